package builtin_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/weft-dev/weft/internal/worker/builtin"
	"github.com/weft-dev/weft/pkg/graph"
)

// TestGraphRefusesWhatExecutorsRefuse: graph validation (pkg/graph, which
// cannot import this package) and the executors' own checks agree on what
// a graph may not hold, and the graph's error is located.
func TestGraphRefusesWhatExecutorsRefuse(t *testing.T) {
	tests := []struct {
		typ, config string
		wantField   string // "" : accepted
	}{
		{"llm", `{"model": "m", "prompt": "p", "baseURL": "https://evil.example/v1"}`, "config.baseURL"},
		{"llm", `{"model": "m", "prompt": "p", "apiKeyEnv": "AWS_SECRET_ACCESS_KEY"}`, "config.apiKeyEnv"},
		{"llm", `{"model": "m", "prompt": "p", "endpoint": "openai"}`, ""},
		{"agent", `{"model": "m", "prompt": "p", "baseURL": "https://evil.example/v1"}`, "config.baseURL"},
		{"agent", `{"model": "m", "prompt": "p", "apiKey": "sk-1"}`, "config.apiKey"},
		{"agent", `{"model": "m", "prompt": "p", "endpoint": "claude", "maxTurns": 4, "tools": [{"name": "fetch", "type": "http", "parameters": {"type": "object"}}]}`, ""},
		{"http", `{"url": "https://ada:hunter2@api.example.com/"}`, "config.url"},
		{"http", `{"url": "https://api.example.com/", "headers": {"Authorization": "Bearer abc"}}`, "config.headers.Authorization"},
		{"http", `{"url": "https://api.example.com/", "headers": {"Cookie": "s=1"}}`, "config.headers.Cookie"},
		{"http", `{"url": "https://api.example.com/", "headers": {"Authorization": "Bearer ${secret:T}", "X-Trace": "1"}}`, ""},
	}
	for _, tt := range tests {
		node, _ := json.Marshal(map[string]any{"id": "n", "type": tt.typ, "config": json.RawMessage(tt.config)})
		doc := `{"name": "g", "nodes": [` + string(node) + `], "edges": [{"from": "START", "to": "n"}, {"from": "n", "to": "END"}]}`
		_, err := graph.Parse([]byte(doc), "g.json")
		var exec []string
		if tt.typ == "llm" || tt.typ == "agent" {
			exec = builtin.CheckLLMConfig(json.RawMessage(tt.config))
		} else {
			exec = builtin.CheckHTTPConfig(json.RawMessage(tt.config))
		}
		if tt.wantField == "" {
			if err != nil || len(exec) > 0 {
				t.Errorf("%s: graph %v, executor %q; want both accepted", tt.config, err, exec)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantField) || !strings.Contains(err.Error(), `node "n"`) {
			t.Errorf("%s: graph error %v, want one at %s", tt.config, err, tt.wantField)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("the graph error shows the password: %v", err)
		}
		if len(exec) != 1 {
			t.Errorf("%s: executor check %q, want one problem", tt.config, exec)
		}
	}
}

// TestGraphChecksAgentConfig: an agent node's configuration is checked
// when the graph loads, each problem at its field.
func TestGraphChecksAgentConfig(t *testing.T) {
	config := `{"model": "", "prompt": "{{.state", "maxTurns": -1, "maxTokenz": 5,
		"tools": [{"name": "a", "type": "http"}, {"name": "a", "type": "agent"}, {"type": "echo", "parameters": [1]}]}`
	doc := `{"name": "g", "nodes": [{"id": "n", "type": "agent", "config": ` + config + `}], "edges": [{"from": "START", "to": "n"}, {"from": "n", "to": "END"}]}`
	_, err := graph.Parse([]byte(doc), "g.json")
	for _, want := range []string{"config.model", "config.prompt", "config.maxTurns", "config.maxTokenz", `config.tools[1].name": tool "a" given twice`, `config.tools[1].type": agent: a node of this type cannot be a tool`, "config.tools[2].name", "config.tools[2].parameters"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("graph error %v does not name %s", err, want)
		}
	}
}

// TestAgentExample: the example agent graph loads.
func TestAgentExample(t *testing.T) {
	if _, err := graph.LoadFile("../../../examples/agent.yaml"); err != nil {
		t.Fatal(err)
	}
}
