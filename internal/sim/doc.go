// Package sim is Weft's deterministic simulator: the production decision
// engine (internal/decider), fold (pkg/projection) and coordinator logic
// (internal/coordinator, driven through HandleEvent and CachedState), run
// against an in-memory model of the JetStream log and of its consumers,
// with simulated clients and workers, while one seeded math/rand/v2 source
// picks every step and every fault. The same seed and fault set replay the
// same simulation exactly; a failure prints both, and the commands that
// replay it.
//
// The pieces, in the manner of resonate's test/dst:
//
//   - log.go: the model of the stream (memLog: total order, subjects,
//     message-id de-duplication inside a window of simulated time and not
//     beyond it, expected-last-subject-sequence checks over every message on
//     a filter, durable message schedules that the server fires at or after
//     their time) and memStore, an events.Store with the production store's
//     client semantics over it (encoding through eventlog.Encode, reading
//     through events.DecodeStored, chained appends, duplicate acks
//     confirmed, a repeated run start answered with the recorded one).
//     JetStream() is nil, so the coordinator sets up no queue consumers
//     and stores no snapshots.
//   - faults.go: the fault classes, and procStore, the wrapper each
//     process gets, which injects them at the seam: appends that fail
//     before the write (a chain part-way) or after it (a lost ack), slow
//     appends during which timers fire, duplicate publishes at once or
//     late, schedule and purge failures, read failures, and coordinator
//     crashes at any store call.
//   - consumer.go: durable pull consumers with explicit acks, ack waits,
//     naks and redelivery, one for the coordinators and one per task queue.
//   - coord.go: coordinator processes, each handling what it is delivered
//     as Run does (events.DecodeStored, refused messages through the same
//     step, acks, naks with back-off). Production gives each partition of
//     runs to one lease holder; the simulator instead lets two or three
//     coordinators share one consumer (multi-coordinator), which splits a
//     run's events between them: the overlap a lease hand-over allows,
//     made common. A coordinator that sees a gap in its deliveries hands
//     each cached run's next event in as redelivered (it re-reads the
//     run), so that its cache is comparable with the log. Crashed
//     coordinators are replaced by new ones with an empty cache.
//   - worker.go: workers that append invoking, run the node (recording the
//     effect under the item's idempotency key), append the outcome and ack,
//     one step at a time; they crash, stall past the ack wait and lose
//     acks, so attempts run twice and outcomes come late.
//   - graphs.go: the graphs runs are started from (chain, fan-out into an
//     all-join, retries with a fallback, a capped loop, a map, a human
//     node with a deadline fed by signals, durable waits for a duration,
//     until a time and until a time long past, a subgraph node whose
//     child run is one node: under append-fail its parent's decisions
//     that start the child often fail, so the child may end before the
//     parent's wait is in the log).
//   - sim.go: the generator: which process acts next, what the clients do,
//     and the simulated clock, which only moves when the simulator says.
//   - validator.go: the invariants, checked after every step.
//
// The fault model. What may fail: any append, schedule, purge or read of
// any process, before or after it took effect; any process, at any store
// call or between steps; any acknowledgement; a worker's heartbeat (it
// stalls past the ack wait); the timing of timers (late, never early);
// publishes may be repeated, late or beyond the de-duplication window;
// junk may be written on a run's subjects; clients cancel runs and repeat
// signals. What is guaranteed, and checked: see validator.go. What is not
// modelled: message loss inside the server (an acknowledged message is
// stored), stale reads from a replica (reads are as fresh as the leader),
// partition leases and their hand-over, snapshots, child runs that are
// tools of agent nodes (subgraph nodes' are modelled), and the
// worker SDK itself (the simulated worker follows pkg/worker's protocol).
// Run's last resort for an event that can never be decided (failing its
// run) is not reachable through HandleEvent: the simulator injects only
// transient failures, and a permanent one shows as a run that never ends.
package sim
