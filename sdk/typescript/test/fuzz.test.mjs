// Decoders of outside input, fed seeded junk: they answer or refuse with
// their own error, and never crash otherwise. A failing seed is printed.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { decode, GraphError, parseGraph, WeftError } from '../dist/index.js'
import { JSONSyntaxError, parse, render } from '../dist/internal/gojson.js'

function rng(seed) {
  let s = seed >>> 0
  return () => {
    s = (Math.imul(s ^ (s >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0
    return s / 2 ** 32
  }
}

const pieces = ['{', '}', '[', ']', ',', ':', '"', '"a"', '1', '-0', '1e5', '.5', 'true', 'null', ' ', '\\', '\\u00', 'é', '\n', 'name', 'nodes', 'edges', '{"id":"a","type":"x"}', '- ', 'a: ', '&x ', '*x', '<<: ', '!!str ', '0x1F', 'yes', '---\n']

function junk(r, n) {
  let s = ''
  for (let i = 0; i < n; i++) s += pieces[Math.floor(r() * pieces.length)]
  return s
}

test('the JSON parser accepts exactly what JSON.parse accepts, and renders what it read', () => {
  const r = rng(1)
  for (let i = 0; i < 5000; i++) {
    const s = junk(r, 1 + Math.floor(r() * 12))
    let want
    try {
      want = JSON.parse(s)
    } catch {
      want = undefined
    }
    try {
      const v = parse(s)
      assert.notEqual(want, undefined, `seed 1 #${i}: parse accepted ${JSON.stringify(s)}`)
      assert.deepEqual(JSON.parse(render(v)), want, `#${i}: ${JSON.stringify(s)}`)
    } catch (e) {
      if (!(e instanceof JSONSyntaxError)) throw e
      assert.equal(want, undefined, `seed 1 #${i}: parse refused ${JSON.stringify(s)}: ${e.message}`)
    }
  }
})

test('graphs of junk are refused with a GraphError', () => {
  const r = rng(2)
  for (let i = 0; i < 3000; i++) {
    const s = junk(r, 1 + Math.floor(r() * 16))
    try {
      parseGraph(s, { source: 'junk' })
    } catch (e) {
      assert.ok(e instanceof GraphError, `seed 2 #${i}: ${JSON.stringify(s)}: ${e}`)
    }
  }
})

test('messages of junk are refused with a WeftError', () => {
  const r = rng(3)
  const names = ['ce-specversion', 'ce-id', 'ce-source', 'ce-type', 'ce-runid', 'ce-attempt', 'ce-time', 'CE-Type', 'content-type', 'Nats-TTL', 'ce-x_y', 'ce-nodeid']
  const values = ['1.0', '0.3', 'weft', 'dev.weft.node.ready.v1', 'dev.weft.node.invoked.v1', 'dev.weft.node.ready.v2', 'r1', '-1', 'x', '2026-01-01T00:00:00Z', 'application/json', '']
  const subjects = ['weft.r.0f.r1.d.ready.q', 'weft.r.0f.r1.w.q.invoked', 'weft.r.00.r1.d.ready.q', 'x', 'weft.r.0f.r1.c.started']
  for (let i = 0; i < 5000; i++) {
    const h = new Map()
    for (let k = Math.floor(r() * 8); k > 0; k--) h.set(names[Math.floor(r() * names.length)], values[Math.floor(r() * values.length)])
    const hdr = { keys: () => [...h.keys()], get: (k) => h.get(k) ?? '' }
    const data = Buffer.from(junk(r, Math.floor(r() * 6)))
    try {
      decode(subjects[Math.floor(r() * subjects.length)], hdr, data)
    } catch (e) {
      assert.ok(e instanceof WeftError, `seed 3 #${i}: ${e}`)
    }
  }
})
