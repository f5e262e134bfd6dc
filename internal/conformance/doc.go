// Package conformance is the worker conformance kit: it checks that a
// worker program, in any language, speaks Weft's wire protocol
// (docs/worker-protocol.md) the way the engine expects.
//
// Run starts a real engine (an embedded NATS server admitting only the
// users of Weft's roles, provisioned as the admin, with the queue
// consumer's ack wait short so that redeliveries come quickly; a
// coordinator and a client in this process, each as its role), starts the
// worker under test as a separate process under the worker role's
// credentials (kit.go, process.go), and runs the cases of cases.go against
// it: graphs of the fixed node types of docs/conformance.md, and faults
// (retries, timeouts, a cancel, SIGKILL and redelivery to a second
// process, a duplicate work item, squatted event ids, junk, oversized and
// newer-version items, items of ended runs, a drain, a NATS restart). It
// writes one line per case, "PASS name", "FAIL name: why" or "SKIP name:
// why", and reports whether every case passed.
//
// The Go SDK's conformance worker is the goworker command beside this
// package; 'weft conformance -worker CMD' (internal/cli) and 'make
// conformance' run the kit, and this package's tests run its short subset
// against the Go SDK. protocol_test.go holds docs/worker-protocol.md's
// machine-readable tables to the code.
package conformance
