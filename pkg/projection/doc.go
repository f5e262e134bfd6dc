// Package projection folds a run's events into its state.
//
// The fold is pure: State.Apply takes one event and changes the state by
// what the event says and nothing else: no clock (times come from the
// events), no I/O, no randomness. Folding the same events always gives a
// byte-identical State.Marshal, and folding a snapshot (State.Marshal, read
// back with Unmarshal) and then the tail gives the same state as folding
// everything. FoldTo gives the state at any sequence; Diff compares two
// states.
//
// The fold records facts; it decides nothing. Which edges a finished node
// took is a NodeRouted event written by the coordinator, so replay never
// re-evaluates a condition; the fold queues those signals per target node
// (State.Pending) and an activation (NodeReady, NodeSkipped, NodeWaiting)
// consumes the ones its event names. The one thing the fold derives is the
// outcome of a map node, which finishes when its last item does, with the
// items' outputs in item order. Pending durable timers are recorded from the
// events that ask for them (a retry's RetryScheduled, a human node's
// deadline from its NodeWaiting), so a state folded afresh after a restart
// knows them as well as the state they were decided in.
//
// Outcomes are first-wins: a node-invoked or node-failed event for an
// attempt that is not current, or already finished, is passed over, so a
// redelivered node that reports twice changes the state once. Events that
// cannot be applied at all (broken data, another run's event, anything
// before run-started) are counted in Stats.Rejected and passed over.
package projection
