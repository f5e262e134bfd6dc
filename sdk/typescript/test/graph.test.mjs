// Graphs: the canonical JSON and digest the SDK gives a graph must be those
// Go's pkg/graph gives it (internal/sdkharness "graph"), for every example
// in examples/ and for YAML and JSON written to trip a reimplementation.
import assert from 'node:assert/strict'
import { readdirSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { GraphError, loadGraphFile, parseGraph } from '../dist/index.js'
import { Harness, root } from './harness.mjs'

let go
before(async () => {
  go = await Harness.start({ engine: false })
})
after(() => go?.stop())

test('every example graph has Go’s canonical JSON and digest', async () => {
  const dir = join(root, 'examples')
  const files = readdirSync(dir).filter((f) => /\.(ya?ml|json)$/.test(f))
  assert.ok(files.length >= 10, `examples found: ${files.length}`)
  for (const f of files) {
    const want = await go.ask({ op: 'graph', file: join(dir, f) })
    assert.equal(want.error, undefined, `${f}: Go: ${want.error}`)
    const g = loadGraphFile(join(dir, f))
    assert.equal(g.canonical, want.canonical, `${f}: canonical JSON`)
    assert.equal(g.digest, want.digest, `${f}: digest`)
  }
})

const node = (extra) => `{"id":"a","type":"x"${extra}}`
const yamlCases = {
  'YAML 1.1 scalars': `
name: scalars
nodes:
  - id: a
    type: x
    config:
      yes1: yes
      no1: No
      on1: on
      off1: OFF
      y1: y
      n1: n
      tilde: ~
      nul: null
      oct: 0755
      hex: 0x1F
      bin: 0b101
      nbin: -0b11
      under: 1_000
      plus: +12
      neg: -7
      big: 12345678901234567890
      bigger: 123456789012345678901234
      flt: 1.0
      flt2: 1.50
      exp: 1e3
      exp2: 2.5e-8
      dot: .5
      eight: 08
      date: 2001-12-14
      datetime: 2001-12-14t21:59:43.10-05:00
      time: 12:30
      quoted: "yes"
      single: '0755'
      block: |
        line <one> & two
      folded: >
        a
        b
      html: "<script>&"
      uni: "é 😀 \\u2028"
      empty:
      list: [1, 2.0, "3", true]
      1: int key
      true: bool key
      2.5: float key
edges:
  - {from: START, to: a}
  - {from: a, to: END}
`,
  'anchors and merge keys': `
name: merge
nodes:
  - id: a
    type: x
    config: &base
      a: 1
      b: 2
  - id: b
    type: x
    config:
      <<: *base
      b: 3
      c: 4
  - id: c
    type: x
    config:
      c: 0
      <<: [*base]
edges:
  - {from: START, to: a}
  - {from: a, to: b}
  - {from: b, to: c}
  - {from: c, to: END}
`,
  'node fields and defaults': `
name: fields
version: "2"
description: all the fields <here>
metadata: {owner: ada, team: "x&y"}
state:
  reducers: {items: append, total: sum}
maxIterations: 7
retention: 36h
searchAttributes: [customer]
nodes:
  - id: a
    name: A
    description: first
    metadata: {k: v}
    type: x
    queue: gpu
    local: false
    inputs: [items]
    outputs: [total]
    inputSchema: {type: object, required: [items]}
    outputSchema: {type: object}
    outputAs: result
    when: "state.total < 10 && true"
    join: 1
    map: {over: state.items, concurrency: 3}
    retry: {maxAttempts: 5, initialInterval: 250ms, backoffCoefficient: 1.5, maxInterval: 90s, jitter: 0, nonRetryableErrors: [Bad]}
    timeout: 1h30m
    heartbeat: 1500ms
    maxIterations: 3
    effect: write
    checkpoint: both
    fallback: {total: 0}
  - id: b
    type: echo
    join: ANY
    retry: {maxAttempts: 2}
  - id: c
    type: human
    timeout: 1h
edges:
  - {from: START, to: a}
  - {from: START, to: b, when: "true"}
  - {from: a, to: c, action: go}
  - {from: b, to: c}
  - {from: c, to: END}
  - {from: c, to: END, timeout: true}
graphs:
  sub:
    nodes: [{id: s, type: transform, config: {set: {x: "1"}}}]
    edges: [{from: START, to: s}, {from: s, to: END}]
`,
  'run limit, limits by type and queue, node limits, agent tools': `
name: limited
concurrency: {max: 2, key: invocation.tenant, name: shared-runs, strategy: cancel-oldest}
limits:
  types:
    http: {concurrency: {max: 3, key: "state.host"}}
    llm: {rate: {limit: 60, per: 1m, units: "int(state.tokens)", name: llm-tokens}}
  queues:
    gpu: {concurrency: {max: 1}}
nodes:
  - {id: fetch, type: http, config: {url: "https://example.com"}}
  - {id: own, type: http, config: {url: "https://example.com/b"}, concurrency: {max: 5, name: mine}}
  - {id: ask, type: llm, config: {model: m, prompt: hi}}
  - {id: train, type: x, queue: gpu}
  - {id: items, type: x, queue: gpu, map: {over: state.list, concurrency: 4}}
  - {id: paced, type: x, rate: {limit: 10, per: 1s, key: invocation.tenant}}
  - {id: slow, type: x, rate: {limit: 1, per: 1500ms}}
  - {id: each, type: z, map: {over: state.list}, rate: {limit: 10, per: 1s, key: "local.item.tenant"}}
  - {id: asks, type: llm, config: {model: m, prompt: hi}, map: {over: state.list}}
  - id: agent
    type: agent
    config:
      model: m
      prompt: "do {{.state.topic}}"
      tools:
        - {name: search, type: http, queue: gpu, approval: required, approvalTimeout: 30m, parameters: {type: object}}
        - {name: sub, graph: helper}
  - {id: pick, type: router, queue: gpu}
edges:
  - {from: START, to: fetch}
  - {from: fetch, to: own}
  - {from: own, to: ask, when: "state.x > 1", onMissing: "false"}
  - {from: own, to: ask, when: "state.y > 1", onMissing: fail}
  - {from: ask, to: train}
  - {from: train, to: items}
  - {from: items, to: paced}
  - {from: paced, to: slow}
  - {from: slow, to: each}
  - {from: each, to: asks}
  - {from: asks, to: agent}
  - {from: agent, to: pick}
  - {from: agent, to: END, timeout: true}
  - {from: pick, to: END}
graphs:
  helper:
    concurrency: {max: 1}
    limits: {types: {x: {rate: {limit: 5, per: 2s}}}, queues: {}}
    nodes: [{id: h, type: x}]
    edges: [{from: START, to: h}, {from: h, to: END}]
`,
}

const jsonCases = {
  'JSON numbers and strings': `{"name":"nums","nodes":[${node(',"config":{"i":12345678901234567890,"f":1.0,"e":1E2,"neg":-0,"tiny":1e-400,"huge":1e400,"s":"\\u003c\\u2028é\\/","z":[],"o":{}},"fallback":null')}],"edges":[{"from":"START","to":"a"},{"from":"a","to":"END"}]}`,
  'JSON with duplicate keys and odd key order': `{"nodes":[${node(',"config":{"b":1,"a":2,"b":3,"é":1,"z":0,"😀":1,"ﬀ":2}')}],"name":"dups","edges":[{"to":"a","from":"START"},{"from":"a","to":"END","action":""}],"maxIterations":0}`,
}

test('tricky YAML gives Go’s canonical JSON and digest', async () => {
  for (const [name, text] of Object.entries(yamlCases)) {
    const want = await go.ask({ op: 'graph', text, source: `${name}.yaml` })
    assert.equal(want.error, undefined, `${name}: Go: ${want.error}`)
    const g = parseGraph(text, { format: 'yaml' })
    assert.equal(g.canonical, want.canonical, name)
    assert.equal(g.digest, want.digest, name)
  }
})

test('tricky JSON, and a graph given as an object, give Go’s canonical JSON and digest', async () => {
  for (const [name, text] of Object.entries(jsonCases)) {
    const want = await go.ask({ op: 'graph', text, source: `${name}.json` })
    assert.equal(want.error, undefined, `${name}: Go: ${want.error}`)
    const g = parseGraph(text)
    assert.equal(g.canonical, want.canonical, name)
    assert.equal(g.digest, want.digest, name)
  }
  const obj = { name: 'obj', nodes: [{ id: 'a', type: 'x', config: { b: 1.5, a: [1, 'two', { y: null }] }, timeout: '90s' }], edges: [{ from: 'START', to: 'a' }, { from: 'a', to: 'END' }] }
  const want = await go.ask({ op: 'graph', text: JSON.stringify(obj), source: 'obj.json' })
  assert.equal(parseGraph(obj).digest, want.digest)
})

test('a graph Go refuses is refused, saying where', async () => {
  const bad = {
    'unknown field': ['name: u\nnodes: [{id: a, type: x, tipe: y}]\nedges: [{from: START, to: a}, {from: a, to: END}]\n', /node "a": tipe: unknown field \(did you mean "type"\?\)/],
    'wrong type': ['name: w\nnodes: [{id: a, type: x, timeout: 5}]\nedges: [{from: START, to: a}, {from: a, to: END}]\n', /node "a": timeout: want a duration/],
    'bad join': ['name: j\nnodes: [{id: a, type: x, join: some}]\nedges: [{from: START, to: a}, {from: a, to: END}]\n', /node "a": join/],
    'unknown edge end': ['name: e\nnodes: [{id: a, type: x}]\nedges: [{from: START, to: b}, {from: a, to: END}]\n', /edge 0 \(START -> b\): to: unknown node "b"/],
    'bad id': ['name: i\nnodes: [{id: "a.b", type: x}]\nedges: [{from: START, to: "a.b"}, {from: "a.b", to: END}]\n', /node "a\.b": id/],
    'yes as a string field': ['name: y\nnodes: [{id: a, type: yes}]\nedges: [{from: START, to: a}, {from: a, to: END}]\n', /quote values such as yes/],
    'not YAML': ['name: [unclosed\n', /invalid YAML/],
    'run limit over the max': ['name: r\nconcurrency: {max: 1001}\nnodes: [{id: a, type: x}]\nedges: [{from: START, to: a}, {from: a, to: END}]\n', /concurrency\.max: must be at most 1000/],
    'run limit strategy': ['name: r\nconcurrency: {max: 1, strategy: drop}\nnodes: [{id: a, type: x}]\nedges: [{from: START, to: a}, {from: a, to: END}]\n', /concurrency\.strategy: unknown strategy "drop"/],
    'run limit unknown field': ['name: r\nconcurrency: {max: 1, kee: x}\nnodes: [{id: a, type: x}]\nedges: [{from: START, to: a}, {from: a, to: END}]\n', /concurrency\.kee: unknown field \(did you mean "key"\?\)/],
    'node concurrency zero': ['name: c\nnodes: [{id: a, type: x, concurrency: {max: 0}}]\nedges: [{from: START, to: a}, {from: a, to: END}]\n', /node "a": concurrency\.max: must be at least 1/],
    'concurrency on a router': ['name: c\nnodes: [{id: a, type: router, concurrency: {max: 1}}]\nedges: [{from: START, to: a}, {from: a, to: END}]\n', /node "a": concurrency: a router node runs in the coordinator/],
    'rate per under 1ms': ['name: r\nnodes: [{id: a, type: x, rate: {limit: 1, per: 10us}}]\nedges: [{from: START, to: a}, {from: a, to: END}]\n', /node "a": rate\.per: must be at least 1ms/],
    'rate and concurrency': ['name: r\nnodes: [{id: a, type: x, concurrency: {max: 1}, rate: {limit: 1, per: 1s}}]\nedges: [{from: START, to: a}, {from: a, to: END}]\n', /node "a": rate: a node with a concurrency limit cannot have a rate limit too/],
    'limit for a type no node has': ['name: l\nlimits: {types: {htp: {concurrency: {max: 1}}}}\nnodes: [{id: a, type: http}]\nedges: [{from: START, to: a}, {from: a, to: END}]\n', /limits\.types\.htp: no node of this graph has type "htp" \(they have: http\)/],
    'limit entry with no limit': ['name: l\nlimits: {queues: {default: {}}}\nnodes: [{id: a, type: x}]\nedges: [{from: START, to: a}, {from: a, to: END}]\n', /limits\.queues\.default: give a concurrency or a rate limit/],
    'node under a type and a queue limit': ['name: l\nlimits: {types: {x: {concurrency: {max: 1}}}, queues: {q: {concurrency: {max: 2}}}}\nnodes: [{id: a, type: x, queue: q}]\nedges: [{from: START, to: a}, {from: a, to: END}]\n', /node "a": type: node is under both limits\.types\.x and limits\.queues\.q/],
    'limit entry with a bad value': ['name: l\nlimits: {types: {x: {concurrency: {max: two}}}}\nnodes: [{id: a, type: x}]\nedges: [{from: START, to: a}, {from: a, to: END}]\n', /limits\.types\.x\.concurrency\.max: want an integer/],
    'onMissing without a condition': ['name: m\nnodes: [{id: a, type: x}]\nedges: [{from: START, to: a}, {from: a, to: END, onMissing: "false"}]\n', /edge 1 \(a -> END\): onMissing: the edge has no condition/],
    'onMissing unknown': ['name: m\nnodes: [{id: a, type: x}]\nedges: [{from: START, to: a}, {from: a, to: END, when: "true", onMissing: skip}]\n', /edge 1 \(a -> END\): onMissing: want "false" or "fail", got "skip"/],
    'not a graph': ['- a\n- b\n', /want a graph object/],
  }
  for (const [name, [text, want]] of Object.entries(bad)) {
    const goErr = (await go.ask({ op: 'graph', text, source: `${name}.yaml` })).error
    assert.ok(goErr !== undefined, `${name}: Go accepts it`)
    assert.throws(() => parseGraph(text, { source: `${name}.yaml`, format: 'yaml' }), (e) => e instanceof GraphError && want.test(e.message), `${name}`)
  }
  // A limit entry's keys are read as every other field's: exactly, an
  // unknown one refused with its place (Go once read them as encoding/json
  // does, case-insensitively and dropping unknown keys).
  for (const [name, text] of Object.entries({
    'limit entry, JSON': '{"name":"l","limits":{"types":{"x":{"rate":{"limit":1,"per":"1s","Per":null}}}},"nodes":[{"id":"a","type":"x"}],"edges":[{"from":"START","to":"a"},{"from":"a","to":"END"}]}',
    'limit entry, YAML': 'name: l\nlimits: {types: {x: {concurrency: {max: 2, kee: state.k}}}}\nnodes: [{id: a, type: x}]\nedges: [{from: START, to: a}, {from: a, to: END}]\n',
    'limit entry, key case': 'name: l\nlimits: {queues: {q: {Concurrency: {max: 2}}}}\nnodes: [{id: a, type: x, queue: q}]\nedges: [{from: START, to: a}, {from: a, to: END}]\n',
  })) {
    const goErr = (await go.ask({ op: 'graph', text, source: name })).error
    assert.match(goErr ?? '', /unknown field/, `${name}: Go`)
    assert.throws(() => parseGraph(text, { source: name }), (e) => e instanceof GraphError && /limits\.(types|queues)\.[xq]\.\S*: unknown field/.test(e.message), name)
  }
  // A key given twice: refused at the same line and column as Go, naming where it was first.
  const dup = 'name: d\nnodes:\n  - id: a\n    type: x\n    type: y\nedges: [{from: START, to: a}, {from: a, to: END}]\nname: e\n'
  const goDup = (await go.ask({ op: 'graph', text: dup, source: 'dup.yaml' })).error
  assert.ok(goDup !== undefined, 'Go accepts a key given twice')
  for (const want of ['line 5, column 5', 'first given at line 4, column 5', 'line 7, column 1', 'first given at line 1, column 1']) {
    assert.ok(goDup.includes(want), `Go's error ${goDup} lacks ${want}`)
    assert.throws(() => parseGraph(dup, { source: 'dup.yaml' }), (e) => e instanceof GraphError && e.message.includes(want) && /duplicate key/.test(e.message), want)
  }
  assert.throws(() => parseGraph('{"name": "x", "nodes": [}', { source: 'x.json' }), /x\.json: line 1, column 25: invalid JSON/)
})
