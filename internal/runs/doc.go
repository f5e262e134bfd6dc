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
// Restore called again completes.
//
// # Memory of the server
//
// A run costs nats-server heap for its subjects (the stream's subject
// index and per-block state: measured 0.85 KiB a run once the stream's
// de-duplication window has passed) and, for that window (2 minutes), its
// events' ids (another 2 KiB a run: 10,000 runs written at once hold 30
// MiB of live heap, 9.3 MiB two minutes later). Retention purges every
// subject of a run (its events, timers, snapshot, read-model entry), and
// the server's live heap goes back to the empty server's (1.5 MiB against
// 1.0 after removing 100,000 runs; its heap profile then holds nothing
// per run, and the stream's blocks are gone from disk). RSS does not go
// all the way back, and what stays is the Go runtime's, not Weft's data.
// Measured on a nats-server process after removing 100,000 runs, once its
// garbage was collected (RSS 40.7 MiB against 17.4 MiB empty):
//
//   - 17.7 MiB (1.1 empty) of the runtime's own memory outside the heap:
//     span structures (7.2 MiB) and GC metadata (9.5 MiB, mark and
//     allocation bits) sized for the largest heap the server ever had,
//     which the runtime never returns. That heap comes from holding the
//     runs: under any load that allocates, the heap grows to the GC goal,
//     twice the live heap (GOGC=100). A sweep allocates (0.5 MiB a run
//     removed, most of it the server's direct gets stepping through a
//     loaded block), so with 100,000 runs just written (172 MiB live, 205
//     with the blocks the sweep's purges load) the heap reached 475 MiB,
//     RSS 448 MiB. About 3.5% of the largest heap stays. (The server's
//     OS threads, 10 against 8 empty, each keep a stack: a few KiB.)
//   - 6.6 MiB (2.6 empty) of heap pages: 5.1 MiB of spans in use for 1.5
//     MiB of live objects (long-lived objects allocated while the runs
//     were there, each keeping its span), and 1.1 MiB of free pages not
//     yet returned. Free memory is not what stays: 449 of the 450 MiB the
//     heap freed went back to the OS within 30 s of GCs.
//   - 16.5 MiB (15.2 empty) of the binary's pages: the code of the purge,
//     direct-get and KV paths an empty server never ran.
//
// At 10,000 runs the same parts are 5.5, 5.4 and 16.6 MiB (27.3 MiB
// against 17.7): the runtime's part follows the largest heap (107 MiB
// there), the rest is about fixed. So RSS after removal is the empty
// server's plus about 5 MiB, plus 3.5 to 4% of the largest heap the
// server had while it held the runs. The sweep's order does not change
// it: sweeping in log order, or once the de-duplication window had
// passed, left RSS within 1.5 MiB of the plain sweep at 10,000 runs.
// What lowers it is a smaller largest heap, set on the nats-server
// process: GOMEMLIMIT (a little under the memory it is given, above what
// its runs need) makes it collect sooner when near it (measured at 5,000
// runs: a sweep's peak 59 MiB with GOMEMLIMIT=48MiB against 90 MiB
// without; 100,000 runs with GOMEMLIMIT=256MiB: peak 270 MiB against 448,
// largest heap 305 MiB against 475, RSS after removal 35.0 MiB against
// 40.7, of which 11.4 MiB of runtime memory outside the heap against
// 17.7), and GOGC below 100 keeps the heap nearer its live size at the
// cost of CPU (10,000 runs with GOGC=50: peak 89 MiB against 110 to 125,
// RSS after removal 26.4 MiB against 27.3 to 28.9). GODEBUG=madvdontneed=1 is the default on Linux since Go
// 1.16, nothing to set. bench/README.md has the figures and the commands
// that give them.
package runs
