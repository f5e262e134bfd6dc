// Start a run: the graph of a run already run (the newest run of each
// graph) or a graph pasted as YAML or JSON, and the input as a JSON
// object, checked as it is typed; nothing is sent until it parses. The
// server's refusals (a graph that does not validate, with where) are shown
// as they come. A read-only UI starts nothing, and says so.
import { useEffect, useState } from 'preact/hooks'
import { api, type Summary } from '../api'
import { useConfig } from '../config'
import { href, navigate, type Route } from '../router'
import { Problem } from '../ui'

// parseInput reads the input box: empty is no input, else a JSON object;
// anything else is an error that says what and where.
export function parseInput(text: string): { value?: Record<string, unknown>; error?: string } {
  if (text.trim() === '') return {}
  let v: unknown
  try {
    v = JSON.parse(text)
  } catch (e) {
    return { error: `The input is not valid JSON: ${(e as Error).message}` }
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v)) {
    return { error: `The input must be a JSON object ({"key": value, ...}), not ${Array.isArray(v) ? 'an array' : v === null ? 'null' : `a ${typeof v}`}.` }
  }
  return { value: v as Record<string, unknown> }
}

// graphsRun is the newest run of each graph among the runs listed.
function graphsRun(runs: Summary[]): { graph: string; runId: string }[] {
  const seen = new Map<string, string>()
  for (const r of runs) if (r.graph && !seen.has(r.graph)) seen.set(r.graph, r.runId)
  return [...seen].map(([graph, runId]) => ({ graph, runId })).sort((a, b) => a.graph.localeCompare(b.graph))
}

export function StartScreen({ route }: { route: Route }) {
  const config = useConfig()
  const [graphs, setGraphs] = useState<{ graph: string; runId: string }[] | null>(null)
  const [from, setFrom] = useState(route.params.get('from') ?? '')
  const [pasted, setPasted] = useState('')
  const [inputText, setInputText] = useState(route.params.get('input') ?? '{}')
  const [error, setError] = useState<unknown>(null)
  const [busy, setBusy] = useState(false)
  useEffect(() => {
    api.runs({ limit: 200 }).then(
      (l) => setGraphs(graphsRun(l.runs)),
      (e) => setError(e),
    )
  }, [])
  const input = parseInput(inputText)
  const paste = from === '' || from === 'paste'
  const noGraph = paste ? pasted.trim() === '' : false
  const noRight = config.rights && !config.rights.actions ? (config.rights.actionsWhy ?? 'this UI may not start runs') : ''
  const why = config.readOnly ? 'the UI is read-only: it starts no runs' : noRight ? noRight : input.error ? 'fix the input first' : noGraph ? 'paste a graph first' : ''
  const submit = async (e: Event) => {
    e.preventDefault()
    if (why) return
    setBusy(true)
    setError(null)
    try {
      const r = await api.start(paste ? { graph: pasted, input: input.value } : { fromRun: from, input: input.value })
      navigate(href(['runs', r.runId]))
    } catch (err) {
      setError(err)
      setBusy(false)
    }
  }
  return (
    <section class="start">
      <h1>Start a run</h1>
      <form onSubmit={submit} class="start-form">
        <label class="block">
          graph
          <select name="from" value={from || 'paste'} onChange={(e) => setFrom((e.target as HTMLSelectElement).value)}>
            <option value="paste">paste a graph (YAML or JSON)</option>
            {(graphs ?? []).map((g) => (
              <option key={g.graph} value={g.runId}>
                {g.graph} (as run {g.runId} ran it)
              </option>
            ))}
          </select>
        </label>
        {paste && (
          <label class="block">
            the graph, as YAML or JSON
            <textarea
              name="graph"
              rows={12}
              spellcheck={false}
              placeholder={'name: hello\nnodes:\n  - {id: greet, type: echo}\nedges:\n  - {from: START, to: greet}\n  - {from: greet, to: END}'}
              value={pasted}
              onInput={(e) => setPasted((e.target as HTMLTextAreaElement).value)}
            />
          </label>
        )}
        <label class="block">
          input (a JSON object)
          <textarea
            name="input"
            rows={6}
            spellcheck={false}
            aria-invalid={input.error ? 'true' : 'false'}
            value={inputText}
            onInput={(e) => setInputText((e.target as HTMLTextAreaElement).value)}
          />
        </label>
        {input.error && (
          <div class="problem input-error" role="alert">
            {input.error}
          </div>
        )}
        {error !== null && <Problem error={error} title="Not started" />}
        <div class="buttons">
          <button type="submit" class="primary" disabled={busy || why !== ''} title={why}>
            {busy ? 'Starting…' : why ? `Start: ${why}` : 'Start the run'}
          </button>
        </div>
      </form>
    </section>
  )
}
