package graph

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	wexpr "github.com/weft-dev/weft/internal/expr"
	"github.com/weft-dev/weft/internal/graphrt"
)

// A wait node (type wait) waits for a duration, or until a time, on a
// durable timer of the coordinator: no worker runs it, and it ends once,
// whatever restarts meanwhile (see the package doc). Its config is one
// of:
//
//	duration  a Go duration string ("90s", "72h"), ≥ 0
//	until     a CEL expression giving a timestamp or an RFC 3339 string,
//	          evaluated when the node is activated, over state, output
//	          (the predecessor's), invocation and local
//
// until's value is parsed at activation; a value that is not a time fails
// the run there, naming the node and the value. An expression that reads
// no variable is evaluated, and so checked, when the graph is loaded.
type waitConfig struct {
	Duration *Duration `json:"duration"`
	Until    string    `json:"until"`
}

// timeExpr is the kind of a wait node's until.
const timeExpr = wexpr.Time

// waitTimeLayout is the form an until value is read in: RFC 3339, with or
// without fractions of a second.
const waitTimeLayout = time.RFC3339Nano

// checkWait checks a wait node's config (its fields decoded already).
func checkWait(c any, failed map[string]bool, o *options, bad badFunc) {
	cfg := c.(*waitConfig)
	hasDur := cfg.Duration != nil || failed["duration"]
	hasUntil := strings.TrimSpace(cfg.Until) != "" || failed["until"]
	switch {
	case hasDur && hasUntil:
		bad("config", `a wait node waits for a duration or until a time: give "duration" or "until", not both`)
	case !hasDur && !hasUntil:
		bad("config", `a wait node needs "duration" (a Go duration such as "72h") or "until" (CEL giving a timestamp or an RFC 3339 string, such as "state.deadline")`)
	case cfg.Duration != nil && *cfg.Duration < 0:
		bad("config.duration", "must not be negative, got %s", cfg.Duration.D())
	case hasUntil && !failed["until"]:
		if _, msg := compileUntil(cfg.Until, o); msg != "" {
			bad("config.until", "%s", msg)
		}
	}
}

// compileUntil compiles a wait node's until; an expression that reads no
// variable is evaluated now, so that a time that does not parse is a
// load error rather than a run's failure.
func compileUntil(src string, o *options) (*expr, string) {
	x, msg := compileExpr(src, timeExpr, o)
	if msg != "" {
		return nil, msg
	}
	if x.fn != nil {
		return nil, "until must be a CEL expression, not a Go condition"
	}
	if x.prog.Constant() {
		if _, err := x.evalTime(graphrt.Env{}); err != nil {
			return nil, err.Error()
		}
	}
	return x, ""
}

// compileWait compiles a wait node's until into g; its problems are
// reported by checkWait.
func compileWait(g *Graph, n *Node, o *options) {
	var cfg struct {
		Until string `json:"until"`
	}
	if json.Unmarshal(n.Config, &cfg) != nil || strings.TrimSpace(cfg.Until) == "" || n.ID == "" {
		return
	}
	if x, msg := compileUntil(cfg.Until, o); msg == "" {
		g.waitFor[n.ID] = x
	}
}

// evalTime evaluates an until expression to a time.
func (x *expr) evalTime(env graphrt.Env) (time.Time, error) {
	v, err := x.prog.Eval(context.Background(), vars(env))
	if err != nil {
		return time.Time{}, err
	}
	s, _ := v.(string)
	t, err := time.Parse(waitTimeLayout, strings.TrimSpace(s))
	if err != nil {
		return time.Time{}, fmt.Errorf("CEL %q gave %q, which is not an RFC 3339 time (such as \"2026-12-01T09:00:00Z\")", x.src, truncateStr(s, 64))
	}
	return t.UTC(), nil
}

// waitUntil is when a wait node activated at now ends: now plus its
// duration, or its until evaluated over env.
func (g *Graph) waitUntil(node string, env graphrt.Env, now time.Time) (time.Time, error) {
	n, ok := g.Node(node)
	if !ok {
		return time.Time{}, fmt.Errorf("%w: node %q", ErrUnknownNode, node)
	}
	if n.Type != TypeWait {
		return time.Time{}, fmt.Errorf("%w: node %q is a %s node, not a wait node", ErrEvaluation, node, n.Type)
	}
	if x := g.waitFor[node]; x != nil {
		t, err := x.evalTime(env)
		if m, missing := wexpr.IsMissingKey(err); missing {
			return time.Time{}, fmt.Errorf("%w: node %q: config.until: %v: %s", ErrEvaluation, node, m, m.Fix())
		}
		if err != nil {
			return time.Time{}, fmt.Errorf("%w: node %q: config.until: %w", ErrEvaluation, node, err)
		}
		return t, nil
	}
	var cfg waitConfig
	if err := json.Unmarshal(n.Config, &cfg); err != nil || cfg.Duration == nil {
		return time.Time{}, fmt.Errorf("%w: node %q: config: neither a duration nor an until", ErrEvaluation, node)
	}
	return now.Add(cfg.Duration.D()), nil
}

func truncateStr(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
