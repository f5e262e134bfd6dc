package security

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// whoGraph is a one-node graph whose worker node (its config is read by
// the worker from the run's start) says whose graph ran.
func whoGraph(t *testing.T, name, who string) *graph.Graph {
	return mustParse(t, fmt.Sprintf(`
name: %s
nodes:
  - {id: a, type: echo, config: {updates: {who: %q}}}
edges:
  - {from: START, to: a}
  - {from: a, to: END}
`, name, who))
}

// TestGraphDigestPoisonRefused: coordinators and workers keep compiled
// graphs by the digest a run's start records. The attacker, with the
// client role only, writes a start (raw: the encoder refuses it) whose
// graphDigest is the victim's graph's and whose graph is its own, to put
// its graph in the caches under the victim's digest (attacker first: the
// victim's later runs would run the attacker's graph) or to have its run
// run under the victim's cached graph (victim first). The engine checks
// the digest against the graph's bytes when it reads the start
// (events.GraphDigestError): the attacker's start is refused by every
// reader, its run never starts, and the victim's runs run the victim's
// graph, in both orders, against a coordinator and a worker process under
// their roles.
func TestGraphDigestPoisonRefused(t *testing.T) {
	s := startServer(t)
	s.setup(t)
	dir := t.TempDir()
	startProcess(t, "coordinator", filepath.Join(dir, "coordinator.log"), s.roleEnv(userCoord), "-nats", s.url)
	startProcess(t, "nodeworker", filepath.Join(dir, "worker.log"), s.roleEnv(userWorker), "-nats", s.url, "-queues", queueA, "-name", "w")
	admin := openStore(t, s.connect(t, userAdmin))
	attacker := s.connect(t, userClient)
	cl := client.New(openStore(t, s.connect(t, userClient)))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// poison writes the attacker's start: the victim's digest, the
	// attacker's graph.
	poison := func(victim *graph.Graph) string {
		t.Helper()
		evil := whoGraph(t, victim.Definition().Name, "attacker")
		run := events.NewRunID()
		m := startMsg(t, run, evil, nil)
		m.Data, _ = json.Marshal(&events.RunStartedData{GraphName: evil.Definition().Name, GraphDigest: victim.Digest(), Graph: evil.Canonical(), StartedBy: "attacker"})
		if _, err := attacker.js.PublishMsg(ctx, m); err != nil {
			t.Fatalf("the attacker's start: %v", err)
		}
		return run
	}
	// refused checks that the attacker's run never started: its start is
	// read as refused, naming the mismatch, and nothing was decided.
	refused := func(run string) {
		t.Helper()
		time.Sleep(time.Second) // time for the coordinator to act on it
		evs, err := admin.Read(ctx, run, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		var de *events.GraphDigestError
		if len(evs) != 1 || !errors.As(evs[0].Refused, &de) {
			t.Fatalf("the attacker's run: %d events, the first refused with %v", len(evs), evs[0].Refused)
		}
		if st, err := cl.Get(ctx, run); err == nil && (st.GraphDigest != "" || st.Status != "") {
			t.Fatalf("the attacker's run %s reads as a run: %s of %s", run, st.Status, st.GraphDigest)
		}
	}
	victimRun := func(g *graph.Graph) {
		t.Helper()
		run, err := cl.Start(ctx, g)
		if err != nil {
			t.Fatal(err)
		}
		st := waitRun(t, ctx, cl, run, "the victim's run ends", ended)
		if st.Status != projection.RunCompleted || st.GraphDigest != g.Digest() || string(st.Vars["who"]) != `"victim"` {
			t.Fatalf("the victim's run %s: %s, digest %s, who %s (want the victim's graph)", run, st.Status, st.GraphDigest, st.Vars["who"])
		}
	}

	t.Run("attacker first", func(t *testing.T) {
		victim := whoGraph(t, "pay-first", "victim")
		attack := poison(victim)
		time.Sleep(time.Second) // time for the coordinator and worker to act on it
		victimRun(victim)
		victimRun(victim)
		refused(attack)
	})
	t.Run("victim first", func(t *testing.T) {
		victim := whoGraph(t, "pay-second", "victim")
		victimRun(victim) // its graph is now in both caches
		refused(poison(victim))
		victimRun(victim)
	})
	if _, err := eventlog.Encode(mustEvent(t, whoGraph(t, "gx", "attacker"), whoGraph(t, "gy", "victim"))); err == nil {
		t.Error("the encoder wrote a start under another graph's digest")
	}
	testkit.CheckNoViolations(t, dir)
}

func mustEvent(t *testing.T, body, digestOf *graph.Graph) *events.Event {
	t.Helper()
	run := events.NewRunID()
	e, err := events.New(run, run, time.Time{}, &events.RunStartedData{GraphName: "g", GraphDigest: digestOf.Digest(), Graph: body.Canonical()})
	if err != nil {
		t.Fatal(err)
	}
	return e
}
