// The run's graph, laid out by dagre and drawn as SVG: one box per node,
// coloured by the status of its activation in the state shown (live, or
// as it was after a selected event), with its attempt, iteration and queue.
import dagre from '@dagrejs/dagre'
import { useMemo } from 'preact/hooks'
import type { GraphView, NodeState } from '../api'

interface Box {
  id: string
  x: number
  y: number
  w: number
  h: number
  type: string
  queue?: string
  label?: string
  subgraph?: boolean
}

interface Line {
  from: string
  to: string
  points: { x: number; y: number }[]
  label?: string
  lx?: number
  ly?: number
  back?: boolean
}

const CHAR = 7.2 // px per character of the node font, near enough for sizing
const H = 58

function layout(g: GraphView): { boxes: Box[]; lines: Line[]; width: number; height: number } {
  const d = new dagre.graphlib.Graph({ multigraph: true })
  d.setGraph({ rankdir: 'TB', nodesep: 28, ranksep: 44, edgesep: 12, marginx: 8, marginy: 8 })
  d.setDefaultEdgeLabel(() => ({}))
  for (const n of g.nodes) {
    const text = Math.max(n.id.length, (n.type + (n.queue ? ` · ${n.queue}` : '')).length, 16)
    const start = n.type === 'start' || n.type === 'end'
    d.setNode(n.id, { width: start ? 70 : Math.min(260, text * CHAR + 24), height: start ? 30 : H })
  }
  g.edges.forEach((e, i) => {
    if (!d.hasNode(e.from) || !d.hasNode(e.to)) return
    const label = e.label ?? ''
    d.setEdge(e.from, e.to, { label, width: label ? Math.min(label.length, 28) * 6.2 : 0, height: label ? 14 : 0, minlen: 1 }, String(i))
  })
  dagre.layout(d)
  const byId = new Map(g.nodes.map((n) => [n.id, n]))
  const boxes: Box[] = d.nodes().map((id) => {
    const n = d.node(id)
    const src = byId.get(id)!
    return { id, x: n.x!, y: n.y!, w: n.width, h: n.height, type: src.type, queue: src.queue, label: src.label, subgraph: src.subgraph }
  })
  const lines: Line[] = d.edges().map((e) => {
    const l = d.edge(e)
    const src = g.edges[Number(e.name)]
    return { from: e.v, to: e.w, points: l.points ?? [], label: src?.label, lx: l.x, ly: l.y, back: src?.back }
  })
  const gl = d.graph()
  return { boxes, lines, width: gl.width ?? 100, height: gl.height ?? 100 }
}

function path(points: { x: number; y: number }[]): string {
  if (points.length === 0) return ''
  let s = `M${points[0].x},${points[0].y}`
  // Quadratic curves through the midpoints: smooth, and through dagre's bends.
  for (let i = 1; i < points.length - 1; i++) {
    const p = points[i]
    const q = points[i + 1]
    s += ` Q${p.x},${p.y} ${(p.x + q.x) / 2},${(p.y + q.y) / 2}`
  }
  const last = points[points.length - 1]
  return s + ` L${last.x},${last.y}`
}

function clip(s: string, n: number): string {
  return s.length > n ? s.slice(0, n - 1) + '…' : s
}

export function GraphPicture(props: {
  graph: GraphView
  nodes: Record<string, NodeState>
  ended: boolean
  selected?: string | null
  onSelect: (id: string | null) => void
}) {
  const { boxes, lines, width, height } = useMemo(() => layout(props.graph), [JSON.stringify(props.graph)])
  return (
    <svg
      class="graph"
      viewBox={`0 0 ${width} ${height}`}
      width={width}
      height={height}
      role="img"
      aria-label="the run's graph"
    >
      <defs>
        <marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">
          <path d="M0,0 L10,5 L0,10 z" class="arrowhead" />
        </marker>
      </defs>
      {lines.map((l, i) => (
        <g key={i} class={`edge ${l.back ? 'back' : ''}`}>
          <path d={path(l.points)} marker-end="url(#arrow)" />
          {l.label && l.lx !== undefined && (
            <text x={l.lx} y={(l.ly ?? 0) + 4} class="edge-label" text-anchor="middle">
              {clip(l.label, 28)}
            </text>
          )}
        </g>
      ))}
      {boxes.map((b) => {
        const s = props.nodes[b.id]
        let status = s?.status || 'idle'
        if (b.type === 'start') status = 'succeeded'
        if (b.type === 'end') status = props.ended ? 'succeeded' : 'idle'
        const x = b.x - b.w / 2
        const y = b.y - b.h / 2
        const terminal = b.type === 'start' || b.type === 'end'
        const sel = props.selected === b.id
        return (
          <g
            key={b.id}
            class={`node status-${status} ${sel ? 'selected' : ''} ${terminal ? 'terminal' : ''}`}
            data-node={b.id}
            data-status={status}
            onClick={() => props.onSelect(sel || terminal ? null : b.id)}
          >
            <title>{`${b.id}: ${status}`}</title>
            <rect x={x} y={y} width={b.w} height={b.h} rx={terminal ? b.h / 2 : 6} />
            {terminal ? (
              <text x={b.x} y={b.y + 4} text-anchor="middle" class="id">
                {b.id}
              </text>
            ) : (
              <>
                <text x={x + 10} y={y + 17} class="id">
                  {clip(b.label || b.id, 30)}
                  {b.subgraph ? ' ↗' : ''}
                </text>
                <text x={x + 10} y={y + 33} class="meta">
                  {clip(b.type + (b.queue ? ` · ${b.queue}` : ''), 34)}
                </text>
                <text x={x + 10} y={y + 49} class="meta">
                  {status}
                  {s?.attempt ? ` · attempt ${s.attempt}` : ''}
                  {s && s.iteration > 1 ? ` · iter ${s.iteration}` : ''}
                  {s?.items?.length ? ` · ${s.items.filter((i) => i.status === 'succeeded').length}/${s.items.length}` : ''}
                </text>
              </>
            )}
          </g>
        )
      })}
    </svg>
  )
}
