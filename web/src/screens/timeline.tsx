// The run's events, one row each, virtualised: only the rows in view (and
// a few either side) are in the DOM, so a run of 10,000 events scrolls as
// easily as one of ten. Clicking a row, or the arrow keys, selects an event.
import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks'
import type { WeftEvent } from '../api'
import { shortType } from '../ui'

export const ROW = 26 // px; CSS .timeline .row has the same height

// Log is a run's events by position: log[p-1] is the event at position p,
// undefined while its page is still loading.
export type Log = (WeftEvent | undefined)[]
const OVERSCAN = 8

function clock(t: string): string {
  const d = new Date(t)
  if (isNaN(d.getTime())) return t
  const p = (n: number, w = 2) => String(n).padStart(w, '0')
  return `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`
}

export function Timeline(props: {
  events: Log
  count: number // events in the run, loaded or not
  selected: number | null // position
  node?: string | null // events of this node are marked
  onSelect: (position: number, byKey: boolean) => void
}) {
  const { events, selected, count } = props
  const box = useRef<HTMLDivElement>(null)
  const [top, setTop] = useState(0)
  const [height, setHeight] = useState(400)
  const follow = useRef(true) // keep the newest event in view while it is

  useLayoutEffect(() => {
    const el = box.current
    if (!el) return
    const ro = new ResizeObserver(() => setHeight(el.clientHeight))
    ro.observe(el)
    setHeight(el.clientHeight)
    return () => ro.disconnect()
  }, [])

  // New events: stay at the bottom if the reader was there.
  useEffect(() => {
    const el = box.current
    if (el && follow.current && selected === null) el.scrollTop = el.scrollHeight
  }, [count])

  // A selected event is scrolled into view.
  useEffect(() => {
    const el = box.current
    if (!el || selected === null) return
    const y = (selected - 1) * ROW
    if (y < el.scrollTop) el.scrollTop = y
    else if (y + ROW > el.scrollTop + el.clientHeight) el.scrollTop = y + ROW - el.clientHeight
  }, [selected, count > 0])

  const onScroll = () => {
    const el = box.current!
    setTop(el.scrollTop)
    follow.current = el.scrollTop + el.clientHeight >= el.scrollHeight - ROW
  }

  const onKey = (e: KeyboardEvent) => {
    if (count === 0) return
    const i = selected === null ? count : selected - 1
    const page = Math.max(1, Math.floor(height / ROW) - 1)
    let j: number
    switch (e.key) {
      case 'ArrowDown':
        j = i + 1
        break
      case 'ArrowUp':
        j = i - 1
        break
      case 'PageDown':
        j = i + page
        break
      case 'PageUp':
        j = i - page
        break
      case 'Home':
        j = 0
        break
      case 'End':
        j = count - 1
        break
      default:
        return
    }
    e.preventDefault()
    j = Math.max(0, Math.min(count - 1, j))
    props.onSelect(j + 1, true)
  }

  const first = Math.max(0, Math.floor(top / ROW) - OVERSCAN)
  const last = Math.min(count, Math.ceil((top + height) / ROW) + OVERSCAN)
  const rows = []
  for (let i = first; i < last; i++) {
    const e = events[i]
    if (e === undefined) {
      rows.push(
        <div key={i + 1} class="row pending" style={{ top: `${i * ROW}px` }} data-position={i + 1}>
          <span class="pos">#{i + 1}</span>
          <span class="muted">loading…</span>
        </div>,
      )
      continue
    }
    const cls = ['row']
    if (e.position === selected) cls.push('selected')
    if (props.node && e.node === props.node) cls.push('of-node')
    if (e.refused) cls.push('refused')
    if (/failed|cancel/.test(e.type)) cls.push('bad')
    // A map item reads as the CLI writes it, pages[2]; the row is one
    // line, so its whole text is its tooltip.
    const node = `${e.node ?? ''}${e.item !== undefined && e.item !== null ? `[${e.item}]` : ''}${e.attempt && e.attempt > 1 ? ` (attempt ${e.attempt})` : ''}`
    const sum = e.refused ? `refused: ${e.refused}` : (e.summary ?? '')
    rows.push(
      <div
        key={e.position}
        class={cls.join(' ')}
        style={{ top: `${i * ROW}px` }}
        data-position={e.position}
        title={`#${e.position} ${shortType(e.type)} ${node}\n${sum}\n${e.id}`}
        onClick={() => props.onSelect(e.position, false)}
      >
        <span class="pos">#{e.position}</span>
        <span class="clock">{clock(e.time)}</span>
        <span class="type">{shortType(e.type)}</span>
        <span class="node">{node}</span>
        <span class="sum">{sum}</span>
      </div>,
    )
  }
  return (
    <div class="timeline" ref={box} onScroll={onScroll} tabIndex={0} onKeyDown={onKey} aria-label="the run's events">
      <div class="spacer" style={{ height: `${count * ROW}px` }}>
        {rows}
      </div>
    </div>
  )
}
