package builtin_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/weft-dev/weft/internal/worker"
	"github.com/weft-dev/weft/internal/worker/builtin"
	"github.com/weft-dev/weft/pkg/events"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func input(typ string, config any) *worker.Input {
	in := &worker.Input{RunID: "r1", NodeID: "n1", Type: typ, Iteration: 1, Attempt: 1, Delivery: 1,
		State: map[string]any{}, Invocation: map[string]any{}, IdempotencyKey: "key-123"}
	if config != nil {
		b, err := json.Marshal(config)
		if err != nil {
			panic(err)
		}
		in.Config = b
	}
	return in
}

// failure checks err is a *worker.Error of the type and retryability.
func failure(t *testing.T, err error, typ string, retryable bool) *worker.Error {
	t.Helper()
	var we *worker.Error
	if !errors.As(err, &we) {
		t.Fatalf("error = %v, want a *worker.Error", err)
	}
	if we.Type != typ || we.Retryable != retryable {
		t.Fatalf("failure = %s (retryable %v), want type %s retryable %v", we, we.Retryable, typ, retryable)
	}
	return we
}

func TestRegister(t *testing.T) {
	w, err := worker.New(fakeStore{})
	if err != nil {
		t.Fatal(err)
	}
	builtin.Register(w)
	want := []string{"agent", "echo", "fail", "http", "llm", "noop", "sleep", "transform"}
	if got := w.Types(); !reflect.DeepEqual(got, want) {
		t.Errorf("types = %v, want %v", got, want)
	}
}

// fakeStore is enough of a store for New.
type fakeStore struct{ events.Store }

func (fakeStore) JetStream() jetstream.JetStream { return nil }

func TestEcho(t *testing.T) {
	in := input("echo", nil)
	in.State = map[string]any{"a": 1.0}
	res, err := builtin.Echo{}.Execute(context.Background(), in)
	if err != nil || !reflect.DeepEqual(res.Output, in.State) {
		t.Fatalf("echo = %+v, %v", res, err)
	}
	in = input("echo", map[string]any{"output": "hi", "updates": map[string]any{"k": 1}, "actions": []any{"next", map[string]any{"name": "fork", "data": 2}}})
	res, err = builtin.Echo{}.Execute(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Output.(json.RawMessage)) != `"hi"` || res.Updates["k"] != 1.0 || len(res.Actions) != 2 || res.Actions[1].Name != "fork" {
		t.Errorf("echo = %+v", res)
	}
	_, err = builtin.Echo{}.Execute(context.Background(), input("echo", map[string]any{"outptu": 1}))
	failure(t, err, events.FailureValidation, false)

	res, err = builtin.Noop{}.Execute(context.Background(), input("noop", nil))
	if err != nil || res.Output != nil {
		t.Errorf("noop = %+v, %v", res, err)
	}
}

func TestSleep(t *testing.T) {
	res, err := builtin.Sleep{}.Execute(context.Background(), input("sleep", map[string]any{"duration": "20ms"}))
	if err != nil || !reflect.DeepEqual(res.Output, map[string]any{"slept": "20ms"}) {
		t.Fatalf("sleep = %+v, %v", res, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	start := time.Now()
	_, err = builtin.Sleep{}.Execute(ctx, input("sleep", map[string]any{"duration": "10s"}))
	if !errors.Is(err, context.Canceled) || time.Since(start) > 5*time.Second {
		t.Fatalf("cancelled sleep = %v after %s", err, time.Since(start))
	}
	_, err = builtin.Sleep{}.Execute(context.Background(), input("sleep", map[string]any{"duration": "soon"}))
	failure(t, err, events.FailureValidation, false)
}

func TestFail(t *testing.T) {
	_, err := builtin.Fail{}.Execute(context.Background(), input("fail", map[string]any{"type": "Boom", "message": "bad", "retryable": false}))
	if we := failure(t, err, "Boom", false); we.Message != "bad" {
		t.Errorf("message = %q", we.Message)
	}
	in := input("fail", map[string]any{"failAttempts": 2})
	_, err = builtin.Fail{}.Execute(context.Background(), in)
	failure(t, err, "Error", true)
	in.Attempt = 3
	if res, err := (builtin.Fail{}).Execute(context.Background(), in); err != nil || !reflect.DeepEqual(res.Output, map[string]any{"attempt": 3}) {
		t.Errorf("third attempt = %+v, %v", res, err)
	}
}

func TestTransform(t *testing.T) {
	in := input("transform", map[string]any{
		"set": map[string]any{
			"count":    "state.count + 1",
			"greeting": `"hello " + invocation.user`,
			"big":      "state.price > 10",
			"item":     "local.id",
			"tags":     "input.tags.map(t, t.upperAscii())",
		},
	})
	in.State = map[string]any{"count": 2.0, "price": 12.5, "tags": []any{"a", "b"}}
	in.Invocation = map[string]any{"user": "ada"}
	in.Local = map[string]any{"id": 7.0}
	res, err := builtin.Transform{}.Execute(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"count": 3.0, "greeting": "hello ada", "big": true, "item": 7.0, "tags": []any{"A", "B"}}
	if !reflect.DeepEqual(res.Updates, want) || !reflect.DeepEqual(res.Output, want) {
		t.Errorf("updates = %#v\noutput = %#v\nwant %#v", res.Updates, res.Output, want)
	}

	in = input("transform", map[string]any{"set": map[string]any{"x": "1"}, "output": "{'n': state.n * 2.0}"})
	in.State = map[string]any{"n": 1.5}
	res, err = builtin.Transform{}.Execute(context.Background(), in)
	if err != nil || !reflect.DeepEqual(res.Output, map[string]any{"n": 3.0}) || res.Updates["x"] != 1.0 {
		t.Errorf("output = %#v, %v", res, err)
	}

	_, err = builtin.Transform{}.Execute(context.Background(), input("transform", map[string]any{"set": map[string]any{"total": "state.a +"}}))
	if we := failure(t, err, events.FailureValidation, false); !strings.Contains(we.Message, "set.total") {
		t.Errorf("compile error does not name the key: %s", we.Message)
	}
	_, err = builtin.Transform{}.Execute(context.Background(), input("transform", map[string]any{"set": map[string]any{"v": "state.missing"}}))
	failure(t, err, builtin.FailureEvaluation, false)
	_, err = builtin.Transform{}.Execute(context.Background(), input("transform", map[string]any{"set": map[string]any{"v": "[1,2,3].map(a, [1,2,3].map(b, [1,2,3,4,5,6,7,8,9,10].map(c, [1,2,3,4,5,6,7,8,9,10].map(d, [1,2,3,4,5,6,7,8,9,10].map(e, [1,2,3,4,5,6,7,8,9,10].map(f, a*b*c*d*e*f))))))"}}))
	failure(t, err, builtin.FailureEvaluation, false)
}

func TestHTTP(t *testing.T) {
	var gotKey, gotBody, gotMethod string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotKey, gotMethod = r.Header.Get("Idempotency-Key"), r.Method
		b := make([]byte, 1024)
		n, _ := r.Body.Read(b)
		gotBody = string(b[:n])
		switch r.URL.Path {
		case "/ok":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Thing", "1")
			_, _ = w.Write([]byte(`{"id": 42}`))
		case "/text":
			_, _ = w.Write([]byte("plain"))
		case "/boom":
			http.Error(w, "down", http.StatusInternalServerError)
		case "/big":
			_, _ = w.Write([]byte(strings.Repeat("x", 2048)))
		case "/slow":
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	h := &builtin.HTTP{Policy: allow(t, "127.0.0.1"), MaxBody: 1024}

	res, err := h.Execute(context.Background(), input("http", map[string]any{"url": srv.URL + "/ok", "method": "post", "body": map[string]any{"q": 1}}))
	if err != nil {
		t.Fatal(err)
	}
	out := res.Output.(map[string]any)
	if out["status"] != 200 || !reflect.DeepEqual(out["body"], map[string]any{"id": 42.0}) || out["headers"].(map[string]any)["X-Thing"] != "1" {
		t.Errorf("output = %#v", out)
	}
	if gotKey != "key-123" || gotMethod != "POST" || gotBody != `{"q":1}` {
		t.Errorf("request: key %q method %q body %q", gotKey, gotMethod, gotBody)
	}

	res, err = h.Execute(context.Background(), input("http", map[string]any{"url": srv.URL + "/text"}))
	if err != nil || res.Output.(map[string]any)["body"] != "plain" {
		t.Errorf("text = %+v, %v", res, err)
	}

	tests := []struct {
		name      string
		config    map[string]any
		wantType  string
		retryable bool
	}{
		{"5xx", map[string]any{"url": srv.URL + "/boom"}, builtin.FailureHTTPStatus, true},
		{"404", map[string]any{"url": srv.URL + "/nope"}, builtin.FailureHTTPStatus, false},
		{"unexpected 200", map[string]any{"url": srv.URL + "/text", "expectStatus": []int{201}}, builtin.FailureHTTPStatus, false},
		{"too large", map[string]any{"url": srv.URL + "/big"}, builtin.FailureResponseTooLarge, false},
		{"timeout", map[string]any{"url": srv.URL + "/slow", "timeout": "50ms"}, events.FailureTimeout, true},
		{"network", map[string]any{"url": "http://127.0.0.1:1/"}, builtin.FailureHTTPNetwork, true},
		{"bad url", map[string]any{"url": "ftp://x"}, events.FailureValidation, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := h.Execute(context.Background(), input("http", tt.config))
			failure(t, err, tt.wantType, tt.retryable)
		})
	}
}
