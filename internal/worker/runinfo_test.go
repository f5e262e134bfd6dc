package worker

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/events"
)

// TestHasEnded checks the ended-run check on a real server: no ending,
// then a run-failed, counted on its terminal subject (eventlog.HasEnd).
func TestHasEnded(t *testing.T) {
	_, st := testkit.Store(t)
	r := newRunReader(st)
	ctx := context.Background()
	run := events.NewRunID()
	if ended, err := r.hasEnded(ctx, run); err != nil || ended || r.knownEnded(run) {
		t.Fatalf("no ending yet: hasEnded = %v, %v", ended, err)
	}
	ev, err := events.New(run, eventlog.DecisionID(run, events.RunFailed), time.Time{}, &events.RunFailedData{Error: events.Failure{Type: "x", Message: "y"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eventlog.Append(ctx, st, run, events.AnySeq, ev); err != nil {
		t.Fatal(err)
	}
	if ended, err := r.hasEnded(ctx, run); err != nil || !ended || !r.knownEnded(run) {
		t.Fatalf("hasEnded = %v, %v; known %v", ended, err, r.knownEnded(run))
	}
	other := events.NewRunID()
	if ended, err := r.hasEnded(ctx, other); err != nil || ended {
		t.Fatalf("a run with no ending: hasEnded = %v, %v", ended, err)
	}
}

// TestReadStart reads a run's start by its subject, and reports a run
// with none as errStartNotFound.
func TestReadStart(t *testing.T) {
	_, st := testkit.Store(t)
	r := newRunReader(st)
	ctx := context.Background()
	run := events.NewRunID()
	if _, err := r.start(ctx, run, 0); !errors.Is(err, errStartNotFound) {
		t.Fatalf("a run with no start: %v", err)
	}
	ev, err := events.New(run, run, time.Time{}, &events.RunStartedData{
		GraphName: "g", GraphDigest: events.GraphDigest([]byte(`{"name":"g","nodes":[{"id":"a","type":"echo","config":{"k":1}}]}`)),
		Graph:      json.RawMessage(`{"name":"g","nodes":[{"id":"a","type":"echo","config":{"k":1}}]}`),
		Invocation: json.RawMessage(`{"tenant":"t"}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eventlog.Append(ctx, st, run, 0, ev); err != nil {
		t.Fatal(err)
	}
	s, err := r.start(ctx, run, 0)
	if err != nil || string(s.nodes["a"].Config) != `{"k":1}` || string(s.invocation) != `{"tenant":"t"}` {
		t.Fatalf("start: %+v, %v", s, err)
	}
}

// TestReadChildStart reads a child run's start from the child's decision
// subject, where its coordinator writes it; a start claiming a parent on
// the child's client subject, which any client may write, is passed over
// (it neither stops the worker nor is read for the config).
func TestReadChildStart(t *testing.T) {
	srv, st := testkit.Store(t)
	_, js := testkit.Connect(t, srv)
	r := newRunReader(st)
	ctx := context.Background()
	child := events.NewRunID()
	parent := &events.ParentRef{RunID: "parent", Ref: events.NodeRef{Node: "sub", Iteration: 1}}
	start := func(config string, p *events.ParentRef) *events.Event {
		g := json.RawMessage(`{"name":"g","nodes":[{"id":"a","type":"echo","config":{"k":"` + config + `"}}]}`)
		ev, err := events.New(child, child, time.Time{}, &events.RunStartedData{
			GraphName: "g", GraphDigest: events.GraphDigest(g),
			Graph:  g,
			Parent: p,
		})
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	real := start("real", parent)
	eventlog.MarkDecision(real)
	if _, err := eventlog.Append(ctx, st, child, 0, real); err != nil {
		t.Fatal(err)
	}
	// The attacker's claim, raw on the client's subject.
	m, err := eventlog.Encode(start("forged", nil))
	if err != nil {
		t.Fatal(err)
	}
	forged := json.RawMessage(`{"name":"g","nodes":[{"id":"a","type":"echo","config":{"k":"forged"}}]}`)
	m.Data, _ = json.Marshal(&events.RunStartedData{GraphName: "g", GraphDigest: events.GraphDigest(forged), Graph: forged, Parent: parent})
	m.Header.Set("Nats-Msg-Id", eventlog.RandomID())
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	s, err := r.start(ctx, child, 0)
	if err != nil || string(s.nodes["a"].Config) != `{"k":"real"}` {
		t.Fatalf("child's start: %+v, %v; want the coordinator's", s, err)
	}
}

// TestStartDigestMismatch: a run's start whose graphDigest is not its
// graph's (written raw: the encoder refuses it) is never read for a node's
// config nor kept under that digest: the work item fails, non-retryable
// (InvalidGraph), naming the mismatch.
func TestStartDigestMismatch(t *testing.T) {
	srv, st := testkit.Store(t)
	_, js := testkit.Connect(t, srv)
	r := newRunReader(st)
	ctx := context.Background()
	run := events.NewRunID()
	real := json.RawMessage(`{"name":"g","nodes":[{"id":"a","type":"echo","config":{"k":"real"}}]}`)
	forged := json.RawMessage(`{"name":"g","nodes":[{"id":"a","type":"echo","config":{"k":"forged"}}]}`)
	ev, err := events.New(run, run, time.Time{}, &events.RunStartedData{GraphName: "g", GraphDigest: events.GraphDigest(real), Graph: real})
	if err != nil {
		t.Fatal(err)
	}
	m, err := eventlog.Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	m.Data, _ = json.Marshal(&events.RunStartedData{GraphName: "g", GraphDigest: events.GraphDigest(real), Graph: forged})
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	_, err = r.resolve(ctx, run, &events.NodeReadyData{NodeRef: events.NodeRef{Node: "a", Iteration: 1}, Type: "echo", Queue: "default"})
	var we *Error
	if !errors.As(err, &we) || we.Retryable || we.Type != events.FailureInvalidGraph || !strings.Contains(we.Message, "graph digest mismatch") {
		t.Fatalf("resolving a work item of a start under another graph's digest: %v", err)
	}
	if _, ok := r.graphs.get(events.GraphDigest(real)); ok {
		t.Fatal("the forged graph was kept under the real graph's digest")
	}
}

// TestSecondStartNotRead: a work item names the stream sequence of its
// run's start (NodeReadyData.StartSeq); a second run-started written
// after it on the run's start subject (gap 12 of deploy/SECURITY.md) is
// never read for the item's config: the item fails, non-retryable
// (RunStartMismatch). An item that names the sequence of the start read
// is resolved from it; one that names none (an older coordinator) takes
// the last, as before.
func TestSecondStartNotRead(t *testing.T) {
	srv, st := testkit.Store(t)
	_, js := testkit.Connect(t, srv)
	ctx := context.Background()
	run := events.NewRunID()
	start := func(who string) *events.Event {
		g := json.RawMessage(`{"name":"g","nodes":[{"id":"a","type":"echo","config":{"who":"` + who + `"}}]}`)
		ev, err := events.New(run, run, time.Time{}, &events.RunStartedData{GraphName: "g", GraphDigest: events.GraphDigest(g), Graph: g})
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	seq, err := eventlog.Append(ctx, st, run, 0, start("victim"))
	if err != nil {
		t.Fatal(err)
	}
	ready := &events.NodeReadyData{NodeRef: events.NodeRef{Node: "a", Iteration: 1}, Type: "echo", Queue: "default", StartSeq: seq}
	if full, err := newRunReader(st).resolve(ctx, run, ready); err != nil || string(full.Config) != `{"who":"victim"}` {
		t.Fatalf("the run's own start: %v, %v", full, err)
	}
	m, err := eventlog.Encode(start("attacker"))
	if err != nil {
		t.Fatal(err)
	}
	m.Header.Set("Nats-Msg-Id", eventlog.RandomID())
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	_, err = newRunReader(st).resolve(ctx, run, ready)
	var we *Error
	if !errors.As(err, &we) || we.Retryable || we.Type != FailureRunStartMismatch {
		t.Fatalf("an item of a run with a second start: %v", err)
	}
	old := *ready
	old.StartSeq = 0
	if full, err := newRunReader(st).resolve(ctx, run, &old); err != nil || string(full.Config) != `{"who":"attacker"}` {
		t.Fatalf("an item naming no start: %v, %v", full, err)
	}
}
