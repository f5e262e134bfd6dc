package graph

import (
	"strings"
	"testing"
)

// A map node takes a rate limit (each item takes a turn of it); its load
// errors are the same as any node's, each located at the node's line and
// field.
func TestMapRateValidation(t *testing.T) {
	tests := []struct {
		name, rate string
		want       string // "" when valid
	}{
		{"valid", `rate: {limit: 10, per: 1s}`, ""},
		{"valid, keyed by item, with units", `rate: {limit: 100, per: 1m, key: "local.item.tenant", units: "local.index + 1"}`, ""},
		{"limit zero", `rate: {limit: 0, per: 1s}`, `node "m": field "rate.limit": must be at least 1, got 0`},
		{"per zero", `rate: {limit: 1, per: 0s}`, `node "m": field "rate.per": must be at least 1ms`},
		{"key does not compile", `rate: {limit: 1, per: 1s, key: "local.item.("}`, `node "m": field "rate.key": CEL "local.item.("`},
		{"key not a string", `rate: {limit: 1, per: 1s, key: "1 + 2"}`, `node "m": field "rate.key": CEL "1 + 2": want a string`},
		{"units not a number", `rate: {limit: 1, per: 1s, units: "'x'"}`, `node "m": field "rate.units"`},
		{"with a concurrency limit", `rate: {limit: 1, per: 1s}, concurrency: {max: 1}`, `node "m": field "rate": a node with a concurrency limit cannot have a rate limit too, yet`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "name: t\nnodes:\n  - {id: m, type: echo, map: {over: \"state.items\"}, " + tt.rate + "}\nedges: [{from: START, to: m}, {from: m, to: END}]\n"
			g, err := Parse([]byte(src), "x.yaml")
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.want == "":
				if m, _ := g.Node("m"); m.Rate == nil || RateName(g.Definition(), m) != "t/m" {
					t.Fatalf("the map node's rate limit: %+v", m.Rate)
				}
			case err == nil:
				t.Fatalf("no error, want %q", tt.want)
			case !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "x.yaml: line 3"):
				t.Fatalf("error %q, want it located at line 3 and to contain %q", err, tt.want)
			}
		})
	}
}
