// JsonView shows a JSON value as a tree: objects and arrays fold and
// unfold (the top levels open, deeper ones folded with a count), scalars
// are coloured by type, and a Copy button puts the whole value, indented,
// on the clipboard. Everything is rendered as text.
import { useState } from 'preact/hooks'

// openDepth is how many levels start unfolded.
const openDepth = 2

function Scalar({ v }: { v: unknown }) {
  const kind = v === null ? 'null' : typeof v
  return <span class={`j-${kind}`}>{JSON.stringify(v)}</span>
}

function Node({ name, v, depth, last }: { name?: string; v: unknown; depth: number; last: boolean }) {
  const [open, setOpen] = useState(depth < openDepth)
  const comma = last ? '' : ','
  const key = name !== undefined && <span class="j-key">{JSON.stringify(name)}: </span>
  if (v === null || typeof v !== 'object') {
    return (
      <div class="j-line">
        {key}
        <Scalar v={v} />
        {comma}
      </div>
    )
  }
  const isArray = Array.isArray(v)
  const entries: [string | undefined, unknown][] = isArray ? v.map((x) => [undefined, x]) : Object.entries(v as object)
  const [o, c] = isArray ? ['[', ']'] : ['{', '}']
  if (entries.length === 0) {
    return (
      <div class="j-line">
        {key}
        {o + c}
        {comma}
      </div>
    )
  }
  return (
    <div class="j-node">
      <div class="j-line">
        <button type="button" class="j-toggle" aria-expanded={open} aria-label={open ? 'fold' : 'unfold'} onClick={() => setOpen(!open)}>
          {open ? '▾' : '▸'}
        </button>
        {key}
        {o}
        {!open && (
          <>
            <span class="muted j-count">
              {' '}
              {entries.length} {isArray ? (entries.length === 1 ? 'item' : 'items') : entries.length === 1 ? 'key' : 'keys'}{' '}
            </span>
            {c}
            {comma}
          </>
        )}
      </div>
      {open && (
        <>
          <div class="j-children">
            {entries.map(([k, x], i) => (
              <Node key={k ?? i} name={k} v={x} depth={depth + 1} last={i === entries.length - 1} />
            ))}
          </div>
          <div class="j-line">
            {c}
            {comma}
          </div>
        </>
      )}
    </div>
  )
}

export function JsonView({ value }: { value: unknown }) {
  const [copied, setCopied] = useState('')
  const copy = async () => {
    const text = JSON.stringify(value, null, 2)
    try {
      await navigator.clipboard.writeText(text)
      setCopied('copied')
    } catch {
      setCopied('copy refused by the browser')
    }
    setTimeout(() => setCopied(''), 2000)
  }
  return (
    <pre class="json json-view" data-json>
      <button type="button" class="link j-copy" onClick={copy} title="copy this JSON to the clipboard">
        {copied || 'Copy'}
      </button>
      <Node v={value} depth={0} last />
    </pre>
  )
}
