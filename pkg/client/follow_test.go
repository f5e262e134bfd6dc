package client_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// fact is a worker's report for a run: an event of its own, which the
// fold passes over (no node is ready), written with AnySeq as workers do.
func fact(t *testing.T, run string, n int) *events.Event {
	t.Helper()
	e, err := events.New(run, fmt.Sprintf("%s:hb:%d", run, n), time.Time{}, &events.HeartbeatData{NodeRef: events.NodeRef{Node: "ask", Iteration: 1}, Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	e.Queue = "default"
	return e
}

func completed(t *testing.T, run string) *events.Event {
	t.Helper()
	e, err := events.New(run, eventlog.DecisionID(run, events.RunCompleted), time.Time{}, &events.RunCompletedData{})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// followed is what a Follow handed to fn.
type followed struct {
	mu   sync.Mutex
	evs  []client.RunEvent
	last *projection.State
}

// check holds what Follow handed over against the run's history: every
// event once, in log order, positions 1 to n.
func (f *followed) check(t *testing.T, c *client.Client, run string) {
	t.Helper()
	hist, err := c.Events(timeout(t), run)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.evs) != len(hist) {
		t.Fatalf("followed %d events, the history has %d", len(f.evs), len(hist))
	}
	for i, e := range f.evs {
		if e.Position != i+1 || e.Seq != hist[i].Seq || e.ID != hist[i].ID {
			t.Fatalf("event %d: followed position %d seq %d id %q, the history has seq %d id %q", i+1, e.Position, e.Seq, e.ID, hist[i].Seq, hist[i].ID)
		}
	}
	if f.last == nil || f.last.Status != projection.RunCompleted {
		t.Fatalf("the last state followed: %+v", f.last)
	}
}

// TestFollowWhileAppending follows a run while several writers append to
// it, and holds fn up in the middle of the first read until more has been
// appended: nothing is lost, repeated or reordered, whether the follow
// starts before the events, mid-run or after the end.
func TestFollowWhileAppending(t *testing.T) {
	_, store := testkit.Store(t)
	c := client.New(store, client.WithLogger(quiet(t)))
	const writers, each = 4, 60

	for _, tc := range []struct {
		name   string
		before int // facts appended before Follow starts
		end    bool
	}{
		{"from the start", 0, false},
		{"mid-run", 25, false},
		{"after the end", 40, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := timeout(t)
			run, err := c.Start(ctx, mustGraph(t, humanYAML))
			if err != nil {
				t.Fatal(err)
			}
			for i := range tc.before {
				if _, err := eventlog.Append(ctx, store, run, events.AnySeq, fact(t, run, -1-i)); err != nil {
					t.Fatal(err)
				}
			}
			if tc.end {
				if _, err := eventlog.Append(ctx, store, run, events.AnySeq, completed(t, run)); err != nil {
					t.Fatal(err)
				}
			}
			var f followed
			held := make(chan struct{})     // fn is held up in the first read
			appended := make(chan struct{}) // the writers are half way
			done := make(chan error, 1)
			go func() {
				first := true
				done <- c.Follow(ctx, run, func(e client.RunEvent, st *projection.State) bool {
					f.mu.Lock()
					f.evs = append(f.evs, e)
					f.last = st
					f.mu.Unlock()
					if first && !tc.end {
						first = false
						close(held)
						select {
						case <-appended:
						case <-ctx.Done():
						}
					}
					return true
				})
			}()
			if !tc.end {
				<-held
				var wg sync.WaitGroup
				var half sync.WaitGroup
				half.Add(writers)
				for w := range writers {
					wg.Go(func() {
						for i := range each {
							if _, err := eventlog.Append(ctx, store, run, events.AnySeq, fact(t, run, w*each+i)); err != nil {
								t.Error(err)
							}
							if i == each/2 {
								half.Done()
							}
						}
					})
				}
				half.Wait()
				close(appended)
				wg.Wait()
				if _, err := eventlog.Append(ctx, store, run, events.AnySeq, completed(t, run)); err != nil {
					t.Fatal(err)
				}
			}
			if err := <-done; err != nil {
				t.Fatalf("Follow: %v", err)
			}
			f.check(t, c, run)
			want := 1 + tc.before + 1
			if !tc.end {
				want += writers * each
			}
			if len(f.evs) != want {
				t.Fatalf("followed %d events, want %d", len(f.evs), want)
			}
		})
	}
}

// TestFollowStops: fn returning false ends Follow; a run with no events
// is ErrRunNotFound; ctx ending is ctx's error.
func TestFollowStops(t *testing.T) {
	_, store := testkit.Store(t)
	c := client.New(store, client.WithLogger(quiet(t)))
	ctx := timeout(t)
	run, err := c.Start(ctx, mustGraph(t, humanYAML))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := c.Follow(ctx, run, func(client.RunEvent, *projection.State) bool { n++; return false }); err != nil || n != 1 {
		t.Fatalf("fn returning false: %v after %d events", err, n)
	}
	if err := c.Follow(ctx, events.NewRunID(), func(client.RunEvent, *projection.State) bool { return true }); !errors.Is(err, events.ErrRunNotFound) {
		t.Fatalf("no such run: %v", err)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := c.Follow(short, run, func(client.RunEvent, *projection.State) bool { return true }); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ctx ending: %v", err)
	}
}

// TestWaitWakes: Wait returns at once for a run that ended, and wakes for
// one that ends while it waits.
func TestWaitWakes(t *testing.T) {
	_, store := testkit.Store(t)
	c := client.New(store, client.WithLogger(quiet(t)))
	ctx := timeout(t)
	run, err := c.Start(ctx, mustGraph(t, humanYAML))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *projection.State, 1)
	go func() {
		st, err := c.Wait(ctx, run)
		if err != nil {
			t.Error(err)
		}
		got <- st
	}()
	// Facts wake Wait up to no end; the end ends it.
	for i := range 20 {
		if _, err := eventlog.Append(ctx, store, run, events.AnySeq, fact(t, run, i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := eventlog.Append(ctx, store, run, events.AnySeq, completed(t, run)); err != nil {
		t.Fatal(err)
	}
	select {
	case st := <-got:
		if st == nil || st.Status != projection.RunCompleted {
			t.Fatalf("Wait: %+v", st)
		}
	case <-ctx.Done():
		t.Fatal("Wait never woke")
	}
	if st, err := c.Wait(ctx, run); err != nil || st.Status != projection.RunCompleted {
		t.Fatalf("Wait for a run that ended: %+v, %v", st, err)
	}
	if _, err := c.Wait(ctx, events.NewRunID()); !errors.Is(err, events.ErrRunNotFound) {
		t.Fatalf("Wait for no run: %v", err)
	}
}

// TestWaitAndFollowCreateNoConsumer: Wait and Follow read with gets and a core
// subscription, never a consumer, so the client's role needs no right to
// create one (deploy/SECURITY.md).
func TestWaitAndFollowCreateNoConsumer(t *testing.T) {
	_, store := testkit.Store(t)
	c := client.New(store, client.WithLogger(quiet(t)))
	ctx := timeout(t)
	run, err := c.Start(ctx, mustGraph(t, humanYAML))
	if err != nil {
		t.Fatal(err)
	}
	s, err := eventlog.JetStream(store).Stream(ctx, store.StreamName())
	if err != nil {
		t.Fatal(err)
	}
	consumers := func() int {
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Consumers
	}
	seen := make(chan struct{})
	waited := make(chan error, 1)
	followed := make(chan error, 1)
	go func() {
		_, err := c.Wait(ctx, run)
		waited <- err
	}()
	go func() {
		once := sync.OnceFunc(func() { close(seen) })
		followed <- c.Follow(ctx, run, func(client.RunEvent, *projection.State) bool { once(); return true })
	}()
	<-seen
	if n := consumers(); n != 0 {
		t.Fatalf("%d consumers on the events stream while reading", n)
	}
	if _, err := eventlog.Append(ctx, store, run, events.AnySeq, completed(t, run)); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	if err := <-followed; err != nil {
		t.Fatal(err)
	}
	if n := consumers(); n != 0 {
		t.Fatalf("%d consumers on the events stream", n)
	}
}

// lateStore hides the events after a sequence from reads until told: a
// stream that stores a message after its subscribers heard it published
// (nats-server stores asynchronously; a replica may be behind).
type lateStore struct {
	events.Store
	mu      sync.Mutex
	visible uint64
	hid     chan struct{} // a read left something out
}

func (s *lateStore) Read(ctx context.Context, run string, from, upTo uint64) ([]*events.Event, error) {
	evs, err := s.Store.Read(ctx, run, from, upTo)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, e := range evs {
		if e.Seq > s.visible {
			select {
			case s.hid <- struct{}{}:
			default:
			}
			return evs[:i], err
		}
	}
	return evs, err
}

func (s *lateStore) Unwrap() events.Store { return s.Store }

func (s *lateStore) show(seq uint64) {
	s.mu.Lock()
	s.visible = seq
	s.mu.Unlock()
}

// TestFollowFindsEventsStoredLate: an event heard of before a read could
// see it is looked for again, although nothing more is published.
func TestFollowFindsEventsStoredLate(t *testing.T) {
	_, store := testkit.Store(t)
	late := &lateStore{Store: store, hid: make(chan struct{}, 1)}
	c := client.New(late, client.WithLogger(quiet(t)))
	ctx := timeout(t)
	run, err := c.Start(ctx, mustGraph(t, humanYAML))
	if err != nil {
		t.Fatal(err)
	}
	first, err := store.LastSeq(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	late.show(first)
	started := make(chan struct{})
	done := make(chan error, 1)
	var n int
	go func() {
		done <- c.Follow(ctx, run, func(e client.RunEvent, _ *projection.State) bool {
			if n++; n == 1 {
				close(started)
			}
			return true
		})
	}()
	<-started
	last, err := eventlog.Append(ctx, store, run, events.AnySeq, completed(t, run))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-late.hid: // Follow heard the end and read without finding it
	case err := <-done:
		t.Fatalf("Follow returned before the end was visible: %v", err)
	}
	late.show(last)
	if err := <-done; err != nil || n != 2 {
		t.Fatalf("Follow: %v after %d events, want the end found", err, n)
	}
}

// TestFollowRereadsWhenNothingIsHeard: an event whose wake-up was lost
// (core NATS delivers at most once) is found by the re-read that follows
// a quiet second.
func TestFollowRereadsWhenNothingIsHeard(t *testing.T) {
	_, store := testkit.Store(t)
	late := &lateStore{Store: store, hid: make(chan struct{}, 1)}
	c := client.New(late, client.WithLogger(quiet(t)))
	ctx := timeout(t)
	run, err := c.Start(ctx, mustGraph(t, humanYAML))
	if err != nil {
		t.Fatal(err)
	}
	first, err := store.LastSeq(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	late.show(first)
	// Published before Follow subscribes: nothing will be heard of it.
	last, err := eventlog.Append(ctx, store, run, events.AnySeq, completed(t, run))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	n := 0
	go func() {
		done <- c.Follow(ctx, run, func(client.RunEvent, *projection.State) bool { n++; return true })
	}()
	select {
	case <-late.hid: // the first read did not see the end
	case err := <-done:
		t.Fatalf("Follow returned before the end was visible: %v", err)
	}
	late.show(last)
	if err := <-done; err != nil || n != 2 {
		t.Fatalf("Follow: %v after %d events, want the end found", err, n)
	}
}
