package flow_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/flow"
	"github.com/weft-dev/weft/internal/setup"
	"github.com/weft-dev/weft/internal/testkit"
)

// faultyKV loses the answer of every third write: the write is made,
// and the caller is told it failed (a reply lost with a connection).
type faultyKV struct {
	flow.KV
	puts atomic.Int64
}

var errLostReply = errors.New("the reply was lost")

func (f *faultyKV) Put(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	next, err := f.KV.Put(ctx, key, value, rev)
	if err == nil && f.puts.Add(1)%3 == 0 {
		return 0, errLostReply
	}
	return next, err
}

// Three limiters (three coordinators' processes) share the bucket, one of
// them losing a third of its writes' replies; 36 attempts race for 3
// slots of one key, each taken and given back in batches with the other
// attempts of its process. Never more than 3 hold at once (counted by the
// attempts themselves, and read from the bucket), every attempt gets its
// slot, and once all gave it back the key holds nobody.
func TestBatchedSlotsAcrossProcesses(t *testing.T) {
	ctx := t.Context()
	srv := testkit.Server(t)
	_, js := testkit.Connect(t, srv)
	kv, _, err := setup.CreateKV(ctx, js, flow.KVConfig(1))
	if err != nil {
		t.Fatal(err)
	}
	base := flow.BucketKV(js, kv)
	ls := []*flow.Limiter{flow.New(base, nil), flow.New(base, nil), flow.New(&faultyKV{KV: base}, nil)}
	s := flow.Slot{Limit: "batch", Key: "k", Max: 3}
	var holding, peak, granted atomic.Int32
	var wg sync.WaitGroup
	for p, l := range ls {
		for i := range 12 {
			wg.Go(func() {
				h := holder(fmt.Sprintf("p%d-r%d", p, i), 1)
				if !take(ctx, t, l, s, h) {
					return
				}
				n := holding.Add(1)
				granted.Add(1)
				for v := peak.Load(); n > v && !peak.CompareAndSwap(v, n); v = peak.Load() {
				}
				// Holds the slot a while so that holders overlap: the work the limit paces.
				time.Sleep(5 * time.Millisecond)
				holding.Add(-1)
				for {
					if _, err := l.Release(ctx, s, h); err == nil {
						return
					} else if !errors.Is(err, errLostReply) {
						t.Error(err)
						return
					}
				}
			})
		}
	}
	stop := make(chan struct{})
	var most atomic.Int32
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if b, _, err := base.Get(ctx, flow.KVKey(s.Limit, s.Key)); err == nil && b != nil {
				n := int32(countHolders(t, b))
				for v := most.Load(); n > v && !most.CompareAndSwap(v, n); v = most.Load() {
				}
			}
		}
	}()
	wg.Wait()
	close(stop)
	if p := peak.Load(); p > 3 || p < 1 {
		t.Errorf("peak holders %d, want 1..3", p)
	}
	if m := most.Load(); m > 3 {
		t.Errorf("the bucket held %d holders at once, want at most 3", m)
	}
	if g := granted.Load(); g != 36 {
		t.Errorf("%d attempts got their slot, want 36", g)
	}
	es, err := ls[0].Entries(ctx)
	if err != nil || len(es) != 0 {
		t.Errorf("entries once every slot was given back: %+v %v, want none", es, err)
	}
}

// take asks for h's slot until it is granted, as a woken waiter asks
// again; a lost reply is asked again too (asking is idempotent).
func take(ctx context.Context, t *testing.T, l *flow.Limiter, s flow.Slot, h flow.Holder) bool {
	for {
		g, err := l.Acquire(ctx, s, h)
		if err != nil && !errors.Is(err, errLostReply) {
			t.Error(err)
			return false
		}
		if err == nil && g.Granted {
			return true
		}
		// Polls: a waiter asks again, as a woken one would.
		time.Sleep(2 * time.Millisecond)
	}
}

func countHolders(t *testing.T, b []byte) int {
	e, err := flow.DecodeEntry(b)
	if err != nil {
		t.Error(err)
		return 0
	}
	return len(e.Holders)
}

// staleKV answers Get for a frozen key with the value and revision it had
// when frozen: a replica that stopped applying the bucket's writes (the
// bucket's gets are direct gets, which any replica answers).
type staleKV struct {
	flow.KV
	mu     sync.Mutex
	frozen map[string]frozenValue
}

type frozenValue struct {
	v   []byte
	rev uint64
}

func (s *staleKV) freeze(ctx context.Context, t *testing.T, key string) {
	v, rev, err := s.KV.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.frozen[key] = frozenValue{v, rev}
}

func (s *staleKV) thaw() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.frozen)
}

func (s *staleKV) Get(ctx context.Context, key string) ([]byte, uint64, error) {
	s.mu.Lock()
	f, ok := s.frozen[key]
	s.mu.Unlock()
	if ok {
		return f.v, f.rev, nil
	}
	return s.KV.Get(ctx, key)
}

// A limiter that reads a stale entry never answers from it: r2, granted
// since, is not told it waits by a limiter that reads the entry from
// before the grant; it is told the key is contended until the read is
// current, then that it holds the slot.
func TestStaleReadIsNoAnswer(t *testing.T) {
	ctx := t.Context()
	srv := testkit.Server(t)
	_, js := testkit.Connect(t, srv)
	kv, _, err := setup.CreateKV(ctx, js, flow.KVConfig(1))
	if err != nil {
		t.Fatal(err)
	}
	stale := &staleKV{KV: flow.BucketKV(js, kv), frozen: map[string]frozenValue{}}
	a, b := flow.New(stale, nil), flow.New(stale, nil)
	s := flow.Slot{Limit: "stale", Key: "k", Max: 1}
	r1, r2 := holder("r1", 1), holder("r2", 1)
	if g, err := a.Acquire(ctx, s, r1); err != nil || !g.Granted {
		t.Fatalf("r1: %+v %v", g, err)
	}
	if g, err := a.Acquire(ctx, s, r2); err != nil || g.Granted {
		t.Fatalf("r2: %+v %v, want waiting", g, err)
	}
	stale.freeze(ctx, t, flow.KVKey(s.Limit, s.Key)) // r1 holds, r2 waits
	if _, err := a.Release(ctx, s, r1); err != nil {
		t.Fatal(err)
	}
	if g, err := a.Acquire(ctx, s, r2); err != nil || !g.Granted {
		t.Fatalf("r2 woken: %+v %v, want granted", g, err)
	}
	g, err := b.Acquire(ctx, s, r2)
	if err == nil {
		t.Fatalf("r2 asked again through a stale read: %+v, want an error (contended) until the read is current", g)
	}
	if !errors.Is(err, flow.ErrContended) {
		t.Fatalf("r2 asked again through a stale read: %v, want ErrContended", err)
	}
	stale.thaw()
	if g, err := b.Acquire(ctx, s, r2); err != nil || !g.Granted {
		t.Fatalf("r2 asked again, read current: %+v %v, want granted", g, err)
	}
}
