package bench

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// hdrStep and hdrItem carry a floor message's step and item.
const (
	hdrStep = "Bench-Step"
	hdrItem = "Bench-Item"
)

// flow is the raw JetStream floor of the engine's message pattern, with no
// engine logic: per run, "steps" steps of "width" work items each (a chain
// is width 1; a map is one step of width N).
//
// Two roles, each on a connection of its own, as the coordinator and the
// worker are:
//
//   - the coordinator role reads every message of the stream with a durable
//     pull consumer (as the coordinator reads weft.r.>), spread over shards
//     by run; on a run's start, and when all items of a step were invoked,
//     it publishes the next step's ready messages (or, after the last step,
//     routed and completed), waiting for their acks, as the coordinator
//     appends a decision (whose routing rides on the ready event);
//   - the worker role reads the ready messages with a second durable pull
//     consumer, at most workerConc at once, and for each publishes invoking
//     then invoked (each waiting for its ack) and acks the ready message.
//
// So each chain node writes ready, invoking and invoked (and a run ends
// with routed and completed); the coordinator role reads them all and the
// worker role reads ready: the messages the engine writes and reads per
// node. Every message carries a
// Nats-Msg-Id (de-duplication is part of the pattern) and a body the size
// of the engine's average event.
type flow struct {
	runs, steps, width int
	workerConc, shards int
	body               int
}

// floorRun is a finished floor flow.
type floorRun struct {
	stream, prefix string
	t0             time.Time // roles started
	ends           []stamp   // completed messages
}

func (f floorRun) elapsed() time.Duration { return last(f.ends).Sub(f.t0) }

// runFloor creates a stream, publishes the runs' start messages, starts the
// two roles and waits until every run completed.
func (e *env) runFloor(ctx context.Context, f flow, timeout time.Duration) (*floorRun, error) {
	stream := e.name("FLOOR")
	prefix := strings.ToLower(stream)
	scfg := jetstream.StreamConfig{
		Name: stream, Subjects: []string{prefix + ".>"}, Storage: e.storage(),
		Retention: jetstream.LimitsPolicy, Duplicates: 2 * time.Minute,
	}
	_, err := e.js.CreateStream(ctx, scfg)
	if err != nil {
		return nil, fmt.Errorf("creating floor stream: %w", err)
	}
	run := &floorRun{stream: stream, prefix: prefix}
	body := make([]byte, max(f.body, 1))
	for i := range body {
		body[i] = 'x'
	}
	starts := make([]*nats.Msg, f.runs)
	for r := range starts {
		m := nats.NewMsg(fmt.Sprintf("%s.r%06d.start", prefix, r))
		m.Data = body
		m.Header.Set(nats.MsgIdHdr, m.Subject)
		starts[r] = m
	}
	if err := publishAll(ctx, e.js, starts); err != nil {
		return nil, err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	_, cjs, err := e.connect("floor-coordinator")
	if err != nil {
		return nil, err
	}
	_, wjs, err := e.connect("floor-worker")
	if err != nil {
		return nil, err
	}
	var roles sync.WaitGroup
	errc := make(chan error, 2)
	run.t0 = time.Now()
	roles.Go(func() { errc <- floorCoordinator(ctx, cjs, stream, prefix, f, body) })
	roles.Go(func() { errc <- floorWorker(ctx, wjs, stream, prefix, f, body) })
	ends, err := collect(ctx, e.js, stream, []string{prefix + ".*.completed"}, f.runs, timeout)
	cancel()
	roles.Wait()
	close(errc)
	for rerr := range errc {
		if rerr != nil && !errors.Is(rerr, context.Canceled) {
			err = errors.Join(err, rerr)
		}
	}
	run.ends = ends
	return run, err
}

func floorCoordinator(ctx context.Context, js jetstream.JetStream, stream, prefix string, f flow, body []byte) error {
	cons, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{
		Durable: "coordinator", FilterSubject: prefix + ".>", AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: 10 * time.Second, MaxAckPending: 20000, MaxDeliver: -1, DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return err
	}
	iter, err := cons.Messages(jetstream.PullMaxMessages(1024))
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, iter.Stop)
	defer stop()
	shards := make([]chan jetstream.Msg, f.shards)
	var wg sync.WaitGroup
	errc := make(chan error, f.shards)
	for i := range shards {
		shards[i] = make(chan jetstream.Msg, 256)
		wg.Go(func() {
			invoked := map[string]int{}
			for m := range shards[i] {
				if err := floorDecide(ctx, js, prefix, f, body, invoked, m); err != nil && ctx.Err() == nil {
					errc <- err
					return
				}
				_ = m.Ack()
			}
		})
	}
	defer func() {
		for _, ch := range shards {
			close(ch)
		}
		wg.Wait()
	}()
	for {
		m, err := iter.Next()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return nil
			}
			continue
		}
		run := strings.Split(m.Subject(), ".")[1]
		h := fnv.New32a()
		_, _ = h.Write([]byte(run))
		select {
		case shards[h.Sum32()%uint32(len(shards))] <- m:
		case err := <-errc:
			return err
		case <-ctx.Done():
			return nil
		}
	}
}

// floorDecide is the coordinator role's reaction to one message.
func floorDecide(ctx context.Context, js jetstream.JetStream, prefix string, f flow, body []byte, invoked map[string]int, m jetstream.Msg) error {
	parts := strings.Split(m.Subject(), ".")
	run, kind := parts[1], parts[2]
	next := 0
	switch kind {
	case "start":
	case "invoked":
		step, _ := strconv.Atoi(m.Headers().Get(hdrStep))
		invoked[run]++
		if invoked[run] < f.width {
			return nil
		}
		delete(invoked, run)
		next = step + 1
	default:
		return nil
	}
	base := prefix + "." + run + "."
	mk := func(kind string, step, item int) *nats.Msg {
		out := nats.NewMsg(base + kind)
		out.Data = body
		out.Header.Set(hdrStep, strconv.Itoa(step))
		out.Header.Set(hdrItem, strconv.Itoa(item))
		out.Header.Set(nats.MsgIdHdr, fmt.Sprintf("%s%s:%d:%d", base, kind, step, item))
		return out
	}
	// As the engine writes: a step's routing goes with its ready events;
	// the last step's routing to END is an event of its own.
	var msgs []*nats.Msg
	if next < f.steps {
		for i := range f.width {
			msgs = append(msgs, mk("ready", next, i))
		}
	} else {
		msgs = append(msgs, mk("routed", next, 0), mk("completed", next, 0))
	}
	return publishAll(ctx, js, msgs)
}

// publishAll publishes msgs asynchronously, at most 1000 unacknowledged at
// a time, and waits for every ack.
func publishAll(ctx context.Context, js jetstream.JetStream, msgs []*nats.Msg) error {
	for start := 0; start < len(msgs); start += 1000 {
		chunk := msgs[start:min(start+1000, len(msgs))]
		futures := make([]jetstream.PubAckFuture, 0, len(chunk))
		for _, m := range chunk {
			fut, err := js.PublishMsgAsync(m)
			if err != nil {
				return err
			}
			futures = append(futures, fut)
		}
		for _, fut := range futures {
			select {
			case <-fut.Ok():
			case err := <-fut.Err():
				return err
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}

func floorWorker(ctx context.Context, js jetstream.JetStream, stream, prefix string, f flow, body []byte) error {
	cons, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{
		Durable: "work", FilterSubject: prefix + ".*.ready", AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: 30 * time.Second, MaxAckPending: 1000, MaxDeliver: -1, DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return err
	}
	iter, err := cons.Messages(jetstream.PullMaxMessages(f.workerConc))
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, iter.Stop)
	defer stop()
	slots := make(chan struct{}, f.workerConc)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		m, err := iter.Next()
		if err != nil {
			<-slots
			if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return nil
			}
			continue
		}
		wg.Go(func() {
			defer func() { <-slots }()
			parts := strings.Split(m.Subject(), ".")
			base := parts[0] + "." + parts[1] + "."
			step, item := m.Headers().Get(hdrStep), m.Headers().Get(hdrItem)
			for _, kind := range []string{"invoking", "invoked"} {
				out := nats.NewMsg(base + kind)
				out.Data = body
				out.Header.Set(hdrStep, step)
				out.Header.Set(hdrItem, item)
				out.Header.Set(nats.MsgIdHdr, base+kind+":"+step+":"+item)
				if _, err := js.PublishMsg(ctx, out); err != nil {
					return // the run stalls; the harness's timeout reports it
				}
			}
			_ = m.Ack()
		})
	}
}
