// A request/reply mux for the worker's hot path: appends (JetStream
// publishes awaiting their acknowledgement) and double acks. nats.js's
// own request builds, for every request, a request object, a timer and,
// once the reply has come, an Error with its stack (its cancel of the
// settled request), which cost a work item tens of microseconds on the
// path from one append to the next. Here a request is a publish with a
// reply subject under one subscription of the connection's inbox prefix,
// a map entry and a timer; an Error only when it fails.

import { createInbox, type Msg, type MsgHdrs, type NatsConnection, type Subscription } from '@nats-io/nats-core'

interface Pending {
  resolve(m: Msg): void
  reject(err: Error): void
  timer: NodeJS.Timeout
  subject: string
}

/** NoRespondersError is a request nobody answered (status 503): no stream, or its leader is away. */
export class NoRespondersError extends Error {
  override name = 'NoResponders'
}

/** Replies sends requests whose replies come on one subscription. */
export class Replies {
  private readonly base: string
  private readonly sub: Subscription
  private readonly pending = new Map<string, Pending>()
  private next = 0

  constructor(
    private readonly nc: NatsConnection,
    inboxPrefix: string,
  ) {
    this.base = createInbox(inboxPrefix) + '.'
    this.sub = nc.subscribe(this.base + '*', { callback: (err, m) => (err === null ? this.reply(m) : undefined) })
  }

  /** request publishes data to subject and resolves with the reply; it rejects after timeout ms, or when nobody answers. */
  request(subject: string, data: Uint8Array, timeout: number, headers?: MsgHdrs): Promise<Msg> {
    const token = (this.next++).toString(36)
    return new Promise<Msg>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(token)
        reject(new Error(`${subject}: request timed out after ${timeout} ms`))
      }, timeout)
      this.pending.set(token, { resolve, reject, timer, subject })
      try {
        this.nc.publish(subject, data, headers !== undefined ? { reply: this.base + token, headers } : { reply: this.base + token })
      } catch (err) {
        clearTimeout(timer)
        this.pending.delete(token)
        reject(err as Error)
      }
    })
  }

  private reply(m: Msg): void {
    const token = m.subject.slice(this.base.length)
    const p = this.pending.get(token)
    if (p === undefined) return
    this.pending.delete(token)
    clearTimeout(p.timer)
    if ((m.headers?.code ?? 0) === 503) p.reject(new NoRespondersError(`${p.subject}: no responders`))
    else p.resolve(m)
  }

  /** close stops taking replies; requests still waiting reject. */
  close(): void {
    this.sub.unsubscribe()
    for (const p of this.pending.values()) {
      clearTimeout(p.timer)
      p.reject(new Error(`${p.subject}: the connection's replies were closed`))
    }
    this.pending.clear()
  }
}
