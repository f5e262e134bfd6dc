package admission_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weft-dev/weft/internal/admission"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/provision"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/events"
)

// namespace sets up a store as 'weft roles -setup' sets up a namespace,
// with the given limits, and runs an admission server on it.
func namespace(t *testing.T, ns provision.Namespace) (events.Store, *admission.Server) {
	t.Helper()
	_, st := testkit.Store(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := provision.Run(ctx, st, provision.Options{Namespace: &ns}); err != nil {
		t.Fatal(err)
	}
	srv, err := admission.New(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if !srv.Enabled() {
		t.Fatal("the namespace's stream does not turn admission on")
	}
	run, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(run) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	// Answering once its subscriptions are in.
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := admission.Request(ctx, eventlog.JetStream(st).Conn(), start(t))
		if !errors.Is(err, admission.ErrUnavailable) || time.Now().After(deadline) {
			break
		}
		// Polls: the admission responder's readiness has no event a client can wait for.
		time.Sleep(10 * time.Millisecond)
	}
	return st, srv
}

func start(t *testing.T) *events.Event {
	t.Helper()
	run := events.NewRunID()
	e, err := events.New(run, run, time.Time{}, &events.RunStartedData{GraphName: "g", Graph: []byte(`{"name":"g"}`)})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func quota(name string) provision.Namespace {
	return provision.Namespace{Name: name, StreamMaxBytes: 64 << 20, StreamMaxMsgs: 100000, StartsPerSecond: 20, SignalsPerSecond: 20}
}

// TestAdmitted: a start asked for is appended, once, and its sequence
// given back; a second start of the run is refused as existing.
func TestAdmitted(t *testing.T) {
	st, _ := namespace(t, quota("a"))
	ctx := context.Background()
	nc := eventlog.JetStream(st).Conn()
	e := start(t)
	seq, err := admission.Request(ctx, nc, e)
	if err != nil || seq == 0 {
		t.Fatalf("admitted: %d, %v", seq, err)
	}
	evs, err := st.Read(ctx, e.RunID, 0, 0)
	if err != nil || len(evs) != 1 || evs[0].Type != events.RunStarted || evs[0].Seq != seq {
		t.Fatalf("the run's log: %v %v", evs, err)
	}
	// The same start again (a retry after a lost answer): the same run.
	if again, err := admission.Request(ctx, nc, e); err != nil || again != seq {
		t.Fatalf("the same start again: %d, %v", again, err)
	}
	other, _ := events.New(e.RunID, e.RunID, time.Time{}, &events.RunStartedData{GraphName: "h", Graph: []byte(`{"name":"h"}`)})
	if _, err := admission.Request(ctx, nc, other); !errors.Is(err, events.ErrRunExists) {
		t.Fatalf("another start of the run: %v", err)
	}
	sig, _ := events.New(e.RunID, "sig-1", time.Time{}, &events.SignalReceivedData{Node: "ask"})
	if _, err := admission.Request(ctx, nc, sig); err != nil {
		t.Fatalf("a signal: %v", err)
	}
	nobody := events.NewRunID()
	stray, _ := events.New(nobody, "sig-2", time.Time{}, &events.SignalReceivedData{Node: "ask"})
	if _, err := admission.Request(ctx, nc, stray); !errors.Is(err, events.ErrRunNotFound) {
		t.Fatalf("a signal for no run of the namespace: %v", err)
	}
	if _, err := st.LastSeq(ctx, nobody); !errors.Is(err, events.ErrRunNotFound) {
		t.Fatalf("a signal for no run was written: %v", err)
	}
}

// TestFloodRefused: starts asked for as fast as they come are admitted at
// the namespace's limit, and the others are refused with an error that
// names it; nothing is written for a refused start.
func TestFloodRefused(t *testing.T) {
	st, srv := namespace(t, quota("flood"))
	ctx := context.Background()
	nc := eventlog.JetStream(st).Conn()
	before, _ := streamMsgs(t, st)
	var admitted, refused atomic.Int64
	var firstRefusal atomic.Value
	end := time.Now().Add(2 * time.Second)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for time.Now().Before(end) {
				_, err := admission.Request(ctx, nc, start(t))
				switch {
				case err == nil:
					admitted.Add(1)
				case errors.Is(err, admission.ErrLimit):
					refused.Add(1)
					firstRefusal.CompareAndSwap(nil, err.Error())
				default:
					t.Errorf("neither admitted nor refused for the limit: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	// 2 s at 20 a second, and the first second's burst: about 40 to 60.
	if a := admitted.Load(); a < 20 || a > 80 {
		t.Errorf("%d starts admitted in 2 s at a limit of 20 per second", a)
	}
	if refused.Load() < 100 {
		t.Errorf("only %d starts refused", refused.Load())
	}
	msg, _ := firstRefusal.Load().(string)
	if !strings.HasPrefix(msg, "admission: run starts over 20 per second in namespace flood: nothing was written") {
		t.Errorf("the refusal says %q", msg)
	}
	after, _ := streamMsgs(t, st)
	if after-before != uint64(admitted.Load()) {
		t.Errorf("the stream took %d messages for %d starts admitted", after-before, admitted.Load())
	}
	as, rs, _, _ := srv.Stats()
	t.Logf("flood of 2 s: %d admitted, %d refused (server: %d, %d)", admitted.Load(), refused.Load(), as, rs)
}

// TestInvalidRefused: only a client's event of the request's kind is
// admitted.
func TestInvalidRefused(t *testing.T) {
	st, _ := namespace(t, quota("inv"))
	nc := eventlog.JetStream(st).Conn()
	e := start(t)
	m, err := eventlog.Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	for name, req := range map[string]*nats.Msg{
		"a start on the signal subject":   {Subject: "weft.admit.signal", Header: nats.Header{admission.HdrSubject: {m.Subject}}, Data: m.Data},
		"a start on a decision's subject": {Subject: "weft.admit.start", Header: nats.Header{admission.HdrSubject: {strings.Replace(m.Subject, ".c.started", ".d.completed", 1)}}, Data: m.Data},
		"no event":                        {Subject: "weft.admit.start", Header: nats.Header{admission.HdrSubject: {m.Subject}}, Data: []byte("{}")},
	} {
		for k, v := range m.Header {
			if _, set := req.Header[k]; !set && name != "no event" {
				req.Header[k] = v
			}
		}
		resp, err := nc.RequestMsg(req, 5*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if resp.Header.Get(admission.HdrError) != "invalid" {
			t.Errorf("%s: answered %q %q", name, resp.Header.Get(admission.HdrError), resp.Data)
		}
	}
	if _, err := st.LastSeq(context.Background(), e.RunID); !errors.Is(err, events.ErrRunNotFound) {
		t.Fatalf("an invalid request was written: %v", err)
	}
}

// TestStartsRefusedWhenFull: above 90% of the events stream's max_msgs,
// starts are refused (the rest is for the runs in flight); signals still
// pass.
func TestStartsRefusedWhenFull(t *testing.T) {
	q := quota("full")
	q.StreamMaxMsgs = 10
	st, _ := namespace(t, q)
	ctx := context.Background()
	nc := eventlog.JetStream(st).Conn()
	var last *events.Event
	var err error
	for i := 0; i < 20; i++ {
		last = start(t)
		if _, err = admission.Request(ctx, nc, last); err != nil {
			break
		}
		time.Sleep(60 * time.Millisecond) // under the rate limit
	}
	if !errors.Is(err, admission.ErrQuota) || !strings.Contains(err.Error(), "starts are refused above 90%") {
		t.Fatalf("a start into a full stream: %v", err)
	}
	if n, _ := streamMsgs(t, st); n != 9 {
		t.Fatalf("the stream holds %d messages, want 9 (90%% of 10)", n)
	}
	// The store itself refuses what the stream cannot take: a direct
	// append at 100% says so.
	for i := 0; ; i++ {
		e := start(t)
		_, err := st.Append(ctx, e.RunID, 0, e)
		if err != nil {
			if qe := admission.QuotaError(err, st.StreamName()); !errors.Is(qe, admission.ErrQuota) {
				t.Fatalf("a full stream's refusal: %v", err)
			}
			break
		}
		if i > 5 {
			t.Fatal("the stream took more than its max_msgs")
		}
	}
}

func streamMsgs(t *testing.T, st events.Store) (uint64, error) {
	t.Helper()
	s, err := eventlog.JetStream(st).Stream(context.Background(), st.StreamName())
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs, nil
}

// TestTriggerClaimRefused: a client's start that claims to be a
// schedule's fire is refused, and not written: pkg/events will not encode
// one (events.TriggerClaimError), and the coordinator refuses the raw
// request (ErrInvalid).
func TestTriggerClaimRefused(t *testing.T) {
	st, _ := namespace(t, quota("claims"))
	ctx := context.Background()
	run := events.NewRunID()
	claim := &events.RunStartedData{GraphName: "g", Graph: []byte(`{"name":"g"}`),
		Trigger: &events.TriggerRef{Kind: events.TriggerSchedule, Name: "nightly", FireTime: time.Now()}}
	e, err := events.New(run, run, time.Time{}, claim)
	if err != nil {
		t.Fatal(err)
	}
	nc := eventlog.JetStream(st).Conn()
	var tc *events.TriggerClaimError
	if _, err := admission.Request(ctx, nc, e); !errors.As(err, &tc) {
		t.Fatalf("a start claiming a schedule: %v, want a TriggerClaimError", err)
	}
	// The raw request: a plain start's message, its data the claim's.
	plain, err := events.New(run, run, time.Time{}, &events.RunStartedData{GraphName: "g", Graph: []byte(`{"name":"g"}`)})
	if err != nil {
		t.Fatal(err)
	}
	m, err := eventlog.Encode(plain)
	if err != nil {
		t.Fatal(err)
	}
	req := nats.NewMsg(eventlog.AdmitStart)
	req.Header = m.Header
	req.Header.Set(admission.HdrSubject, m.Subject)
	req.Data, _ = json.Marshal(claim)
	resp, err := nc.RequestMsg(req, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Header.Get(admission.HdrError) == "" || !strings.Contains(string(resp.Data), "nightly") {
		t.Fatalf("the raw claim: answered %v %q, want a refusal naming nightly", resp.Header, resp.Data)
	}
	if _, err := st.LastSeq(ctx, run); !errors.Is(err, events.ErrRunNotFound) {
		t.Fatalf("the claimed start was written: %v", err)
	}
}
