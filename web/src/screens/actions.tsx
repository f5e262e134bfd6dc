// The run's actions: signal a node waiting for one (its data as JSON),
// cancel the run, fork a new run from the selected event. Each asks first;
// its event then shows in the timeline through the live stream.
import { useState } from 'preact/hooks'
import { api, ApiError, type RunState } from '../api'
import { href, navigate } from '../router'
import { Confirm } from '../ui'

type Open = 'signal' | 'cancel' | 'fork' | null

const ended = (s: string) => s === 'completed' || s === 'failed' || s === 'cancelled'

// parseSignalData reads the signal form's JSON, or says where it is wrong.
export function parseSignalData(text: string): unknown {
  if (text.trim() === '') return {}
  try {
    return JSON.parse(text)
  } catch (e) {
    throw new ApiError(`The signal's data is not valid JSON: ${(e as Error).message}`, 0, 'data')
  }
}

export function Actions(props: { runId: string; state: RunState; at: number | null; onDone: (msg: string) => void }) {
  const [open, setOpen] = useState<Open>(null)
  const waiting = Object.entries(props.state.nodes ?? {})
    .filter(([, n]) => n.status === 'waiting' && n.waitingFor === 'signal')
    .map(([id]) => id)
  const [node, setNode] = useState('')
  const [text, setText] = useState('{\n  "approved": true\n}')
  const [reason, setReason] = useState('')
  const done = ended(props.state.status)
  const target = waiting.includes(node) ? node : (waiting[0] ?? '')

  return (
    <div class="actions">
      <button
        onClick={() => setOpen('signal')}
        disabled={waiting.length === 0}
        title={waiting.length ? `send a signal to ${waiting.join(', ')}` : 'no node is waiting for a signal'}
      >
        Signal…
      </button>
      <button onClick={() => setOpen('cancel')} disabled={done || props.state.status === 'cancelling'}>
        Cancel run…
      </button>
      <button
        onClick={() => setOpen('fork')}
        disabled={props.at === null}
        title={props.at === null ? 'select an event in the timeline first' : `fork from event #${props.at}`}
      >
        {props.at === null ? 'Fork: select an event first' : `Fork from #${props.at}…`}
      </button>
      {open === 'signal' && (
        <Confirm
          title="Send a signal"
          confirm="Send signal"
          onClose={() => setOpen(null)}
          onConfirm={async () => {
            const data = parseSignalData(text)
            const r = await api.signal(props.runId, target, data)
            props.onDone(`Signal sent to ${target} (${r.id}).`)
          }}
        >
          <label>
            node{' '}
            <select value={target} onChange={(e) => setNode((e.target as HTMLSelectElement).value)} name="node">
              {waiting.map((n) => (
                <option key={n} value={n}>
                  {n}
                </option>
              ))}
            </select>
          </label>
          <label class="block">
            data (JSON)
            <textarea
              name="data"
              rows={8}
              spellcheck={false}
              value={text}
              onInput={(e) => setText((e.target as HTMLTextAreaElement).value)}
            />
          </label>
        </Confirm>
      )}
      {open === 'cancel' && (
        <Confirm
          title={`Cancel run ${props.runId}?`}
          confirm="Cancel the run"
          onClose={() => setOpen(null)}
          onConfirm={async () => {
            await api.cancel(props.runId, reason)
            props.onDone('Cancellation requested.')
          }}
        >
          <p>Running nodes are asked to stop; the run ends as cancelled.</p>
          <label class="block">
            reason
            <input name="reason" value={reason} onInput={(e) => setReason((e.target as HTMLInputElement).value)} />
          </label>
        </Confirm>
      )}
      {open === 'fork' && props.at !== null && (
        <Confirm
          title={`Fork a new run from event #${props.at}?`}
          confirm="Fork"
          onClose={() => setOpen(null)}
          onConfirm={async () => {
            const r = await api.fork(props.runId, props.at!)
            props.onDone(`Forked as ${r.runId}.`)
            navigate(href(['runs', r.runId]))
          }}
        >
          <p>The new run starts from the state after event #{props.at} of this run and goes on from there.</p>
        </Confirm>
      )}
    </div>
  )
}
