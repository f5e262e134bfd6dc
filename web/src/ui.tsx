// Small pieces every screen uses: status badges, messages, JSON, times,
// and the confirmation dialog. Everything from the server is rendered as
// text (Preact escapes it); nothing here sets HTML.
import type { ComponentChildren } from 'preact'
import { useEffect, useRef, useState } from 'preact/hooks'
import { ApiError } from './api'
import { JsonView } from './json'

export function Status({ status }: { status: string }) {
  const s = status || 'idle'
  return <span class={`status status-${s}`}>{s.replace('_', ' ')}</span>
}

// shownStatus is a run's status as people read it: a run 'weft terminate'
// ends is terminating, then terminated, not cancelling and cancelled (the
// API keeps the log's statuses, with the run marked terminated).
export function shownStatus(status: string, terminated?: boolean): string {
  if (terminated && status === 'cancelled') return 'terminated'
  if (terminated && status === 'cancelling') return 'terminating'
  return status
}

// Problem shows an error as a message on the page, with the field to blame.
export function Problem({ error, title }: { error: unknown; title?: string }) {
  const e = error instanceof ApiError ? error : null
  const msg = error instanceof Error ? error.message : String(error)
  return (
    <div class="problem" role="alert">
      {title && <strong>{title}: </strong>}
      {msg}
      {e?.field && <span class="field"> (parameter: {e.field})</span>}
    </div>
  )
}

export function Loading({ what }: { what: string }) {
  return <div class="loading">Loading {what}…</div>
}

// Json shows a JSON value: a collapsible tree with a copy button (json.tsx).
export function Json({ value, empty = '—' }: { value: unknown; empty?: string }) {
  if (value === undefined || value === null) return <span class="muted">{empty}</span>
  return <JsonView value={value} />
}

export function Time({ at }: { at?: string }) {
  if (!at) return <span class="muted">—</span>
  const d = new Date(at)
  if (isNaN(d.getTime())) return <span>{at}</span>
  return <time dateTime={at} title={at}>{fmtTime(d)}</time>
}

export function fmtTime(d: Date): string {
  const pad = (n: number, w = 2) => String(n).padStart(w, '0')
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`
}

export function duration(from?: string, to?: string): string {
  if (!from || !to) return ''
  const ms = new Date(to).getTime() - new Date(from).getTime()
  if (!isFinite(ms) || ms < 0) return ''
  if (ms < 1000) return `${ms} ms`
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`
  const m = Math.floor(ms / 60_000)
  if (m < 60) return `${m} min ${Math.round((ms % 60_000) / 1000)} s`
  return `${Math.floor(m / 60)} h ${m % 60} min`
}

// relative says when at is from now, for people: "in 4 min 2 s", "12 s
// ago"; the absolute time is its title (see Ago).
export function relative(at: string, now: number): string {
  const t = new Date(at).getTime()
  if (!isFinite(t)) return at
  const d = duration(new Date(Math.min(t, now)).toISOString(), new Date(Math.max(t, now)).toISOString()) || '0 ms'
  return t >= now ? `in ${d}` : `${d} ago`
}

// Ago shows a time relative to now, the absolute time on hover.
export function Ago({ at, now }: { at?: string; now: number }) {
  if (!at) return <span class="muted">—</span>
  const d = new Date(at)
  if (isNaN(d.getTime())) return <span>{at}</span>
  return (
    <time dateTime={at} title={fmtTime(d)}>
      {relative(at, now)}
    </time>
  )
}

// shortType turns dev.weft.node.invoked.v1 into node.invoked.
export function shortType(t: string): string {
  return t.replace(/^dev\.weft\./, '').replace(/\.v\d+$/, '')
}

// Confirm asks before an action runs; it shows the action's error, if
// any, and closes when the action succeeds.
export function Confirm(props: {
  title: string
  confirm: string
  children?: ComponentChildren
  onConfirm: () => Promise<void>
  onClose: () => void
  // blocked says why the action may not be confirmed yet ('' or absent: it may).
  blocked?: string
}) {
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<unknown>(null)
  const ref = useRef<HTMLDialogElement>(null)
  useEffect(() => {
    ref.current?.showModal?.()
  }, [])
  const go = async (e: Event) => {
    e.preventDefault()
    setBusy(true)
    setError(null)
    try {
      await props.onConfirm()
      props.onClose()
    } catch (err) {
      setError(err)
      setBusy(false)
    }
  }
  return (
    <dialog ref={ref} class="confirm" onCancel={props.onClose}>
      <form onSubmit={go}>
        <h3>{props.title}</h3>
        {props.children}
        {error !== null && <Problem error={error} />}
        <div class="buttons">
          <button type="button" onClick={props.onClose} disabled={busy}>
            Back
          </button>
          <button type="submit" class="primary" disabled={busy || !!props.blocked} title={props.blocked || undefined}>
            {busy ? 'Working…' : props.confirm}
          </button>
        </div>
      </form>
    </dialog>
  )
}
