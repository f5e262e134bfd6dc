package graph

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	wexpr "github.com/weft-dev/weft/internal/expr"
)

// SignalExample is the data of a signal that answers the human node id of
// def, as a command shows it ('weft signal RUN NODE -data DATA'). From the
// node's outputSchema (an object's required properties, else all of
// them), each with a value of its type (its const, default or first enum
// value when it has one; true, 0, "", {} or []). Without a schema, the
// keys of output that the node's outgoing conditions read, each with ...
// for the value, which the person fills in (as written it is not JSON, so
// a command pasted unchanged is refused, never sent). {} when neither
// says anything.
func SignalExample(def *Definition, id string) string {
	if def == nil {
		return "{}"
	}
	i := slices.IndexFunc(def.Nodes, func(n Node) bool { return n.ID == id })
	if i < 0 {
		return "{}"
	}
	if ex, ok := schemaExample(def.Nodes[i].OutputSchema); ok {
		return ex
	}
	var keys []string
	for _, e := range def.Edges {
		if e.From != id || strings.TrimSpace(e.Condition) == "" || strings.HasPrefix(e.Condition, funcPrefix) {
			continue
		}
		p, err := wexpr.Compile(e.Condition, wexpr.Any, 0)
		if err != nil {
			continue
		}
		for _, path := range p.Paths() {
			if path.Var == "output" && len(path.Keys) > 0 && !slices.Contains(keys, path.Keys[0]) {
				keys = append(keys, path.Keys[0])
			}
		}
	}
	parts := make([]string, len(keys))
	for k, key := range keys {
		parts[k] = jsonText(key) + ": ..."
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// schemaExample is an example value of an object schema's properties.
func schemaExample(raw json.RawMessage) (string, bool) {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil || len(s.Properties) == 0 && len(s.Required) == 0 {
		return "", false
	}
	keys := s.Required
	if len(keys) == 0 {
		keys = slices.Sorted(func(yield func(string) bool) {
			for k := range s.Properties {
				if !yield(k) {
					return
				}
			}
		})
	}
	parts := make([]string, len(keys))
	for k, key := range keys {
		parts[k] = jsonText(key) + ": " + valueExample(s.Properties[key])
	}
	return "{" + strings.Join(parts, ", ") + "}", true
}

// valueExample is an example value of a property's schema.
func valueExample(raw json.RawMessage) string {
	var p struct {
		Type    any               `json:"type"`
		Const   json.RawMessage   `json:"const"`
		Default json.RawMessage   `json:"default"`
		Enum    []json.RawMessage `json:"enum"`
	}
	if json.Unmarshal(raw, &p) != nil {
		return "..."
	}
	switch {
	case len(p.Const) > 0:
		return compactJSON(p.Const)
	case len(p.Default) > 0:
		return compactJSON(p.Default)
	case len(p.Enum) > 0:
		return compactJSON(p.Enum[0])
	}
	t, _ := p.Type.(string)
	if ts, ok := p.Type.([]any); ok && len(ts) > 0 {
		t, _ = ts[0].(string)
	}
	switch t {
	case "boolean":
		return "true"
	case "integer", "number":
		return "0"
	case "string":
		return `""`
	case "object":
		return "{}"
	case "array":
		return "[]"
	case "null":
		return "null"
	}
	return "..."
}

func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return "..."
	}
	return b.String()
}

func jsonText(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
