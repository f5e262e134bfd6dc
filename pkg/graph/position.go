package graph

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	yaml3 "go.yaml.in/yaml/v3"
)

// Where a problem is in the source. The YAML library that converts a graph
// to JSON (yaml.v2, under sigs.k8s.io/yaml) gives a syntax error's line
// only, and for parser errors that line is 0-based: one line early. So the
// line is corrected here, the column is found from the source line, and the
// problems found after conversion (a duplicated key, a wrong type, an
// unknown field or node type) are placed by walking a yaml.v3 node tree of
// the same source, which keeps every key's and value's line and column.

// yamlErrLine matches "line 4: did not find expected key".
var yamlErrLine = regexp.MustCompile(`^line (\d+): (.*)$`)

// parserProblems are the yaml.v2 parser's messages, whose line is the
// 0-based line of the token it did not expect; the scanner's are 1-based.
var parserProblems = []string{
	"did not find expected key",
	"did not find expected '-' indicator",
	"did not find expected node content",
	"did not find expected ',' or ']'",
	"did not find expected ',' or '}'",
	"did not find expected <document start>",
}

// yamlSyntaxError reports a YAML syntax error at the line and column a
// person would point at.
func yamlSyntaxError(data []byte, err error, p *problems) {
	msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
	msg = strings.TrimPrefix(msg, "yaml: ")
	line := 0
	if m := yamlErrLine.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
		for _, pp := range parserProblems {
			if msg == pp {
				line++
			}
		}
	}
	lines := bytes.Split(data, []byte("\n"))
	line = min(max(line, 1), len(lines))
	line, col, hint := syntaxColumn(lines, line, msg, data)
	p.add(Error{Edge: -1, Line: line, Column: col, Msg: "invalid YAML: " + msg + hint})
}

// syntaxColumn finds the position on the given 1-based line that msg is
// about, with a hint to add to msg: an unclosed quote or bracket moves the
// position to where it opens.
func syntaxColumn(lines [][]byte, line int, msg string, data []byte) (int, int, string) {
	text := lines[line-1]
	switch {
	case strings.HasPrefix(msg, "found unexpected end of stream"), strings.HasPrefix(msg, "found unexpected document indicator"):
		if off := unclosedQuote(data); off >= 0 {
			l, c := position(data, int64(off)+1)
			return l, c, fmt.Sprintf(" (the %c here is never closed)", data[off])
		}
	case strings.HasPrefix(msg, "did not find expected ',' or"), msg == "did not find expected node content" && line == len(lines):
		if off := unclosedFlow(data); off >= 0 {
			l, c := position(data, int64(off)+1)
			return l, c, fmt.Sprintf(" (the %c here is never closed)", data[off])
		}
	case strings.Contains(msg, "cannot start any token"):
		if i := bytes.IndexAny(text, "\t@`"); i >= 0 && text[i] == '\t' {
			return line, i + 1, " (YAML indents with spaces, not tabs)"
		} else if i >= 0 {
			return line, i + 1, ""
		}
	case strings.HasPrefix(msg, "mapping values are not allowed"):
		if i := lastColon(text); i >= 0 {
			return line, i + 1, ""
		}
	}
	return line, firstNonBlank(text) + 1, ""
}

// lastColon is the index of the last ':' in text that ends a key (followed
// by a blank or the line's end), or -1.
func lastColon(text []byte) int {
	text = bytes.TrimRight(text, " \r")
	for i := len(text) - 1; i >= 0; i-- {
		if text[i] == ':' && (i == len(text)-1 || text[i+1] == ' ' || text[i+1] == '\t') {
			return i
		}
	}
	return -1
}

func firstNonBlank(text []byte) int {
	for i, c := range text {
		if c != ' ' && c != '\t' {
			return i
		}
	}
	return 0
}

// unclosedQuote is the offset of the quote that opens a scalar and is never
// closed, or -1. A quote opens a scalar only where a scalar can start (after
// the line's indentation, ':', '-', ',', '[', '{' or '?'), so an apostrophe
// inside a plain word is not taken for one.
func unclosedQuote(data []byte) int {
	prev := byte('\n') // the last non-blank byte outside quotes
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch {
		case startsComment(data, i):
			i = lineEnd(data, i) - 1 // the newline sets prev
		case (c == '"' || c == '\'') && strings.IndexByte("\n:-,[{?", prev) >= 0:
			end := quoteEnd(data, i+1, c)
			if end < 0 {
				return i
			}
			i, prev = end, c
		case c != ' ' && c != '\t':
			prev = c
		}
	}
	return -1
}

// unclosedFlow is the offset of the '[' or '{' that opens a flow
// collection never closed, or -1; quotes and comments are skipped.
func unclosedFlow(data []byte) int {
	var open []int
	for i := 0; i < len(data); i++ {
		switch c := data[i]; {
		case startsComment(data, i):
			i = lineEnd(data, i)
		case c == '"' || c == '\'':
			if end := quoteEnd(data, i+1, c); end >= 0 {
				i = end
			}
		case c == '[' || c == '{':
			open = append(open, i)
		case (c == ']' || c == '}') && len(open) > 0:
			open = open[:len(open)-1]
		}
	}
	if len(open) == 0 {
		return -1
	}
	return open[0]
}

// startsComment reports whether a '#' at i starts a comment: at the
// line's start or after a blank.
func startsComment(data []byte, i int) bool {
	return data[i] == '#' && (i == 0 || data[i-1] == ' ' || data[i-1] == '\t' || data[i-1] == '\n')
}

// lineEnd is the offset of the newline ending the line at i, or len(data).
func lineEnd(data []byte, i int) int {
	if j := bytes.IndexByte(data[i:], '\n'); j >= 0 {
		return i + j
	}
	return len(data)
}

// quoteEnd is the offset of the quote that closes a scalar opened by quote
// just before from, or -1.
func quoteEnd(data []byte, from int, quote byte) int {
	for i := from; i < len(data); i++ {
		switch {
		case quote == '"' && data[i] == '\\':
			i++
		case data[i] != quote:
		case quote == '\'' && i+1 < len(data) && data[i+1] == '\'':
			i++ // '' is an escaped quote
		default:
			return i
		}
	}
	return -1
}

// yamlTree parses the source into a node tree for locating problems, or
// gives nil when it does not parse (yaml.v3 is stricter in places than
// yaml.v2, which decided that the source is valid).
func yamlTree(data []byte) (root *yaml3.Node) {
	defer func() {
		if recover() != nil {
			root = nil
		}
	}()
	var doc yaml3.Node
	if yaml3.Unmarshal(data, &doc) != nil || doc.Kind != yaml3.DocumentNode || len(doc.Content) == 0 {
		return nil
	}
	return doc.Content[0]
}

// duplicateKeys reports each mapping key that is given twice: YAML to JSON
// keeps the last silently, so the first would be ignored without a word.
func duplicateKeys(n *yaml3.Node, path string, p *problems) {
	switch n.Kind {
	case yaml3.MappingNode:
		first := map[string]*yaml3.Node{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			field := joinPath(path, k.Value)
			if f, dup := first[k.Value]; dup {
				p.add(Error{Edge: -1, Field: field, Line: k.Line, Column: k.Column,
					Msg: fmt.Sprintf("duplicate key (first given at line %d, column %d)", f.Line, f.Column)})
			} else {
				first[k.Value] = k
			}
			duplicateKeys(v, field, p)
		}
	case yaml3.SequenceNode:
		for i, item := range n.Content {
			duplicateKeys(item, fmt.Sprintf("%s[%d]", path, i), p)
		}
	}
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// locate sets the line and column of each problem in errs that has none,
// from where its graph, node or edge, and field are in the tree.
func locate(errs []error, root *yaml3.Node) {
	for _, err := range errs {
		e, ok := err.(*Error)
		if !ok || e.Line > 0 {
			continue
		}
		if n := find(root, e); n != nil {
			e.Line, e.Column = n.Line, n.Column
		}
	}
}

// byPosition orders problems by line and column, those without one last.
func byPosition(a, b error) int {
	pa, pb := where(a), where(b)
	switch {
	case pa == pb:
		return 0
	case pa == [2]int{}:
		return 1
	case pb == [2]int{}:
		return -1
	case pa[0] != pb[0]:
		return pa[0] - pb[0]
	}
	return pa[1] - pb[1]
}

func where(err error) [2]int {
	if e, ok := err.(*Error); ok {
		return [2]int{e.Line, e.Column}
	}
	return [2]int{}
}

// find is the node a problem is about: the deepest node on its path that
// the tree has. A problem with a value points at the value; an unknown
// field, or a field that holds an object or a list, at the key.
func find(root *yaml3.Node, e *Error) *yaml3.Node {
	n := root
	for _, g := range strings.Split(e.Graph, "/") {
		if g != "" {
			n = child(child(n, "graphs"), g)
		}
	}
	switch {
	case e.Node != "":
		n = nodeByID(child(n, "nodes"), e.Node)
	case e.Edge >= 0:
		n = item(child(n, "edges"), e.Edge)
	case e.Field == "":
		return nil
	}
	var key *yaml3.Node
	for _, step := range fieldSteps(e.Field) {
		next, k := step.in(n)
		if next == nil {
			break
		}
		n, key = next, k
	}
	if key != nil && (strings.HasPrefix(e.Msg, "unknown field") || n.Kind != yaml3.ScalarNode) {
		return key
	}
	return n
}

// step is one key or list index of a field path such as
// "config.actions[0].dta".
type step struct {
	key   string
	index int // -1 for a key
}

// in gives the node the step leads to from n, and its key node if any.
func (s step) in(n *yaml3.Node) (value, key *yaml3.Node) {
	if s.index >= 0 {
		return item(n, s.index), nil
	}
	return lookup(n, s.key)
}

var indexSuffix = regexp.MustCompile(`\[(\d+)\]`)

func fieldSteps(field string) []step {
	var steps []step
	for _, part := range strings.Split(field, ".") {
		name, _, _ := strings.Cut(part, "[")
		if name != "" {
			steps = append(steps, step{key: name, index: -1})
		}
		for _, m := range indexSuffix.FindAllStringSubmatch(part, -1) {
			i, _ := strconv.Atoi(m[1])
			steps = append(steps, step{index: i})
		}
	}
	return steps
}

// lookup is the value and key of key in the mapping n; the last, as in
// the JSON form, when the key is given twice.
func lookup(n *yaml3.Node, key string) (value, k *yaml3.Node) {
	if n == nil || n.Kind != yaml3.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			k, value = n.Content[i], n.Content[i+1]
		}
	}
	return value, k
}

func child(n *yaml3.Node, key string) *yaml3.Node {
	v, _ := lookup(n, key)
	return v
}

func item(n *yaml3.Node, i int) *yaml3.Node {
	if n == nil || n.Kind != yaml3.SequenceNode || i < 0 || i >= len(n.Content) {
		return nil
	}
	return n.Content[i]
}

// nodeByID is the item of the node list whose id is id.
func nodeByID(nodes *yaml3.Node, id string) *yaml3.Node {
	if nodes == nil || nodes.Kind != yaml3.SequenceNode {
		return nil
	}
	for _, n := range nodes.Content {
		if v := child(n, "id"); v != nil && v.Value == id {
			return n
		}
	}
	return nil
}
