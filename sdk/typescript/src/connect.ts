// Connecting to NATS the way Weft's programs do: the URL and credentials
// from options or from the environment Weft's programs read
// (WEFT_NATS_URL, WEFT_NATS_USER, WEFT_NATS_PASSWORD, WEFT_NATS_CREDS,
// WEFT_NATS_NKEY, WEFT_NATS_TOKEN, WEFT_NATS_INBOX_PREFIX, the WEFT_NATS_TLS_*
// files), and replies on the inbox prefix "_INBOX_<user>", the only inbox
// the roles of deploy/SECURITY.md let a user subscribe to.

import { readFileSync } from 'node:fs'
import { connect as natsConnect, credsAuthenticator, nkeyAuthenticator, type NatsConnection } from '@nats-io/transport-node'
import type { Authenticator, ConnectionOptions } from '@nats-io/nats-core'

/** ConnectOptions say where NATS is and who connects. Unset fields come from the environment. */
export interface ConnectOptions {
  /** url, or a comma-separated list (default WEFT_NATS_URL, else nats://127.0.0.1:4222). */
  url?: string
  user?: string
  password?: string
  token?: string
  /** creds is a NATS credentials file (WEFT_NATS_CREDS). */
  creds?: string
  /** nkey is an nkey seed file (WEFT_NATS_NKEY). */
  nkey?: string
  /** inboxPrefix is where replies come (default "_INBOX_<user>" with a user, "_INBOX" without). */
  inboxPrefix?: string
  tlsCA?: string
  tlsCert?: string
  tlsKey?: string
  /** name names the connection on the server. */
  name?: string
  /** env is read for unset fields (default process.env). */
  env?: NodeJS.ProcessEnv
}

/** Connection is a NATS connection with the inbox prefix it replies on. */
export interface Connection {
  nc: NatsConnection
  inboxPrefix: string
  user: string
}

/** DefaultURL is where Weft's programs look for NATS by default. */
export const DefaultURL = 'nats://127.0.0.1:4222'

/** connectionOptions resolves options and environment into the NATS client's options. */
export function connectionOptions(o: ConnectOptions = {}): { opts: ConnectionOptions; inboxPrefix: string; user: string } {
  const env = o.env ?? process.env
  const pick = (v: string | undefined, k: string) => (v !== undefined && v !== '' ? v : (env[k] ?? ''))
  const url = pick(o.url, 'WEFT_NATS_URL') || DefaultURL
  let user = pick(o.user, 'WEFT_NATS_USER')
  const password = pick(o.password, 'WEFT_NATS_PASSWORD')
  const token = pick(o.token, 'WEFT_NATS_TOKEN')
  const creds = pick(o.creds, 'WEFT_NATS_CREDS')
  const nkey = pick(o.nkey, 'WEFT_NATS_NKEY')
  // A user in the URL (nats://user:pass@host) counts as the user.
  const servers = url.split(',').map((s) => s.trim()).filter((s) => s !== '')
  if (user === '') {
    for (const s of servers) {
      try {
        const u = new URL(s)
        if (u.username !== '') {
          user = decodeURIComponent(u.username)
          break
        }
      } catch {
        // not a URL with a scheme: the client parses it
      }
    }
  }
  // noAsyncTraces: no Error (and its stack) made up front for every
  // request and its timeout, which cost a worker a sixth of its CPU per
  // work item; the SDK names what failed in its own errors.
  const opts: ConnectionOptions = { servers, name: o.name ?? 'weft typescript sdk', maxReconnectAttempts: -1, reconnectTimeWait: 250, noAsyncTraces: true }
  const auths: Authenticator[] = []
  if (creds !== '') auths.push(credsAuthenticator(readFileSync(creds)))
  if (nkey !== '') auths.push(nkeyAuthenticator(new TextEncoder().encode(readFileSync(nkey, 'utf8').trim())))
  if (auths.length > 0) opts.authenticator = auths
  if (pick(o.user, 'WEFT_NATS_USER') !== '') {
    opts.user = user
    opts.pass = password
  }
  if (token !== '') opts.token = token
  const ca = pick(o.tlsCA, 'WEFT_NATS_TLS_CA')
  const cert = pick(o.tlsCert, 'WEFT_NATS_TLS_CERT')
  const key = pick(o.tlsKey, 'WEFT_NATS_TLS_KEY')
  if (ca !== '' || cert !== '' || key !== '') {
    opts.tls = {}
    if (ca !== '') opts.tls.caFile = ca
    if (cert !== '') opts.tls.certFile = cert
    if (key !== '') opts.tls.keyFile = key
  }
  const inboxPrefix = pick(o.inboxPrefix, 'WEFT_NATS_INBOX_PREFIX') || (user !== '' ? `_INBOX_${user}` : '_INBOX')
  opts.inboxPrefix = inboxPrefix
  return { opts, inboxPrefix, user }
}

/** connect connects to NATS as ConnectOptions (and the environment) say. */
export async function connect(o: ConnectOptions = {}): Promise<Connection> {
  const { opts, inboxPrefix, user } = connectionOptions(o)
  const nc = await natsConnect(opts)
  return { nc, inboxPrefix, user }
}
