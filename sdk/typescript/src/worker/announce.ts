// Worker announcements (Go: pkg/worker announce.go). A running worker keeps
// an entry in the KV bucket "weft-workers" under its name, saying which
// queues it pulls from and which node types it serves, refreshed every
// announce interval; the bucket's TTL removes the entry of a worker that
// died, and a worker that stops cleanly purges its own. The entries are a
// read model for operators: nothing in the engine depends on them.

import { Kvm, type KV } from '@nats-io/kv'
import { jetstream } from '@nats-io/jetstream'
import { formatTime } from '../events/envelope.js'
import { quote } from '../internal/gojson.js'
import { errorMessage, type Logger } from '../internal/util.js'
import type { Store } from '../store.js'

/** WorkersBucket is the KV bucket of worker announcements. */
export const WorkersBucket = 'weft-workers'
/** DefaultAnnounceInterval is how often a worker refreshes its entry. */
export const DefaultAnnounceInterval = 10_000
const announceTTL = 3 * DefaultAnnounceInterval

/** Protocol is the version of the wire protocol this worker speaks (docs/worker-protocol.md), written in its announcement. */
export const Protocol = 'weft-worker/1'

/** Announcement is a live worker's entry. */
export interface Announcement {
  name: string
  protocol: string
  queues: string[]
  types: string[]
  started: string
  heartbeat: string
}

/** announceKey is a worker name made safe as a KV key. */
export function announceKey(name: string): string {
  return name.replace(/[^A-Za-z0-9\-_=.]/gu, '_')
}

function encodeAnnouncement(a: Announcement): string {
  const list = (l: string[]) => '[' + l.map(quote).join(',') + ']'
  return `{"name":${quote(a.name)},"protocol":${quote(a.protocol)},"queues":${list(a.queues)},"types":${list(a.types)},"started":${quote(a.started)},"heartbeat":${quote(a.heartbeat)}}`
}

/** Announcer keeps a worker's entry fresh until stop. */
export class Announcer {
  private timer: NodeJS.Timeout | undefined
  private constructor(
    private kv: KV,
    private key: string,
    private ann: Announcement,
    private types: () => string[],
    private log: Logger,
  ) {}

  /** start announces the worker; it returns undefined (and logs) when the bucket cannot be had. */
  static async start(store: Store, name: string, queues: string[], types: () => string[], every: number, log: Logger): Promise<Announcer | undefined> {
    if (every < 0) return undefined
    if (every === 0) every = DefaultAnnounceInterval
    let kv: KV | undefined
    const kvm = new Kvm(jetstream(store.nc))
    // Created only when it is missing (as the Go worker does): under the
    // roles it is the admin's to create, and a failure that is not "not
    // found" (a server restarting) is tried again, not met with a create
    // the worker role may not make.
    for (let tries = 1; kv === undefined; tries++) {
      try {
        const open = await kvm.open(WorkersBucket)
        await open.status()
        kv = open
      } catch (err) {
        try {
          if (!bucketMissing(err)) throw err
          kv = await kvm.create(WorkersBucket, {
            description: 'Weft workers: the queues and node types each live worker serves',
            ttl: announceTTL,
            history: 1,
            replicas: store.replicas,
          })
        } catch (err) {
          if (tries >= 10) {
            log.warn('announcing the worker', { error: errorMessage(err) })
            return undefined
          }
          await new Promise((resolve) => setTimeout(resolve, 250 * tries))
        }
      }
    }
    const now = formatTime(new Date())
    const a = new Announcer(kv, announceKey(name), { name, protocol: Protocol, queues, types: types(), started: now, heartbeat: now }, types, log)
    await a.put()
    a.timer = setInterval(() => void a.put(), every)
    a.timer.unref()
    return a
  }

  private async put(): Promise<void> {
    this.ann.types = this.types()
    this.ann.heartbeat = formatTime(new Date())
    try {
      await this.kv.put(this.key, encodeAnnouncement(this.ann))
    } catch (err) {
      this.log.warn("refreshing the worker's announcement", { error: errorMessage(err) })
    }
  }

  /** stop ends the refreshes and withdraws the entry. */
  async stop(): Promise<void> {
    clearInterval(this.timer)
    try {
      await this.kv.purge(this.key)
    } catch (err) {
      this.log.warn("withdrawing the worker's announcement", { error: errorMessage(err) })
    }
  }
}

/** bucketMissing tells whether err says the bucket's stream does not exist (JetStream's error 10059). */
function bucketMissing(err: unknown): boolean {
  const e = err as { code?: unknown; api_error?: { err_code?: unknown } } | undefined
  if (e?.api_error?.err_code === 10059 || e?.code === 10059) return true
  return /stream not found/i.test(errorMessage(err))
}
