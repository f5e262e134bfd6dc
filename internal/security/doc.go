// Package security holds Weft's security tests: attacks run with valid
// credentials of one role against real nats-server processes on loopback,
// configured with the authorization that 'weft roles' generates (see
// internal/natsconn/roles.go and deploy/SECURITY.md).
//
// For each role, what it must not do is tried and must be refused by NATS
// (a publish permission violation reported on the connection, and nothing
// stored; an API call that never reaches JetStream), and what it must do
// is done for real: a run started by the client role is decided by a
// coordinator process and run by a worker process, each with its own
// role's credentials. Rights that are still broader than their role
// because of how the engine works today have tests named TestGap…, which
// show the right is there; deploy/SECURITY.md lists them as open gaps.
//
// Some attacks are made with a role's own rights, which NATS cannot
// refuse, and the engine must: the forged child run of issue 25
// (TestForgedChildRefused: a client writes the start of a run's next
// child before the coordinator, naming the run as its parent; the run
// must never take it for its child) and a forged fork state
// (TestForgedForkRefused: a fork whose state the graph cannot run, which
// names another run's child run as its own; it must fail at once and
// touch nothing else).
//
// The tests also start every daemon and the CLI with a password in the
// URL, the flags and the environment, and look for it in all their output,
// and turn the built-in executors against their worker (SSRF to a loopback
// canary, redirects, oversized responses, template bombs, schema $refs to
// files, llm key exfiltration), looking for the worker's secrets in every
// message of the stream and in every process's output.
package security
