package graph

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/weft-dev/weft/internal/nodeconfig"
	"github.com/weft-dev/weft/pkg/worker/builtin"
)

// TestExecutorConfigErrors holds one broken graph per rule of the
// built-in executors' configs, each error located by file, node and field.
func TestExecutorConfigErrors(t *testing.T) {
	tests := []struct {
		name, node string // node: the node's YAML after "id: x, "
		field, msg string
	}{
		{"config not an object", `type: echo, config: [1, 2]`, "config", "want an object, got a list"},
		{"unknown field, suggested", `type: sleep, config: {duraton: 1s}`, "config.duraton", `unknown field (did you mean "duration"?)`},
		{"unknown field", `type: echo, config: {colour: red}`, "config.colour", "unknown field"},
		{"noop takes no config", `type: noop, config: {x: 1}`, "config.x", "unknown field"},
		{"field of the wrong type", `type: fail, config: {retryable: "no"}`, "config.retryable", "want true or false, got string"},
		{"echo action neither name nor object", `type: echo, config: {actions: [3]}`, "config.actions[0]", `want an action name or {"name": NAME, "data": VALUE}, got a number`},
		{"echo action without a name", `type: echo, config: {actions: [{data: 1}]}`, "config.actions[0].name", "missing action name"},
		{"echo action with an unknown field", `type: echo, config: {actions: [{name: go, dta: 1}]}`, "config.actions[0].dta", `unknown field (did you mean "data"?)`},
		{"fail attempts negative", `type: fail, config: {failAttempts: -1}`, "config.failAttempts", "must not be negative, got -1"},
		{"sleep duration malformed", `type: sleep, config: {duration: banana}`, "config.duration", `"banana" is not a duration`},
		{"sleep duration negative", `type: sleep, config: {duration: -5}`, "config.duration", "must not be negative, got -5"},
		{"sleep duration not a duration", `type: sleep, config: {duration: true}`, "config.duration", `want a duration like "1.5s" or a number of milliseconds, got true`},
		{"http without url", `type: http, config: {method: GET}`, "config.url", "missing url"},
		{"http url not absolute", `type: http, config: {url: /relative}`, "config.url", `"/relative" is not an absolute http or https URL`},
		{"http url not http", `type: http, config: {url: "ftp://example.com/x"}`, "config.url", `"ftp://example.com/x" is not an absolute http or https URL`},
		{"http url with credentials", `type: http, config: {url: "https://ada:hunter2@example.com/"}`, "config.url", "holds credentials"},
		{"http url with a secret", `type: http, config: {url: "https://example.com/${secret:T}"}`, "config.url", "secret references are allowed in header values only"},
		{"http method malformed", `type: http, config: {url: "https://example.com/", method: "GE T"}`, "config.method", `"GE T" is not an HTTP method`},
		{"http header name malformed", `type: http, config: {url: "https://example.com/", headers: {"X Y": "1"}}`, "config.headers.X Y", `"X Y" is not a header name`},
		{"http header value with a line break", `type: http, config: {url: "https://example.com/", headers: {X-Y: "a\r\nHost: evil"}}`, "config.headers.X-Y", "must not hold line breaks"},
		{"http credential written", `type: http, config: {url: "https://example.com/", headers: {Authorization: "Bearer abc"}}`, "config.headers.Authorization", "a credential must not be written in the graph"},
		{"http secret reference malformed", `type: http, config: {url: "https://example.com/", headers: {X-Key: "${secret:T"}}`, "config.headers.X-Key", "malformed secret reference"},
		{"http secret name malformed", `type: http, config: {url: "https://example.com/", headers: {X-Key: "${secret:../etc}"}}`, "config.headers.X-Key", `secret reference "${secret:../etc}": a name holds letters`},
		{"http status out of range", `type: http, config: {url: "https://example.com/", expectStatus: [200, 42]}`, "config.expectStatus[1]", "42 is not an HTTP status"},
		{"http timeout malformed", `type: http, config: {url: "https://example.com/", timeout: soon}`, "config.timeout", `"soon" is not a duration`},
		{"transform without set or output", `type: transform, config: {}`, "config", `a transform needs "set"`},
		{"transform set CEL", `type: transform, config: {set: {a: "state.x +"}}`, "config.set.a", `CEL "state.x +"`},
		{"transform output CEL", `type: transform, config: {output: "]["}`, "config.output", `CEL "]["`},
		{"llm without model", `type: llm, config: {prompt: hi}`, "config.model", "missing model"},
		{"llm without prompt", `type: llm, config: {model: m, prompt: "  "}`, "config.prompt", "missing prompt"},
		{"llm prompt template", `type: llm, config: {model: m, prompt: "Hi {{.state.name"}`, "config.prompt", "template: template: prompt:1: unclosed action"},
		{"llm system template", `type: llm, config: {model: m, prompt: hi, system: "{{if}}"}`, "config.system", "template: template: system:1: missing value for if"},
		{"llm template unknown function", `type: llm, config: {model: m, prompt: "{{shout .state.x}}"}`, "config.prompt", `function "shout" not defined`},
		{"llm template defines", `type: llm, config: {model: m, prompt: "{{define \"x\"}}a{{end}}b"}`, "config.prompt", "templates may not define others"},
		{"llm template calls", `type: llm, config: {model: m, prompt: "{{if true}}{{template \"x\"}}{{end}}"}`, "config.prompt", `templates may not call others ({{template "x"}})`},
		{"llm template reserved name", `type: llm, config: {model: m, prompt: "{{weftRangeTick__}}"}`, "config.prompt", "weftRangeTick__ is reserved"},
		{"llm max_tokens negative", `type: llm, config: {model: m, prompt: hi, max_tokens: -1}`, "config.max_tokens", "must not be negative"},
		{"llm temperature not a number", `type: llm, config: {model: m, prompt: hi, temperature: warm}`, "config.temperature", "want a number, got string"},
		{"llm URL", `type: llm, config: {model: m, prompt: hi, baseURL: "https://evil.example/"}`, "config.baseURL", "a graph does not choose the llm URL"},
		{"llm key", `type: llm, config: {model: m, prompt: hi, apiKey: sk-1}`, "config.apiKey", "a graph does not choose the llm API key"},
		{"human timeout not a string", `type: human, config: {timeout: 5}`, "config.timeout", `want a duration string such as "30s", got 5`},
		{"human timeout malformed", `type: human, config: {timeout: soon}`, "config.timeout", `malformed duration "soon"`},
		{"human unknown field", `type: human, config: {timout: 1m}`, "config.timout", `unknown field (did you mean "timeout"?)`},
		{"subgraph unknown field", `type: subgraph, config: {graph: child, input: x}`, "config.input", "unknown field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "name: t\nnodes:\n  - {id: x, " + tt.node + "}\nedges: [{from: START, to: x}, {from: x, to: END}]\n" +
				"graphs: {child: {nodes: [{id: c, type: echo}], edges: [{from: START, to: c}, {from: c, to: END}]}}\n"
			_, err := Parse([]byte(src), "x.yaml")
			var joined interface{ Unwrap() []error }
			if !errors.As(err, &joined) {
				t.Fatalf("Parse: %v, want errors", err)
			}
			var got []string
			for _, e := range joined.Unwrap() {
				var ge *Error
				if !errors.As(e, &ge) || ge.Source != "x.yaml" || ge.Node != "x" {
					t.Errorf("not located by file and node: %#v", e)
					continue
				}
				if ge.Field == tt.field && strings.Contains(ge.Msg, tt.msg) {
					got = append(got, ge.Msg)
				}
			}
			if len(got) != 1 || len(joined.Unwrap()) != 1 {
				t.Errorf("want exactly one error at %s containing %q, got:\n%v", tt.field, tt.msg, err)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the error shows the password: %v", err)
			}
		})
	}
}

// TestExecutorConfigsAccepted: configs the executors run are accepted.
func TestExecutorConfigsAccepted(t *testing.T) {
	for _, node := range []string{
		`type: echo, config: {output: {a: 1}, updates: {b: 2}, actions: [go, {name: fork, data: {x: 1}}]}`,
		`type: noop`,
		`type: sleep, config: {duration: 1500}`,
		`type: fail, config: {message: m, type: T, retryable: false, failAttempts: 2}`,
		`type: http, config: {url: "https://example.com/a", method: post, headers: {Authorization: "Bearer ${secret:API_TOKEN}", X-Y: "1"}, body: {a: [1]}, timeout: 2s, expectStatus: [200, 404]}`,
		`type: transform, config: {set: {a: "state.x + 1"}, output: "state"}`,
		`type: llm, config: {endpoint: e, model: m, temperature: 0.2, max_tokens: 10, system: "Be {{index .invocation \"tone\"}}", prompt: "{{range .state.items}}{{printf \"%5s\" .}}{{end}}", timeout: 30s}`,
		`type: human, config: {timeout: 1h}`,
		`type: subgraph, config: {graph: child}`,
	} {
		src := "name: t\nnodes:\n  - {id: x, " + node + "}\nedges: [{from: START, to: x}, {from: x, to: END}]\n" +
			"graphs: {child: {nodes: [{id: c, type: echo}], edges: [{from: START, to: c}, {from: c, to: END}]}}\n"
		if _, err := Parse([]byte(src), "x.yaml"); err != nil {
			t.Errorf("%s: %v", node, err)
		}
	}
}

// TestConfigsMatchExecutors holds the config fields this package checks
// equal to the fields the built-in executors decode, and its duration and
// header rules equal to theirs.
func TestConfigsMatchExecutors(t *testing.T) {
	executors := map[string]any{
		"echo": builtin.EchoConfig{}, "noop": struct{}{}, "sleep": builtin.SleepConfig{}, "fail": builtin.FailConfig{},
		"http": builtin.HTTPConfig{}, "transform": builtin.TransformConfig{}, "llm": builtin.LLMConfig{},
	}
	names := func(v any) []string {
		var out []string
		for _, f := range jsonFields(reflect.TypeOf(v)) {
			out = append(out, f.name)
		}
		slices.Sort(out)
		return out
	}
	for typ, exec := range executors {
		c, ok := configChecks[typ]
		if !ok {
			t.Errorf("%s: no config check", typ)
			continue
		}
		if got, want := names(reflect.ValueOf(c.config()).Elem().Interface()), names(exec); !slices.Equal(got, want) {
			t.Errorf("%s: graph checks fields %v, the executor decodes %v", typ, got, want)
		}
	}
	for _, typ := range builtinTypes {
		if _, ok := configChecks[typ]; !ok && typ != TypeRouter {
			t.Errorf("built-in type %s: no config check", typ)
		}
	}

	for _, v := range []string{`"1.5s"`, `1500`, `0`, `"banana"`, `-5`, `"-1s"`, `true`, `[1]`, `"1h30m"`} {
		var ours execDuration
		var theirs builtin.Duration
		e1, e2 := json.Unmarshal([]byte(v), &ours), json.Unmarshal([]byte(v), &theirs)
		if (e1 == nil) != (e2 == nil) || int64(ours) != int64(theirs) {
			t.Errorf("duration %s: graph %v (%v), executor %v (%v)", v, int64(ours), e1, int64(theirs), e2)
		}
	}

	for _, h := range []map[string]string{
		{"Authorization": "Bearer x"}, {"authorization": "Bearer ${secret:T}"}, {"Cookie": ""}, {"Proxy-Authorization": "p"},
		{"X-Key": "${secret:T"}, {"X-Key": "${secret:a.b}"}, {"X-Key": "${secret:OK_1} and ${secret:TWO}"}, {"X-Key": "plain"},
	} {
		var ours []string
		for k, v := range h {
			checkHeader(k, v, func(field, format string, args ...any) { ours = append(ours, field) })
		}
		if theirs := nodeconfig.CheckHeaders(h); len(ours) != len(theirs) {
			t.Errorf("headers %v: graph %v, executor %v", h, ours, theirs)
		}
	}
}
