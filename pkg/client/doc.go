// Package client is how programs start, watch and steer Weft runs.
//
// A Client works over an events.Store: it appends the client's facts to a
// run's log (run started, signal received, cancel requested) and reads the
// log back to fold a run's state with package projection. It never decides
// anything; the coordinator does. Every method is a thin, documented use of
// the log:
//
//   - Start appends a run-started event that carries the compiled graph
//     (graph.Graph.Canonical and Digest), the input that seeds the shared
//     state and the read-only invocation state, so the run's log is
//     self-contained. The event's id is the run id: a start that is retried
//     is de-duplicated by JetStream, and a start of a run id that already
//     has a history gives events.ErrRunExists.
//   - Wait blocks until one of the run's terminal
//     decisions (completed, failed, cancelled) is in the log, then folds the
//     run. It subscribes to the terminal subjects (core NATS, a wake-up
//     only), then reads the last message on each, so a run that ended
//     before Wait was called is seen at once. Follow hands over a run's
//     events as they are stored, the same way. Neither creates a
//     consumer: a client's role needs no right to (see watch.go).
//   - Get, History, Events and StateAt read a run's log: the current state,
//     the events (Events with each one's position in the run: 1, 2, 3…),
//     and the state after any position (StateAtSeq: any stream sequence).
//   - Fork starts a new run from the state after any position of a run,
//     optionally with edited state, invocation state or graph; Reset ends a
//     run and forks it from just before a node was last activated; Replay
//     checks recorded runs against a changed graph (see package replay).
//   - List and ListPage list runs from the read model of runs (a KV bucket
//     the coordinators keep), without reading their histories; Summary
//     gives one run's entry. A run that retention removed from the live
//     log is read from the archive (WithArchive).
//   - Signal and Cancel append a signal for a node and a cancel request; the
//     coordinator acts on them. Both are idempotent: a cancel request's id
//     is derived from the run, and a signal's from the id the caller gives
//     (WithSignalID) or, without one, from the run, the node, the
//     activation it is for and its data, so that a retried call is the same
//     event (JetStream de-duplicates it within its window, the fold applies
//     a signal id once) and never answers a looping node's next wait.
//
// Namespaces: a client is in the namespace its connection's credentials
// put it in (a NATS account of its own; Namespace names it) and sees only
// that namespace's runs; WithNamespace makes it check which (a wrong one
// is ErrWrongNamespace). In a namespace with admission, its starts, forks,
// signals and cancel requests are not appended by the client but asked of
// the coordinators, which admit them within the namespace's limits
// (admission.go); a refusal wraps ErrAdmission, saying which limit, or
// ErrQuota, and nothing is written.
//
// Errors wrap events.ErrRunNotFound when a run has no events,
// events.ErrRunExists when a run id is taken, ErrRunEnded when a signal or a
// cancel request comes after the run's end, graph.ErrUnknownNode when a
// signal names a node the run's graph lacks, ErrNoSuchPosition for a position
// outside a run's events, ErrNoSuchSeq when StateAtSeq is asked for a point
// before the run's start, ErrIncompatibleGraph when a fork's graph lacks
// what the run's state refers to, projection.ErrInvalidForkState (a
// *projection.ForkStateError, each problem by node and field) when a
// fork's state does not pass the checks the engine makes before it
// believes one, and ErrInvalidInput when an
// input or invocation is not a JSON object; ErrNoReadModel,
// ErrNotInReadModel and ErrNotArchived come from the read model and the
// archive.
//
// # What it offers
//
//	the client   New with Option values (WithLogger, WithIdentity,
//	             WithArchive, WithTracerProvider); Identity
//	starting     Start with StartOption values (WithInput, WithInvocation,
//	             WithRetention, WithRunID)
//	reading      Get, Wait, History, Events (RunEvent), StateAt, StateAtSeq,
//	             Follow
//	listing      List, ListPage, Summary (RunSummary, RunPage) with
//	             ListOption values (WithStatus, WithGraph, WithAttr,
//	             WithStartedBetween, WithLimit, WithCursor)
//	steering     Signal (WithSignalID, SignalRetryWindow), Cancel, Terminate
//	debugging    Fork (ForkOption values), Reset (ResetTarget), Replay
//	the fleet    LiveWorkers, Coordinators (AliveAt)
//	archives     Archive, DirArchive
//	errors       ErrInvalidInput, ErrRunEnded, ErrSignalRefused,
//	             ErrNoSuchPosition, ErrNoSuchSeq, ErrIncompatibleGraph,
//	             ErrNodeNeverRan, ErrNoReadModel, ErrNotInReadModel,
//	             ErrNotArchived, ErrAdmission, ErrQuota
//	namespaces   Namespace, WithNamespace, DefaultNamespace,
//	             ErrWrongNamespace
package client
