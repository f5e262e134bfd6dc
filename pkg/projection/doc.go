// Package projection folds a run's events into its state.
//
// The fold is pure: State.Apply takes one event and changes the state by
// what the event says and nothing else: no clock, no I/O, no randomness.
// Folding the same events always gives a byte-identical State.Marshal, and
// folding a snapshot (State.Marshal, read back with Unmarshal) and then the
// tail gives the same state as folding everything. FoldTo gives the state
// at any sequence; Diff compares two states.
//
// The fold reads like the event catalogue: Apply hands each event to the
// applier of its type (applyRunStarted, applyNodeReady, applyNodeInvoked,
// …), each a few lines over the state.
//
// # Facts, not decisions
//
// The fold records facts; it decides nothing. Which edges a finished node
// took is a NodeRouted event written by the coordinator, so replay never
// re-evaluates a condition; the fold queues those signals per target node
// (State.Pending) and an activation (NodeReady, NodeSkipped, NodeWaiting)
// consumes the ones its event names. The one thing the fold derives is the
// outcome of a map node, which finishes when its last item does, with the
// items' outputs in item order.
//
// # Times
//
// Every time the fold records (StartedAt, ReadyAt, EndedAt, UpdatedAt,
// HeartbeatAt, a cancellation's time) of a client's, a worker's or a
// notice's event is the event's Stored time, the stream's own timestamp,
// when it has one: such a writer cannot forge it, so a worker that writes
// year 1 or 9999 cannot break a duration. Decisions carry the
// coordinator's time: only the coordinator role may write them (NATS
// permissions, and the writer class of their subjects), and the
// coordinator applies a decision to its cache before the stream stamps it,
// so the time must be the one it decided with for its cache to equal a
// fresh fold. Events not read from the store (recorded histories) use the
// writer's Time. Decided times (a retry's At, a human node's Deadline) are
// the coordinator's, as decided.
//
// # Timers
//
// Pending durable timers are recorded from the events that ask for them (a
// retry's RetryScheduled, a human node's deadline or a wait node's end
// from its NodeWaiting: see wait.go), so
// a state folded afresh after a restart knows them as well as the state
// they were decided in (State.Timers, by timer id), and a coordinator
// re-arms them from it. A timer
// goes when it fires, when its node's wait ends, and, all of them, when the
// run ends. A TimerFired for a timer that is not pending changes nothing.
//
// # Fencing: what counts, what is stale
//
// Delivery is at least once and several writers race, so the fold decides
// which of the events it is given count. Per node (and per map item) it
// knows the live attempt: the activation's current Iteration and Attempt,
// while its status is ready or running. It records the highest Delivery a
// NodeInvoking of that attempt reported (NodeState.Delivery).
//
//   - An outcome (NodeInvoked, NodeFailed, NodeCancelled) counts only for
//     the live attempt: the first one to land stands, from whichever
//     delivery of the attempt's work item (the deliveries run one logical
//     execution, with one idempotency key, and share one work item, which
//     the first outcome's worker acknowledges; fencing out an earlier
//     delivery would strand the attempt if the later one's worker died).
//     An outcome of another iteration or attempt, or of an attempt that is
//     retrying, due for retry, timed out by the coordinator or ended, is
//     stale. Two outcomes of the coordinator stand in for a worker's: a
//     router's NodeInvoked while it waits, and a fallback's NodeInvoked for
//     the last attempt, which failed for good.
//   - A worker's report (invoking, an outcome, a heartbeat) counts only
//     from its attempt's queue as far as local nodes go: a local attempt
//     (its work item on events.LocalQueue; NodeState.LocalAttempt), which the
//     coordinator runs itself, takes reports from LocalQueue only, and a
//     LocalQueue report counts for a local attempt only; any other is
//     stale.
//   - A NodeInvoking of the live attempt makes it running and may raise the
//     live delivery; any invoking counts as an execution (Executions).
//   - A Heartbeat of the live attempt sets its HeartbeatAt; others are
//     stale.
//   - A decision never overwrites an activation that began: a NodeWaiting
//     or NodeSkipped for an iteration at or below the node's current one,
//     a NodeReady for an earlier iteration, for an ended activation or
//     item, or for an attempt not above the current one, a RetryScheduled
//     for an attempt that did not fail, a routing made before, a second
//     cancellation request: all stale. A new iteration of a loop is a new
//     activation and counts.
//   - A SignalReceived applies once per event id (State.SignalIDs); the
//     same id again is stale. Signals for a node that is not waiting are
//     buffered up to MaxBufferedSignals per node and
//     MaxBufferedSignalsPerRun per run; more are refused. An update (a
//     signal with an update id, AcceptsUpdate) is never buffered: one for
//     an activation that does not wait, or for a human node that declares
//     no input, is refused; its id is kept taken in or refused, so the same
//     update id again is stale (the first verdict stands).
//   - A routing that takes an edge to CONTINUE records where
//     (State.ContinueFrom); a run-completed naming a continuation sets
//     State.ContinuedAs, and a continuation's run-started its State.Chain.
//   - Anything after the run ended is stale.
//
// A stale event changes nothing but Stats.Stale (and LastSeq, Stats.Events
// and UpdatedAt), and Apply returns an error wrapping ErrStale that says
// why ("stale: attempt 1 of a/1 is retrying"), for the
// coordinator's logs and the timeline of `weft events`.
//
// # Refused and rejected events
//
// An event the store refused (Event.Refused: junk bytes, a type on a
// subject that does not accept it) or of a type this version does not
// know (written by a newer Weft) keeps its place in the history and is
// passed over: it moves LastSeq on, counts in Stats.Refused, changes
// nothing else, and Apply returns an error wrapping ErrRefused, so the log
// stays forward compatible. Events that cannot be applied at all (broken
// data, another run's event, anything before run-started) are counted in
// Stats.Rejected and passed over.
//
// Apply ignores an event at or below LastSeq, so an event delivered again
// after later ones changes nothing: folding a run's events in log order,
// with redeliveries and interleaved with other runs' events, gives the
// same state as the log alone.
//
// # Forked runs
//
// A run forked from another (weft fork, weft reset) starts from a state:
// ForkState turns the parent's state at the fork point into it (attempts
// that were ready or running are due again, finished nodes stay finished),
// and the fork's run-started carries it (events.RunStartedData.State), so
// the fork's log alone folds to it. State.Fork names the parent run and
// position.
//
// A client writes that state, so the fold believes it only once it is
// checked against the fork's graph, as a decision of the engine's would
// be (CheckForkState): every node, edge and timer it names is the graph's,
// statuses, iterations and attempts are within the graph's bounds, no
// node is ready or running (the fork has no work item for it), none waits
// for a child run (which reports to its own parent) or as a router between
// its decisions, every timer is one the engine would have asked for and
// every node that waits on a timer has it. A state that does not pass is
// not taken at all: the run starts with nothing of it and with
// State.ForkRefused, the failure (events.FailureInvalidForkState, each
// problem located by node and field) the engine ends the run with.
// ForkState's own output, from any point of a run, passes (pkg/client
// checks before it writes a fork).
//
// # Child runs
//
// The fold takes State.Parent from the run-started; events.Decode refuses
// a run-started that names a parent anywhere but on the child's decision
// subject, so in a history read from the store it is the coordinator's. A
// child-run-finished counts for the activation that waits for that child
// run (NodeState.Child; any, before the child-run-started is folded), and
// no other. The coordinator appends the child's start before the parent's
// decisions, so a quick child's end may come before the node's wait: it is
// kept (State.EarlyChildEnds, one per node, for its next activation) and
// ends the wait when the node-waiting comes, as an end right after it
// would. A claimed child's preempted notice that comes early changes
// nothing.
//
// # What it offers
//
//	folding    Fold, FoldTo, Resume, State.Apply; State.Clone
//	the state  State (run status, nodes, items, shared state via VarsMap,
//	           invocation via InvocationMap, timers, signals, Stats),
//	           NodeState, ItemState, Timer, CancelRequest; RunStatus and
//	           NodeStatus with their values; State.Node,
//	           State.AcceptsSignal
//	encoding   State.Marshal, Unmarshal; Snapshot (TakeSnapshot,
//	           Snapshot.Restore)
//	comparing  Diff, DiffJSON, Change
//	forking    ForkState, ErrForkChild; CheckForkState, ForkStateError,
//	           ForkProblem, ErrInvalidForkState; RetryTimerID
//	fencing    ErrStale, ErrRefused
//	limits     MaxBufferedSignals, MaxBufferedSignalsPerRun, HeartbeatMisses,
//	           TimeoutGrace; timer ids (DeadlineTimerID) and purposes
//	           (PurposeTimeout, PurposeHeartbeat)
package projection
