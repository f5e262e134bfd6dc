// Package builtin is the built-in node executors (echo, noop, sleep,
// fail, http, transform, llm, agent): engine code, which the coordinator runs
// locally (transform) and the worker daemon registers on its worker.
// pkg/worker/builtin is its face for users' own workers and documents the
// executors' configuration and limits.
package builtin

import "github.com/weft-dev/weft/internal/worker"

// Node types of the built-in executors.
const (
	TypeEcho      = "echo"
	TypeNoop      = "noop"
	TypeSleep     = "sleep"
	TypeFail      = "fail"
	TypeHTTP      = "http"
	TypeTransform = "transform"
	TypeLLM       = "llm"
	TypeAgent     = "agent"
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
	w.Handle(TypeAgent, &Agent{
		Endpoints: s.endpoints, Secrets: s.secrets, MaxBody: s.maxBody, Limits: s.limits,
		Tools: w.Handler, Tokens: PublishTokens,
	})
}
