// Package runs is what happens to runs at scale: the read model that
// answers "which runs" without reading the log, and the end of a run's log
// (retention, archive, removal).
//
// # The read model
//
// One entry per run in the JetStream KV bucket Bucket ("weft-runs"): its
// Summary (id, graph name and digest, status, start and end, parent,
// search attributes, when it may be removed). The entry's key is
// "<status>.<run>", so that the runs of one status are one subject filter
// of the bucket's stream: listing the failed runs reads the failed runs'
// keys, not every run's. The coordinator that owns a run writes its entry
// from the state it folds, when the run starts and whenever its status
// changes (Index: a put of the folded summary, then a purge of the run's
// older keys, keeping the newest). Both steps are idempotent, and any
// later fold of the run, or Reindex, repairs a lost one. The read model is
// a projection: Reindex rebuilds it from the log.
//
// Search attributes are declared by a graph (searchAttributes: [customer,
// region]) and taken, for each run, from the top-level keys of its
// invocation state, else of its input: strings as they are, numbers and
// booleans as their JSON text, anything else not at all.
//
// # Retention
//
// A run that ended is kept for its retention: the one it was started with
// (client.WithRetention), else its graph's (retention: 720h), else the
// coordinator's default (-retention, DefaultRetention). The summary
// records when the run may go (ExpiresAt). Sweep removes the ended runs
// whose time has come, each by purging its own subjects (never by stream
// age, so a long-running run keeps its whole history); a run that has not
// ended is never removed. Removing a run (Remove) archives its log first
// when an Archive is given, and an archive that fails leaves the run as it
// was. It then purges, in this order: the run's events
// ("weft.r.<slot>.<run>.>"), its timers in the timers stream, its
// snapshot, and its read-model entry. Purging needs the admin's rights
// (deploy/SECURITY.md): a purge request carries its subject filter in the
// body, which NATS permissions cannot scope, so no other role may purge
// the events stream.
//
// # Archive
//
// An archived run is one gzip object named by the run id: its messages as
// stored, in log order, one JSON line each (subject, sequence, stored
// time, headers and body: the CloudEvents in binary content mode, exactly
// as the log held them), so that folding the archive gives the same state
// as folding the live log did. Archive is the seam: ObjectStore (the
// default, a JetStream Object Store bucket) and Dir implement it, and an
// S3-compatible store is one more implementation. Read reads a run from
// the live log, or from the archive when the log has no such run.
package runs
