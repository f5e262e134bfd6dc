// Package readmodel is what happens to runs at scale: the read model that
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
// Its statuses are the fold's and one more: a running run that does
// nothing but wait, on a human node's signal or a wait node's time, is
// projection.RunWaiting ("waiting.<run>"), and its summary lists what it
// waits on (Waiting: node, deadline, and for a human node the data of a
// signal that answers it, from which SignalCommand makes the 'weft
// signal' command). The fold itself is unchanged (its status stays
// running; StatusOf and WaitsOf derive the rest), so recorded histories
// fold as before. A query for running runs selects the waiting ones too.
//
// Search attributes are declared by a graph (searchAttributes: [customer,
// region]) and taken, for each run, from the top-level keys of its
// invocation state, else of its input: strings as they are, numbers and
// booleans as their JSON text, anything else not at all. On a sealed log
// (internal/eventlog, seal.go) they are still taken from the plain
// invocation state and input, which the coordinator holds once it has
// opened the run-started, and kept in the read model as they are: the
// read model is not sealed, so a graph declares as search attributes only
// values its operators may read (an id, a region; not a customer's data).
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
// snapshot, and its read-model entry; then it deletes the large payloads
// its log referred to (eventlog.RunPayloads names them, read before the
// purge: the run's own objects, at the cost of its log, never a listing
// of the bucket). Purging needs the admin's rights
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
// as folding the live log did. The large payloads the messages refer to
// (kept in eventlog.PayloadsBucket) go with them: after the first message
// that refers to it, each object's bytes as stored (sealed if the event
// is), in lines of up to 1 MiB ({"object": name, "data": bytes}); the
// bucket then keeps none of the run's, and deleting the archive entry
// leaves nothing behind. Read reads them from the archive; an archive
// written before archives carried objects holds references only, which
// are read from the bucket (where that Weft left the objects). Archive
// is the seam: ObjectStore (the
// default, a JetStream Object Store bucket) and Dir implement it, and an
// S3-compatible store is one more implementation. Read reads a run from
// the live log, or from the archive when the log has no such run.
//
// # Restore
//
// Restore puts an archived run back into the events stream, live again
// ('weft admin restore RUN...'): its messages republished in log order on
// their own subjects, with their headers and bodies (CloudEvents ids,
// times, trace context), without the headers the server acts on (Nats-*:
// de-duplication ids, expected sequences, batch markers), each marked
// with the header Weft-Restored (eventlog.HdrRestored) carrying its
// original stored time. A run's events get new stream sequences, but a
// fold keeps only their order, and reads the original stored times from
// the header (events.DecodeStored: a header may only make an event older
// than the stream says, never newer), so the restored run folds to the
// state it had before the archive, but for LastSeq. Each message is
// checked to follow the one before over the run's subjects, the first to
// find the run absent: a run in the log is refused (ErrLive), and nothing
// slips in between. The run's snapshot, whose sequences are the old ones,
// is dropped first, and its read-model entry written before its messages,
// marked restored (Summary.Restored) and kept for its retention counted
// from the restore (Reindex counts the same way). The coordinators pass
// restored messages over for a run so marked (a header is any writer's;
// the read model is not), and the workers pass restored work items over
// (only coordinators and the admin write work items): they are history,
// not news, so no decision is taken again and no node runs again. A restore cut short (more than 8 messages go as atomic batches
// of up to 1000; fewer one by one) leaves a prefix of the run, which
// Restore called again completes. The payload objects an archive carries
// go back into the payloads bucket before any message (each checked to
// be one of the run's, its bytes its name's digest).
//
// # Memory of the server
//
// A run costs nats-server heap for its subjects (the stream's subject
// index and per-block state): 0.55 KiB a run, 55 MiB for 100,000 ended
// runs of four subjects each. For the stream's de-duplication window (2
// minutes) after they are written, its events' message ids cost more:
// 100,000 runs written in 15 s hold 172 MiB of live heap until the window
// passes. Retention purges every subject of a run (its events, timers,
// snapshot, read-model entry), and the server's live heap goes back to
// the empty server's: 1.5 MiB against 1.0 after removing 100,000 runs, 1%
// of what the runs held; no subject is left, and the blocks are gone from
// disk.
//
// RSS does not go all the way back, and what stays is the Go runtime's,
// not Weft's data. The runtime keeps the span structures and GC metadata
// sized for the largest heap the process ever had, and never returns them;
// the heap reaches twice its live size (GOGC=100) under any load that
// allocates. Measured on a nats-server process restarted on the store of
// 100,000 ended runs (as retention meets runs, days after their writes),
// once it had collected its garbage: RSS 105 MiB with the runs, 32.0 MiB
// after removing them, against 17.7 empty (1.8×). Of the 14.3 MiB above the
// empty server, 8 MiB are span structures and GC metadata for the largest
// heap (220 MiB, during the sweep: the runs' subject index, the blocks the
// sweep reads and purges, and the garbage between collections), 3.5 MiB
// heap pages that a few long-lived objects keep, and 1 MiB code pages of
// paths an empty server never ran. With 10,000 runs the ratio is 1.50×
// (26.3 MiB against 17.5). In the process that wrote the 100,000 runs,
// whose largest heap was the write burst's (475 MiB), removal leaves 40.2
// MiB.
//
// Retention's reads used to set that largest heap: a batched read of an
// old run went on, after the run's last message, through every later
// block of the stream (events.Store reads now ask for exactly the pending
// messages), so a sweep loaded the whole stream (100,000 runs: a peak of
// 321 MiB and 7 minutes, now 220 MiB and 3 minutes 48 s).
//
// What lowers the largest heap is set on the nats-server process:
// GOMEMLIMIT a little under the memory it is given and above what its runs
// need (100,000 runs, GOMEMLIMIT=128MiB: the sweep's peak RSS 142 MiB
// against 220, RSS after removal 30.4 MiB), and GOGC below 100 at the cost
// of CPU. bench/README.md has the figures and the commands that give them.
package readmodel
