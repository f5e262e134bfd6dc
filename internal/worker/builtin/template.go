package builtin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"text/template"
	"text/template/parse"

	"github.com/weft-dev/weft/internal/nodeconfig"
	"github.com/weft-dev/weft/internal/worker"
)

// FailureTemplateLimit is the failure type of a template that went past one
// of its limits. It is not retryable: the same template over the same
// state would go past it again.
const FailureTemplateLimit = "TemplateLimit"

// Template limits. Go's text/template cannot be interrupted once it runs,
// so its work is bounded by construction: the source is capped, so is the
// output (a writer that fails past the cap aborts execution), every
// iteration of every range (over a list, a map or an integer, which
// templates may range over since Go 1.22) counts against a budget and
// checks the node's context, printf refuses widths and precisions that
// would build huge strings, and templates may not define or call other
// templates (no recursion).
const (
	DefaultTemplateMaxSource     = 64 << 10
	DefaultTemplateMaxOutput     = 1 << 20
	DefaultTemplateMaxIterations = 100_000
	// maxCachedTemplates caps the cache of parsed templates; past it,
	// templates are parsed on every use.
	maxCachedTemplates = 1024
)

// TemplateLimits bound one template's execution; zero fields take the
// defaults.
type TemplateLimits struct {
	MaxSource     int // bytes of template text
	MaxOutput     int // bytes of output
	MaxIterations int // range iterations, all ranges together
}

func (l TemplateLimits) withDefaults() TemplateLimits {
	if l.MaxSource <= 0 {
		l.MaxSource = DefaultTemplateMaxSource
	}
	if l.MaxOutput <= 0 {
		l.MaxOutput = DefaultTemplateMaxOutput
	}
	if l.MaxIterations <= 0 {
		l.MaxIterations = DefaultTemplateMaxIterations
	}
	return l
}

// templates caches parsed and instrumented templates by text.
var (
	templates     sync.Map // name + "\x00" + text → *template.Template
	templateCount atomic.Int64
)

// limitError marks an execution that went past a limit.
type limitError struct{ msg string }

func (e *limitError) Error() string { return e.msg }

// parseTemplate parses text (by the rules graph validation also applies,
// package nodeconfig) and instruments its ranges, or says why not.
func parseTemplate(name, text string) (*template.Template, error) {
	key := name + "\x00" + text
	if v, ok := templates.Load(key); ok {
		return v.(*template.Template), nil
	}
	t, err := nodeconfig.ParseTemplate(name, text)
	if err != nil {
		return nil, err
	}
	tick, err := template.New("tick").Funcs(nodeconfig.Funcs()).Parse("{{" + nodeconfig.TickFunc + "}}")
	if err != nil {
		return nil, err
	}
	instrument(t.Tree.Root, tick.Tree.Root.Nodes[0])
	if templateCount.Load() < maxCachedTemplates {
		if _, loaded := templates.LoadOrStore(key, t); !loaded {
			templateCount.Add(1)
		}
	}
	return t, nil
}

// instrument puts the tick action first in the body of every range.
func instrument(n parse.Node, tick parse.Node) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			instrument(c, tick)
		}
	case *parse.RangeNode:
		instrument(n.List, tick)
		instrument(n.ElseList, tick)
		n.List.Nodes = append([]parse.Node{tick}, n.List.Nodes...)
	case *parse.IfNode:
		instrument(n.List, tick)
		instrument(n.ElseList, tick)
	case *parse.WithNode:
		instrument(n.List, tick)
		instrument(n.ElseList, tick)
	}
}

// render executes a template over data within limits and ctx.
func render(ctx context.Context, in *worker.Input, name, text string, data any, limits TemplateLimits) (string, error) {
	l := limits.withDefaults()
	if len(text) > l.MaxSource {
		return "", worker.NonRetryable(FailureTemplateLimit, fmt.Sprintf("%s node %q: %s: the template is %d bytes, the limit is %d", in.Type, in.NodeID, name, len(text), l.MaxSource))
	}
	t, err := parseTemplate(name, text)
	if err != nil {
		return "", configError(in, fmt.Sprintf("%s: %v", name, err))
	}
	t, err = t.Clone()
	if err != nil {
		return "", configError(in, fmt.Sprintf("%s: %v", name, err))
	}
	iterations := 0
	t.Funcs(template.FuncMap{nodeconfig.TickFunc: func() (string, error) {
		iterations++
		if iterations > l.MaxIterations {
			return "", &limitError{fmt.Sprintf("more than %d range iterations", l.MaxIterations)}
		}
		if err := ctx.Err(); err != nil {
			return "", err
		}
		return "", nil
	}})
	w := &cappedWriter{max: l.MaxOutput}
	err = t.Execute(w, data)
	var le *limitError
	switch {
	case err == nil:
		return w.b.String(), nil
	case w.over:
		return "", worker.NonRetryable(FailureTemplateLimit, fmt.Sprintf("%s node %q: %s: the output passes the %d-byte limit", in.Type, in.NodeID, name, l.MaxOutput))
	case errors.As(err, &le):
		return "", worker.NonRetryable(FailureTemplateLimit, fmt.Sprintf("%s node %q: %s: %s", in.Type, in.NodeID, name, le.msg))
	case ctx.Err() != nil:
		return "", ctx.Err()
	}
	return "", configError(in, fmt.Sprintf("%s: %v", name, err))
}

// cappedWriter fails a write that would pass max bytes.
type cappedWriter struct {
	b    strings.Builder
	max  int
	over bool
}

var errOutputLimit = errors.New("template output limit")

func (w *cappedWriter) Write(p []byte) (int, error) {
	if w.b.Len()+len(p) > w.max {
		w.over = true
		return 0, errOutputLimit
	}
	return w.b.Write(p)
}
