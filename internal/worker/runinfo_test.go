package worker

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/natstest"
	"github.com/weft-dev/weft/pkg/events"
)

// TestHasEnded checks the ended-run check on a real server: no ending,
// then a run-failed, counted on its terminal subject (eventlog.HasEnd).
func TestHasEnded(t *testing.T) {
	_, st := natstest.Store(t)
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
	_, st := natstest.Store(t)
	r := newRunReader(st)
	ctx := context.Background()
	run := events.NewRunID()
	if _, err := r.start(ctx, run); !errors.Is(err, errStartNotFound) {
		t.Fatalf("a run with no start: %v", err)
	}
	ev, err := events.New(run, run, time.Time{}, &events.RunStartedData{
		GraphName: "g", GraphDigest: "sha256:g",
		Graph:      json.RawMessage(`{"name":"g","nodes":[{"id":"a","type":"echo","config":{"k":1}}]}`),
		Invocation: json.RawMessage(`{"tenant":"t"}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eventlog.Append(ctx, st, run, 0, ev); err != nil {
		t.Fatal(err)
	}
	s, err := r.start(ctx, run)
	if err != nil || string(s.nodes["a"].Config) != `{"k":1}` || string(s.invocation) != `{"tenant":"t"}` {
		t.Fatalf("start: %+v, %v", s, err)
	}
}

// TestReadChildStart reads a child run's start from the child's decision
// subject, where its coordinator writes it; a start claiming a parent on
// the child's client subject, which any client may write, is passed over
// (it neither stops the worker nor is read for the config).
func TestReadChildStart(t *testing.T) {
	srv, st := natstest.Store(t)
	_, js := natstest.Connect(t, srv)
	r := newRunReader(st)
	ctx := context.Background()
	child := events.NewRunID()
	parent := &events.ParentRef{RunID: "parent", Ref: events.NodeRef{Node: "sub", Iteration: 1}}
	start := func(config string, p *events.ParentRef) *events.Event {
		ev, err := events.New(child, child, time.Time{}, &events.RunStartedData{
			GraphName: "g", GraphDigest: "sha256:" + config,
			Graph:  json.RawMessage(`{"name":"g","nodes":[{"id":"a","type":"echo","config":{"k":"` + config + `"}}]}`),
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
	m.Data, _ = json.Marshal(&events.RunStartedData{GraphName: "g", GraphDigest: "sha256:forged",
		Graph: json.RawMessage(`{"name":"g","nodes":[{"id":"a","type":"echo","config":{"k":"forged"}}]}`), Parent: parent})
	m.Header.Set("Nats-Msg-Id", eventlog.RandomID())
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	s, err := r.start(ctx, child)
	if err != nil || string(s.nodes["a"].Config) != `{"k":"real"}` {
		t.Fatalf("child's start: %+v, %v; want the coordinator's", s, err)
	}
}
