package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/weft-dev/weft/internal/worker"
	"github.com/weft-dev/weft/pkg/events"
)

// recorder notes the steps a node goes through.
type recorder struct {
	mu    sync.Mutex
	steps []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	r.steps = append(r.steps, s)
	r.mu.Unlock()
}

func (r *recorder) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.steps...)
}

// lifecycleNode implements every optional interface.
type lifecycleNode struct {
	rec      *recorder
	invalid  bool
	skip     bool
	execErr  error
	fallback bool
}

func (n *lifecycleNode) Execute(ctx context.Context, in *worker.Input) (*worker.Result, error) {
	return worker.RunPhases(ctx, n, in)
}

func (n *lifecycleNode) Validate(in *worker.Input) error {
	n.rec.add("validate")
	if n.invalid {
		return errors.New("state.name: want a non-empty string")
	}
	return nil
}

func (n *lifecycleNode) ShouldExecute(ctx context.Context, in *worker.Input) (bool, error) {
	n.rec.add("shouldExecute")
	return !n.skip, nil
}

func (n *lifecycleNode) Before(ctx context.Context, in *worker.Input) error {
	n.rec.add("before")
	return nil
}

func (n *lifecycleNode) Prep(ctx context.Context, in *worker.Input) (any, error) {
	n.rec.add("prep")
	return in.State["name"], nil
}

func (n *lifecycleNode) Exec(ctx context.Context, prep any) (any, error) {
	n.rec.add("exec")
	if n.execErr != nil {
		return nil, n.execErr
	}
	return "hello " + prep.(string), nil
}

func (n *lifecycleNode) Post(ctx context.Context, in *worker.Input, prep, exec any) (*worker.Result, error) {
	n.rec.add("post")
	return &worker.Result{Output: exec, Updates: map[string]any{"greeting": exec}, Actions: []worker.Action{{Name: "greeted"}}}, nil
}

func (n *lifecycleNode) After(ctx context.Context, in *worker.Input, res *worker.Result) error {
	n.rec.add("after")
	return nil
}

func (n *lifecycleNode) Failed(ctx context.Context, in *worker.Input, err error) {
	n.rec.add("failed")
}

func (n *lifecycleNode) Fallback(ctx context.Context, in *worker.Input, err error) (*worker.Result, error) {
	n.rec.add("fallback")
	if !n.fallback {
		return nil, errors.New("no fallback")
	}
	return &worker.Result{Output: "fallback"}, nil
}

func TestNodeLifecycle(t *testing.T) {
	tests := []struct {
		name        string
		node        lifecycleNode
		attempt     int
		maxAttempts int
		wantSteps   []string
		wantType    events.Type
		check       func(t *testing.T, evs []*events.Event)
	}{{
		name:      "success",
		wantSteps: []string{"validate", "shouldExecute", "before", "prep", "exec", "post", "after"},
		wantType:  events.NodeInvoked,
		check: func(t *testing.T, evs []*events.Event) {
			d := ofType[*events.NodeInvokedData](t, evs, events.NodeInvoked)[0]
			if string(d.Output) != `"hello ada"` || string(d.Updates["greeting"]) != `"hello ada"` || d.Actions[0].Name != "greeted" || d.Fallback {
				t.Errorf("invoked = %+v", d)
			}
		},
	}, {
		name:      "invalid input",
		node:      lifecycleNode{invalid: true},
		wantSteps: []string{"validate", "failed", "fallback"},
		wantType:  events.NodeFailed,
		check: func(t *testing.T, evs []*events.Event) {
			d := ofType[*events.NodeFailedData](t, evs, events.NodeFailed)[0]
			if d.Error.Type != events.FailureValidation || d.Error.Retryable || !strings.Contains(d.Error.Message, "state.name: want a non-empty string") {
				t.Errorf("failure = %+v", d.Error)
			}
		},
	}, {
		name:      "skipped",
		node:      lifecycleNode{skip: true},
		wantSteps: []string{"validate", "shouldExecute"},
		wantType:  events.NodeInvoked,
		check: func(t *testing.T, evs []*events.Event) {
			d := ofType[*events.NodeInvokedData](t, evs, events.NodeInvoked)[0]
			want := []events.FilterNote{{Filter: "shouldExecute", Action: worker.FilterSkipped}}
			if d.Output != nil || d.Updates != nil || d.Actions != nil || !reflect.DeepEqual(d.Filters, want) {
				t.Errorf("invoked = %+v", d)
			}
		},
	}, {
		name:        "retryable failure before the last attempt",
		node:        lifecycleNode{execErr: errors.New("flaky"), fallback: true},
		attempt:     1,
		maxAttempts: 3,
		wantSteps:   []string{"validate", "shouldExecute", "before", "prep", "exec", "failed"},
		wantType:    events.NodeFailed,
	}, {
		name:        "last attempt falls back",
		node:        lifecycleNode{execErr: errors.New("flaky"), fallback: true},
		attempt:     3,
		maxAttempts: 3,
		wantSteps:   []string{"validate", "shouldExecute", "before", "prep", "exec", "failed", "fallback"},
		wantType:    events.NodeInvoked,
		check: func(t *testing.T, evs []*events.Event) {
			d := ofType[*events.NodeInvokedData](t, evs, events.NodeInvoked)[0]
			if string(d.Output) != `"fallback"` || !d.Fallback || d.Attempt != 3 {
				t.Errorf("invoked = %+v", d)
			}
		},
	}, {
		name:        "non-retryable failure falls back at once",
		node:        lifecycleNode{execErr: worker.NonRetryable("Refused", "no"), fallback: true},
		attempt:     1,
		maxAttempts: 3,
		wantSteps:   []string{"validate", "shouldExecute", "before", "prep", "exec", "failed", "fallback"},
		wantType:    events.NodeInvoked,
	}, {
		name:        "failing fallback leaves the failure",
		node:        lifecycleNode{execErr: worker.NonRetryable("Refused", "no")},
		attempt:     1,
		maxAttempts: 3,
		wantSteps:   []string{"validate", "shouldExecute", "before", "prep", "exec", "failed", "fallback"},
		wantType:    events.NodeFailed,
		check: func(t *testing.T, evs []*events.Event) {
			if d := ofType[*events.NodeFailedData](t, evs, events.NodeFailed)[0]; d.Error.Type != "Refused" {
				t.Errorf("failure = %+v", d.Error)
			}
		},
	}}
	st := testStore(t)
	nodes := map[string]worker.Node{}
	recs := map[string]*recorder{}
	for i := range tests {
		tt := &tests[i]
		typ := "life" + string(rune('a'+i))
		rec := &recorder{}
		tt.node.rec = rec
		nodes[typ] = &tt.node
		recs[tt.name] = rec
	}
	startWorker(t, st, nodes)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			typ := "life" + string(rune('a'+i))
			run := publishReady(t, st, typ, withInput(map[string]any{"name": "ada"}), func(d *events.NodeReadyData) {
				if tt.attempt > 0 {
					d.Attempt = tt.attempt
				}
				d.MaxAttempts = tt.maxAttempts
			})
			evs := waitOutcome(t, st, run, tt.wantType)
			if got := recs[tt.name].get(); !reflect.DeepEqual(got, tt.wantSteps) {
				t.Errorf("steps = %v, want %v", got, tt.wantSteps)
			}
			if tt.check != nil {
				tt.check(t, evs)
			}
		})
	}
}

// A plain Phases value is a node too; exec sees only prep's result.
func TestPhases(t *testing.T) {
	st := testStore(t)
	var execSaw any
	startWorker(t, st, map[string]worker.Node{
		"phased": worker.Phases{
			Prep: func(ctx context.Context, in *worker.Input) (any, error) { return in.State["n"], nil },
			Exec: func(ctx context.Context, prep any) (any, error) { execSaw = prep; return prep.(float64) * 2, nil },
		},
	})
	run := publishReady(t, st, "phased", withInput(map[string]any{"n": 21, "other": "x"}))
	evs := waitOutcome(t, st, run, events.NodeInvoked)
	if d := ofType[*events.NodeInvokedData](t, evs, events.NodeInvoked)[0]; string(d.Output) != "42" {
		t.Errorf("output = %s", d.Output)
	}
	if execSaw != 21.0 {
		t.Errorf("exec saw %v, want only prep's result", execSaw)
	}
}

func TestSchemas(t *testing.T) {
	inSchema := json.RawMessage(`{"type":"object","required":["user"],"properties":{"user":{"type":"object","properties":{"age":{"type":"integer","minimum":0}},"required":["age"]}}}`)
	outSchema := json.RawMessage(`{"type":"object","properties":{"score":{"type":"number","maximum":1}},"required":["score"]}`)
	st := testStore(t)
	startWorker(t, st, map[string]worker.Node{
		"score": worker.NodeFunc(func(ctx context.Context, in *worker.Input) (*worker.Result, error) {
			return &worker.Result{Output: map[string]any{"score": in.State["score"]}, Updates: map[string]any{"score": 1, "extra": 2}}, nil
		}),
	})
	tests := []struct {
		name      string
		input     any
		outputs   []string
		wantField string // "" for success
		wantMsg   string
	}{
		{name: "valid", input: map[string]any{"user": map[string]any{"age": 3}, "score": 0.5}},
		{name: "input type", input: map[string]any{"user": map[string]any{"age": "three"}, "score": 0.5}, wantField: "/user/age", wantMsg: "input does not match its schema: /user/age:"},
		{name: "input missing", input: map[string]any{"score": 0.5}, wantField: "", wantMsg: "missing property 'user'"},
		{name: "output", input: map[string]any{"user": map[string]any{"age": 3}, "score": 7}, wantField: "/score", wantMsg: "output does not match its schema: /score:"},
		{name: "undeclared output", input: map[string]any{"user": map[string]any{"age": 3}, "score": 0.5}, outputs: []string{"score"}, wantMsg: "does not declare as outputs: extra"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := publishReady(t, st, "score", withInput(tt.input), func(d *events.NodeReadyData) {
				d.InputSchema, d.OutputSchema, d.Outputs = inSchema, outSchema, tt.outputs
			})
			if tt.wantMsg == "" {
				waitOutcome(t, st, run, events.NodeInvoked)
				return
			}
			evs := waitOutcome(t, st, run, events.NodeFailed)
			f := ofType[*events.NodeFailedData](t, evs, events.NodeFailed)[0].Error
			if f.Type != events.FailureValidation || f.Retryable || !strings.Contains(f.Message, tt.wantMsg) {
				t.Fatalf("failure = %+v, want a non-retryable ValidationError saying %q", f, tt.wantMsg)
			}
			if tt.outputs != nil {
				return
			}
			var details struct {
				Fields []worker.FieldError `json:"fields"`
			}
			if err := json.Unmarshal(f.Details, &details); err != nil || len(details.Fields) == 0 || details.Fields[0].Field != tt.wantField {
				t.Errorf("details = %s, want field %q", f.Details, tt.wantField)
			}
		})
	}
}

func TestFilters(t *testing.T) {
	st := testStore(t)
	var order []string
	var mu sync.Mutex
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	startWorker(t, st, map[string]worker.Node{
		"echo": worker.NodeFunc(func(ctx context.Context, in *worker.Input) (*worker.Result, error) {
			note("node")
			return &worker.Result{Output: in.State}, nil
		}),
	},
		worker.WithInvokingFilter("tenant", worker.InvokingFilterFunc(func(ctx context.Context, in *worker.Input) (worker.FilterDecision, error) {
			note("tenant")
			if in.State["tenant"] == "blocked" {
				return worker.Cancel("tenant is blocked"), nil
			}
			return worker.Pass(), nil
		})),
		worker.WithInvokingFilter("redact-in", worker.InvokingFilterFunc(func(ctx context.Context, in *worker.Input) (worker.FilterDecision, error) {
			note("redact-in")
			if _, ok := in.State["secret"]; ok {
				in.State["secret"] = "***"
				return worker.Modify("secret masked"), nil
			}
			return worker.Pass(), nil
		})),
		worker.WithInvokedFilter("wrap", worker.InvokedFilterFunc(func(ctx context.Context, in *worker.Input, res *worker.Result) (*worker.Result, error) {
			note("wrap")
			return &worker.Result{Output: map[string]any{"wrapped": res.Output}}, nil
		})),
		worker.WithInvokedFilter("audit", worker.InvokedFilterFunc(func(ctx context.Context, in *worker.Input, res *worker.Result) (*worker.Result, error) {
			note("audit")
			return res, nil
		})),
	)

	t.Run("modify and replace", func(t *testing.T) {
		order = nil
		run := publishReady(t, st, "echo", withInput(map[string]any{"secret": "s3cr3t", "tenant": "a"}))
		evs := waitOutcome(t, st, run, events.NodeInvoked)
		invoking := ofType[*events.NodeInvokingData](t, evs, events.NodeInvoking)[0]
		wantIn := []events.FilterNote{{Filter: "tenant", Action: "passed"}, {Filter: "redact-in", Action: "modified", Note: "secret masked"}}
		if !reflect.DeepEqual(invoking.Filters, wantIn) {
			t.Errorf("invoking filters = %+v, want %+v", invoking.Filters, wantIn)
		}
		invoked := ofType[*events.NodeInvokedData](t, evs, events.NodeInvoked)[0]
		wantOut := []events.FilterNote{{Filter: "wrap", Action: "replaced"}, {Filter: "audit", Action: "passed"}}
		if !reflect.DeepEqual(invoked.Filters, wantOut) {
			t.Errorf("invoked filters = %+v, want %+v", invoked.Filters, wantOut)
		}
		if string(invoked.Output) != `{"wrapped":{"secret":"***","tenant":"a"}}` {
			t.Errorf("output = %s", invoked.Output)
		}
		mu.Lock()
		defer mu.Unlock()
		if want := []string{"tenant", "redact-in", "node", "wrap", "audit"}; !reflect.DeepEqual(order, want) {
			t.Errorf("order = %v, want %v", order, want)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		order = nil
		run := publishReady(t, st, "echo", withInput(map[string]any{"tenant": "blocked"}))
		evs := waitOutcome(t, st, run, events.NodeCanceled)
		if want := []events.Type{events.NodeReady, events.NodeInvoking, events.NodeCanceled}; !reflect.DeepEqual(types(evs), want) {
			t.Fatalf("log = %v, want %v", types(evs), want)
		}
		c := ofType[*events.NodeCancelledData](t, evs, events.NodeCanceled)[0]
		if c.By != "filter:tenant" || c.Reason != "tenant is blocked" {
			t.Errorf("cancelled = %+v", c)
		}
		invoking := ofType[*events.NodeInvokingData](t, evs, events.NodeInvoking)[0]
		if len(invoking.Filters) != 1 || invoking.Filters[0].Action != "cancelled" {
			t.Errorf("invoking filters = %+v", invoking.Filters)
		}
		mu.Lock()
		defer mu.Unlock()
		if want := []string{"tenant"}; !reflect.DeepEqual(order, want) {
			t.Errorf("order = %v, want %v", order, want)
		}
	})
}
