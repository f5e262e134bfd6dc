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
		if tt.typ == "llm" {
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
