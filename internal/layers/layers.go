// Package layers writes down Weft's three layers and which package is in
// which, so that a test (layers_test.go) can hold every import to them.
//
// Imports run one way: faces → engine → foundations.
//
//   - Faces are what a user calls: the client library, the worker SDK, the
//     embedding entry point, the CLI, the UI, the replay checker, the
//     commands and tools. A face may be a thin set of type aliases and
//     constructors over the engine (pkg/worker over internal/worker).
//   - The engine is what runs runs: the coordinator's loop, the decider,
//     the worker runtime and its built-in executors, the read model, the
//     daemons' internals, the connection and telemetry wiring. It never
//     imports a face.
//   - Foundations are what a user may also use alone, and what everything
//     builds on: the graph, the fold, the event catalogue and the log
//     (pkg/events over internal/eventlog), and the small pure helpers
//     under them. A foundation never imports the engine.
//
// Testing rooms (servers, processes and simulations for tests, and the
// packages that hold only tests) may import any layer; no other package
// may import them. Only non-test files are held to the layers: a test of
// the engine may drive it through a face.
package layers

import "strings"

// Layer is where a package stands; a package may import its own layer and
// the layers below.
type Layer int

// The layers, bottom up.
const (
	Foundation Layer = iota + 1
	Engine
	Face
	Testing
)

func (l Layer) String() string {
	switch l {
	case Foundation:
		return "foundation"
	case Engine:
		return "engine"
	case Face:
		return "face"
	case Testing:
		return "testing"
	}
	return "unassigned"
}

// Of is every package's layer, by its path in the module; a path ending in
// "/..." covers the packages under it. A package missing here fails the
// test: place it when you add it.
var Of = map[string]Layer{
	// Faces.
	"cmd/...":                           Face,
	"examples/...":                      Face,
	"internal/cli":                      Face,
	"internal/ui":                       Face,
	"internal/gateway":                  Face, // weft serve: the HTTP API, over pkg/client
	"internal/batchops":                 Face, // what a batch job does to each run, over pkg/client (the CLI and the UI)
	"internal/bench":                    Face, // weftbench drives the engine as users do
	"internal/conformance/...":          Face, // the conformance kit and its Go worker: a tool and a user's worker
	"internal/reliability/ledgerworker": Face, // a user's worker process, for the chaos test
	"pkg/client":                        Face,
	"pkg/replay":                        Face,
	"pkg/weft":                          Face,
	"pkg/worker":                        Face,
	"pkg/worker/builtin":                Face,

	// The engine.
	"internal/admission":          Engine,
	"internal/batch":              Engine, // durable batch jobs: their bucket, progress and pacing
	"internal/daemon":             Engine,
	"internal/coordinator":        Engine,
	"internal/coordinatord":       Engine,
	"internal/embedded":           Engine,
	"internal/fakemodel":          Engine, // the scripted model of weft demo and the process tests
	"internal/decider":            Engine,
	"internal/flow":               Engine,
	"internal/natsconn":           Engine,
	"internal/nodeworker":         Engine,
	"internal/provision":          Engine,
	"internal/reliability/ledger": Engine,
	"internal/readmodel":          Engine,
	"internal/schedule":           Engine,
	"internal/trigger":            Engine,
	"internal/telemetry":          Engine,
	"internal/worker":             Engine,
	"internal/worker/builtin":     Engine,
	"internal/workqueue":          Engine,

	// Foundations.
	"internal/eventlog":   Foundation,
	"internal/expr":       Foundation,
	"internal/graphrt":    Foundation,
	"internal/logattr":    Foundation,
	"internal/nodeconfig": Foundation,
	"internal/setup":      Foundation,
	"internal/suggest":    Foundation, // "did you mean ...?" for the CLI and the graph
	"internal/tsbuild":    Foundation, // builds the TypeScript SDK for the bench and the tests that run it
	"pkg/events":          Foundation,
	"pkg/graph":           Foundation,
	"pkg/projection":      Foundation,

	// Testing rooms.
	"internal/eventlog/logtest": Testing,
	"internal/layers":           Testing,
	"internal/testkit":          Testing,
	"internal/reliability":      Testing,
	"internal/sdkharness":       Testing, // the TypeScript SDK tests' harness
	"internal/security":         Testing,
	"internal/semantics":        Testing,
	"internal/sim":              Testing,
}

// For returns the layer of the package at path (relative to the module),
// and false when it has none.
func For(path string) (Layer, bool) {
	if l, ok := Of[path]; ok {
		return l, true
	}
	best, bestLen := Layer(0), -1
	for k, l := range Of {
		prefix, ok := strings.CutSuffix(k, "/...")
		if ok && (path == prefix || strings.HasPrefix(path, prefix+"/")) && len(prefix) > bestLen {
			best, bestLen = l, len(prefix)
		}
	}
	return best, bestLen >= 0
}
