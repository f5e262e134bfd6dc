// The web UI in a real browser: weft dev (built from this tree) runs a
// fan-out with joins, a failing node with retries, a human node, a run
// with markup in its state and a run of over 10,000 events; Debian's
// Chromium, driven headless by playwright-core, checks what the screens
// show, the scrubbing, a signal sent from the page, live updates, and bad
// input. Screenshots land in docs/screenshots/ (the README shows them).
import assert from 'node:assert/strict'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { chromium } from 'playwright-core'
import { chromiumPath, root, Weft } from './weft.mjs'

const shots = join(root, 'docs', 'screenshots')
const weft = new Weft()
let browser
let page
const runs = {}
const pageErrors = []

before(async () => {
  mkdirSync(shots, { recursive: true })
  const t0 = Date.now()
  await weft.start()
  const t1 = Date.now()
  // One after another, so that newest first has one right order.
  runs.parent = await weft.run('examples/subgraph.yaml', { wait: true })
  runs.stranded = await weft.run('web/e2e/graphs/stranded.yaml')
  runs.fanout = await weft.run('examples/fanout.yaml', { input: { docs: ['a', 'b', 'c', 'd'] }, wait: true })
  runs.flaky = await weft.run('web/e2e/graphs/flaky.yaml', { wait: true })
  runs.markup = await weft.run('web/e2e/graphs/markup.yaml', {
    input: { note: '<script>alert(1)</script>', html: '<b>markup</b>', img: '<img src=x onerror="alert(2)">' },
    wait: true,
  })
  runs.long = await weft.run('web/e2e/graphs/long.yaml', { wait: true })
  runs.approval = await weft.run('examples/approval.yaml')
  console.log(`# weft built and started in ${t1 - t0} ms; the runs took ${Date.now() - t1} ms`)
  browser = await chromium.launch({ executablePath: chromiumPath, args: ['--no-sandbox'], headless: true })
  const ctx = await browser.newContext({ viewport: { width: 1400, height: 1000 } })
  // Any alert, confirm or prompt is recorded: the markup test wants none.
  await ctx.addInitScript(() => {
    window.__alerts = []
    for (const f of ['alert', 'confirm', 'prompt']) window[f] = (m) => void window.__alerts.push(`${f}: ${m}`)
  })
  page = await ctx.newPage()
  page.setDefaultTimeout(15_000)
  page.on('pageerror', (e) => pageErrors.push(String(e)))
}, { timeout: 300_000 })

after(async () => {
  await browser?.close()
  await weft.stop()
}, { timeout: 60_000 })

const go = (path) => page.goto(weft.url + path)
const node = (id, status) => page.locator(`svg.graph [data-node="${id}"][data-status="${status}"]`)
const noReload = () => page.evaluate(() => (window.__sameDocument = 'yes'))
const stillSameDocument = async () => assert.equal(await page.evaluate(() => window.__sameDocument), 'yes', 'the page reloaded')

async function apiEvents(id) {
  const r = await fetch(`${weft.url}/api/runs/${id}/events?limit=5000`)
  assert.equal(r.status, 200)
  return (await r.json()).events
}

test('the run list shows the runs, newest first, with their statuses and counts', async () => {
  await go('/runs')
  const want = { fanout: 'completed', flaky: 'failed', markup: 'completed', long: 'completed' }
  for (const [name, status] of Object.entries(want)) {
    await page.locator(`tr[data-run="${runs[name]}"][data-status="${status}"]`).waitFor()
  }
  const approval = await page.locator(`tr[data-run="${runs.approval}"]`).getAttribute('data-status')
  assert.ok(['running', 'waiting'].includes(approval), `the waiting run's status is ${approval}`)
  const order = await page.locator('tbody tr').evaluateAll((rows) => rows.map((r) => r.dataset.run))
  assert.deepEqual(order.slice(0, 6), [runs.approval, runs.long, runs.markup, runs.flaky, runs.fanout, runs.stranded])
  assert.ok(order.includes(runs.parent))
  assert.ok(Number(await page.locator('[data-count="completed"] b').textContent()) >= 3)
  assert.equal(await page.locator('[data-count="failed"] b').textContent(), '1')
  await page.screenshot({ path: join(shots, 'runs.png'), fullPage: true })

  // Filter by status: the URL holds it.
  await page.locator('[data-count="failed"]').click()
  await page.waitForURL(/status=failed/)
  await page.locator(`tr[data-run="${runs.fanout}"]`).waitFor({ state: 'detached' })
  assert.deepEqual(await page.locator('tbody tr').evaluateAll((r) => r.map((x) => x.dataset.run)), [runs.flaky])

  // Paging: two at a time, older through the server's cursor.
  await go('/runs?limit=2')
  await page.locator('tbody tr').nth(1).waitFor()
  assert.deepEqual(await page.locator('tbody tr').evaluateAll((r) => r.map((x) => x.dataset.run)), order.slice(0, 2))
  await page.getByRole('link', { name: 'older →' }).click()
  await page.waitForURL(/cursor=/)
  await page.locator(`tr[data-run="${order[2]}"]`).waitFor()
  assert.deepEqual(await page.locator('tbody tr').evaluateAll((r) => r.map((x) => x.dataset.run)), order.slice(2, 4))
  await page.getByRole('link', { name: '⇤ newest' }).click()
  await page.locator(`tr[data-run="${order[0]}"]`).waitFor()

  // Time: nothing started after tomorrow; everything before it.
  const tomorrow = new Date(Date.now() + 86_400_000).toISOString()
  await go(`/runs?since=${tomorrow}`)
  await page.locator('.empty', { hasText: 'No runs match' }).waitFor()
  await go(`/runs?until=${tomorrow}&graph=fanout`)
  await page.locator(`tr[data-run="${runs.fanout}"]`).waitFor()
  assert.equal(await page.locator('tbody tr').count(), 1)

  // Search by a prefix of a run id.
  await go('/runs')
  await page.getByLabel('search by run id').fill(runs.markup.slice(0, 22))
  await page.getByRole('button', { name: 'Filter' }).click()
  await page.waitForURL(/q=/)
  await page.locator(`tr[data-run="${runs.fanout}"]`).waitFor({ state: 'detached' })
  assert.deepEqual(await page.locator('tbody tr').evaluateAll((r) => r.map((x) => x.dataset.run)), [runs.markup])
})

test('the graph shows each node with its status, attempts and detail', async () => {
  await go(`/runs/${runs.fanout}`)
  for (const id of ['split', 'left', 'right', 'pages', 'gather']) await node(id, 'succeeded').waitFor()
  await node('END', 'succeeded').waitFor()
  await page.locator('.timeline .row').first().waitFor()

  await go(`/runs/${runs.flaky}`)
  await node('prepare', 'succeeded').waitFor()
  await node('fetch', 'failed').waitFor()
  assert.match(await node('fetch', 'failed').textContent(), /attempt 3/)
  await node('fetch', 'failed').click()
  const detail = page.locator('[data-node-detail="fetch"]')
  await detail.waitFor()
  assert.match(await detail.textContent(), /idempotency key/)
  assert.doesNotMatch(await detail.locator('dt:has-text("idempotency key") + dd').textContent(), /^—$/)
  assert.doesNotMatch(await detail.locator('dt:has-text("worker") + dd').textContent(), /^—$/)
  assert.equal(await detail.locator('table.attempts tbody tr').count(), 3)
  // The failure's markup is text.
  assert.match(await detail.textContent(), /upstream said <i>no<\/i>/)
  assert.equal(await page.locator('main i').count(), 0)
  await page.waitForURL(/node=fetch/)

  await go(`/runs/${runs.approval}`)
  await node('draft', 'succeeded').waitFor()
  await node('approve', 'waiting').waitFor()
  await node('publish', 'idle').waitFor()
})

test('a run links to its child runs, the child to its parent, the trace to the tracing UI', async () => {
  await go(`/runs/${runs.parent}`)
  await node('child', 'succeeded').click()
  const link = page.locator('[data-node-detail="child"] a.child')
  await link.waitFor()
  const child = await link.textContent()
  assert.ok(child.startsWith(runs.parent), child)
  await page.locator(`dt:has-text("children") + dd a`, { hasText: child }).waitFor()
  await link.click()
  await page.waitForURL(new RegExp(`/runs/${child}$`))
  await node('twice', 'succeeded').waitFor()
  await page.locator(`dt:has-text("parent") + dd a[href="/runs/${runs.parent}"]`).click()
  await page.waitForURL(new RegExp(`/runs/${runs.parent}$`))

  // A trace id, as the server gives it when the run was traced and
  // -trace-url is set, links to the tracing UI.
  const traceId = '4bf92f3577b34da6a3ce929d0e0e4736'
  await page.route(`**/api/runs/${runs.fanout}`, async (r) => {
    const res = await r.fetch()
    const json = { ...(await res.json()), traceId, traceUrl: `http://jaeger.example/trace/${traceId}` }
    // The ended run's page refreshes once more: a request may still be
    // in this handler when the route goes below.
    await r.fulfill({ response: res, json }).catch(() => {})
  })
  await go(`/runs/${runs.fanout}`)
  const trace = page.locator('dt:has-text("trace") + dd a')
  await trace.waitFor()
  assert.equal(await trace.getAttribute('href'), `http://jaeger.example/trace/${traceId}`)
  assert.equal(await trace.textContent(), traceId)
  await page.unroute(`**/api/runs/${runs.fanout}`)
})

test('selecting an event shows the state after it, the diff, and the graph then', async () => {
  const evs = await apiEvents(runs.fanout)
  const gathered = evs.find((e) => e.node === 'gather' && /node\.invoked/.test(e.type))
  assert.ok(gathered, 'no invoked event of gather')

  await go(`/runs/${runs.fanout}`)
  await page.locator('.timeline .row[data-position="1"]').click()
  await page.waitForURL(/at=1(&|$)/)
  const panel = page.locator('.event-panel')
  await panel.locator('.state-after pre').waitFor()
  let after = await panel.locator('.state-after pre').textContent()
  assert.match(after, /"docs"/)
  assert.doesNotMatch(after, /gathered/)
  await node('split', 'idle').waitFor() // the graph as it was after run.started
  await node('gather', 'idle').waitFor()

  // The arrow keys scrub: the second event already moves the run on.
  await page.locator('.timeline').press('ArrowDown')
  await page.waitForURL(/at=2(&|$)/)

  await go(`/runs/${runs.fanout}?at=${gathered.position}`)
  await panel.locator('.diff').waitFor()
  assert.match(await panel.locator('.diff').textContent(), /state\.gathered/)
  // The fold's bookkeeping only when asked for.
  assert.doesNotMatch(await panel.locator('.diff').textContent(), /lastSeq|updatedAt|stats\./)
  await panel.locator('input[name="bookkeeping"]').check()
  await panel.locator('.diff', { hasText: 'lastSeq' }).waitFor()
  await panel.locator('input[name="bookkeeping"]').uncheck()
  after = await panel.locator('.state-after pre').textContent()
  assert.match(after, /"gathered": true/)
  await node('gather', 'succeeded').waitFor()
  assert.equal(await page.locator(`.timeline .row.selected`).getAttribute('data-position'), String(gathered.position))
  await page.screenshot({ path: join(shots, 'run.png'), fullPage: true })
})

test('a signal sent from the page completes the waiting run, live', async () => {
  await go(`/runs/${runs.approval}`)
  await node('approve', 'waiting').waitFor()
  // Where it waits: the node, its deadline, the command that answers it.
  const waits = page.locator('.pending tr[data-pending="approve"]')
  await waits.waitFor()
  assert.match(await waits.textContent(), new RegExp(`deadline in .*weft signal ${runs.approval} approve -data`))
  const answer = await page.locator('.wait[data-wait="approve"] code.command').textContent()
  assert.match(answer, new RegExp(`^weft signal ${runs.approval} approve -data '\\{"approved":\\.\\.\\.\\}'$`))
  await noReload()
  await page.getByRole('button', { name: 'Signal…' }).click()
  const dialog = page.locator('dialog.confirm')
  await dialog.locator('textarea').fill('{"approved": tru')
  await dialog.getByRole('button', { name: 'Send signal' }).click()
  await dialog.locator('.problem').waitFor()
  assert.match(await dialog.locator('.problem').textContent(), /not valid JSON/)
  assert.equal(await page.locator('.run').getAttribute('data-status'), 'waiting')

  await dialog.locator('textarea').fill('{"approved": true}')
  await dialog.getByRole('button', { name: 'Send signal' }).click()
  await dialog.waitFor({ state: 'detached' })
  await page.locator('.notice', { hasText: 'Signal sent to approve' }).waitFor()
  await page.locator('.timeline .row .type', { hasText: 'signal.received' }).waitFor()
  await node('publish', 'succeeded').waitFor()
  await page.locator('.run[data-status="completed"]').waitFor()
  await stillSameDocument()
})

test('the run list updates without a reload as runs start and end', async () => {
  await go('/runs')
  await page.locator(`tr[data-run="${runs.approval}"][data-status="completed"]`).waitFor()
  await noReload()
  const id = await weft.run('examples/approval.yaml')
  await page.locator(`tr[data-run="${id}"]`).waitFor()
  assert.equal(await page.locator('tbody tr').first().getAttribute('data-run'), id)
  await stillSameDocument()
})

test('markup in a run is shown as text and runs nothing', async () => {
  await go(`/runs/${runs.markup}`)
  const now = page.locator('section.panel pre.json').first()
  await now.waitFor()
  const text = await now.textContent()
  assert.ok(text.includes('<script>alert(1)</script>'), text)
  assert.ok(text.includes('<b>markup</b>'), text)
  assert.ok(text.includes('<img src=x onerror=\\"alert(2)\\">'), text)
  assert.ok(text.includes('<b>done</b>'), text)
  assert.equal(await page.locator('main b', { hasText: 'markup' }).count(), 0)
  assert.equal(await page.locator('main script, main img').count(), 0)
  // The same through the timeline's panels.
  await page.locator('.timeline .row[data-position="1"]').click()
  await page.locator('.event-panel .state-after pre').waitFor()
  assert.match(await page.locator('.event-panel').textContent(), /<script>alert\(1\)<\/script>/)
  assert.equal(await page.locator('main script, main img, main b').count(), 0)
  assert.deepEqual(await page.evaluate(() => window.__alerts), [])
})

test('a run of over 10,000 events stays responsive', async () => {
  const t0 = Date.now()
  const slow = { timeout: 60_000 } // the server folds 10,000 events for some answers
  await go(`/runs/${runs.long}`)
  await page.locator('.timeline .row').first().waitFor(slow)
  const loadMs = Date.now() - t0
  const total = Number(await page.locator('dt:has-text("events") + dd').textContent())
  assert.ok(total > 10_000, `the long run has ${total} events`)
  const rows = await page.locator('.timeline .row').count()
  assert.ok(rows < 100, `${rows} rows in the DOM for ${total} events`)

  // Scroll to the middle: the rows there are drawn, still few.
  const scrollMs = await page.locator('.timeline').evaluate(async (el) => {
    const t = performance.now()
    el.scrollTop = el.scrollHeight / 2
    await new Promise((ok) => requestAnimationFrame(() => requestAnimationFrame(ok)))
    return performance.now() - t
  })
  const mid = await page.locator('.timeline .row').evaluateAll((r) => r.map((x) => Number(x.dataset.position)))
  assert.ok(mid.some((p) => Math.abs(p - total / 2) < 60), `rows after scrolling: ${mid[0]}…${mid.at(-1)}`)
  assert.ok(mid.length < 100)

  const t1 = Date.now()
  await page.locator('.timeline').press('End')
  await page.waitForURL(new RegExp(`at=${total}(&|$)`))
  await page.locator('.event-panel .state-after pre', { hasText: '"count": 5000' }).waitFor(slow)
  const selectMs = Date.now() - t1
  console.log(`# long run: ${total} events; page ${loadMs} ms, scroll ${scrollMs.toFixed(1)} ms, select last + state ${selectMs} ms`)
  assert.ok(scrollMs < 1000, `scrolling took ${scrollMs} ms`)
})

test('the workers page lists the queues, their workers, work no worker serves, and the limits in use', async () => {
  await go('/workers')
  const q = page.locator('[data-queue="default"]')
  await q.waitFor()
  await q.locator('[data-worker]').first().waitFor()
  assert.match(await q.textContent(), /echo/)
  assert.ok(!(await q.getAttribute('class')).includes('stranded'))
  const gpu = page.locator('[data-queue="gpu"].stranded')
  await gpu.waitFor()
  assert.match(await gpu.textContent(), /1 work item is waiting on this queue and no live worker serves it/)

  // A graph's run limit in use: one run holds its slot, the next waits.
  const first = await weft.run('web/e2e/graphs/limited.yaml')
  const second = await weft.run('web/e2e/graphs/limited.yaml')
  const limit = page.locator('.limits tr[data-limit="limited"][data-held="1"][data-waiting="1"]')
  await limit.waitFor()
  assert.match(await limit.textContent(), /limited \(runs\)-1\/11/)
  assert.equal(await limit.locator('td[title]').first().getAttribute('title'), `${first}/START/1/1`)
  await page.screenshot({ path: join(shots, 'workers.png'), fullPage: true })
  // The waiting run says what it waits for, on its page and in the list.
  await go(`/runs/${second}`)
  await page.locator('.wait[data-wait="START"]', { hasText: 'a slot of limited, max 1' }).waitFor()
  await go('/runs')
  await page.locator(`tr[data-run="${second}"][data-status="waiting"] .wait[data-wait="START"]`, { hasText: 'a slot of limited' }).waitFor()
  for (const id of [second, first]) await weft.cli('cancel', id)
  await go('/workers')
  await page.locator('.limits').waitFor()
  await page.locator('.limits tr[data-limit="limited"]').waitFor({ state: 'detached' })
})

test('fork from the selected event, and cancel: confirmed, their results in the timeline', async () => {
  const dialog = page.locator('dialog.confirm')
  await go(`/runs/${runs.fanout}?at=1`)
  await page.locator('.event-panel .state-after pre').waitFor()
  await page.getByRole('button', { name: 'Fork from #1' }).click()
  await dialog.getByRole('button', { name: 'Fork', exact: true }).click()
  await page.waitForURL((u) => u.pathname.startsWith('/runs/') && !u.pathname.endsWith(runs.fanout))
  const forked = decodeURIComponent(new URL(page.url()).pathname.split('/').pop())
  await page.locator(`.run[data-run="${forked}"]`).waitFor()
  await page.locator(`dt:has-text("forked from") + dd a[href^="/runs/${runs.fanout}"]`).waitFor()
  await page.locator('.timeline .row .type', { hasText: 'run.started' }).waitFor()
  await page.locator('.run[data-status="completed"]').waitFor()
  await node('gather', 'succeeded').waitFor()

  // The run whose work waits on a queue no worker serves.
  await go(`/runs/${runs.stranded}`)
  await node('render', 'ready').waitFor()
  await noReload()
  await page.getByRole('button', { name: 'Cancel run…' }).click()
  await dialog.locator('input[name="reason"]').fill('no gpu today')
  await dialog.getByRole('button', { name: 'Cancel the run' }).click()
  await dialog.waitFor({ state: 'detached' })
  await page.locator('.timeline .row .type', { hasText: 'run.cancel_requested' }).waitFor()
  await page.locator('.run[data-status="cancelled"]').waitFor()
  await stillSameDocument()
})

test('a terminated run reads as terminated, in the list and on its page', async () => {
  const id = await weft.run('examples/approval.yaml')
  await weft.cli('terminate', id, '-reason', 'stuck')
  await go('/runs')
  await page.locator(`tr[data-run="${id}"] .status-terminated`).waitFor()
  await go(`/runs/${id}`)
  await page.locator('.run .title .status-terminated').waitFor()
  assert.equal(await page.locator('.run .title .status').textContent(), 'terminated')
})

test('dark mode follows the system; a disabled action says why', async () => {
  await page.emulateMedia({ colorScheme: 'dark' })
  await go('/runs')
  await page.locator('tbody tr').first().waitFor()
  assert.equal(await page.evaluate(() => getComputedStyle(document.documentElement).backgroundColor), 'rgb(22, 24, 29)')
  await page.screenshot({ path: join(shots, 'runs-dark.png'), fullPage: true })
  await page.emulateMedia({ colorScheme: 'light' })
  assert.equal(await page.evaluate(() => getComputedStyle(document.documentElement).backgroundColor), 'rgb(247, 247, 245)')
  await go(`/runs/${runs.fanout}`)
  const fork = page.getByRole('button', { name: 'Fork: select an event first' })
  await fork.waitFor()
  assert.equal(await fork.isDisabled(), true)
})

test('the schedules page: next and last fires, pause with a reason, unpause, trigger', async () => {
  await weft.cli('schedule', 'create', 'tick', '-graph', 'examples/hello.yaml', '-every', '1h', '-input', '{"name": "tick"}', '-note', 'hourly hello')
  const dialog = page.locator('dialog.confirm')
  await go('/schedules')
  const s = page.locator('[data-schedule="tick"]')
  await s.waitFor()
  assert.match(await s.locator('h2').textContent(), /every 1h0m0s · graph hello · overlap skip/)
  await s.locator('[data-paused="false"]').waitFor()
  assert.equal(await s.locator('.next time').count(), 5)
  await s.locator('p', { hasText: 'No fires yet.' }).waitFor()
  await noReload()

  // Trigger: one run now, then among the fires, linked, with its status.
  await s.getByRole('button', { name: 'Trigger now…' }).click()
  await dialog.getByRole('button', { name: 'Trigger', exact: true }).click()
  const notice = page.locator('.notice', { hasText: 'Schedule tick triggered: run ' })
  await notice.waitFor()
  const run = (await notice.textContent()).match(/run (\S+)\.$/)[1]
  const row = s.locator(`tr[data-run="${run}"]`)
  await row.waitFor()
  assert.match(await row.textContent(), /triggered/)
  await row.locator('.status-completed').waitFor({ timeout: 30_000 })

  // Pause: a reason is required; then it is shown.
  await s.getByRole('button', { name: 'Pause…' }).click()
  await dialog.getByRole('button', { name: 'Pause', exact: true }).click()
  await dialog.locator('.problem', { hasText: 'note' }).waitFor()
  await dialog.locator('input[name="note"]').fill('maintenance until <b>monday</b>')
  await dialog.getByRole('button', { name: 'Pause', exact: true }).click()
  await dialog.waitFor({ state: 'detached' })
  await s.locator('[data-paused="true"]').waitFor()
  assert.match(await s.locator('.pause-note').textContent(), /Paused: maintenance until <b>monday<\/b>/)
  assert.equal(await s.locator('.pause-note b').count(), 0)
  await page.screenshot({ path: join(shots, 'schedules.png'), fullPage: true })

  // Unpause.
  await s.getByRole('button', { name: 'Unpause…' }).click()
  await dialog.getByRole('button', { name: 'Unpause', exact: true }).click()
  await s.locator('[data-paused="false"]').waitFor()
  await stillSameDocument()

  // The run links to its page, which says where it came from.
  await row.locator('a').click()
  await page.waitForURL(new RegExp(`/runs/${run}$`))
  await page.locator(`.run[data-run="${run}"]`).waitFor()
})

test('read-only: the UI offers no action', async () => {
  const url = await weft.ui('-read-only')
  await page.goto(`${url}/runs/${runs.fanout}`)
  await node('gather', 'succeeded').waitFor()
  await page.locator('header .badge', { hasText: 'read-only' }).waitFor()
  assert.equal(await page.locator('.actions, dialog').count(), 0)
  await page.goto(`${url}/schedules`)
  await page.locator('[data-schedule="tick"]').waitFor()
  assert.equal(await page.locator('.actions, dialog').count(), 0)
  await page.goto(`${url}/runs`)
  await page.locator('tbody tr').first().waitFor()
  assert.equal(await page.locator('.batch, input[name="select"]').count(), 0)
})

test('runs selected in the list are cancelled together, each reported', async () => {
  const a = await weft.run('examples/approval.yaml')
  const b = await weft.run('examples/approval.yaml')
  await go('/runs')
  const cancelSelected = page.getByRole('button', { name: 'Cancel selected: select runs in the list first' })
  await cancelSelected.waitFor()
  assert.equal(await cancelSelected.isDisabled(), true)
  for (const id of [a, b, runs.fanout]) await page.locator(`tr[data-run="${id}"] input[name="select"]`).check()
  await page.getByRole('button', { name: 'Cancel 3 selected…' }).click()
  const dialog = page.locator('dialog.confirm')
  await dialog.locator('input[name="reason"]').fill('batch from the UI')
  await dialog.getByRole('button', { name: 'Cancel the runs' }).click()
  await dialog.waitFor({ state: 'detached' })
  await page.locator('.notice', { hasText: 'cancel done for 2 of 3 run(s). 1 skipped: ' + runs.fanout }).waitFor()
  for (const id of [a, b]) await page.locator(`tr[data-run="${id}"][data-status="cancelled"]`).waitFor()
})

test('bad input gets a clear message, never a blank page', async () => {
  await go('/runs/no-such-run-here')
  await page.locator('.problem', { hasText: 'Unknown run' }).waitFor()
  assert.match(await page.locator('.problem').textContent(), /no-such-run-here/)

  await go('/runs?since=yesterday')
  await page.locator('.problem', { hasText: 'Cannot list runs' }).waitFor()
  assert.match(await page.locator('.problem').textContent(), /since/)

  await go(`/runs/${runs.fanout}?at=abc`)
  await page.locator('.problem', { hasText: 'Bad link' }).waitFor()
  await node('gather', 'succeeded').waitFor() // the rest of the page is there

  await go(`/runs/${runs.fanout}?at=99999`)
  await page.locator('.problem', { hasText: 'Bad link' }).waitFor()

  await go('/nowhere/at/all')
  await page.locator('.problem', { hasText: 'There is no page' }).waitFor()

  // The server gone: every API call fails to connect.
  await page.route('**/api/**', (r) => r.abort('connectionrefused'))
  await go('/runs')
  await page.locator('.problem', { hasText: 'not reachable' }).first().waitFor()
  await go(`/runs/${runs.fanout}`)
  await page.locator('.problem', { hasText: 'not reachable' }).first().waitFor()
  await page.unroute('**/api/**')
})

test('an agent node shows its conversation: messages, tool calls, results, and its tokens as they stream', async () => {
  // weft dev runs with -fake-model: the scripted fake answers at its pace,
  // the final answer word by word.
  // examples/agent.yaml's note tool waits for a person's approval (weft
  // demo answers it); this test is about the conversation, so it runs the
  // graph without that wait.
  const graph = join(tmpdir(), `weft-e2e-agent-${process.pid}.yaml`)
  const yaml = readFileSync(join(root, 'examples/agent.yaml'), 'utf8')
  const unapproved = yaml.replace(/^ +approval: required\n +approvalTimeout: .*\n/m, '')
  assert.notEqual(unapproved, yaml, 'the approval lines are gone')
  writeFileSync(graph, unapproved)
  const id = await weft.run(graph, { input: { name: 'Ada' } })
  await go(`/runs/${id}?node=research`)
  const conv = page.locator('[data-conversation="research"]')
  await conv.waitFor()
  // The final answer (step 5) is seen while it streams, before its step.
  const streaming = conv.locator('[data-streaming="5"]')
  await streaming.waitFor({ timeout: 60_000 })
  const partial = (await streaming.locator('.msg-text').textContent()).replace(/▍$/, '')
  assert.ok(partial.length > 0, 'streamed text shown')
  await page.screenshot({ path: join(shots, 'agent-streaming.png'), fullPage: true })
  const final = conv.locator('li.msg-assistant[data-step="5"]')
  await final.waitFor({ timeout: 60_000 })
  const answer = await final.locator('.msg-text').textContent()
  assert.match(answer, /^\[fake model\] I was asked "Research Ada\."/)
  assert.ok(answer.includes(partial), `the streamed text ${JSON.stringify(partial)} is part of the answer`)
  assert.equal(await conv.locator('[data-streaming]').count(), 0, 'no streaming once the step is recorded')
  // The tool calls, each answered by its result, in order.
  assert.deepEqual(await conv.locator('li.msg').evaluateAll((els) => els.map((e) => `${e.dataset.role}@${e.dataset.step}`)), [
    'system@0', 'user@0', 'assistant@1', 'tool@2', 'assistant@3', 'tool@4', 'assistant@5',
  ])
  assert.equal(await conv.locator('li[data-step="1"] .tool-call[data-tool="search"]').count(), 1)
  assert.equal(await conv.locator('li[data-step="3"] .tool-call[data-tool="note"]').count(), 1)
  assert.match(await conv.locator('li.msg-tool[data-step="2"]').textContent(), /tool result: search.*Ada Lovelace/)
  await node('research', 'succeeded').waitFor()
  await page.screenshot({ path: join(shots, 'agent-conversation.png'), fullPage: true })
})

test('no script error on any page', () => {
  assert.deepEqual(pageErrors, [])
})
