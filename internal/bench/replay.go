package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// replayTemplateNodes is the length of the chain whose real log is the
// template of the generated history.
const replayTemplateNodes = 100

// runReplay measures figure 4: rebuilding run states from a history of N
// events. The history is a real engine run's log (a 100-node noop chain:
// run-started with its graph, routed, and per node ready, invoking, invoked
// and routed, then completed: about 400 events), cloned under fresh run ids
// and appended with store.Append, one atomic batch per run (big batches:
// each atomic batch costs the server a temporary store), from several
// goroutines.
//
// Rows:
//   - replay: one ordered consumer over weft.r.> reads every event, decodes
//     it (events.Decode, CloudEvents SDK) and folds it into its run's state
//     (projection.State.Apply); events per second.
//   - replay by run: store.Read (batched direct gets) and projection.Fold of
//     each run, four runs at a time: the path the coordinator and clients
//     take.
//   - pure fold: projection.State.Apply over decoded events in memory.
//
// The floor is the same ordered consumer reading the same messages and
// doing nothing with them.
//
// Size: a benchmark script, read top to bottom; most of its length is the
// rows' notes.
func runReplay(ctx context.Context, e *env) ([]Result, error) {
	tmpl, err := e.replayTemplate(ctx)
	if err != nil {
		return nil, fmt.Errorf("recording the template run: %w", err)
	}
	stream := e.name("WEFT_REPLAY")
	defer e.dropStream(stream)
	st, err := e.openStore(ctx, e.js, stream)
	if err != nil {
		return nil, err
	}
	runs := (e.sizes.ReplayEvents + len(tmpl) - 1) / len(tmpl)
	t0 := time.Now()
	ids, err := appendHistory(ctx, st, tmpl, runs)
	if err != nil {
		return nil, fmt.Errorf("generating the history: %w", err)
	}
	total := runs * len(tmpl)
	e.logf("history of %d events (%d runs) appended in %s", total, runs, time.Since(t0).Round(time.Millisecond))
	timeout := time.Minute + time.Duration(total)*50*time.Microsecond

	var floorRate float64
	err = e.profile("floor", func() error {
		start := time.Now()
		n := 0
		err := watch(ctx, e.js, stream, []string{eventlog.AllEvents}, timeout, func(m jetstream.Msg, _ *jetstream.MsgMetadata) bool {
			n++
			return n < total
		})
		floorRate = float64(n) / time.Since(start).Seconds()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("floor: %w", err)
	}

	var replayRate, readRate, foldRate float64
	var completed int
	err = e.profile("", func() error {
		start := time.Now()
		states := map[string]*projection.State{}
		n := 0
		var derr error
		err := watch(ctx, e.js, stream, []string{eventlog.AllEvents}, timeout, func(m jetstream.Msg, meta *jetstream.MsgMetadata) bool {
			n++
			ev, err := events.Decode(m.Subject(), m.Headers(), m.Data())
			if err != nil {
				derr = err
				return false
			}
			ev.Seq = meta.Sequence.Stream
			s := states[ev.RunID]
			if s == nil {
				s = &projection.State{}
				states[ev.RunID] = s
			}
			_ = s.Apply(ev)
			return n < total
		})
		replayRate = float64(n) / time.Since(start).Seconds()
		if err = errors.Join(err, derr); err != nil {
			return err
		}
		for _, s := range states {
			if s.Status == projection.RunCompleted {
				completed++
			}
		}

		start = time.Now()
		var read atomic.Int64
		if err := forEach(ctx, ids, 4, func(run string) error {
			evs, err := st.Read(ctx, run, 0, 0)
			if err != nil {
				return err
			}
			if s := projection.Fold(evs); s.Status != projection.RunCompleted {
				return fmt.Errorf("run %s folds to %s", run, s.Status)
			}
			read.Add(int64(len(evs)))
			return nil
		}); err != nil {
			return err
		}
		readRate = float64(read.Load()) / time.Since(start).Seconds()

		start = time.Now()
		for range runs {
			s := &projection.State{}
			for _, ev := range tmpl {
				_ = s.Apply(ev)
			}
		}
		foldRate = float64(total) / time.Since(start).Seconds()
		return nil
	})
	if err != nil {
		return nil, err
	}
	if completed != runs {
		return nil, fmt.Errorf("replay folded %d of %d runs to completed", completed, runs)
	}
	notes := fmt.Sprintf("%d events (%d runs of a %d-node chain's real log, %d events each); ordered consumer, decode (CloudEvents SDK) and fold, one goroutine",
		total, runs, replayTemplateNodes, len(tmpl))
	return []Result{
		row("replay (read+decode+fold)", replayRate, "events/s", floorRate, ratioAtLeast(0.5), notes),
		row("replay by run (store.Read+Fold)", readRate, "events/s", floorRate, nil, "4 runs at a time, batched direct gets"),
		row("pure fold (in memory)", foldRate, "events/s", 0, nil, "State.Apply over decoded events"),
	}, nil
}

// replayTemplate runs one chain through the engine and returns its log.
func (e *env) replayTemplate(ctx context.Context) ([]*events.Event, error) {
	g, err := chainGraph("replay", "noop", replayTemplateNodes, nil)
	if err != nil {
		return nil, err
	}
	stream, st, done, err := e.engineOn(ctx, "WEFT_TMPL", 4)
	if err != nil {
		return nil, err
	}
	defer done()
	run := events.NewRunID()
	ev, err := startedEvent(run, g, []byte(`{"doc":"a","n":1}`))
	if err != nil {
		return nil, err
	}
	if _, err := st.Append(ctx, run, 0, ev); err != nil {
		return nil, err
	}
	if _, err := waitRuns(ctx, e.js, stream, 1, time.Minute); err != nil {
		return nil, err
	}
	return st.Read(ctx, run, 0, 0)
}

// appendHistory appends runs clones of the template's events, each under a
// fresh run id, as one atomic batch per run.
func appendHistory(ctx context.Context, st events.Store, tmpl []*events.Event, runs int) ([]string, error) {
	old := tmpl[0].RunID
	ids := make([]string, runs)
	for i := range ids {
		ids[i] = events.NewRunID()
	}
	err := forEach(ctx, ids, 8, func(run string) error {
		evs := make([]*events.Event, len(tmpl))
		for i, t := range tmpl {
			evs[i] = &events.Event{
				ID: strings.ReplaceAll(t.ID, old, run), Type: t.Type, Source: t.Source, Time: t.Time,
				RunID: run, NodeID: t.NodeID, Attempt: t.Attempt, Queue: t.Queue,
				Data: bytes.ReplaceAll(t.Data, []byte(old), []byte(run)),
			}
			if t.IsDecision() {
				eventlog.MarkDecision(evs[i])
			}
		}
		_, err := eventlog.Append(ctx, st, run, events.AnySeq, evs...)
		return err
	})
	return ids, err
}

// forEach calls fn for every item, n at a time, and returns the first
// error.
func forEach(ctx context.Context, items []string, n int, fn func(string) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ch := make(chan string)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for it := range ch {
				if err := fn(it); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
feed:
	for _, it := range items {
		select {
		case ch <- it:
		case <-ctx.Done():
			break feed
		}
	}
	close(ch)
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}
