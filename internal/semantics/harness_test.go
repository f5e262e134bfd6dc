package semantics_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/decider"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
	"github.com/weft-dev/weft/pkg/worker"
	"github.com/weft-dev/weft/pkg/worker/builtin"
)

// testTypes are the node types the test worker adds to the built-in ones.
var testTypes = []string{"capture", "fork", "writer", "item", "flaky"}

// harness is one embedded server with a coordinator and a worker.
type harness struct {
	t        *testing.T
	st       events.Store
	ctx      context.Context
	quiet    *slog.Logger
	coordOpt []coordinator.Option
	stopCo   func()
	seen     sync.Map // "run/node[/item]" -> *worker.Input
	nonces   sync.Map // run -> the nonce of its run-started
}

func newHarness(t *testing.T, coordOpts ...coordinator.Option) *harness {
	t.Helper()
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	quiet := slog.New(slog.DiscardHandler)
	h := &harness{t: t, st: st, ctx: ctx, quiet: quiet, coordOpt: append([]coordinator.Option{coordinator.WithLogger(quiet)}, coordOpts...)}
	h.startCoordinator()
	t.Cleanup(func() { h.stopCoordinator() })
	h.startWorker()
	return h
}

func (h *harness) startCoordinator() {
	c := coordinator.New(h.st, h.coordOpt...)
	ctx, cancel := context.WithCancel(h.ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = c.Run(ctx) })
	h.stopCo = func() { cancel(); wg.Wait() }
}

// stopCoordinator stops the coordinator and waits for it; a stopped
// coordinator leaves unhandled events to the next one.
func (h *harness) stopCoordinator() {
	if h.stopCo != nil {
		h.stopCo()
		h.stopCo = nil
	}
}

func (h *harness) startWorker() {
	w, err := worker.New(h.st, worker.WithName("w1"), worker.WithConcurrency(32), worker.WithDrainTimeout(5*time.Second), worker.WithLogger(h.quiet))
	if err != nil {
		h.t.Fatal(err)
	}
	builtin.Register(w)
	// capture records what a node was given and outputs its local data.
	w.Handle("capture", worker.NodeFunc(func(_ context.Context, in *worker.Input) (*worker.Result, error) {
		h.seen.Store(inputKey(in.RunID, in.NodeID, in.Item), in)
		return &worker.Result{Output: map[string]any{"local": in.Local}}, nil
	}))
	// fork triggers the actions its config lists, with their data, via
	// the SDK's Result.Actions.
	w.Handle("fork", worker.NodeFunc(func(_ context.Context, in *worker.Input) (*worker.Result, error) {
		var cfg struct {
			Actions []struct {
				Name string `json:"name"`
				Data any    `json:"data"`
			} `json:"actions"`
		}
		if err := json.Unmarshal(in.Config, &cfg); err != nil {
			return nil, err
		}
		res := &worker.Result{Output: "forked"}
		for _, a := range cfg.Actions {
			res.Actions = append(res.Actions, worker.Action{Name: a.Name, Data: a.Data})
		}
		return res, nil
	}))
	// writer writes its node id to every key, after a short delay that
	// varies by node so that parallel writers interleave.
	w.Handle("writer", worker.NodeFunc(func(ctx context.Context, in *worker.Input) (*worker.Result, error) {
		var cfg struct {
			DelayMs int `json:"delayMs"`
		}
		_ = json.Unmarshal(in.Config, &cfg)
		if err := sleep(ctx, time.Duration(cfg.DelayMs)*time.Millisecond); err != nil {
			return nil, err
		}
		return &worker.Result{Output: in.NodeID, Updates: map[string]any{
			"tags":  []string{in.NodeID},
			"total": 1,
			"meta":  map[string]any{in.NodeID: true},
			"last":  in.NodeID,
		}}, nil
	}))
	// item handles one map item: a pause, then the item upper-cased.
	w.Handle("item", worker.NodeFunc(func(ctx context.Context, in *worker.Input) (*worker.Result, error) {
		h.seen.Store(inputKey(in.RunID, in.NodeID, in.Item), in)
		if err := sleep(ctx, 80*time.Millisecond); err != nil {
			return nil, err
		}
		local, _ := in.Local.(map[string]any)
		return &worker.Result{Output: fmt.Sprintf("%v!", local["item"])}, nil
	}))
	// flaky fails the first attempt of map item 1, retryably.
	w.Handle("flaky", worker.NodeFunc(func(_ context.Context, in *worker.Input) (*worker.Result, error) {
		if in.Item != nil && *in.Item == 1 && in.Attempt == 1 {
			return nil, &worker.Error{Type: "Flaky", Message: "first attempt of item 1", Retryable: true}
		}
		local, _ := in.Local.(map[string]any)
		return &worker.Result{Output: local["item"]}, nil
	}))
	ctx, cancel := context.WithCancel(h.ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = w.Run(ctx) })
	h.t.Cleanup(func() { cancel(); wg.Wait() })
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func inputKey(run, node string, item *int) string {
	k := run + "/" + node
	if item != nil {
		k += fmt.Sprintf("/%d", *item)
	}
	return k
}

// input returns what the worker gave a node, or fails the test.
func (h *harness) input(run, node string, item *int) *worker.Input {
	h.t.Helper()
	v, ok := h.seen.Load(inputKey(run, node, item))
	if !ok {
		h.t.Fatalf("node %s of run %s never ran", node, run)
	}
	return v.(*worker.Input)
}

// parse compiles a graph written inline.
func parse(t *testing.T, src string) *graph.Graph {
	t.Helper()
	g, err := graph.Parse([]byte(src), t.Name()+".yaml", graph.WithTypes(testTypes...))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// example loads a graph from examples/.
func example(t *testing.T, name string) *graph.Graph {
	t.Helper()
	g, err := graph.LoadFile(filepath.Join("..", "..", "examples", name), graph.WithTypes(testTypes...))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// start appends a run-started event, as a client does, and returns the run.
func (h *harness) start(g *graph.Graph, input, invocation string) string {
	h.t.Helper()
	run := events.NewRunID()
	p := &events.RunStartedData{GraphName: g.Definition().Name, GraphDigest: g.Digest(), Graph: g.Canonical(), StartedBy: "test", Nonce: events.NewNonce()}
	h.nonces.Store(run, p.Nonce)
	if input != "" {
		p.Input = json.RawMessage(input)
	}
	if invocation != "" {
		p.Invocation = json.RawMessage(invocation)
	}
	e, err := events.New(run, run, time.Time{}, p)
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.st.Append(h.ctx, run, 0, e); err != nil {
		h.t.Fatal(err)
	}
	return run
}

// childID is the id of the child run a subgraph node's activation ref
// starts in a run h started.
func (h *harness) childID(parent string, ref events.NodeRef) string {
	h.t.Helper()
	nonce, ok := h.nonces.Load(parent)
	if !ok {
		h.t.Fatalf("run %s was not started by the harness", parent)
	}
	return decider.ChildRunID(parent, nonce.(string), ref)
}

// appendFact appends a fact from outside (a signal, a cancel request).
func (h *harness) appendFact(run, id string, p events.Payload) {
	h.t.Helper()
	e, err := events.New(run, id, time.Time{}, p)
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.st.Append(h.ctx, run, events.AnySeq, e); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) signal(run, node, data string) {
	h.t.Helper()
	h.appendFact(run, eventlog.RandomID(), &events.SignalReceivedData{Node: node, Data: json.RawMessage(data), By: "tester"})
}

func (h *harness) cancel(run, by, reason string) {
	h.t.Helper()
	h.appendFact(run, eventlog.DecisionID(run, events.RunCancelRequested), &events.RunCancelRequestedData{By: by, Reason: reason})
}

// runLog is a run's events and their fold.
type runLog struct {
	evs []*events.Event
	s   *projection.State
}

// waitFor polls the run's log until cond holds.
func (h *harness) waitFor(run, what string, timeout time.Duration, cond func(runLog) bool) runLog {
	h.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		evs, err := h.st.Read(h.ctx, run, 0, 0)
		if err == nil {
			l := runLog{evs: evs, s: projection.Fold(evs)}
			if cond(l) {
				return l
			}
			if time.Now().After(deadline) {
				h.t.Fatalf("run %s: %s: not within %s; status %s, error %v\n%s", run, what, timeout, l.s.Status, l.s.Error, l.summary())
			}
		} else if time.Now().After(deadline) {
			h.t.Fatalf("run %s: %s: %v", run, what, err)
		}
		// Polls: the run's projection is a read of the log, which notifies nobody.
		time.Sleep(25 * time.Millisecond)
	}
}

// ended waits for the run to end and checks its status.
func (h *harness) ended(run string, want projection.RunStatus) runLog {
	h.t.Helper()
	l := h.waitFor(run, "end", 30*time.Second, func(l runLog) bool { return l.s.Status.Ended() })
	if l.s.Status != want {
		h.t.Fatalf("run %s ended %s (error %v), want %s\n%s", run, l.s.Status, l.s.Error, want, l.summary())
	}
	checkRefold(h.t, l.evs)
	return l
}

// checkRefold checks the fold is deterministic and splittable at every
// point: folding again, or from a snapshot plus the tail, gives the same
// bytes.
func checkRefold(t *testing.T, evs []*events.Event) {
	t.Helper()
	want := projection.Fold(evs).Marshal()
	if again := projection.Fold(evs).Marshal(); string(again) != string(want) {
		t.Fatalf("refold differs")
	}
	for cut := range evs {
		snap, err := projection.Unmarshal(projection.Fold(evs[:cut]).Marshal())
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs[cut:] {
			_ = snap.Apply(e)
		}
		if got := snap.Marshal(); string(got) != string(want) {
			t.Fatalf("snapshot at %d + tail differs:\n%s\n%s", cut, got, want)
		}
	}
}

// summary lists the log, one event a line, for failure messages.
func (l runLog) summary() string {
	var out string
	for _, e := range l.evs {
		out += fmt.Sprintf("  %4d %-28s %s %s\n", e.Seq, e.Type, e.NodeID, truncate(string(e.Data), 160))
	}
	return out
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// payloads returns the payloads of type T in log order, with their events.
func payloads[T events.Payload](l runLog) ([]T, []*events.Event) {
	var out []T
	var evs []*events.Event
	for _, e := range l.evs {
		p, err := e.Payload()
		if err != nil {
			continue
		}
		if v, ok := p.(T); ok {
			out = append(out, v)
			evs = append(evs, e)
		}
	}
	return out, evs
}

// readies counts the node-ready events of a node.
func (l runLog) readies(node string) int {
	n := 0
	ps, _ := payloads[*events.NodeReadyData](l)
	for _, p := range ps {
		if p.Node == node {
			n++
		}
	}
	return n
}

// seqOf returns the sequence of the first event of type t for node, or 0.
func (l runLog) seqOf(t events.Type, node string) uint64 {
	for _, e := range l.evs {
		if e.Type == t && e.NodeID == node {
			return e.Seq
		}
	}
	return 0
}

// status returns a node's status (idle if it never ran).
func (l runLog) status(node string) projection.NodeStatus {
	if ns := l.s.Nodes[node]; ns != nil {
		return ns.Status
	}
	return projection.NodeIdle
}

// wantStatus checks node statuses: node -> status.
func (l runLog) wantStatus(t *testing.T, want map[string]projection.NodeStatus) {
	t.Helper()
	for node, st := range want {
		if got := l.status(node); got != st {
			t.Errorf("node %s: %q, want %q\n%s", node, got, st, l.summary())
		}
	}
}

// stateOf decodes one key of the shared state.
func (l runLog) stateOf(key string) any {
	var v any
	if raw, ok := l.s.Vars[key]; ok {
		_ = json.Unmarshal(raw, &v)
	}
	return v
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
