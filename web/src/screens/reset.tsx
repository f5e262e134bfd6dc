// Reset from a node: the run forked from just before the node last ran
// (its state then, the node and what follows run again) and, if it has
// not ended, cancelled ('weft reset -to NODE'). It asks first, then opens
// the new run.
import { useState } from 'preact/hooks'
import { api } from '../api'
import { href, navigate } from '../router'
import { Confirm } from '../ui'

export function ResetFrom(props: {
  runId: string
  node: string
  ran: boolean
  readOnly: boolean
  noRight?: string // why this UI may not act on runs, if it may not
  onDone: (msg: string) => void
}) {
  const [open, setOpen] = useState(false)
  const why = props.readOnly
    ? 'the UI is read-only'
    : props.noRight
      ? props.noRight
      : !props.ran
        ? 'this node has not run: there is nothing to reset to'
        : ''
  return (
    <>
      <button data-reset={props.node} disabled={why !== ''} title={why || `fork the run from just before ${props.node} last ran`} onClick={() => setOpen(true)}>
        {why ? `Reset from here: ${why}` : 'Reset from here…'}
      </button>
      {open && (
        <Confirm
          title={`Reset run ${props.runId} to node ${props.node}?`}
          confirm="Reset"
          onClose={() => setOpen(false)}
          onConfirm={async () => {
            const r = await api.reset(props.runId, props.node)
            props.onDone(`Reset to ${props.node}: new run ${r.runId}.`)
            navigate(href(['runs', r.runId]))
          }}
        >
          <p>
            A new run starts from this run's state just before <b>{props.node}</b> last ran, and runs it and what follows again. This
            run, if it has not ended, is cancelled.
          </p>
        </Confirm>
      )}
    </>
  )
}
