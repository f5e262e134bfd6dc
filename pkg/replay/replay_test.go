package replay_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
	"github.com/weft-dev/weft/pkg/replay"
)

// The recorded histories of package projection: real runs on JetStream.
func histories(t *testing.T) map[string][]*events.Event {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("..", "projection", "testdata", "histories", "*.jsonl"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no recorded histories (%v)", err)
	}
	out := map[string][]*events.Event{}
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		var evs []*events.Event
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var e events.Event
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			evs = append(evs, &e)
		}
		f.Close()
		out[strings.TrimSuffix(filepath.Base(p), ".jsonl")] = evs
	}
	return out
}

func runGraph(t *testing.T, evs []*events.Event) *graph.Graph {
	t.Helper()
	st := projection.Fold(evs[:1])
	g, err := graph.Parse(st.Graph, "recorded", graph.AllowAnyType())
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// Every recorded run replays cleanly on its own graph: the check finds no
// difference where there is none.
func TestRecordedRunsReplayOnTheirGraph(t *testing.T) {
	for name, evs := range histories(t) {
		t.Run(name, func(t *testing.T) {
			r := replay.Check(t, runGraph(t, evs), evs)
			if r.Decisions == 0 || r.Events != len(evs) {
				t.Errorf("replayed %d events, %d decisions; want all %d events and some decisions", r.Events, r.Decisions, len(evs))
			}
		})
	}
}

// recorder collects what Check reports.
type recorder struct{ errs []string }

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// A graph whose changed condition routes the recorded run elsewhere is
// caught at the routing, with both sides shown.
func TestChangedGraphIsCaughtAtFirstDifference(t *testing.T) {
	evs := histories(t)["hello"]
	var def map[string]any
	if err := json.Unmarshal(projection.Fold(evs[:1]).Graph, &def); err != nil {
		t.Fatal(err)
	}
	// A new node between greet and shout: greet's routing goes elsewhere.
	def["nodes"] = append(def["nodes"].([]any), map[string]any{"id": "audit", "type": "echo"})
	edges := def["edges"].([]any)
	for _, e := range edges {
		e := e.(map[string]any)
		if e["from"] == "greet" {
			e["to"] = "audit"
		}
	}
	def["edges"] = append(edges, map[string]any{"from": "audit", "to": "shout"})
	raw, _ := json.Marshal(def)
	g, err := graph.Parse(raw, "changed.json", graph.AllowAnyType())
	if err != nil {
		t.Fatal(err)
	}
	var rec recorder
	r := replay.Check(&rec, g, evs)
	if r.OK() || len(rec.errs) != 1 {
		t.Fatalf("the changed graph replays cleanly (%d errors reported)", len(rec.errs))
	}
	d := r.Diff
	at := evs[d.Position-1]
	if !strings.Contains(d.Recorded, "greet/1 -> shout") || !strings.Contains(strings.Join(d.Decided, "\n"), "greet/1 -> audit") {
		t.Errorf("difference at %d (%s): recorded %q, decided %q; want greet's routing to shout vs to audit", d.Position, at.Type, d.Recorded, d.Decided)
	}
	for i := range d.Position - 1 {
		if evs[i].IsDecision() && strings.Contains(string(evs[i].Data), `"greet"`) && evs[i].Type == events.NodeRouted {
			t.Errorf("an earlier event %d already routes greet; the difference is reported late", i+1)
		}
	}
	wantIn := []string{"does not replay", "recorded:", "decided:", "greet/1 -> audit"}
	for _, w := range wantIn {
		if !strings.Contains(rec.errs[0], w) {
			t.Errorf("report lacks %q:\n%s", w, rec.errs[0])
		}
	}
}

// A changed node type keeps every routing but changes the work item: the
// difference is the data, field by field.
func TestChangedDataShowsChangedFields(t *testing.T) {
	evs := histories(t)["hello"]
	var def map[string]any
	_ = json.Unmarshal(projection.Fold(evs[:1]).Graph, &def)
	for _, n := range def["nodes"].([]any) {
		n := n.(map[string]any)
		if n["id"] == "shout" {
			n["queue"] = "gpu"
		}
	}
	raw, _ := json.Marshal(def)
	g, err := graph.Parse(raw, "changed.json", graph.AllowAnyType())
	if err != nil {
		t.Fatal(err)
	}
	r := replay.Run(g, evs)
	if r.OK() {
		t.Fatal("a changed queue replays cleanly")
	}
	found := false
	for _, c := range r.Diff.Changes {
		if c.Path == "/queue" && string(c.Before) == `"default"` && string(c.After) == `"gpu"` {
			found = true
		}
	}
	if !found {
		t.Errorf("changes %+v lack /queue default -> gpu\n%s", r.Diff.Changes, r.Diff)
	}
}

// For a run still going, what comes next is compared too: a graph that
// agrees with every recorded decision but would route the run elsewhere
// from here differs after the last event.
func TestRunningRunComparesTheNextDecisions(t *testing.T) {
	all := histories(t)["hello"]
	var upto int
	for i, e := range all {
		if e.Type == events.NodeInvoked && e.NodeID == "greet" {
			upto = i + 1
		}
	}
	evs := all[:upto]
	if r := replay.Run(runGraph(t, evs), evs); !r.OK() {
		t.Fatalf("the running run on its own graph: %s", r.Diff)
	}
	var def map[string]any
	_ = json.Unmarshal(projection.Fold(evs[:1]).Graph, &def)
	def["nodes"] = append(def["nodes"].([]any), map[string]any{"id": "audit", "type": "echo"})
	for _, e := range def["edges"].([]any) {
		if e := e.(map[string]any); e["from"] == "greet" {
			e["to"] = "audit"
		}
	}
	def["edges"] = append(def["edges"].([]any), map[string]any{"from": "audit", "to": "shout"})
	raw, _ := json.Marshal(def)
	g, err := graph.Parse(raw, "changed.json", graph.AllowAnyType())
	if err != nil {
		t.Fatal(err)
	}
	r := replay.Run(g, evs)
	if r.OK() || r.Diff.Position != len(evs)+1 || !strings.Contains(r.Diff.Recorded, "greet/1 -> shout") || !strings.Contains(strings.Join(r.Diff.Decided, ";"), "greet/1 -> audit") {
		t.Fatalf("want a difference after the last event, shout vs audit; got %+v", r.Diff)
	}
}

// A decision recorded twice (the second copy stale, as around a
// coordinator takeover) is not a difference.
func TestStaleDuplicateDecisionIsNotADifference(t *testing.T) {
	evs := histories(t)["hello"]
	var dup []*events.Event
	for _, e := range evs {
		dup = append(dup, e)
		if e.Type == events.NodeReady && e.NodeID == "shout" {
			c := *e
			c.ID += "-again"
			dup = append(dup, &c)
		}
	}
	for i, e := range dup {
		c := *e
		c.Seq = uint64(i + 1)
		dup[i] = &c
	}
	if r := replay.Check(t, runGraph(t, dup), dup); r.Events != len(evs)+1 {
		t.Errorf("replayed %d events, want %d", r.Events, len(evs)+1)
	}
}
