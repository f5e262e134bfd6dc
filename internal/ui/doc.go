// Package ui serves Weft's web UI: the front end's files, embedded in the
// binary from dist (built from web/ by 'make ui'), and the JSON API they
// call, described in API.md. The browser never talks to NATS: every answer
// is read from the log through pkg/client, from the read model of runs
// (internal/readmodel) and from the workers' announcements, and live pages are fed by
// server-sent events from one KV watch of the read model (the run list) and
// from client.Follow over one run's subjects (a run's events: a core
// subscription as a wake-up and reads, no consumer).
//
// An agent node's conversation (conversation.go) is read from its step
// events; the text of its model call under way is streamed to the page
// from the run's token subjects (core NATS, which the ui role may
// subscribe to), through client.FollowTokensReady.
//
// The schedules page's API (schedules.go) lists the schedules with their
// next and latest fires, read with the ui role's rights, and pauses,
// unpauses and triggers them, which needs the trigger role's: a server
// connected as another role is refused by NATS and says so.
//
// New returns the handler; Start listens and serves it. Safety is the
// server's own: it listens on loopback unless told otherwise and refuses to
// listen elsewhere without credentials (CheckAddr); with a user and a
// password (at least MinPasswordLength characters) or a bcrypt hash of
// one (a password file: ReadPasswordFile, HashPassword) every path needs
// HTTP basic auth, and without them only requests for a loopback Host are
// answered (no DNS rebinding); read-only mode refuses every action;
// actions are POSTs that must carry the header X-Weft-Action (a cross-site
// form cannot set it), and any state-changing request a browser says
// comes from another origin (Sec-Fetch-Site, Origin) is refused, as is
// any API request another site's page makes; every answer carries a
// strict Content-Security-Policy and the other security headers; bodies
// are capped at MaxBody. Event data are returned as JSON, never as HTML:
// escaping them on the page is the front end's work.
//
// The door (door.go) holds clients to Limits. A client is a request's
// peer address (an IPv6 one by its /64), or what a trusted proxy says it
// forwarded for. Failed logins are each logged (remote address, client,
// the user if it is the server's: never a password) and limited: a
// client's logins are checked one at a time, and after LoginFailures it
// is locked out (429 with Retry-After, its right password included;
// counted in a line at most every 10 s) for a time that doubles with each
// further failure; a budget of failures
// shared by all clients that have not logged in lately bounds guesses
// spread over many addresses. A client's first login in a while is
// logged too. Credentials are compared in constant time; a bcrypt hash is
// checked once, and the digest of the credentials it accepted is kept.
// Live streams are limited per client and in all (429), and every live
// run list shares one KV watch of the read model (runsFeed), fanned out
// in memory: N pages cost one consumer of the bucket.
//
// A run's log is read once and kept folded for the runs read last
// (logCache): its timeline's pages and the state at each of its events are
// then answered from memory, and a run that goes on is read from its last
// known event only. Answers are gzipped; live streams are not.
//
// When dist holds no built index.html, the embedded placeholder page says
// how to build the UI; the API works either way.
package ui
