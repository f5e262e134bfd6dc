package graph

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Sentinel errors. Every problem found while loading or validating a graph
// is an *Error that matches ErrInvalidGraph under errors.Is; several
// problems are joined with errors.Join so all of them are reported at once.
var (
	// ErrInvalidGraph marks a graph file or Definition that cannot be run.
	ErrInvalidGraph = errors.New("invalid graph")
	// ErrEvaluation marks a condition, when or map expression that failed at
	// run time: a missing key, a wrong type, or the cost limit exceeded.
	ErrEvaluation = errors.New("expression evaluation failed")
	// ErrUnknownNode is returned when a node id or edge index is not in the
	// graph.
	ErrUnknownNode = errors.New("unknown node or edge")
)

// Error is one problem in a graph, located by the file, the subgraph, the
// node or edge, and the field it was found in.
type Error struct {
	Source string // the file (or other name) the graph was read from; may be empty
	Graph  string // the nested graph's name path ("child/grandchild"); empty for the top level
	Node   string // the node id; empty if the problem is not in a node
	Edge   int    // the edge index (0-based, definition order; messages say it 1-based); -1 if the problem is not in an edge
	From   string // the edge's source, when Edge ≥ 0
	To     string // the edge's target, when Edge ≥ 0
	Field  string // the JSON field name ("timeout", "retry.jitter"); may be empty
	Line   int    // the 1-based line in the source where the problem is; 0 if not known
	Column int    // the 1-based column on Line; 0 if not known
	Msg    string
}

// Error formats the problem as
//
//	examples/x.yaml: line 7, column 14: node "fetch": field "timeout": malformed duration "3 sec" (want e.g. "250ms", "30s", "1m")
//
// The line and column are those of the source file, when it was parsed
// from one.
// Edges are numbered from 1 in definition order, as a reader counts them
// in the file.
func (e *Error) Error() string {
	var b strings.Builder
	if e.Source != "" {
		b.WriteString(e.Source)
		b.WriteString(": ")
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, "line %d, column %d: ", e.Line, e.Column)
	}
	if e.Graph != "" {
		fmt.Fprintf(&b, "graph %q: ", e.Graph)
	}
	if e.Node != "" {
		fmt.Fprintf(&b, "node %q: ", e.Node)
	}
	if e.Edge >= 0 {
		fmt.Fprintf(&b, "edge %d (%s -> %s): ", e.Edge+1, orQ(e.From), orQ(e.To))
	}
	if e.Field != "" {
		fmt.Fprintf(&b, "field %q: ", e.Field)
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Is reports whether target is ErrInvalidGraph.
func (e *Error) Is(target error) bool { return target == ErrInvalidGraph }

func orQ(s string) string {
	if s == "" {
		return `""`
	}
	return s
}

// problems collects located errors while a graph is decoded or validated.
type problems struct {
	source string
	graph  string
	errs   []error
}

func (p *problems) add(e Error) {
	e.Source, e.Graph = p.source, p.graph
	p.errs = append(p.errs, &e)
}

func (p *problems) top(field, format string, args ...any) {
	p.add(Error{Edge: -1, Field: field, Msg: fmt.Sprintf(format, args...)})
}

func (p *problems) node(id, field, format string, args ...any) {
	p.add(Error{Node: id, Edge: -1, Field: field, Msg: fmt.Sprintf(format, args...)})
}

func (p *problems) edge(i int, e *Edge, field, format string, args ...any) {
	p.add(Error{Edge: i, From: e.From, To: e.To, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// sub returns a collector for the nested graph name that appends to p.
func (p *problems) sub(name string) *problems {
	g := name
	if p.graph != "" {
		g = p.graph + "/" + name
	}
	return &problems{source: p.source, graph: g}
}

func (p *problems) merge(q *problems) { p.errs = append(p.errs, q.errs...) }

func (p *problems) err() error { return errors.Join(p.errs...) }

// structuralField matches the fields of a node whose id is unknown.
var structuralField = regexp.MustCompile(`^nodes\[\d+\](\.id)?$`)

// structural reports whether a problem found so far is in the graph's
// shape: the document, its nodes, edges or graphs as a whole, a node object
// or id, an edge object or its ends.
func (p *problems) structural() bool {
	for _, err := range p.errs {
		e, ok := err.(*Error)
		switch {
		case !ok:
			return true
		case e.Edge >= 0:
			if e.Field == "" || e.Field == "from" || e.Field == "to" {
				return true
			}
		case e.Node != "":
			if e.Field == "id" {
				return true
			}
		case e.Field == "" || e.Field == "nodes" || e.Field == "edges" || strings.HasPrefix(e.Field, "graphs") || structuralField.MatchString(e.Field):
			return true
		}
	}
	return false
}

// addUnlessEcho adds the problems of err, a later pass's, but those at a
// place (a field, or within it) p already holds a problem for: a value that
// did not decode is left zero, and what a later pass says of the zero
// echoes the first problem.
func (p *problems) addUnlessEcho(err error) {
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else if err != nil {
		errs = []error{err}
	}
	for _, err := range errs {
		e, ok := err.(*Error)
		if ok && slices.ContainsFunc(p.errs, func(f error) bool { return within(e, f) }) {
			continue
		}
		p.errs = append(p.errs, err)
	}
}

// within reports whether e is at f's place or inside it.
func within(e *Error, f error) bool {
	g, ok := f.(*Error)
	if !ok || e.Graph != g.Graph || e.Node != g.Node || e.Edge != g.Edge {
		return false
	}
	return e.Field == g.Field || strings.HasPrefix(e.Field, g.Field+".") || strings.HasPrefix(e.Field, g.Field+"[")
}
