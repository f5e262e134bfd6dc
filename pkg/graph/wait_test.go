package graph

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/graphrt"
)

func waitGraph(cfg string) string {
	return "name: w\nnodes:\n  - {id: w, type: wait, config: " + cfg + "}\nedges: [{from: START, to: w}, {from: w, to: END}]\n"
}

// A wait node's config is checked at load, each problem located; an until
// that reads nothing is evaluated then, so a constant that is not a time
// never reaches a run.
func TestWaitConfig(t *testing.T) {
	for _, tc := range []struct {
		name, cfg, wantErr string
	}{
		{"duration", "{duration: 72h}", ""},
		{"zero duration", "{duration: 0s}", ""},
		{"until over state", `{until: "state.deadline"}`, ""},
		{"until a timestamp", `{until: "timestamp(invocation.due) + duration('1h')"}`, ""},
		{"constant time", `{until: "'2026-12-01T09:00:00Z'"}`, ""},
		{"neither", "{}", `field "config": a wait node needs "duration"`},
		{"no config", "null", `field "config": a wait node needs "duration"`},
		{"both", `{duration: 1h, until: "state.x"}`, `not both`},
		{"negative", "{duration: -1s}", `field "config.duration"`},
		{"a number", "{duration: 5}", `field "config.duration": want a duration string`},
		{"unknown field", `{until: "state.x", at: 1}`, `field "config.at": unknown field`},
		{"constant not a time", `{until: "'next tuesday'"}`, `field "config.until": CEL "'next tuesday'" gave "next tuesday", which is not an RFC 3339 time`},
		{"not a time type", `{until: "12"}`, `field "config.until": CEL "12": want a timestamp or an RFC 3339 string, expression gives int`},
		{"bad CEL", `{until: "state.("}`, `field "config.until": CEL`},
		{"go function", `{until: "func:x"}`, `field "config.until"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(waitGraph(tc.cfg)), "w.yaml")
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !errors.Is(err, ErrInvalidGraph) || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v; want one with %q", err, tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), `node "w"`):
				t.Fatalf("error %v does not name the node", err)
			}
		})
	}
	for _, tc := range []struct{ name, src, want string }{
		{"map", "name: w\nnodes:\n  - {id: w, type: wait, config: {duration: 1s}, map: {over: 'state.xs'}}\nedges: [{from: START, to: w}, {from: w, to: END}]\n", `field "map"`},
		{"local", "name: w\nnodes:\n  - {id: w, type: wait, local: false, config: {duration: 1s}}\nedges: [{from: START, to: w}, {from: w, to: END}]\n", `field "local"`},
		{"concurrency", "name: w\nnodes:\n  - {id: w, type: wait, concurrency: {max: 1}, config: {duration: 1s}}\nedges: [{from: START, to: w}, {from: w, to: END}]\n", `field "concurrency"`},
	} {
		if _, err := Parse([]byte(tc.src), "w.yaml"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v; want one with %q", tc.name, err, tc.want)
		}
	}
}

// WaitUntil: a duration counts from the activation; an until is read as
// RFC 3339, with fractions or not; what is not a time is an error naming
// the node and the value.
func TestWaitUntil(t *testing.T) {
	now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	eval := func(cfg string, state map[string]any) (time.Time, error) {
		t.Helper()
		g, err := Parse([]byte(waitGraph(cfg)), "w.yaml")
		if err != nil {
			t.Fatal(err)
		}
		return graphrt.Of(g).WaitUntil("w", graphrt.Env{State: state}, now)
	}
	if at, err := eval("{duration: 90m}", nil); err != nil || !at.Equal(now.Add(90*time.Minute)) {
		t.Errorf("duration: %s, %v", at, err)
	}
	if at, err := eval(`{until: "state.d"}`, map[string]any{"d": "2026-11-28T09:30:00.5+01:00"}); err != nil || !at.Equal(time.Date(2026, 11, 28, 8, 30, 0, 5e8, time.UTC)) {
		t.Errorf("until: %s, %v", at, err)
	}
	if at, err := eval(`{until: "timestamp(state.d) - duration('1h')"}`, map[string]any{"d": "2026-11-28T09:00:00Z"}); err != nil || !at.Equal(time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)) {
		t.Errorf("until a timestamp: %s, %v", at, err)
	}
	for _, bad := range []map[string]any{{"d": "tomorrow"}, {"d": 12.0}, {"d": true}, {}} {
		if _, err := eval(`{until: "state.d"}`, bad); err == nil || !errors.Is(err, ErrEvaluation) || !strings.Contains(err.Error(), `node "w": config.until`) {
			t.Errorf("until %v: %v; want an evaluation error naming the node and field", bad, err)
		}
	}
}

// SignalExample: from the human node's schema, typed; without one, the
// keys its conditions read, with ... to fill in.
func TestSignalExample(t *testing.T) {
	src := `
name: s
nodes:
  - id: typed
    type: human
    outputSchema: {type: object, required: [approved, note, level], properties: {approved: {type: boolean}, note: {type: string}, level: {enum: [low, "it's high"]}, extra: {type: number}}}
  - id: open
    type: human
  - id: none
    type: human
edges:
  - {from: START, to: typed}
  - {from: typed, to: open}
  - {from: open, to: none, when: "output.approved == true && has(output.reviewer)"}
  - {from: open, to: END, when: "!output.approved"}
  - {from: none, to: END}
`
	g, err := Parse([]byte(src), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for node, want := range map[string]string{
		"typed": `{"approved": true, "note": "", "level": "low"}`,
		"open":  `{"approved": ..., "reviewer": ...}`,
		"none":  `{}`,
		"nope":  `{}`,
	} {
		if got := SignalExample(g.Definition(), node); got != want {
			t.Errorf("%s: %s, want %s", node, got, want)
		}
	}
}
