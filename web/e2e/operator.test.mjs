// What an operator reaches for in the browser (issue 31): starting a run
// (a graph already run, or one pasted; the input checked before it is
// sent; the server's refusals shown), resetting a run from a node, JSON as
// a collapsible tree with a copy button, and batch actions on a selection
// of the run list, done by one durable batch job (the one 'weft batch'
// runs), with the actions the server may not take disabled and labelled.
// Its screenshots go to docs/screenshots/, which the README shows.
import assert from 'node:assert/strict'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { chromium } from 'playwright-core'
import { chromiumPath, root, Weft } from './weft.mjs'

const shots = join(root, 'docs', 'screenshots')
const weft = new Weft()
let browser
let ctx
let page
const runs = {}
const pageErrors = []

before(async () => {
  mkdirSync(shots, { recursive: true })
  await weft.start()
  runs.hello = await weft.run('examples/hello.yaml', { input: { name: 'Ada' }, wait: true })
  runs.fanout = await weft.run('examples/fanout.yaml', { input: { docs: ['a', 'b', 'c', 'd'] }, wait: true })
  browser = await chromium.launch({ executablePath: chromiumPath, args: ['--no-sandbox'], headless: true })
  ctx = await browser.newContext({ viewport: { width: 1400, height: 1000 } })
  await ctx.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: weft.url })
  page = await ctx.newPage()
  page.setDefaultTimeout(20_000)
  page.on('pageerror', (e) => pageErrors.push(String(e)))
}, { timeout: 300_000 })

after(async () => {
  await browser?.close()
  await weft.stop()
}, { timeout: 60_000 })

const go = (path) => page.goto(weft.url + path)
const node = (id, status) => page.locator(`svg.graph [data-node="${id}"][data-status="${status}"]`)
const dialog = () => page.locator('dialog.confirm')

async function summary(id) {
  const r = await fetch(`${weft.url}/api/runs/${id}`)
  assert.equal(r.status, 200)
  return (await r.json()).summary
}

test('start a run: a graph already run or pasted, the input checked before it is sent, refusals shown', async () => {
  await go('/start')
  const start = page.locator('button[type="submit"]')
  await page.locator(`select[name="from"] option[value="${runs.hello}"]`).waitFor({ state: 'attached' })
  await page.locator('select[name="from"]').selectOption(runs.hello)

  // The input is checked as it is typed: not JSON, not an object.
  const input = page.locator('textarea[name="input"]')
  await input.fill('{"name": ')
  await page.locator('.input-error', { hasText: 'not valid JSON' }).waitFor()
  assert.equal(await start.isDisabled(), true)
  assert.equal(await start.textContent(), 'Start: fix the input first')
  await input.fill('[1, 2]')
  await page.locator('.input-error', { hasText: 'must be a JSON object' }).waitFor()
  assert.match(await page.locator('.input-error').textContent(), /not an array/)
  await input.fill('{"name": "Grace"}')
  assert.equal(await page.locator('.input-error').count(), 0)
  await page.screenshot({ path: join(shots, 'start.png'), fullPage: true })
  await start.click()
  await page.waitForURL(/\/runs\/[0-9a-z]+$/)
  const id = page.url().split('/').pop()
  assert.notEqual(id, runs.hello)
  await node('shout', 'succeeded').waitFor({ timeout: 30_000 })
  const s = await summary(id)
  assert.equal(s.graph, 'hello')
  const evs = await (await fetch(`${weft.url}/api/runs/${id}/events?limit=1`)).json()
  assert.match(JSON.stringify(evs.events[0].data), /"name":"Grace"/)

  // A pasted graph: refused with where and what was meant, then started.
  await go('/start')
  await page.locator('select[name="from"]').selectOption('paste')
  await page.locator('textarea[name="graph"]').fill('name: pasted\nnodes:\n  - {id: a, type: ecko}\nedges:\n  - {from: START, to: a}\n  - {from: a, to: END}\n')
  await input.fill('{}')
  await start.click()
  const refusal = page.locator('.problem', { hasText: 'Not started' })
  await refusal.waitFor()
  assert.match(await refusal.textContent(), /ecko/)
  assert.match(await refusal.textContent(), /echo/) // did you mean
  assert.match(await refusal.textContent(), /parameter: graph/)
  await page.locator('textarea[name="graph"]').fill('name: pasted\nnodes:\n  - {id: a, type: echo}\nedges:\n  - {from: START, to: a}\n  - {from: a, to: END}\n')
  await start.click()
  await page.waitForURL(/\/runs\/[0-9a-z]+$/)
  await node('a', 'succeeded').waitFor({ timeout: 30_000 })
})

test('reset from a node: asked first, the new run opened, the old one cancelled', async () => {
  const id = await weft.run('examples/approval.yaml')
  await go(`/runs/${id}?node=approve`)
  await node('approve', 'waiting').waitFor({ timeout: 30_000 })
  // A node that never ran has nothing to reset to: disabled, and says why.
  await go(`/runs/${id}?node=publish`)
  const never = page.locator('button[data-reset="publish"]')
  await never.waitFor()
  assert.equal(await never.isDisabled(), true)
  assert.match(await never.textContent(), /this node has not run/)

  await go(`/runs/${id}?node=approve`)
  await page.locator('button[data-reset="approve"]', { hasText: 'Reset from here…' }).click()
  await dialog().locator('h3', { hasText: `Reset run ${id} to node approve?` }).waitFor()
  await dialog().getByRole('button', { name: 'Reset', exact: true }).click()
  await page.waitForURL((u) => /\/runs\/[0-9a-z]+$/.test(u.pathname) && !u.pathname.endsWith(id))
  const newId = page.url().split('/').pop()
  await node('approve', 'waiting').waitFor({ timeout: 30_000 })
  await node('draft', 'succeeded').waitFor()
  const s = await summary(newId)
  assert.equal(s.forkedFrom?.runId, id)
  for (let i = 0; ; i++) {
    const old = await summary(id)
    if (old.status === 'cancelled') break
    assert.ok(i < 200, `the reset run is ${old.status}, want cancelled`)
    await new Promise((ok) => setTimeout(ok, 100)) // the coordinator's cancellation
  }
})

test('JSON is a collapsible tree with a copy button', async () => {
  await go(`/runs/${runs.fanout}`)
  const view = page.locator('section.panel .json-view').first()
  await view.waitFor()
  const rootToggle = view.locator('.j-toggle').first()
  assert.equal(await rootToggle.getAttribute('aria-expanded'), 'true')
  // A list folds to its size, and unfolds.
  const docs = view.locator('.j-line', { hasText: '"docs": [' }).locator('.j-toggle')
  assert.equal(await docs.getAttribute('aria-expanded'), 'true')
  await docs.click()
  await view.locator('.j-line', { hasText: '"docs": [ 4 items ]' }).waitFor()
  await docs.click()
  assert.equal(await docs.getAttribute('aria-expanded'), 'true')
  await rootToggle.click()
  assert.equal(await rootToggle.getAttribute('aria-expanded'), 'false')
  const keys = Number((await view.locator('.j-count').first().textContent()).trim().split(' ')[0])
  await view.locator('.j-copy').click()
  await view.locator('.j-copy', { hasText: 'copied' }).waitFor()
  const copied = JSON.parse(await page.evaluate(() => navigator.clipboard.readText()))
  assert.equal(Object.keys(copied).length, keys)
  assert.deepEqual(copied.docs, ['a', 'b', 'c', 'd'])
  await rootToggle.click()
  assert.equal(await rootToggle.getAttribute('aria-expanded'), 'true')
})

test('batch actions on a selection run as one durable job, each run reported', async () => {
  const a = await weft.run('examples/approval.yaml')
  const b = await weft.run('examples/approval.yaml')
  const c = await weft.run('examples/approval.yaml')
  await go('/runs')
  const cancel = page.locator('button[data-batch="cancel"]')
  await cancel.waitFor()
  assert.equal(await cancel.isDisabled(), true)
  assert.equal(await cancel.textContent(), 'Cancel selected: select runs in the list first')
  for (const id of [a, b, runs.hello]) await page.locator(`tr[data-run="${id}"] input[name="select"]`).check()
  await page.getByRole('button', { name: 'Cancel 3 selected…' }).click()
  await dialog().locator('input[name="reason"]').fill('batch from the UI')
  await page.screenshot({ path: join(shots, 'batch.png'), fullPage: true })
  await dialog().getByRole('button', { name: 'Cancel the runs' }).click()
  await dialog().waitFor({ state: 'detached' })
  const notice = page.locator('.notice', { hasText: 'cancel done for 2 of 3 run(s). 1 skipped: ' + runs.hello })
  await notice.waitFor({ timeout: 30_000 })
  const job = (await notice.textContent()).match(/Batch job (\S+):/)[1]
  for (const id of [a, b]) await page.locator(`tr[data-run="${id}"][data-status="cancelled"]`).waitFor()
  // The same job, as 'weft batch describe' reads it.
  const described = await weft.cli('batch', 'describe', job)
  assert.match(described, /runs: +3: 2 done, 1 skipped, 0 failed, 0 not reached/)
  assert.match(described, /operation: +cancel -reason batch from the UI/)

  // Terminate one; delete the two cancelled.
  await page.locator(`tr[data-run="${c}"] input[name="select"]`).check()
  await page.getByRole('button', { name: 'Terminate 1 selected…' }).click()
  await dialog().getByRole('button', { name: 'Terminate the runs' }).click()
  await page.locator('.notice', { hasText: 'terminate done for 1 of 1 run(s)' }).waitFor({ timeout: 30_000 })
  await page.locator(`tr[data-run="${c}"] .status-terminated`).waitFor()
  for (const id of [a, b]) await page.locator(`tr[data-run="${id}"] input[name="select"]`).check()
  await page.getByRole('button', { name: 'Delete 2 selected…' }).click()
  assert.equal(await dialog().locator('input[name="reason"]').count(), 0)
  await dialog().getByRole('button', { name: 'Delete the runs' }).click()
  await page.locator('.notice', { hasText: 'delete done for 2 of 2 run(s)' }).waitFor({ timeout: 30_000 })
  for (const id of [a, b]) await page.locator(`tr[data-run="${id}"]`).waitFor({ state: 'detached' })
})

test('batch signal and reset on a selection: the node and the data asked for, the data checked as JSON, each run reported', async () => {
  const a = await weft.run('examples/approval.yaml')
  const b = await weft.run('examples/approval.yaml')
  await go('/runs')
  for (const id of [a, b]) await page.locator(`tr[data-run="${id}"][data-status="waiting"]`).waitFor({ timeout: 30_000 })
  for (const id of [a, b, runs.hello]) await page.locator(`tr[data-run="${id}"] input[name="select"]`).check()
  await page.getByRole('button', { name: 'Signal 3 selected…' }).click()
  const send = dialog().getByRole('button', { name: 'Signal the runs' })
  // No node yet: the confirmation may not be sent, and says why.
  assert.equal(await send.isDisabled(), true)
  assert.equal(await send.getAttribute('title'), 'name the node to signal')
  await dialog().locator('input[name="node"]').fill('approve')
  assert.equal(await dialog().locator('h3').textContent(), 'Signal node approve of 3 runs?')
  // Data that is not JSON is caught before anything is sent.
  await dialog().locator('textarea[name="data"]').fill('{"approved": tru')
  await dialog().locator('.input-error', { hasText: 'The data is not valid JSON' }).waitFor()
  assert.equal(await send.isDisabled(), true)
  await dialog().locator('textarea[name="data"]').fill('{"approved": true}')
  await dialog().locator('.input-error').waitFor({ state: 'detached' })
  await send.click()
  await dialog().waitFor({ state: 'detached' })
  const notice = page.locator('.notice', { hasText: 'signal done for 2 of 3 run(s). 1 skipped: ' + runs.hello })
  await notice.waitFor({ timeout: 30_000 })
  const job = (await notice.textContent()).match(/Batch job (\S+):/)[1]
  for (const id of [a, b]) {
    await page.locator(`tr[data-run="${id}"][data-status="completed"]`).waitFor({ timeout: 30_000 })
    assert.equal((await summary(id)).status, 'completed')
  }
  const described = await weft.cli('batch', 'describe', job)
  assert.match(described, /runs: +3: 2 done, 1 skipped, 0 failed, 0 not reached/)
  assert.match(described, /operation: +signal/)

  // Reset both to the human node: each forked and the job names the new run.
  for (const id of [a, b]) await page.locator(`tr[data-run="${id}"] input[name="select"]`).check()
  await page.getByRole('button', { name: 'Reset 2 selected…' }).click()
  const reset = dialog().getByRole('button', { name: 'Reset the runs' })
  assert.equal(await reset.isDisabled(), true)
  assert.equal(await dialog().locator('textarea[name="data"]').count(), 0)
  await dialog().locator('input[name="node"]').fill('approve')
  assert.equal(await dialog().locator('h3').textContent(), 'Reset 2 runs to node approve?')
  await page.screenshot({ path: join(shots, 'batch-reset.png'), fullPage: true })
  await reset.click()
  const done = page.locator('.notice', { hasText: 'reset done for 2 of 2 run(s)' })
  await done.waitFor({ timeout: 30_000 })
  const resetJob = (await done.textContent()).match(/Batch job (\S+):/)[1]
  const r = await fetch(`${weft.url}/api/batches/${resetJob}`)
  const outs = (await r.json()).outcomes
  assert.deepEqual(outs.map((o) => o.run).sort(), [a, b].sort())
  for (const o of outs) {
    const fork = o.detail.match(/new run (\S+)\)/)[1]
    assert.equal((await summary(fork)).forkedFrom?.runId, o.run)
  }
})

test('actions this server may not take are disabled and labelled; bad batches are refused with the field', async () => {
  // The server's rights as a UI on the ui role would report them.
  await page.route('**/api/config', async (r) => {
    const res = await r.fetch()
    const json = {
      ...(await res.json()),
      rights: {
        actions: false,
        actionsWhy: "this UI's NATS user may not act on runs (it reads only: Weft's ui role)",
        batch: false,
        batchWhy: "this UI's NATS user may not run batch jobs (the admin's role may)",
      },
    }
    await r.fulfill({ response: res, json })
  })
  await go('/runs')
  const del = page.locator('button[data-batch="delete"]')
  await del.waitFor()
  await page.locator('tbody tr input[name="select"]').first().check()
  assert.equal(await del.isDisabled(), true)
  assert.equal(await del.textContent(), "Delete selected: this UI's NATS user may not run batch jobs (the admin's role may)")
  for (const op of ['signal', 'reset']) {
    const b = page.locator(`button[data-batch="${op}"]`)
    assert.equal(await b.isDisabled(), true)
    assert.match(await b.textContent(), /selected: this UI's NATS user may not run batch jobs/)
  }
  // Starting and resetting need the client's rights: disabled, and why.
  await go('/start')
  const start = page.locator('button[type="submit"]')
  await start.waitFor()
  assert.equal(await start.isDisabled(), true)
  assert.equal(await start.textContent(), "Start: this UI's NATS user may not act on runs (it reads only: Weft's ui role)")
  await go(`/runs/${runs.hello}?node=greet`)
  const reset = page.locator('button[data-reset="greet"]')
  await reset.waitFor()
  assert.equal(await reset.isDisabled(), true)
  assert.match(await reset.textContent(), /may not act on runs/)
  const acts = page.locator('.actions button', { hasText: 'Signal, cancel, fork: ' })
  await acts.waitFor()
  assert.equal(await acts.isDisabled(), true)
  await page.unroute('**/api/config')

  const post = (body) =>
    fetch(`${weft.url}/api/batches`, { method: 'POST', headers: { 'Content-Type': 'application/json', 'X-Weft-Action': '1' }, body: JSON.stringify(body) })
  let r = await post({ operation: 'reboot', runs: [runs.hello] })
  assert.equal(r.status, 400)
  assert.equal((await r.json()).field, 'operation')
  r = await post({ operation: 'cancel', runs: [] })
  assert.equal(r.status, 400)
  assert.equal((await r.json()).field, 'runs')
  r = await post({ operation: 'cancel', runs: ['no good'] })
  assert.equal(r.status, 400)
  r = await post({ operation: 'signal', runs: [runs.hello] })
  assert.equal((await r.json()).field, 'node')
  r = await post({ operation: 'signal', runs: [runs.hello], node: 'approve', data: '{nope' })
  assert.equal(r.status, 400)
  assert.equal((await r.json()).field, 'data')
  r = await post({ operation: 'reset', runs: [runs.hello] })
  assert.equal((await r.json()).field, 'node')
  r = await fetch(`${weft.url}/api/batches/b-nope`)
  assert.equal(r.status, 404)
})

test('read-only: no start, no reset, no batch', async () => {
  const url = await weft.ui('-read-only')
  await page.goto(`${url}/start`)
  const start = page.locator('button[type="submit"]')
  await start.waitFor()
  assert.equal(await start.isDisabled(), true)
  assert.match(await start.textContent(), /read-only/)
  await page.goto(`${url}/runs/${runs.hello}?node=greet`)
  await page.locator('[data-node-detail="greet"]').waitFor()
  assert.equal(await page.locator('button[data-reset]').count(), 0)
  const r = await fetch(`${url}/api/batches`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-Weft-Action': '1' },
    body: JSON.stringify({ operation: 'cancel', runs: [runs.hello] }),
  })
  assert.equal(r.status, 403)
})

test('no script error on any page', () => {
  assert.deepEqual(pageErrors, [])
})
