// What the worker heard of runs' ends (Go: internal/worker endwatch.go):
// the coordinators' ended notices (core NATS, "weft.ended.<slot>.<run>",
// events/subjects.ts), heard since the worker subscribed. The watch spares
// the read of the ended-run check (Worker.runEnded, a stream-info request
// per item): a run noticed ended is ended, with no read; and the first
// delivery of an item stored after the watch began (less endWatchMargin,
// for the clocks of the server and this host), of a run not noticed
// ended, is taken for live with no read either, as long as no notice may
// have been lost meanwhile: no disconnection of the worker's connection
// (notices published while away are lost; a server that finds the worker
// a slow consumer closes its connection, which is one; nats.js itself
// drops nothing of a callback subscription), none forgotten (the watch
// keeps the last endNotices runs; an item stored before the latest one
// forgotten was noticed is read). A loss restarts the watch from the
// next check after it. Under a burst of runs items wait in their queue
// longer than the worker's staleAfter for want of workers, not because
// their runs ended, and a read per item held the worker back (issue 26).
//
// A notice is a hint. One that never came (a coordinator older than the
// notices, or one that could not publish) leaves work of a run that ended
// while its item waited to run, as a fresh item's does (the fold passes
// its outcome over). docs/worker-protocol.md, "Ended notices", says when
// a notice may replace the read.

import type { NatsConnection, Status, Subscription } from '@nats-io/nats-core'
import { AllEndedNotices, runOfEndedNotice } from '../events/subjects.js'

/** endNotices is how many noticed runs the watch keeps (as Go's): more than a burst's runs end while its items wait. */
export const endNotices = 16384

/** endWatchMargin (ms) allows for the server's clock (an item's stored time) and this host's (when the watch began) to differ. */
export const endWatchMargin = 1_000

/** flushTimeout (ms) bounds the wait for the subscription to be in place. */
const flushTimeout = 5_000

/** What the watch knows of a run: noticed ended, or vouched for as not ended when its item was stored. */
export interface Known {
  ended: boolean
  vouched: boolean
}

const unknown: Known = { ended: false, vouched: false }

/** EndWatch hears runs' ended notices on a connection. */
export class EndWatch {
  // since: every notice was heard since then (ms; this host's clock).
  private since = Date.now()
  // lost: a notice may have been lost (a disconnection) since the watch
  // last began; down: the connection is away now.
  private lost = false
  private down = false
  // ended: runs noticed ended, oldest first (a Map keeps insertion order).
  private ended = new Map<string, number>()
  // forgotten: when the last run forgotten was noticed.
  private forgotten = 0
  private sub: Subscription | undefined
  // statuses: nats.js's QueuedIterator, whose stop ends the loop.
  private statuses: AsyncIterable<Status> & { stop?(): void }

  private constructor(private nc: NatsConnection) {
    this.statuses = nc.status()
    void this.follow()
  }

  /**
   * start subscribes to every run's ended notice on nc and waits until the
   * subscription is in place (a flush); undefined when it cannot (the
   * worker then reads, as before the notices), also when its user may not
   * subscribe there (roles generated before the notices): the server's
   * refusal comes before the flush's answer, to the subscription.
   */
  static async start(nc: NatsConnection): Promise<EndWatch | undefined> {
    const w = new EndWatch(nc)
    let refused = false
    try {
      w.sub = nc.subscribe(AllEndedNotices, {
        callback: (err, m) => {
          if (err !== null) refused = true
          else w.heard(m.subject)
        },
      })
      let t: NodeJS.Timeout | undefined
      const timedOut = await Promise.race([nc.flush().then(() => false), new Promise<boolean>((r) => (t = setTimeout(() => r(true), flushTimeout)))])
      clearTimeout(t)
      if (timedOut || refused || w.sub.isClosed() || w.lost) throw new Error('no watch')
    } catch {
      w.stop()
      return undefined
    }
    w.since = Date.now()
    return w
  }

  /** stop ends the watch. */
  stop(): void {
    this.statuses.stop?.()
    if (this.sub !== undefined && !this.sub.isClosed()) this.sub.unsubscribe()
  }

  // follow marks what the connection says of itself: a disconnection
  // loses the notices published until the reconnection.
  private async follow(): Promise<void> {
    for await (const s of this.statuses) {
      switch (s.type) {
        case 'disconnect':
        case 'staleConnection':
        case 'forceReconnect':
        case 'reconnecting':
          this.down = true
          this.lost = true
          break
        case 'reconnect':
          this.down = false
          this.lost = true
          break
        case 'slowConsumer':
          this.lost = true
          break
        case 'close':
          this.down = true
          break
      }
    }
  }

  // heard records a notice.
  private heard(subject: string): void {
    const run = runOfEndedNotice(subject)
    if (run === undefined || this.ended.has(run)) return
    this.ended.set(run, Date.now())
    if (this.ended.size > endNotices) {
      const [old, at] = this.ended.entries().next().value as [string, number]
      this.ended.delete(old)
      this.forgotten = at
    }
  }

  /**
   * knows reports whether run was noticed ended, and else whether the
   * watch vouches that it had not ended when last heard of: every notice
   * since its item was stored (at stored, ms since the epoch; 0: unknown)
   * was heard.
   */
  knows(run: string, stored: number): Known {
    if (this.ended.has(run)) return { ended: true, vouched: false }
    if (this.down || this.nc.isClosed() || this.sub === undefined || this.sub.isClosed()) return unknown
    if (this.lost) {
      // Notices may have been lost: begin again from now.
      this.lost = false
      this.since = Date.now()
      return unknown
    }
    const after = stored - endWatchMargin
    return { ended: false, vouched: stored > 0 && after > this.since && after > this.forgotten }
  }

  /** noticed is how many runs the watch holds as noticed ended. */
  get noticed(): number {
    return this.ended.size
  }
}
