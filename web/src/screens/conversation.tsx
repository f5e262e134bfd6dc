// An agent node's conversation: the messages, tool calls and tool results
// its steps recorded (GET /api/runs/{id}/conversation), read again as its
// step events arrive, and, while a model call streams, its text as it
// comes (GET /api/live/runs/{id}/tokens).
import { useEffect, useState } from 'preact/hooks'
import { api, live, type Conversation, type Token } from '../api'
import { Loading, Problem } from '../ui'
import type { Log } from './timeline'

// shortType is an event's short name (dev.weft.node.step.v1 → node.step).
const shortType = (e: { type: string; kind?: string }) => e.kind ?? e.type.replace(/^dev\.weft\./, '').replace(/\.v\d+$/, '')

export function ConversationPanel({ id, node, events }: { id: string; node: string; events: Log }) {
  // The node's steps and outcomes so far: the conversation is read again
  // when either changes.
  let steps = 0
  let outcomes = 0
  for (const e of events) {
    if (!e || e.node !== node) continue
    const k = shortType(e)
    if (k === 'node.step') steps++
    else if (k === 'node.invoked' || k === 'node.failed') outcomes++
  }
  const [conv, setConv] = useState<Conversation | null>(null)
  const [error, setError] = useState<unknown>(null)
  useEffect(() => {
    let gone = false
    api.conversation(id, node).then(
      (c) => {
        if (gone) return
        setConv(c)
        setError(null)
      },
      (e) => !gone && setError(e),
    )
    return () => {
      gone = true
    }
  }, [id, node, steps, outcomes])

  // The text of the model call under way, while the node is live.
  const [streaming, setStreaming] = useState<{ step: number; text: string } | null>(null)
  const isLive = conv?.live ?? false
  const key = conv?.key
  useEffect(() => {
    setStreaming(null)
    if (!isLive || !key) return
    return live(`/api/live/runs/${encodeURIComponent(id)}/tokens`, ['token'], (_kind, data) => {
      const t = data as Token
      if (t.node !== key) return
      setStreaming((s) => (s && s.step === t.step ? { step: t.step, text: s.text + t.text } : { step: t.step, text: t.text }))
    })
  }, [id, key, isLive])

  if (error) return <Problem error={error} />
  if (!conv) return <Loading what="conversation" />
  const recorded = conv.steps.length ? conv.steps[conv.steps.length - 1].step : 0
  const showStream = isLive && streaming && streaming.step > recorded
  return (
    <section class="panel conversation" aria-label="conversation" data-conversation={node}>
      <h2>
        Conversation{' '}
        <span class="muted">
          {conv.steps.length} steps, {conv.turns} model turns
          {conv.usage?.total_tokens ? `, ${conv.usage.total_tokens} tokens` : ''}
          {isLive ? ' · live' : ''}
        </span>
      </h2>
      {conv.messages.length === 0 && !showStream && <div class="empty">No step recorded yet.</div>}
      <ol class="messages">
        {conv.messages.map((m, i) => (
          <li key={i} class={`msg msg-${m.role}${m.isError ? ' bad' : ''}`} data-role={m.role} data-step={m.step}>
            <div class="msg-head muted">
              {m.role === 'tool' ? `tool result: ${m.name ?? ''}` : m.role}
              {m.step > 0 ? ` · step ${m.step}` : ''}
            </div>
            {m.content && <div class="msg-text">{m.content}</div>}
            {m.toolCalls.map((c) => (
              <div key={c.id} class="tool-call" data-tool={c.name}>
                calls <b class="mono">{c.name}</b> <code class="mono">{c.arguments}</code>
              </div>
            ))}
          </li>
        ))}
        {showStream && (
          <li class="msg msg-assistant streaming" data-role="assistant" data-streaming={streaming!.step}>
            <div class="msg-head muted">assistant · step {streaming!.step} · streaming</div>
            <div class="msg-text">
              {streaming!.text}
              <span class="cursor">▍</span>
            </div>
          </li>
        )}
      </ol>
    </section>
  )
}
