// Schedules: each with when it fires (its spec, the next fire times), its
// latest fires (each run linked, with its status; a skipped fire with the
// reason), and whether it is paused and why; buttons pause (a note is
// required), unpause and trigger one run now. Refreshed every few seconds
// (fires come from the coordinators, not from this page).
import { useEffect, useState } from 'preact/hooks'
import { api, type Schedule } from '../api'
import { useConfig } from '../config'
import { href } from '../router'
import { Confirm, Loading, Problem, Status, Time } from '../ui'

const EVERY = 3000

type Open = { kind: 'pause' | 'unpause' | 'trigger'; name: string } | null

export function SchedulesScreen() {
  const config = useConfig()
  const [view, setView] = useState<Schedule[] | null>(null)
  const [error, setError] = useState<unknown>(null)
  const [open, setOpen] = useState<Open>(null)
  const [note, setNote] = useState('')
  const [notice, setNotice] = useState<string | null>(null)
  const [tick, setTick] = useState(0)
  useEffect(() => {
    let gone = false
    let timer: number | undefined
    const load = () =>
      api.schedules().then(
        (v) => {
          if (gone) return
          setView(v)
          setError(null)
          timer = window.setTimeout(load, EVERY)
        },
        (e) => {
          if (gone) return
          setError(e)
          timer = window.setTimeout(load, EVERY)
        },
      )
    load()
    return () => {
      gone = true
      clearTimeout(timer)
    }
  }, [tick])
  const done = (msg: string) => {
    setNotice(msg)
    setTick((t) => t + 1) // read the schedules again now
  }

  return (
    <section class="schedules">
      <h1>Schedules</h1>
      {notice && (
        <div class="notice" role="status">
          {notice}
        </div>
      )}
      {error !== null && <Problem error={error} title="Cannot read the schedules" />}
      {view === null && error === null && <Loading what="schedules" />}
      {view !== null && view.length === 0 && (
        <p class="empty">
          No schedules yet: <span class="mono">weft schedule create NAME -graph FILE -cron SPEC</span>.
        </p>
      )}
      {view?.map((s) => (
        <div class={`queue schedule ${s.paused ? 'paused' : ''}`} key={s.name} data-schedule={s.name}>
          <h2>
            <span class="mono">{s.name}</span>{' '}
            <span class="muted">
              {s.spec} · graph <span class="mono">{s.graph}</span> · overlap {s.overlap}
            </span>{' '}
            {s.paused ? (
              <span class="status status-cancelled" data-paused="true">
                paused
              </span>
            ) : (
              <span class="status status-running" data-paused="false">
                active
              </span>
            )}
          </h2>
          {s.paused && (
            <p class="pause-note">
              Paused: <span>{s.pauseNote || 'no reason given'}</span>
            </p>
          )}
          {s.note && <p class="muted">{s.note}</p>}
          {!config.readOnly && (
            <div class="actions">
              {s.paused ? (
                <button onClick={() => setOpen({ kind: 'unpause', name: s.name })}>Unpause…</button>
              ) : (
                <button
                  onClick={() => {
                    setNote('')
                    setOpen({ kind: 'pause', name: s.name })
                  }}
                >
                  Pause…
                </button>
              )}
              <button onClick={() => setOpen({ kind: 'trigger', name: s.name })}>Trigger now…</button>
            </div>
          )}
          <p class="next">
            next fires:{' '}
            {s.next.length === 0 && <span class="muted">none</span>}
            {s.next.map((t, i) => (
              <span key={t}>
                {i > 0 && ', '}
                <Time at={t} />
              </span>
            ))}
            {s.paused && s.next.length > 0 && <span class="muted"> (skipped while paused)</span>}
          </p>
          {s.fires.length === 0 ? (
            <p class="muted">No fires yet.</p>
          ) : (
            <table class="list fires">
              <thead>
                <tr>
                  <th>fire time</th>
                  <th>outcome</th>
                  <th>run</th>
                  <th>status</th>
                </tr>
              </thead>
              <tbody>
                {s.fires.map((f) => (
                  <tr key={f.nominal + f.outcome + (f.runId ?? '')} data-run={f.runId ?? ''}>
                    <td>
                      <Time at={f.nominal} />
                    </td>
                    <td title={f.reason}>
                      {f.outcome}
                      {f.reason && <span class="muted"> ({f.reason})</span>}
                    </td>
                    <td class="mono">{f.runId ? <a href={href(['runs', f.runId])}>{f.runId}</a> : '—'}</td>
                    <td>{f.status ? <Status status={f.status} /> : <span class="muted">—</span>}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </div>
      ))}
      {open?.kind === 'pause' && (
        <Confirm
          title={`Pause schedule ${open.name}?`}
          confirm="Pause"
          onClose={() => setOpen(null)}
          onConfirm={async () => {
            await api.pauseSchedule(open.name, note)
            done(`Schedule ${open.name} paused.`)
          }}
        >
          <p>Its fires are recorded as skipped until it is unpaused; fires missed meanwhile are not caught up.</p>
          <label class="block">
            why (required)
            <input name="note" value={note} onInput={(e) => setNote((e.target as HTMLInputElement).value)} />
          </label>
        </Confirm>
      )}
      {open?.kind === 'unpause' && (
        <Confirm
          title={`Unpause schedule ${open.name}?`}
          confirm="Unpause"
          onClose={() => setOpen(null)}
          onConfirm={async () => {
            await api.unpauseSchedule(open.name)
            done(`Schedule ${open.name} unpaused.`)
          }}
        >
          <p>It fires again from its next fire time.</p>
        </Confirm>
      )}
      {open?.kind === 'trigger' && (
        <Confirm
          title={`Start a run of schedule ${open.name} now?`}
          confirm="Trigger"
          onClose={() => setOpen(null)}
          onConfirm={async () => {
            const r = await api.triggerSchedule(open.name)
            done(`Schedule ${open.name} triggered: run ${r.runId}.`)
          }}
        >
          <p>One run now, whatever its overlap policy.</p>
        </Confirm>
      )}
    </section>
  )
}
