// Package builtin holds the node executors that come with Weft's worker
// daemon: echo, noop, sleep, fail, http, transform and llm. Register adds them
// all to a worker; each is also an exported type, for reuse under another
// name or with other settings (an HTTP executor with its own client, say).
//
// Executors read their configuration from the node's "config" in the graph.
// Unknown configuration fields are refused: a misspelt field fails the node
// with a non-retryable "ValidationError" rather than being ignored.
// Durations are Go duration strings ("100ms", "1m30s") or numbers of
// milliseconds.
package builtin

import "github.com/weft-dev/weft/pkg/worker"

// Node types of the built-in executors.
const (
	TypeEcho      = "echo"
	TypeNoop      = "noop"
	TypeSleep     = "sleep"
	TypeFail      = "fail"
	TypeHTTP      = "http"
	TypeTransform = "transform"
	TypeLLM       = "llm"
)

// Register registers every built-in executor with w under its type,
// configured by opts.
func Register(w *worker.Worker, opts ...Option) {
	var s settings
	for _, o := range opts {
		o(&s)
	}
	w.Handle(TypeEcho, Echo{})
	w.Handle(TypeNoop, Noop{})
	w.Handle(TypeSleep, Sleep{})
	w.Handle(TypeFail, Fail{})
	w.Handle(TypeHTTP, &HTTP{Policy: s.policy, Secrets: s.secrets, MaxBody: s.maxBody, MaxRedirects: s.maxRedirects})
	w.Handle(TypeTransform, Transform{})
	w.Handle(TypeLLM, &LLM{Endpoints: s.endpoints, Secrets: s.secrets, MaxBody: s.maxBody, Limits: s.limits})
}
