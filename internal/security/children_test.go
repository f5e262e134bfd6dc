package security

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weft-dev/weft/internal/decider"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// paymentGraph is the victim of the forged-child attack: after hold, an
// approval is asked for in a child run, and the pay branch runs only if
// the child's state says approved.
const paymentGraph = `
name: payment
graphs:
  approve:
    name: approve
    nodes:
      - {id: gate, type: human}
      - {id: granted, type: transform, config: {set: {approved: "true"}}}
      - {id: denied, type: transform, config: {set: {approved: "false"}}}
    edges:
      - {from: START, to: gate}
      - {from: gate, to: granted, when: "output.approved == true"}
      - {from: gate, to: denied, when: "output.approved != true"}
      - {from: granted, to: END}
      - {from: denied, to: END}
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

// attackerGraph is the attacker's child: once signalled, its state says
// approved, and who forged it.
const attackerGraph = `
name: approve
nodes:
  - {id: gate, type: human}
  - {id: forge, type: transform, config: {set: {approved: "true", forgedBy: "'attacker'"}}}
edges:
  - {from: START, to: gate}
  - {from: gate, to: forge}
  - {from: forge, to: END}
`

var childNode = events.NodeRef{Node: "child", Iteration: 1}

// waitRun polls a run (as the client reads it) until cond holds.
func waitRun(t *testing.T, ctx context.Context, cl *client.Client, run, what string, cond func(*projection.State) bool) *projection.State {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := cl.Get(ctx, run)
		if err == nil && cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s: %s: not in 30s (%v, %+v)", run, what, err, st)
		}
		// Polls: the run's status is a read of its log, which notifies nobody.
		time.Sleep(25 * time.Millisecond)
	}
}

func waiting(node string) func(*projection.State) bool {
	return func(s *projection.State) bool {
		return s.Node(node) != nil && s.Node(node).Status == projection.NodeWaiting
	}
}

func ended(s *projection.State) bool { return s.Status.Ended() }

// startMsg is the message of a run-started for run as a client publishes
// it, naming parent if set: the attacker's raw bytes (the engine refuses
// to encode a client's start that names a parent).
func startMsg(t *testing.T, run string, g *graph.Graph, parent *events.ParentRef) *nats.Msg {
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
	forged := *plain
	forged.Parent = parent
	m.Data, _ = json.Marshal(&forged)
	return m
}

// TestForgedChildRefused is the red team's attack of issue 25, with the
// client role's credentials only, against a coordinator process under its
// role: the victim waits at hold; the attacker reads its start (any
// client may read any run), derives the id of the child run the victim
// will start next, and writes that run's start first, with a graph of its
// own and the victim as its parent, then signals it to approve. Before
// the fix the coordinator took it for the child and the victim paid. Now:
//
//   - the start on the child's decision subject, where a child's start
//     goes, is refused by NATS (only the coordinator role writes there);
//   - Store.Append refuses to write a start that names a parent;
//   - the start written raw on the client's subject is refused by the
//     engine (it names a parent and is not the coordinator's), so the
//     forged run never exists, and signalling it does nothing;
//   - when the victim's node starts its child, the coordinator finds the
//     id taken and does not adopt it: the node fails with
//     ChildRunPreempted, the victim fails saying why (in its log and the
//     coordinator's), and it never pays.
//
// The same holds when the attacker starts a plain run of its own under
// the child's id (the second victim): that run runs as its own and never
// reports to the victim.
func TestForgedChildRefused(t *testing.T) {
	s := startServer(t)
	s.setup(t)
	admin := s.connect(t, userAdmin)
	dir := t.TempDir()
	startProcess(t, "coordinator", filepath.Join(dir, "coordinator.log"), s.roleEnv(userCoord), "-nats", s.url)

	attacker := s.connect(t, userClient)
	cl := client.New(openStore(t, attacker))
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	victim, forged := mustParse(t, paymentGraph), mustParse(t, attackerGraph)

	for _, attack := range []string{"a start naming the victim", "a run of its own"} {
		run, err := cl.Start(ctx, victim)
		if err != nil {
			t.Fatal(err)
		}
		vs := waitRun(t, ctx, cl, run, "hold waits", waiting("hold"))
		child := decider.ChildRunID(run, vs.Nonce, childNode)
		if child == decider.ChildRunID(run, "", childNode) {
			t.Fatalf("the victim's child id %s has no part from its nonce", child)
		}
		parent := &events.ParentRef{RunID: run, Ref: childNode}

		switch attack {
		case "a start naming the victim":
			// On the child's decision subject: NATS refuses.
			attacker.refusedPublish(t, admin, func() *nats.Msg {
				m := startMsg(t, child, forged, parent)
				m.Subject = eventlog.ChildStartedSubject(child)
				return m
			}())
			// Through the client library: refused, nothing written.
			claim, err := events.New(child, child, time.Time{}, &events.RunStartedData{GraphName: "approve", GraphDigest: forged.Digest(), Graph: forged.Canonical(), Parent: parent})
			if err != nil {
				t.Fatal(err)
			}
			var pc *events.ParentClaimError
			if _, err := openStore(t, attacker).Append(ctx, child, 0, claim); !errors.As(err, &pc) {
				t.Fatalf("Append of a start naming a parent: %v, want a ParentClaimError", err)
			}
			// Raw, on the client's own subject: stored, and refused by
			// the engine.
			if _, err := attacker.js.PublishMsg(ctx, startMsg(t, child, forged, parent)); err != nil {
				t.Fatalf("the client's raw publish: %v", err)
			}
		case "a run of its own":
			if _, err := cl.Start(ctx, forged, client.WithRunID(child)); err != nil {
				t.Fatal(err)
			}
			waitRun(t, ctx, cl, child, "the attacker's gate waits", waiting("gate"))
		}
		if err := cl.Signal(ctx, run, "hold", map[string]any{}); err != nil {
			t.Fatal(err)
		}
		vs = waitRun(t, ctx, cl, run, "the victim ends", ended)
		// The attacker signals its run anyway.
		sig, err := events.New(child, eventlog.RandomID(), time.Time{}, &events.SignalReceivedData{Node: "gate", Data: json.RawMessage(`{"approved":true,"forgedBy":"attacker"}`), By: "attacker"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := openStore(t, attacker).Append(ctx, child, events.AnySeq, sig); err != nil {
			t.Fatal(err)
		}
		if attack == "a run of its own" {
			fs := waitRun(t, ctx, cl, child, "the attacker's run ends", ended)
			if fs.Parent != nil || fs.Status != projection.RunCompleted || string(fs.Vars["forgedBy"]) != `"attacker"` {
				t.Fatalf("the attacker's run: %s, parent %+v, state %v", fs.Status, fs.Parent, fs.Vars)
			}
		} else {
			time.Sleep(500 * time.Millisecond) // what the signal could do, it would have done
		}
		vs = waitRun(t, ctx, cl, run, "the victim ends", ended)
		if vs.Status != projection.RunFailed || vs.Error == nil || vs.Error.Cause == nil || vs.Error.Cause.Type != events.FailureChildRunPreempted || !strings.Contains(vs.Error.Cause.Message, child) {
			t.Fatalf("%s: the victim %s with %+v; want it failed for its pre-empted child %s", attack, vs.Status, vs.Error, child)
		}
		if vs.Vars["paid"] != nil || vs.Artifacts["approval"] != nil || vs.Node("pay") != nil {
			t.Fatalf("%s: the victim took the forged result: paid %s, approval %s", attack, vs.Vars["paid"], vs.Artifacts["approval"])
		}
		// The victim's timeline says why.
		evs, err := cl.Events(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		var said bool
		for _, e := range evs {
			if e.Event.Type != events.ChildRunFinished {
				continue
			}
			p, _ := e.Event.Payload()
			f := p.(*events.ChildRunFinishedData)
			if f.Status != string(projection.RunFailed) || f.Error == nil || f.Error.Type != events.FailureChildRunPreempted {
				t.Fatalf("%s: the victim's child-run-finished: %+v", attack, f)
			}
			said = true
		}
		if !said {
			t.Fatalf("%s: the victim's timeline has no child-run-finished saying why", attack)
		}
		if attack == "a start naming the victim" {
			// Its messages are in the log, refused: no run for anyone.
			if fs, err := cl.Get(ctx, child); err == nil && (fs.Status != projection.RunPending || fs.Stats.Refused == 0) {
				t.Fatalf("the forged child run exists for the client: %s, %d refused", fs.Status, fs.Stats.Refused)
			}
		}
	}

	// The coordinator says so too, and it was refused nothing itself.
	b, err := os.ReadFile(filepath.Join(dir, "coordinator.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"not taking that run for the child", "is not the coordinator's"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the coordinator's log does not say %q", want)
		}
	}
	testkit.CheckNoViolations(t, dir)
}

// TestHonestChildUnderRoles: the coordinator's role writes the child's
// start on its decision subject, a worker process under its role reads it
// for the child's worker node, the child runs and reports, and the
// parent pays.
func TestHonestChildUnderRoles(t *testing.T) {
	s := startServer(t)
	s.setup(t)
	dir := t.TempDir()
	startProcess(t, "coordinator", filepath.Join(dir, "coordinator.log"), s.roleEnv(userCoord), "-nats", s.url)
	startProcess(t, "nodeworker", filepath.Join(dir, "worker.log"), s.roleEnv(userWorker), "-nats", s.url, "-queues", queueA, "-name", "w")
	cl := client.New(openStore(t, s.connect(t, userClient)))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The child first runs a worker's node, whose config is in the child's
	// start.
	g := strings.Replace(paymentGraph, `      - {id: gate, type: human}
`, `      - {id: note, type: echo, config: {updates: {noted: true}}}
      - {id: gate, type: human}
`, 1)
	g = strings.Replace(g, `      - {from: START, to: gate}
`, `      - {from: START, to: note}
      - {from: note, to: gate}
`, 1)
	run, err := cl.Start(ctx, mustParse(t, g))
	if err != nil {
		t.Fatal(err)
	}
	waitRun(t, ctx, cl, run, "hold waits", waiting("hold"))
	if err := cl.Signal(ctx, run, "hold", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	ps := waitRun(t, ctx, cl, run, "the child starts", func(s *projection.State) bool { return s.Node("child") != nil && s.Node("child").Child != "" })
	child := ps.Node("child").Child
	cs := waitRun(t, ctx, cl, child, "the child's gate waits", waiting("gate"))
	if cs.Parent == nil || cs.Parent.RunID != run || cs.Node("note").Status != projection.NodeSucceeded || cs.Node("note").Worker != "w" || string(cs.Vars["noted"]) != "true" {
		t.Fatalf("child's parent %+v, note %+v", cs.Parent, cs.Node("note"))
	}
	if err := cl.Signal(ctx, child, "gate", map[string]any{"approved": true}); err != nil {
		t.Fatal(err)
	}
	ps = waitRun(t, ctx, cl, run, "the run ends", ended)
	if ps.Status != projection.RunCompleted || string(ps.Vars["paid"]) != "true" {
		t.Fatalf("run %s %+v, paid %s", ps.Status, ps.Error, ps.Vars["paid"])
	}
	testkit.CheckNoViolations(t, dir)
}

// TestForgedForkRefused: a fork's start state is the client's, so it is
// checked against the graph before the engine believes it. The attacker
// writes a "fork" of the victim whose state says the victim's child run
// is its own (a node waiting for it), that pay is running, that a timer
// of a node the graph lacks is pending, and that paid is true; then
// cancels its fork, which before the fix had the coordinator cancel the
// victim's child. Now the state is not taken: the fork fails at once
// with InvalidForkState listing each problem (node and field), nothing
// happens to the victim's child, and the victim completes as its person
// decides.
func TestForgedForkRefused(t *testing.T) {
	s := startServer(t)
	s.setup(t)
	dir := t.TempDir()
	startProcess(t, "coordinator", filepath.Join(dir, "coordinator.log"), s.roleEnv(userCoord), "-nats", s.url)
	attacker := s.connect(t, userClient)
	st := openStore(t, attacker)
	cl := client.New(st)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	g := mustParse(t, paymentGraph)
	run, err := cl.Start(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	waitRun(t, ctx, cl, run, "hold waits", waiting("hold"))
	if err := cl.Signal(ctx, run, "hold", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	child := waitRun(t, ctx, cl, run, "the child starts", func(s *projection.State) bool { return s.Node("child") != nil && s.Node("child").Child != "" }).Node("child").Child
	waitRun(t, ctx, cl, child, "the child's gate waits", waiting("gate"))

	state, _ := json.Marshal(map[string]any{
		"state":     map[string]any{"paid": true},
		"artifacts": map[string]any{"approval": map[string]any{"approved": true, "forgedBy": "attacker"}},
		"nodes": map[string]any{
			"hold":  map[string]any{"status": "succeeded", "iteration": 1, "routed": 1},
			"child": map[string]any{"status": "waiting", "waitingFor": "child", "child": child, "iteration": 1},
			"pay":   map[string]any{"status": "running", "iteration": 1, "attempt": 1},
		},
		"timers": map[string]any{"t1": map[string]any{"purpose": "retry", "ref": map[string]any{"node": "ghost", "iteration": 1}, "at": time.Now().Add(time.Hour)}},
	})
	fork := events.NewRunID()
	start, err := events.New(fork, fork, time.Time{}, &events.RunStartedData{GraphName: g.Definition().Name, GraphDigest: g.Digest(), Graph: g.Canonical(),
		Fork: &events.ForkRef{RunID: run, Position: 3}, State: state, StartedBy: "attacker"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(ctx, fork, 0, start); err != nil {
		t.Fatal(err)
	}
	if err := cl.Cancel(ctx, fork, "attacker"); err != nil && !errors.Is(err, client.ErrRunEnded) {
		t.Fatal(err)
	}
	fs := waitRun(t, ctx, cl, fork, "the fork ends", ended)
	if fs.Status != projection.RunFailed || fs.Error == nil || fs.Error.Type != events.FailureInvalidForkState {
		t.Fatalf("the forged fork: %s %+v", fs.Status, fs.Error)
	}
	for _, want := range []string{`node "child": waitingFor`, `node "pay": status: running`, "timers[t1]", `"ghost"`} {
		if !strings.Contains(fs.Error.Message, want) {
			t.Errorf("the fork's failure does not say %s: %s", want, fs.Error.Message)
		}
	}
	var details struct {
		Problems []projection.ForkProblem `json:"problems"`
	}
	if err := json.Unmarshal(fs.Error.Details, &details); err != nil || len(details.Problems) < 3 {
		t.Fatalf("the fork's failure details: %v %s", err, fs.Error.Details)
	}
	if fs.Vars["paid"] != nil || fs.Artifacts["approval"] != nil || len(fs.Nodes) != 0 {
		t.Fatalf("the forged state was taken: %v %v %v", fs.Vars, fs.Artifacts, fs.Nodes)
	}

	// The victim's child was not touched: its person approves, the
	// victim pays.
	cs, err := cl.Get(ctx, child)
	if err != nil || cs.Cancel != nil || cs.Status != projection.RunRunning {
		t.Fatalf("the victim's child after the forged fork: %v %s %+v", err, cs.Status, cs.Cancel)
	}
	if err := cl.Signal(ctx, child, "gate", map[string]any{"approved": true}); err != nil {
		t.Fatal(err)
	}
	vs := waitRun(t, ctx, cl, run, "the victim ends", ended)
	if vs.Status != projection.RunCompleted || string(vs.Vars["paid"]) != "true" {
		t.Fatalf("victim %s %+v", vs.Status, vs.Error)
	}

	// An honest fork of the victim still works.
	if _, err := cl.Fork(ctx, run, 2); err != nil {
		t.Fatalf("an honest fork: %v", err)
	}
	testkit.CheckNoViolations(t, dir)
}
