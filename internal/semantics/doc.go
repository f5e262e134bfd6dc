// Package semantics proves Weft's graph semantics on real JetStream. It
// holds only tests: each starts an embedded NATS server (internal/testkit),
// an in-process coordinator (internal/coordinator) and worker (pkg/worker
// with the built-in executors and a few test-only node types), starts runs
// by appending run-started events, and checks what the folded log says.
//
// One test (or a small group) per item of the graph semantics: conditions
// over state, output and invocation, Go conditions, invocation state, action
// routing with forking data, routers, static and dynamic fan-out with a
// concurrency cap, joins with skip propagation, state reducers, cycles and
// their caps, no lockstep, subgraphs, human nodes with durable deadlines
// across coordinator restarts, cancellation, and skips. Most graphs come
// from examples/, so the examples are run as well as read.
package semantics
