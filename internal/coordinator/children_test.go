package coordinator_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/decider"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// approveGraph is the child the victim's subgraph node runs: a person's
// decision at gate becomes the run's state, so its output.
const approveGraph = `
  approve:
    name: approve
    nodes:
      - {id: gate, type: human}
      - {id: approved, type: transform, config: {set: {approved: "true"}}}
      - {id: refused, type: transform, config: {set: {approved: "false"}}}
    edges:
      - {from: START, to: gate}
      - {from: gate, to: approved, when: "output.approved == true"}
      - {from: gate, to: refused, when: "output.approved != true"}
      - {from: approved, to: END}
      - {from: refused, to: END}
`

// victimGraph waits at hold, then asks for approval in a child run: the
// pay branch runs only on {"approved": true} from the child.
const victimGraph = `
name: victim
graphs:` + approveGraph + `
nodes:
  - {id: hold, type: human}
  - {id: child, type: subgraph, outputAs: approval, config: {graph: approve}}
  - {id: pay, type: transform, config: {set: {paid: "true"}}}
edges:
  - {from: START, to: hold}
  - {from: hold, to: child}
  - {from: child, to: pay, when: "output.approved == true"}
  - {from: pay, to: END}
  - {from: child, to: END, when: "output.approved != true"}
`

// directGraph is victimGraph without the hold: the child starts at once.
const directGraph = `
name: victim
graphs:` + approveGraph + `
nodes:
  - {id: child, type: subgraph, outputAs: approval, config: {graph: approve}}
  - {id: pay, type: transform, config: {set: {paid: "true"}}}
edges:
  - {from: START, to: child}
  - {from: child, to: pay, when: "output.approved == true"}
  - {from: pay, to: END}
  - {from: child, to: END, when: "output.approved != true"}
`

// forgedGraph is the graph a forged child runs: it approves, at once.
const forgedGraph = `
name: approve
nodes: [{id: gate, type: transform, config: {set: {approved: "true", forgedBy: "'attacker'"}}}]
edges: [{from: START, to: gate}, {from: gate, to: END}]
`

// childRef is the victim's subgraph node's first activation.
var childRef = events.NodeRef{Node: "child", Iteration: 1}

// stateOf folds a run from the log.
func stateOf(t *testing.T, st events.Store, run string) (*projection.State, []*events.Event) {
	t.Helper()
	evs, err := st.Read(context.Background(), run, 0, 0)
	if err != nil {
		t.Fatalf("reading run %s: %v", run, err)
	}
	return projection.Fold(evs), evs
}

// pollRun polls a run until cond holds.
func pollRun(t *testing.T, st events.Store, run, what string, cond func(*projection.State) bool) *projection.State {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		evs, err := st.Read(context.Background(), run, 0, 0)
		if err == nil {
			if s := projection.Fold(evs); cond(s) {
				return s
			}
		}
		if time.Now().After(deadline) {
			for _, e := range evs {
				t.Logf("%d %s %s %s", e.Seq, e.Type, e.NodeID, e.Data)
			}
			t.Fatalf("run %s: %s: not in 20s", run, what)
		}
		// Polls: the run's status is the read of its log, which notifies nobody.
		time.Sleep(20 * time.Millisecond)
	}
}

// claimMsg is a client's run-started for run naming parent: what the
// engine never writes (events refuses to encode it), as an attacker's
// raw publish has it.
func claimMsg(t *testing.T, run string, parent events.ParentRef, g *graph.Graph) *nats.Msg {
	t.Helper()
	plain := &events.RunStartedData{GraphName: g.Definition().Name, GraphDigest: g.Digest(), Graph: g.Canonical(), StartedBy: "attacker"}
	e, err := events.New(run, run, time.Time{}, plain)
	if err != nil {
		t.Fatal(err)
	}
	m, err := eventlog.Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	claim := *plain
	claim.Parent = &parent
	m.Data, _ = json.Marshal(&claim)
	return m
}

// TestForgedChildIsNotAdopted: whatever another writer puts under the id
// of a run's next child before the coordinator starts it (a start naming
// the parent on the client's subject, a run of its own, a stray message),
// the coordinator never takes it for the child: the subgraph node fails
// with ChildRunPreempted, saying why, and the run ends failed rather than
// taking the forged child's result.
func TestForgedChildIsNotAdopted(t *testing.T) {
	t.Parallel()
	srv, st := testkit.Store(t)
	_, js := testkit.Connect(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c := runCoordinator(t, ctx, st)
	cl := client.New(st)
	victim := mustGraph(t, victimGraph)
	forged := mustGraph(t, forgedGraph)

	for _, attack := range []string{"claim", "own run", "junk"} {
		run, err := cl.Start(ctx, victim)
		if err != nil {
			t.Fatal(err)
		}
		s := pollRun(t, st, run, "hold waits", func(s *projection.State) bool {
			return s.Node("hold") != nil && s.Node("hold").Status == projection.NodeWaiting
		})
		// The attacker reads the victim's start, as any client may, and
		// derives the child's id as the engine does.
		child := decider.ChildRunID(run, s.Nonce, childRef)
		if s.Nonce == "" || child == decider.ChildRunID(run, "", childRef) {
			t.Fatalf("run %s has no nonce: its child id is the guessable %s", run, child)
		}
		switch attack {
		case "claim":
			if _, err := js.PublishMsg(ctx, claimMsg(t, child, events.ParentRef{RunID: run, Ref: childRef}, forged)); err != nil {
				t.Fatal(err)
			}
		case "own run":
			if _, err := cl.Start(ctx, forged, client.WithRunID(child)); err != nil {
				t.Fatal(err)
			}
		case "junk":
			if _, err := js.Publish(ctx, eventlog.RunBase(child)+"c.signal", []byte("{}")); err != nil {
				t.Fatal(err)
			}
		}
		if err := cl.Signal(ctx, run, "hold", map[string]any{}); err != nil {
			t.Fatal(err)
		}
		if attack == "own run" {
			// The forged child finishes with the approval the attacker
			// wants; the victim must not hear of it.
			if fs := pollRun(t, st, child, "forged child ends", func(s *projection.State) bool { return s.Status.Ended() }); fs.Parent != nil || string(fs.Vars["approved"]) != "true" {
				t.Fatalf("%s: the forged run: parent %+v, state %v", attack, fs.Parent, fs.Vars)
			}
		}
		s = pollRun(t, st, run, "victim ends", func(s *projection.State) bool { return s.Status.Ended() })
		if s.Status != projection.RunFailed || s.Error == nil || s.Error.Cause == nil || s.Error.Cause.Type != events.FailureChildRunPreempted || !strings.Contains(s.Error.Cause.Message, child) {
			t.Fatalf("%s: victim %s, error %+v; want it failed for its pre-empted child %s", attack, s.Status, s.Error, child)
		}
		if s.Vars["paid"] != nil || s.Artifacts["approval"] != nil || s.Node("pay") != nil {
			t.Fatalf("%s: the victim took a forged child's result: paid %s, approval %s", attack, s.Vars["paid"], s.Artifacts["approval"])
		}
		_, evs := stateOf(t, st, run)
		notices := 0
		for _, e := range evs {
			if e.Type == events.ChildRunFinished {
				p, _ := e.Payload()
				if f := p.(*events.ChildRunFinishedData); f.Error == nil || f.Error.Type != events.FailureChildRunPreempted || f.ChildRunID != child {
					t.Fatalf("%s: child-run-finished %+v", attack, f)
				}
				notices++
			}
		}
		// One notice fails the node; a claim seen before the node waited
		// may have left one more, which changed nothing.
		if notices < 1 || notices > 2 || (notices == 2) != (attack == "claim") {
			t.Fatalf("%s: %d child-run-finished events in the victim's log", attack, notices)
		}
	}
	if n := c.Stats().ChildrenPreempted; n < 3 {
		t.Fatalf("ChildrenPreempted = %d, want at least 3", n)
	}
}

// TestHonestChildAfterAClaim: a claim written after the coordinator
// started the child changes nothing: the child's start is the
// coordinator's, and the run completes with the child's real result.
func TestHonestChildAfterAClaim(t *testing.T) {
	t.Parallel()
	srv, st := testkit.Store(t)
	_, js := testkit.Connect(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runCoordinator(t, ctx, st)
	cl := client.New(st)
	run, err := cl.Start(ctx, mustGraph(t, victimGraph))
	if err != nil {
		t.Fatal(err)
	}
	pollRun(t, st, run, "hold waits", func(s *projection.State) bool {
		return s.Node("hold") != nil && s.Node("hold").Status == projection.NodeWaiting
	})
	if err := cl.Signal(ctx, run, "hold", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	s := pollRun(t, st, run, "child started", func(s *projection.State) bool { return s.Node("child") != nil && s.Node("child").Child != "" })
	child := s.Node("child").Child
	cs := pollRun(t, st, child, "child's gate waits", func(s *projection.State) bool {
		return s.Node("gate") != nil && s.Node("gate").Status == projection.NodeWaiting
	})
	if cs.Parent == nil || cs.Parent.RunID != run || cs.Nonce == "" || cs.Nonce == s.Nonce {
		t.Fatalf("child %s: parent %+v, nonce %q (parent's %q)", child, cs.Parent, cs.Nonce, s.Nonce)
	}
	claim := claimMsg(t, child, events.ParentRef{RunID: run, Ref: childRef}, mustGraph(t, forgedGraph))
	claim.Header.Set(nats.MsgIdHdr, eventlog.RandomID()) // not de-duplicated against the real start
	if ack, err := js.PublishMsg(ctx, claim); err != nil || ack.Duplicate {
		t.Fatal(err, ack)
	}
	if err := cl.Signal(ctx, child, "gate", map[string]any{"approved": true}); err != nil {
		t.Fatal(err)
	}
	s = pollRun(t, st, run, "run ends", func(s *projection.State) bool { return s.Status.Ended() })
	if s.Status != projection.RunCompleted || string(s.Vars["paid"]) != "true" {
		t.Fatalf("run %s %+v, paid %s", s.Status, s.Error, s.Vars["paid"])
	}
	cs, evs := stateOf(t, st, child)
	if cs.Status != projection.RunCompleted || cs.Stats.Refused != 1 || evs[0].Subject() != eventlog.ChildStartedSubject(child) {
		t.Fatalf("child %s, refused %d, first event on %s", cs.Status, cs.Stats.Refused, evs[0].Subject())
	}
}

// TestWaitingChildCheckedWhenFoldedAfresh: a run whose log says a node
// waits for a child run that has no start of the coordinator's (a
// coordinator died between the run's decisions and its notice, say)
// fails that node when a coordinator folds the run from the log, rather
// than waiting forever.
func TestWaitingChildCheckedWhenFoldedAfresh(t *testing.T) {
	t.Parallel()
	srv, st := testkit.Store(t)
	_, js := testkit.Connect(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	g := mustGraph(t, directGraph)
	run := events.NewRunID()
	start, err := events.New(run, run, time.Time{}, &events.RunStartedData{GraphName: "victim", GraphDigest: g.Digest(), Graph: g.Canonical(), Nonce: events.NewNonce()})
	if err != nil {
		t.Fatal(err)
	}
	seq, err := st.Append(ctx, run, 0, start)
	if err != nil {
		t.Fatal(err)
	}
	// The decisions as a coordinator wrote them, its child's id taken
	// first by a stray message.
	s := &projection.State{}
	start.Seq = seq
	_ = s.Apply(start)
	d := decider.Decide(g, s, time.Now())
	if len(d.Children) != 1 {
		t.Fatalf("decision %+v", d)
	}
	child := d.Children[0].RunID
	if _, err := js.Publish(ctx, eventlog.RunBase(child)+"c.signal", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if _, err := eventlog.Append(ctx, st, run, 0, d.Events...); err != nil {
		t.Fatal(err)
	}
	if s, _ := stateOf(t, st, run); s.Node("child").Status != projection.NodeWaiting || s.Node("child").Child != child {
		t.Fatalf("setup: %+v", s.Node("child"))
	}
	runCoordinator(t, ctx, st)
	s = pollRun(t, st, run, "run ends", func(s *projection.State) bool { return s.Status.Ended() })
	if s.Status != projection.RunFailed || s.Error.Cause == nil || s.Error.Cause.Type != events.FailureChildRunPreempted {
		t.Fatalf("run %s %+v", s.Status, s.Error)
	}
}

// TestClaimedChildTellsItsParent: a run whose start claims a parent from
// a client's subject (a child run an older Weft started, or an attacker's
// start) does not exist for the engine; when one of its events is
// handled, its parent, if a node waits for a child under exactly that id,
// is told the child is not its own, and the node fails instead of
// waiting forever.
func TestClaimedChildTellsItsParent(t *testing.T) {
	t.Parallel()
	srv, st := testkit.Store(t)
	_, js := testkit.Connect(t, srv)
	ctx := context.Background()
	g := mustGraph(t, directGraph)
	parent := events.NewRunID()
	// A parent an older Weft started (no nonce) and had decided up to the
	// child's wait, the child's start on the client's subject.
	start, err := events.New(parent, parent, time.Time{}, &events.RunStartedData{GraphName: "victim", GraphDigest: g.Digest(), Graph: g.Canonical()})
	if err != nil {
		t.Fatal(err)
	}
	seq, err := st.Append(ctx, parent, 0, start)
	if err != nil {
		t.Fatal(err)
	}
	s := &projection.State{}
	start.Seq = seq
	_ = s.Apply(start)
	d := decider.Decide(g, s, time.Now())
	child := d.Children[0].RunID
	if child != parent+"-child-1" {
		t.Fatalf("a parent without a nonce: child id %s", child)
	}
	if _, err := eventlog.Append(ctx, st, parent, 0, d.Events...); err != nil {
		t.Fatal(err)
	}
	claimAck, err := js.PublishMsg(ctx, claimMsg(t, child, events.ParentRef{RunID: parent, Ref: childRef}, mustGraph(t, forgedGraph)))
	if err != nil {
		t.Fatal(err)
	}
	// A claim of another activation, and one for a run id the parent
	// does not derive, change nothing.
	other := events.NewRunID()
	if _, err := js.PublishMsg(ctx, claimMsg(t, other, events.ParentRef{RunID: parent, Ref: childRef}, mustGraph(t, forgedGraph))); err != nil {
		t.Fatal(err)
	}
	c := coordinator.New(st)
	for _, ev := range []struct {
		run string
		seq uint64
	}{{other, 0}, {child, claimAck.Sequence}} {
		evs, err := st.Read(ctx, ev.run, 0, 0)
		if err != nil || len(evs) != 1 || evs[0].Refused == nil {
			t.Fatalf("claim of %s: %v %+v", ev.run, err, evs)
		}
		if err := c.HandleEvent(ctx, evs[0], false); err != nil {
			t.Fatalf("handling the claim of %s: %v", ev.run, err)
		}
		ps, pevs := stateOf(t, st, parent)
		last := pevs[len(pevs)-1]
		if ev.run == other {
			if last.Type == events.ChildRunFinished || ps.Node("child").Status != projection.NodeWaiting {
				t.Fatalf("a claim for an id the parent does not derive told it: %s %+v", last.Type, ps.Node("child"))
			}
			continue
		}
		if last.Type != events.ChildRunFinished || ps.Node("child").Status != projection.NodeFailed || ps.Node("child").Error.Type != events.FailureChildRunPreempted {
			t.Fatalf("after the claim: last event %s, node %+v", last.Type, ps.Node("child"))
		}
	}
	// The engine, deciding from there, fails the run.
	runCoordinator(t, context.Background(), st)
	if s := pollRun(t, st, parent, "parent ends", func(s *projection.State) bool { return s.Status.Ended() }); s.Status != projection.RunFailed {
		t.Fatalf("parent %s", s.Status)
	}
}
