package trigger_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/schedule"
	"github.com/weft-dev/weft/internal/setup"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/internal/trigger"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
)

const orderGraph = `name: order
nodes:
  - id: a
    type: passthrough
edges:
  - from: START
    to: a
  - from: a
    to: END
`

type env struct {
	t   *testing.T
	ctx context.Context
	st  events.Store
	js  jetstream.JetStream
	nc  *nats.Conn
	ts  *trigger.Store
	g   *graph.Graph
}

// newEnv is a server with the buckets, a user stream ORDERS on orders.>
// (de-duplication window dedup) and runners over store (the real one, or
// a wrapper).
func newEnv(t *testing.T, dedup time.Duration) *env {
	t.Helper()
	srv, st := testkit.Store(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	nc, js := testkit.Connect(t, srv)
	for _, c := range schedule.KVConfigs(1) {
		if _, err := setup.EnsureKV(ctx, js, c, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Duplicates: dedup}); err != nil {
		t.Fatal(err)
	}
	ts, err := trigger.Open(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.Parse([]byte(orderGraph), "order.yaml", graph.AllowAnyType())
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, ctx: ctx, st: st, js: js, nc: nc, ts: ts, g: g}
}

func (e *env) runner(st events.Store) {
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan struct{})
	go func() { _ = trigger.NewRunner(st).Run(ctx); close(done) }()
	e.t.Cleanup(func() { cancel(); <-done })
}

func (e *env) create(d *trigger.Definition) {
	e.t.Helper()
	d.SetGraph(e.g)
	if err := e.ts.Create(e.ctx, d); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) publish(subject, id, body string) {
	e.t.Helper()
	m := nats.NewMsg(subject)
	m.Data = []byte(body)
	if id != "" {
		m.Header.Set(nats.MsgIdHdr, id)
	}
	if _, err := e.js.PublishMsg(e.ctx, m); err != nil {
		e.t.Fatal(err)
	}
}

// waitState waits until ok holds of the trigger's state.
func (e *env) waitState(name string, ok func(*trigger.State) bool, within time.Duration) *trigger.State {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for {
		st, _, err := e.ts.State(e.ctx, name)
		if err != nil {
			e.t.Fatal(err)
		}
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("trigger %s: state %+v", name, st)
		}
		// Polls: a trigger's state is a KV value re-read here.
		time.Sleep(50 * time.Millisecond)
	}
}

// starts counts the runs started per run id, for the runs whose id has
// prefix.
func (e *env) starts(prefix string) map[string]int {
	e.t.Helper()
	s, err := e.js.Stream(e.ctx, e.st.StreamName())
	if err != nil {
		e.t.Fatal(err)
	}
	info, err := s.Info(e.ctx, jetstream.WithSubjectFilter(eventlog.KindFilter(events.RunStarted)))
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]int{}
	for subj, n := range info.State.Subjects {
		if p, ok := eventlog.Parse(subj); ok && strings.HasPrefix(p.Run, prefix) {
			out[p.Run] = int(n)
		}
	}
	return out
}

// TestTriggerMapsMessages: the filter, input and id expressions; a
// message published again under the same id (after the stream's own
// de-duplication window) starts no second run; bad messages are counted,
// recorded, and do not stall the trigger.
func TestTriggerMapsMessages(t *testing.T) {
	e := newEnv(t, 100*time.Millisecond)
	e.runner(e.st)
	e.runner(e.st) // two coordinators
	e.create(&trigger.Definition{Name: "orders", Subject: "orders.created", Filter: "input.amount > 10", Input: `{"order": input.id, "amount": input.amount, "via": local.subject}`, ID: "input.id"})
	e.create(&trigger.Definition{Name: "raw", Subject: "orders.raw"}) // the stream is looked up; ids from Nats-Msg-Id
	e.publish("orders.created", "", `{"id":"o1","amount":20}`)
	// Republishes after the first message was taken: the duplicate must arrive as a later delivery, which no event marks.
	time.Sleep(100 * time.Millisecond)
	e.publish("orders.created", "", `{"id":"o1","amount":20}`) // republished: the same -id
	e.publish("orders.created", "", `{"id":"o2","amount":5}`)  // filtered
	e.publish("orders.created", "", `not json`)                // bad: the filter fails
	e.publish("orders.created", "", `{"amount":50}`)           // bad: no id for -input
	e.publish("orders.created", "", `{"id":"o3","amount":30}`) // after the bad ones: starts
	e.publish("orders.raw", "m1", `{"x":1}`)
	time.Sleep(200 * time.Millisecond)       // past the stream's de-duplication window
	e.publish("orders.raw", "m1", `{"x":1}`) // republished under the same Nats-Msg-Id
	e.publish("orders.raw", "", `[1,2]`)     // bad: not an object, and no -input
	st := e.waitState("orders", func(s *trigger.State) bool { return s.Started+s.Duplicates+s.Filtered+s.Bad == 6 }, 20*time.Second)
	if st.Started != 2 || st.Duplicates != 1 || st.Filtered != 1 || st.Bad != 2 || len(st.LastBad) != 2 {
		t.Fatalf("orders: %+v", st)
	}
	errs := st.LastBad[0].Error + " | " + st.LastBad[1].Error
	if !strings.Contains(errs, "-filter") || !strings.Contains(errs, "-input") || st.LastBad[0].Seq == 0 {
		t.Fatalf("bad messages not explained: %+v", st.LastBad)
	}
	raw := e.waitState("raw", func(s *trigger.State) bool { return s.Started+s.Duplicates+s.Bad == 3 }, 20*time.Second)
	if raw.Started != 1 || raw.Duplicates != 1 || raw.Bad != 1 || !strings.Contains(raw.LastBad[0].Error, "not a JSON object") {
		t.Fatalf("raw: %+v", raw)
	}
	runs := e.starts("orders-")
	if len(runs) != 2 {
		t.Fatalf("orders runs %v", runs)
	}
	for run, n := range runs {
		if n != 1 {
			t.Fatalf("run %s started %d times", run, n)
		}
		var d *events.RunStartedData
		_ = eventlog.Each(e.ctx, e.st, run, 0, 0, func(ev *events.Event) error {
			p, _ := ev.Payload()
			if s, ok := p.(*events.RunStartedData); ok {
				d = s
			}
			return nil
		})
		if d == nil || d.Trigger == nil || d.Trigger.Kind != events.TriggerEvent || d.Trigger.Name != "orders" || !strings.Contains(string(d.Input), `"via":"orders.created"`) {
			t.Fatalf("run %s start %+v", run, d)
		}
	}
	if n := len(e.starts("raw-")); n != 1 {
		t.Fatalf("raw runs: %d", n)
	}
}

// TestTriggerRedelivered: the append of a run's start lands but its
// acknowledgement is lost, so the message comes again: one run.
func TestTriggerRedelivered(t *testing.T) {
	e := newEnv(t, time.Minute)
	fs := testkit.NewFaultStore(e.st)
	var lost atomic.Int32
	fs.Set(func(f *testkit.FaultStore) {
		f.AfterAppend = func(run string, evs []*events.Event) error {
			if lost.Add(1) <= 3 {
				return errors.New("injected: the acknowledgement was lost")
			}
			return nil
		}
	})
	e.runner(fs)
	e.create(&trigger.Definition{Name: "re", Subject: "orders.re"})
	for i := range 3 {
		e.publish("orders.re", fmt.Sprint("r", i), `{"n":1}`)
	}
	st := e.waitState("re", func(s *trigger.State) bool { return s.Started+s.Duplicates >= 3 }, 20*time.Second)
	runs := e.starts("re-")
	if len(runs) != 3 {
		t.Fatalf("%d runs for 3 messages: %v (state %+v)", len(runs), runs, st)
	}
	for run, n := range runs {
		if n != 1 {
			t.Fatalf("run %s started %d times", run, n)
		}
	}
	if st.Duplicates < 1 {
		t.Fatalf("no redelivery seen: %+v", st)
	}
}

// TestTriggerBurst: 10,000 messages, two runners: every message starts
// its run, once.
func TestTriggerBurst(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 runs")
	}
	e := newEnv(t, time.Minute)
	e.runner(e.st)
	e.runner(e.st)
	e.create(&trigger.Definition{Name: "burst", Subject: "orders.burst", ID: "string(input.n)"})
	const n = 10000
	began := time.Now()
	for i := range n {
		m := nats.NewMsg("orders.burst")
		m.Data = fmt.Appendf(nil, `{"n":%d}`, i)
		if _, err := e.js.PublishMsgAsync(m); err != nil {
			t.Fatal(err)
		}
		if i%1000 == 999 {
			<-e.js.PublishAsyncComplete()
		}
	}
	<-e.js.PublishAsyncComplete()
	st := e.waitState("burst", func(s *trigger.State) bool { return s.Started+s.Duplicates+s.Bad >= n }, 2*time.Minute)
	took := time.Since(began)
	runs := e.starts("burst-")
	if len(runs) != n || st.Started != n || st.Bad != 0 {
		t.Fatalf("%d runs, state %+v; want %d", len(runs), st, n)
	}
	for run, c := range runs {
		if c != 1 {
			t.Fatalf("run %s started %d times", run, c)
		}
	}
	t.Logf("%d messages → %d runs in %s (%.0f runs/s)", n, len(runs), took.Round(time.Millisecond), float64(n)/took.Seconds())
}

// TestBadTriggers: each gets an error naming its flag, and nothing is
// created.
func TestBadTriggers(t *testing.T) {
	e := newEnv(t, time.Minute)
	for _, c := range []struct {
		d    trigger.Definition
		want string
	}{
		{trigger.Definition{Name: "a", Subject: "orders.x", Filter: "input.amount >"}, "-filter"},
		{trigger.Definition{Name: "a", Subject: "orders.x", Filter: "1 + 2"}, "-filter"},
		{trigger.Definition{Name: "a", Subject: "orders.x", Input: "input.("}, "-input"},
		{trigger.Definition{Name: "a", Subject: "nowhere.x"}, "no stream captures"},
		{trigger.Definition{Name: "a", Subject: "orders.x", Stream: "NOPE"}, "-stream NOPE"},
		{trigger.Definition{Name: "a", Subject: "weft.r.>", Stream: "ORDERS"}, "Weft's own"},
		{trigger.Definition{Name: "a", Subject: "bad subject"}, "-subject"},
		{trigger.Definition{Name: "a.b", Subject: "orders.x"}, "name"},
		{trigger.Definition{Name: "a", Subject: "orders.x", Webhook: "git hub"}, "-webhook"},
	} {
		c.d.SetGraph(e.g)
		err := e.ts.Create(e.ctx, &c.d)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %s", c.d.Subject, err, c.want)
		}
	}
	if l, err := e.ts.List(e.ctx); err != nil || len(l) != 0 {
		t.Fatalf("after refused creates: %v %v", l, err)
	}
}
