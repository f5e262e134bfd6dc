package builtin_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/worker"
	"github.com/weft-dev/weft/internal/worker/builtin"
)

// The fuzz tests feed arbitrary graph JSON to the executors' config
// decoders: any input gives a result or a *worker.Error, never a panic or
// a hang, and nothing is dialled (the http executor's policy allows no
// address the fuzzer could reach; the llm endpoint does not listen).

func fuzzInput(typ string, config []byte) *worker.Input {
	in := input(typ, nil)
	in.Config = config
	in.State = map[string]any{"list": []any{1.0, 2.0}, "name": "ada"}
	return in
}

func checkFuzzError(t *testing.T, err error) {
	t.Helper()
	var we *worker.Error
	if err != nil && !errors.As(err, &we) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v (%T) is not a *worker.Error", err, err)
	}
}

func FuzzHTTPConfig(f *testing.F) {
	for _, s := range []string{
		`{"url": "http://127.0.0.1:1/", "headers": {"Authorization": "Bearer ${secret:T}"}}`,
		`{"url": "https://u:p@example.com/"}`,
		`{"url": "http://[::1]/", "method": "post", "body": {"a": 1}, "timeout": "1ms", "expectStatus": [201]}`,
		`{"url": "http://x/", "headers": {"X": "${secret:}"}}`,
		`null`, `[]`, `{"url": 1}`,
	} {
		f.Add([]byte(s))
	}
	h := &builtin.HTTP{Policy: mustPolicy(f, "192.0.2.1:9"), Secrets: func(string) (string, bool) { return "v", true }}
	f.Fuzz(func(t *testing.T, config []byte) {
		_ = builtin.CheckHTTPConfig(config)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := h.Execute(ctx, fuzzInput("http", config))
		checkFuzzError(t, err)
	})
}

func FuzzLLMConfig(f *testing.F) {
	for _, s := range []string{
		`{"model": "m", "prompt": "{{.state.name}}"}`,
		`{"model": "m", "prompt": "{{range .state.list}}{{.}}{{end}}", "system": "{{printf \"%5d\" 1}}"}`,
		`{"model": "m", "prompt": "{{range 100000000}}{{end}}"}`,
		`{"model": "m", "prompt": "p", "baseURL": "http://x"}`,
		`{"model": "m", "prompt": "{{define \"a\"}}{{end}}"}`,
		`{"model": "m", "prompt": "p", "endpoint": "none", "temperature": 2, "max_tokens": -1}`,
	} {
		f.Add([]byte(s))
	}
	l := &builtin.LLM{Endpoints: map[string]builtin.LLMEndpoint{"default": {URL: "http://127.0.0.1:1/v1"}}}
	f.Fuzz(func(t *testing.T, config []byte) {
		_ = builtin.CheckLLMConfig(config)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := l.Execute(ctx, fuzzInput("llm", config))
		checkFuzzError(t, err)
	})
}

func FuzzTransformConfig(f *testing.F) {
	for _, s := range []string{
		`{"set": {"n": "size(state.list) + 1"}}`,
		`{"output": "{'a': state.name}"}`,
		`{"set": {"x": "state.list.map(a, state.list.map(b, a*b))"}}`,
		`{"set": {"x": "1 +"}}`, `{}`, `{"set": []}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, config []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		res, err := builtin.Transform{}.Execute(ctx, fuzzInput("transform", config))
		checkFuzzError(t, err)
		if err == nil {
			if _, err := json.Marshal(res.Output); err != nil {
				t.Fatalf("output does not encode: %v", err)
			}
		}
	})
}

func mustPolicy(f *testing.F, entries ...string) *builtin.AddressPolicy {
	p, err := builtin.NewAddressPolicy(entries)
	if err != nil {
		f.Fatal(err)
	}
	return p
}

// FuzzAgentResume: whatever the last recorded step holds (a step is read
// back from the run's log, written by any worker of the queue), the agent
// goes on or fails with a *worker.Error; it never panics.
func FuzzAgentResume(f *testing.F) {
	f.Add([]byte(`{"step":1,"kind":"model","turns":1,"messages":[{"role":"user","content":"hi"},{"role":"assistant","toolCalls":[{"id":"a","name":"lookup","arguments":"{\"q\":\"x\"}"}]}]}`))
	f.Add([]byte(`{"step":2,"kind":"tool","messages":[{"role":"tool","toolCallId":"zz"}]}`))
	f.Add([]byte(`{"step":1,"messages":[{"role":"assistant"}],"turns":-1}`))
	f.Add([]byte(`{"step":9,"messages":[{"role":"system"}],"turns":99,"usage":{"total_tokens":-5}}`))
	f.Add([]byte(`null`))
	_, url := newFakeModel(f, false, fakeTurn{text: "done"})
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return
		}
		j := &memJournal{steps: []json.RawMessage{raw}}
		_, err := newAgent(url, false, &countingTool{}, j).Execute(context.Background(), agentInput(agentConfig(map[string]any{"maxTurns": 3})))
		var we *worker.Error
		if err != nil && !errors.As(err, &we) {
			t.Fatalf("error %v (%T) is not a *worker.Error", err, err)
		}
	})
}
