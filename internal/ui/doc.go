// Package ui serves Weft's web UI: the front end's files, embedded in the
// binary from dist (built from web/ by 'make ui'), and the JSON API they
// call, described in API.md. The browser never talks to NATS: every answer
// is read from the log through pkg/client, from the read model of runs
// (internal/runs) and from the workers' announcements, and live pages are fed by
// server-sent events from a KV watch of the read model (the run list) and
// from a JetStream ordered consumer over one run's subjects (a run's
// events, client.Follow).
//
// New returns the handler; Start listens and serves it. Safety is the
// server's own: it listens on loopback unless told otherwise and refuses to
// listen elsewhere without credentials (CheckAddr); with a user and
// password set every path needs HTTP basic auth, and without them only
// requests for a loopback Host are answered (no DNS rebinding); read-only
// mode refuses
// every action; actions are POSTs that must carry the header X-Weft-Action
// (a cross-site form cannot set it); every answer carries a strict
// Content-Security-Policy and the other security headers; bodies are capped
// at MaxBody. Event data are returned as JSON, never as HTML: escaping them
// on the page is the front end's work.
//
// A run's log is read once and kept folded for the runs read last
// (logCache): its timeline's pages and the state at each of its events are
// then answered from memory, and a run that goes on is read from its last
// known event only. Answers are gzipped; live streams are not.
//
// When dist holds no built index.html, the embedded placeholder page says
// how to build the UI; the API works either way.
package ui
