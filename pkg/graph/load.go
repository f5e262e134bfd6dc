package graph

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"

	yaml3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"
)

// maxFileSize bounds what LoadFile and Parse accept; graph files are small.
const maxFileSize = 8 << 20

type format int

const (
	sniff format = iota
	formatJSON
	formatYAML
)

// LoadFile reads, validates and compiles the graph in the file at path. The
// format follows the extension: .yaml or .yml for YAML, .json for JSON.
func LoadFile(path string, opts ...Option) (*Graph, error) {
	var f format
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml":
		f = formatYAML
	case ".json":
		f = formatJSON
	default:
		return nil, &Error{Source: path, Edge: -1, Msg: "unknown graph file extension (want .yaml, .yml or .json)"}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("loading graph: %w", err)
	}
	return parse(data, path, f, opts)
}

// Parse validates and compiles a graph written in JSON or YAML; it takes
// the input for JSON when it starts with '{'. source names the input in
// errors, typically the file name.
func Parse(data []byte, source string, opts ...Option) (*Graph, error) {
	return parse(data, source, sniff, opts)
}

func parse(data []byte, source string, f format, opts []Option) (*Graph, error) {
	p := &problems{source: source}
	js := toJSON(data, f, p)
	if js == nil || !checkDocument(js, p) {
		return nil, p.err()
	}
	tree := yamlTree(data)
	if tree != nil && (f == formatYAML || !json.Valid(data)) {
		// A key given twice is an error in YAML; JSON read as JSON keeps
		// encoding/json's reading (the last one wins), which the
		// TypeScript SDK reproduces byte for byte.
		duplicateKeys(tree, "", p)
	}
	def := decodeDefinition(js, p)
	if len(p.errs) > 0 {
		// Validate what did decode too, so that every problem shows in
		// one pass, unless the graph's shape (its nodes, edges, ids or
		// edge ends) did not decode: then validation would only guess.
		if def != nil && !p.structural() {
			_, err := compile(def, source, opts)
			p.addUnlessEcho(err)
		}
		return nil, located(p.errs, tree)
	}
	g, err := compile(def, source, opts)
	if err != nil {
		return nil, located(unjoin(err), tree)
	}
	return g, nil
}

// located gives the problems joined, each with its line and column when
// the source's tree has them, in the order of the file: located ones by
// position, then the rest as found.
func located(errs []error, tree *yaml3.Node) error {
	if tree != nil {
		locate(errs, tree)
		slices.SortStableFunc(errs, byPosition)
	}
	return errors.Join(errs...)
}

// unjoin is the problems an error joins, or the error alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// toJSON checks the input's size and syntax and gives it as JSON, or nil
// after reporting the problem.
func toJSON(data []byte, f format, p *problems) []byte {
	if len(data) > maxFileSize {
		p.top("", "graph is %d bytes, larger than the limit of %d", len(data), maxFileSize)
		return nil
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		p.top("", "empty document")
		return nil
	}
	if f == sniff {
		// A YAML flow mapping starts with '{' too; JSON wins when valid, and
		// its error is the clearer one when neither parses.
		f = formatYAML
		if trimmed[0] == '{' {
			if json.Valid(data) {
				f = formatJSON
			} else if _, err := yamlToJSON(data); err != nil {
				f = formatJSON
			}
		}
	}
	if f == formatJSON {
		return checkJSON(data, p)
	}
	js, err := yamlToJSON(data)
	if err != nil {
		yamlSyntaxError(data, err, p)
		return nil
	}
	return js
}

// checkJSON gives data, or nil after reporting where its syntax is wrong.
func checkJSON(data []byte, p *problems) []byte {
	if err := json.Unmarshal(data, new(json.RawMessage)); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line, col := position(data, se.Offset)
			p.add(Error{Edge: -1, Line: line, Column: col, Msg: "invalid JSON: " + strings.TrimPrefix(se.Error(), "json: ")})
		} else {
			p.top("", "invalid JSON: %v", err)
		}
		return nil
	}
	return data
}

// yamlToJSON converts, turning a panic in the YAML parser on hostile input
// into an error.
func yamlToJSON(data []byte) (js []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			js, err = nil, fmt.Errorf("%v", r)
		}
	}()
	return yaml.YAMLToJSON(data)
}

// position converts a byte offset to a 1-based line and column.
func position(data []byte, off int64) (line, col int) {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	before := data[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(off) - (bytes.LastIndexByte(before, '\n') + 1)
	if col < 1 {
		col = 1
	}
	return line, col
}

// The decoder below is strict like json.Decoder.DisallowUnknownFields, but
// it goes field by field so that every problem is reported, each with the
// node, edge and field it is in.

// decodeDefinition decodes a graph object, reporting problems to p.
func decodeDefinition(data []byte, p *problems) *Definition {
	m, ok := asObject(data)
	if !ok {
		p.top("", "want a graph object, got %s", kindOf(data))
		return nil
	}
	def := new(Definition)
	report := func(field, msg string) { p.top(field, "%s", msg) }
	decodeFields(m, reflect.ValueOf(def).Elem(), "", report, "nodes", "edges", "graphs")

	decodeNodes(m["nodes"], def, p)
	decodeEdges(m["edges"], def, p)
	decodeGraphs(m["graphs"], def, p)
	return def
}

func decodeNodes(raw json.RawMessage, def *Definition, p *problems) {
	if len(raw) == 0 || isNull(raw) {
		return
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		p.top("nodes", "want a list of nodes, got %s", kindOf(raw))
	}
	def.Nodes = make([]Node, len(items))
	for i, item := range items {
		decodeNode(item, i, &def.Nodes[i], p)
	}
}

func decodeEdges(raw json.RawMessage, def *Definition, p *problems) {
	if len(raw) == 0 || isNull(raw) {
		return
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		p.top("edges", "want a list of edges, got %s", kindOf(raw))
	}
	def.Edges = make([]Edge, len(items))
	for i, item := range items {
		decodeEdge(item, i, &def.Edges[i], p)
	}
}

// decodeGraphs decodes the nested graphs, each reporting to a collector
// of its own name.
func decodeGraphs(raw json.RawMessage, def *Definition, p *problems) {
	if len(raw) == 0 || isNull(raw) {
		return
	}
	graphs, ok := asObject(raw)
	if !ok {
		p.top("graphs", "want an object of graphs by name, got %s", kindOf(raw))
	}
	if len(graphs) > 0 {
		def.Graphs = make(map[string]*Definition, len(graphs))
	}
	for _, name := range sortedKeys(graphs) {
		q := p.sub(name)
		if sub := decodeDefinition(graphs[name], q); sub != nil {
			def.Graphs[name] = sub
		}
		p.merge(q)
	}
}

func decodeNode(data json.RawMessage, i int, n *Node, p *problems) {
	m, ok := asObject(data)
	if !ok {
		p.top(fmt.Sprintf("nodes[%d]", i), "want a node object, got %s", kindOf(data))
		return
	}
	var id string
	_ = json.Unmarshal(m["id"], &id)
	report := func(field, msg string) {
		if id == "" {
			field = fmt.Sprintf("nodes[%d].%s", i, field)
		}
		p.node(id, field, "%s", msg)
	}
	decodeFields(m, reflect.ValueOf(n).Elem(), "", report)
}

func decodeEdge(data json.RawMessage, i int, e *Edge, p *problems) {
	m, ok := asObject(data)
	if !ok {
		p.edge(i, &Edge{}, "", "want an edge object, got %s", kindOf(data))
		return
	}
	var ends Edge
	_ = json.Unmarshal(m["from"], &ends.From)
	_ = json.Unmarshal(m["to"], &ends.To)
	report := func(field, msg string) { p.edge(i, &ends, field, "%s", msg) }
	decodeFields(m, reflect.ValueOf(e).Elem(), "", report)
}

// decodeFields sets the fields of the struct v from m, one by one, and
// reports each bad value and each unknown key. Keys in skip are left to the
// caller. Fields holding plain structs are decoded recursively, so nested
// problems are named "retry.jitter".
func decodeFields(m map[string]json.RawMessage, v reflect.Value, prefix string, report func(field, msg string), skip ...string) {
	fields := jsonFields(v.Type())
	for _, f := range fields {
		raw, ok := m[f.name]
		if !ok || slices.Contains(skip, f.name) {
			continue
		}
		fv := v.Field(f.index)
		name := prefix + f.name
		if isNull(raw) {
			continue
		}
		if st, isPtr := plainStruct(fv.Type()); st != nil {
			sub, ok := asObject(raw)
			if !ok {
				report(name, fmt.Sprintf("want an object, got %s", kindOf(raw)))
				continue
			}
			target := fv
			if isPtr {
				fv.Set(reflect.New(st))
				target = fv.Elem()
			}
			decodeFields(sub, target, name+".", report)
			continue
		}
		if st := structMap(fv.Type()); st != nil {
			decodeStructMap(raw, fv, st, name, report)
			continue
		}
		if err := json.Unmarshal(raw, fv.Addr().Interface()); err != nil {
			report(name, decodeMessage(err, fv.Type()))
		}
	}
	reportUnknown(m, fields, prefix, report)
}

// reportUnknown reports each key of m that names none of fields, with the
// field it may be a typo of.
func reportUnknown(m map[string]json.RawMessage, fields []jsonField, prefix string, report func(field, msg string)) {
	known := make(map[string]bool, len(fields))
	names := make([]string, len(fields))
	for i, f := range fields {
		known[f.name] = true
		names[i] = f.name
	}
	for _, k := range sortedKeys(m) {
		if known[k] {
			continue
		}
		msg := "unknown field"
		if near := nearest(k, names); near != "" {
			msg = fmt.Sprintf("unknown field (did you mean %q?)", near)
		}
		report(prefix+k, msg)
	}
}

type jsonField struct {
	name  string
	index int
}

var fieldCache sync.Map // reflect.Type -> []jsonField

func jsonFields(t reflect.Type) []jsonField {
	if fs, ok := fieldCache.Load(t); ok {
		return fs.([]jsonField)
	}
	var fs []jsonField
	for i := range t.NumField() {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if !sf.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		fs = append(fs, jsonField{name: name, index: i})
	}
	fieldCache.Store(t, fs)
	return fs
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// plainStruct gives the struct type to decode field by field when t is a
// struct or a pointer to one without its own UnmarshalJSON.
// structMap is the struct type of a map[string]struct's values, nil for
// any other type: each value is decoded field by field as a struct field
// is (limits.types.http.concurrency.max; an unknown key refused), where
// encoding/json would match keys case-insensitively and drop unknown ones.
func structMap(t reflect.Type) reflect.Type {
	if t.Kind() != reflect.Map || t.Key().Kind() != reflect.String {
		return nil
	}
	if st, isPtr := plainStruct(t.Elem()); st != nil && !isPtr {
		return st
	}
	return nil
}

// decodeStructMap decodes raw, an object, into fv, a map of st by name,
// each value field by field under name.<key>.
func decodeStructMap(raw json.RawMessage, fv reflect.Value, st reflect.Type, name string, report func(field, msg string)) {
	m, ok := asObject(raw)
	if !ok {
		report(name, fmt.Sprintf("want an object, got %s", kindOf(raw)))
		return
	}
	out := reflect.MakeMapWithSize(fv.Type(), len(m))
	for _, k := range sortedKeys(m) {
		sub, ok := asObject(m[k])
		if !ok {
			report(name+"."+k, fmt.Sprintf("want an object, got %s", kindOf(m[k])))
			continue
		}
		v := reflect.New(st).Elem()
		decodeFields(sub, v, name+"."+k+".", report)
		out.SetMapIndex(reflect.ValueOf(k).Convert(fv.Type().Key()), v)
	}
	fv.Set(out)
}

func plainStruct(t reflect.Type) (st reflect.Type, isPtr bool) {
	if t.Kind() == reflect.Pointer {
		isPtr = true
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil, false
	}
	return t, isPtr
}

func decodeMessage(err error, t reflect.Type) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		msg := fmt.Sprintf("want %s, got %s", describeType(t), te.Value)
		if te.Value == "bool" && t.Kind() == reflect.String {
			msg += " (in YAML, quote values such as yes, no, on, off, y and n)"
		}
		return msg
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

func describeType(t reflect.Type) string {
	switch t {
	case reflect.TypeFor[Duration]():
		return `a duration string such as "30s"`
	case reflect.TypeFor[json.RawMessage]():
		return "any JSON value"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "an integer"
	case reflect.Float64, reflect.Float32:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice:
		return "a list of " + strings.TrimPrefix(strings.TrimPrefix(describeType(t.Elem()), "a "), "an ") + "s"
	case reflect.Pointer:
		return describeType(t.Elem())
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return t.String()
}

func asObject(data []byte) (map[string]json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")) && json.Unmarshal(data, &m) == nil {
		return m, true
	}
	return nil, false
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// kindOf names the JSON kind of raw for error messages.
func kindOf(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "a list"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
