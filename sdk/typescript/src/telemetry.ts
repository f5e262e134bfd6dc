// W3C trace context on events (Go: internal/telemetry propagate.go). Events
// carry traceparent and tracestate as the CloudEvents distributed-tracing
// extension, whatever the process's propagator is: it is part of the event
// contract. Each delivery of a node runs under a Consumer span
// "node <id>" whose parent is the work item's trace context, so the node
// joins its run's trace; the events the attempt appends carry the span's
// context. With no TracerProvider installed the work item's context is
// passed on as it is, and nothing is recorded (as in Go).

import {
  context as otelContext,
  type Attributes,
  type Context,
  createTraceState,
  isSpanContextValid,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  type SpanContext,
  trace,
  type TracerProvider,
} from '@opentelemetry/api'
import type { WeftEvent } from './events/envelope.js'

/** ScopeName is the instrumentation scope of Weft's spans. */
export const ScopeName = 'github.com/weft-dev/weft'

const tpRE = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/

/** parseTraceParent reads a W3C traceparent; undefined when it is not a valid one. */
export function parseTraceParent(tp: string, ts = ''): SpanContext | undefined {
  const m = tpRE.exec(tp.trim())
  if (m === null || m[1] === 'ff' || (m[1] === '00' && m[5] !== undefined)) return undefined
  const sc: SpanContext = { traceId: m[2] as string, spanId: m[3] as string, traceFlags: parseInt(m[4] as string, 16) & 1, isRemote: true }
  if (!isSpanContextValid(sc)) return undefined
  if (ts !== '') sc.traceState = createTraceState(ts)
  return sc
}

/** extract is the context whose remote parent is the event's trace context (ROOT_CONTEXT when it has none). */
export function extract(e: Pick<WeftEvent, 'traceParent' | 'traceState'>, ctx: Context = ROOT_CONTEXT): Context {
  const sc = e.traceParent !== '' ? parseTraceParent(e.traceParent, e.traceState) : undefined
  return sc === undefined ? ctx : trace.setSpanContext(ctx, sc)
}

/** inject writes the span context of ctx onto the events; without a valid one it writes nothing. */
export function inject(ctx: Context, ...evs: WeftEvent[]): void {
  const sc = trace.getSpanContext(ctx)
  if (sc === undefined || !isSpanContextValid(sc)) return
  const tp = `00-${sc.traceId}-${sc.spanId}-${(sc.traceFlags & 1).toString(16).padStart(2, '0')}`
  const ts = sc.traceState?.serialize() ?? ''
  for (const e of evs) {
    e.traceParent = tp
    e.traceState = ts
  }
}

/** NodeSpan names a node attempt's span. */
export interface NodeSpanInfo {
  runId: string
  nodeId: string
  type: string
  iteration: number
  attempt: number
  delivery: number
  queue: string
  worker: string
  subject: string
  messageId: string
}

/** startNodeSpan starts the Consumer span of a node attempt under the work item's trace context. */
export function startNodeSpan(tp: TracerProvider | undefined, ready: WeftEvent, n: NodeSpanInfo): { span: Span; ctx: Context } {
  const parent = extract(ready)
  const tracer = (tp ?? trace.getTracerProvider()).getTracer(ScopeName)
  const attributes: Attributes = {
    'messaging.system': 'nats',
    'messaging.operation.type': 'process',
    'messaging.operation.name': 'process',
    'messaging.destination.name': n.subject,
    'messaging.message.id': n.messageId,
    'messaging.consumer.group.name': n.queue,
    'weft.run.id': n.runId,
    'weft.node.id': n.nodeId,
    'weft.node.type': n.type,
    'weft.node.iteration': n.iteration,
    'weft.node.attempt': n.attempt,
    'weft.node.delivery': n.delivery,
    'weft.queue': n.queue,
    'weft.worker': n.worker,
  }
  const span = tracer.startSpan(`node ${n.nodeId}`, { kind: SpanKind.CONSUMER, attributes }, parent)
  return { span, ctx: trace.setSpan(parent, span) }
}

/** failSpan marks a span failed with a failure's type and message. */
export function failSpan(span: Span, type: string, message: string): void {
  if (!span.isRecording()) return
  span.setAttributes({ 'weft.failure.type': type, 'error.type': type })
  span.setStatus({ code: SpanStatusCode.ERROR, message })
}

/** withContext runs fn with ctx as the active OpenTelemetry context. */
export function withContext<T>(ctx: Context, fn: () => T): T {
  return otelContext.with(ctx, fn)
}
