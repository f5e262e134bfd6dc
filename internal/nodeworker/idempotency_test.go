package nodeworker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
)

// ledger is a payment service that applies each charge once per
// Idempotency-Key and answers a repeated key with the first result.
type ledger struct {
	mu      sync.Mutex
	seen    map[string]int // key → requests
	applied int            // side effects applied
	results map[string]string
	arrived chan struct{} // closed when the first request arrives
	release chan struct{} // the first request's answer waits for it
	first   sync.Once
}

func newLedger() *ledger {
	return &ledger{seen: map[string]int{}, results: map[string]string{}, arrived: make(chan struct{}), release: make(chan struct{})}
}

func (l *ledger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	l.mu.Lock()
	l.seen[key]++
	res, done := l.results[key]
	if !done {
		l.applied++
		res = fmt.Sprintf(`{"charge":%d}`, l.applied)
		l.results[key] = res
	}
	l.mu.Unlock()
	blocked := false
	l.first.Do(func() { blocked = true; close(l.arrived) })
	if blocked {
		<-l.release // the worker is killed while the effect is applied and unanswered
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(res))
}

// A worker killed after a side effect but before it recorded the outcome:
// the item is redelivered with the same idempotency key, the service
// applies the effect once, and the run's log has one outcome.
func TestKilledWorkerDoesNotApplyEffectTwice(t *testing.T) {
	srv, st := setup(t)
	setAckWait(t, st, 2*time.Second)
	l := newLedger()
	hs := httptest.NewServer(l)
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(l.release) }) }
	t.Cleanup(func() { release(); hs.Close() })

	doomed := startProc(t, srv, "doomed", "-ack-wait", "2s", "-http-allow", "127.0.0.1")
	waitPulling(t, st, 1)
	run := events.NewRunID()
	publish(t, st, run, "charge", "http", fmt.Sprintf(`{"url": %q, "method": "POST", "body": {"amount": 42}}`, hs.URL), "")
	select {
	case <-l.arrived:
	case <-time.After(15 * time.Second):
		t.Fatal("the charge never arrived")
	}
	if err := doomed.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = doomed.wait(t, 5*time.Second)
	release()

	startProc(t, srv, "heir", "-ack-wait", "2s", "-http-allow", "127.0.0.1")
	evs := waitCount(t, st, run, events.NodeInvoked, 1, 30*time.Second)

	l.mu.Lock()
	seen, applied := l.seen, l.applied
	l.mu.Unlock()
	if len(seen) != 1 || applied != 1 {
		t.Fatalf("service saw keys %v and applied %d effects, want one key and one effect", seen, applied)
	}
	for key, n := range seen {
		if n != 2 {
			t.Errorf("key %s sent %d times, want 2 (the killed delivery and the redelivery)", key, n)
		}
		if want := eventlog.IdempotencyKey(run, events.NodeRef{Node: "charge", Iteration: 1}, 1); key != want {
			t.Errorf("key = %s, want %s", key, want)
		}
	}
	invoking := payloads[*events.NodeInvokingData](t, evs)
	if len(invoking) != 2 || invoking[0].Worker != "doomed" || invoking[1].Worker != "heir" || invoking[1].Delivery != 2 {
		t.Errorf("invoking = %+v", invoking)
	}
	invoked := payloads[*events.NodeInvokedData](t, evs)
	if len(invoked) != 1 || invoked[0].Worker != "heir" {
		t.Fatalf("invoked = %+v", invoked)
	}
	var out struct {
		Body struct{ Charge int } `json:"body"`
	}
	if err := json.Unmarshal(invoked[0].Output, &out); err != nil || out.Body.Charge != 1 {
		t.Errorf("output = %s, want the first charge's result", invoked[0].Output)
	}
	// Gives a duplicate outcome the time to be (wrongly) appended: the absence of an event cannot be waited for.
	time.Sleep(300 * time.Millisecond)
	evs, err := st.Read(context.Background(), run, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(filter(evs, events.NodeInvoked)) + len(filter(evs, events.NodeFailed)); n != 1 {
		t.Errorf("%d outcomes, want 1", n)
	}
}
