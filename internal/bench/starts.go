package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/schedule"
	"github.com/weft-dev/weft/internal/setup"
	"github.com/weft-dev/weft/internal/trigger"
	"github.com/weft-dev/weft/pkg/events"
)

// runStarts measures starting runs without a client (issue 27):
//
//   - runs started per second from a trigger burst: StartsBurst messages
//     wait in a user stream, then a trigger is created and two runners
//     (two coordinators' worth) start one run per message; the rate is
//     the sustained rate of the run-started events' stored times. The
//     floor is raw asynchronous publishes of as many messages of the
//     start's size to a stream on the same server.
//   - the delay from a schedule's nominal fire time to its run's start
//     (the stored time of the run-started), over StartsFires fires of an
//     every-second schedule; the floor is the delay of a bare JetStream
//     "@at" message schedule (its target message's stored time against
//     its "@at" time), which is what the engine's fires ride on.
//
// Size: a benchmark script, read top to bottom (set up, measure, report
// rows).
func runStarts(ctx context.Context, e *env) ([]Result, error) {
	n, fires := e.sizes.StartsBurst, e.sizes.StartsFires
	stream := e.name("WEFT_STARTS")
	st, err := e.openStore(ctx, e.js, stream)
	if err != nil {
		return nil, err
	}
	defer e.dropStream(stream)
	if err := eventlog.EnsureTimers(ctx, st); err != nil {
		return nil, err
	}
	for _, c := range schedule.KVConfigs(1) {
		if _, err := setup.EnsureKV(ctx, e.js, c, nil); err != nil {
			return nil, err
		}
		defer func() { _ = e.js.DeleteKeyValue(context.WithoutCancel(ctx), c.Bucket) }()
	}
	g, err := chainGraph("starts", "noop", 1, nil)
	if err != nil {
		return nil, err
	}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	for range 2 {
		go func() { _ = trigger.NewRunner(st, trigger.WithLogger(e.quiet)).Run(rctx) }()
	}
	go func() { _ = schedule.NewRunner(st, schedule.WithLogger(e.quiet)).Run(rctx) }()

	// The burst.
	user := e.name("BENCH_ORDERS")
	subj := "bench.orders." + user
	if _, err := e.js.CreateStream(ctx, jetstream.StreamConfig{Name: user, Subjects: []string{subj}, Storage: e.storage()}); err != nil {
		return nil, err
	}
	defer e.dropStream(user)
	body := []byte(`{"order":"o-0000000","amount":25}`)
	for i := range n {
		m := nats.NewMsg(subj)
		m.Data = fmt.Appendf(nil, `{"order":"o-%07d","amount":25}`, i)
		if _, err := e.js.PublishMsgAsync(m); err != nil {
			return nil, err
		}
		if i%1000 == 999 {
			<-e.js.PublishAsyncComplete()
		}
	}
	<-e.js.PublishAsyncComplete()
	ts, err := trigger.Open(ctx, e.js)
	if err != nil {
		return nil, err
	}
	d := &trigger.Definition{Name: "bench-" + user, Subject: subj, Stream: user, ID: "input.order", CreatedAt: time.Now()}
	d.SetGraph(g)
	if err := ts.Create(ctx, d); err != nil {
		return nil, err
	}
	timeout := time.Minute + time.Duration(n)*2*time.Millisecond
	starts, err := collect(ctx, e.js, stream, []string{eventlog.KindFilter(events.RunStarted)}, n, timeout)
	if err != nil {
		return nil, fmt.Errorf("trigger burst: %w", err)
	}
	_ = ts.Delete(ctx, d.Name)
	rate := sustained(starts)
	floor, err := e.rawPublishRate(ctx, n, len(body)+200)
	if err != nil {
		return nil, err
	}

	// The fires.
	ss, err := schedule.Open(ctx, e.js)
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	sd := &schedule.Definition{Name: "bench-fires", Every: schedule.Duration(time.Second), Overlap: schedule.OverlapAllowAll, CreatedAt: now, UpdatedAt: now}
	sd.SetGraph(g)
	if err := ss.Create(ctx, sd); err != nil {
		return nil, err
	}
	var delays []time.Duration
	err = watch(ctx, e.js, stream, []string{eventlog.KindFilter(events.RunStarted)}, time.Duration(fires+30)*time.Second, func(m jetstream.Msg, meta *jetstream.MsgMetadata) bool {
		var sd events.RunStartedData
		if json.Unmarshal(m.Data(), &sd) == nil && sd.Trigger != nil && sd.Trigger.Kind == events.TriggerSchedule {
			delays = append(delays, meta.Timestamp.Sub(sd.Trigger.FireTime))
		}
		return len(delays) < fires
	})
	_ = ss.Delete(ctx, sd.Name)
	if err != nil {
		return nil, fmt.Errorf("schedule fires: %w", err)
	}
	raw, err := e.rawScheduleDelays(ctx, min(fires, 20))
	if err != nil {
		return nil, err
	}
	return []Result{
		row("runs started/s from a trigger burst", rate, "runs/s", floor, nil,
			fmt.Sprintf("%d messages waiting in a user stream, 2 runners; sustained rate of the run-started stored times; floor: raw async publishes of as many %d-byte messages", n, len(body)+200)),
		row("schedule fire → run start p50", ms(pct(delays, 50)), "ms", ms(pct(raw, 50)), nil,
			fmt.Sprintf("%d fires of an every-second schedule: run-started stored time − nominal fire time; floor: a bare @at message schedule's target stored time − its @at time", len(delays))),
		row("schedule fire → run start p99", ms(pct(delays, 99)), "ms", ms(pct(raw, 99)), nil, ""),
	}, nil
}

// rawPublishRate publishes n messages of size bytes asynchronously to a
// fresh stream and returns the rate.
func (e *env) rawPublishRate(ctx context.Context, n, size int) (float64, error) {
	name := e.name("FLOOR_PUB")
	subj := "floor.pub." + name
	if _, err := e.js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subj}, Storage: e.storage()}); err != nil {
		return 0, err
	}
	defer e.dropStream(name)
	data := make([]byte, size)
	began := time.Now()
	for i := range n {
		m := nats.NewMsg(subj)
		m.Data = data
		m.Header.Set(nats.MsgIdHdr, fmt.Sprint(i))
		if _, err := e.js.PublishMsgAsync(m); err != nil {
			return 0, err
		}
		if i%1000 == 999 {
			<-e.js.PublishAsyncComplete()
		}
	}
	<-e.js.PublishAsyncComplete()
	return float64(n) / time.Since(began).Seconds(), nil
}

// rawScheduleDelays arms k "@at" message schedules a few hundred ms
// apart and returns each target message's stored time − its @at time.
func (e *env) rawScheduleDelays(ctx context.Context, k int) ([]time.Duration, error) {
	if k <= 0 {
		return nil, nil // nothing to wait for
	}
	name := e.name("FLOOR_SCHED")
	if _, err := e.js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{"floor.sched." + name + ".>"}, Storage: e.storage(), AllowMsgSchedules: true}); err != nil {
		return nil, err
	}
	defer e.dropStream(name)
	// Two seconds ahead: an @at time that has passed by the time the
	// server stores the schedule (a loaded machine) may never fire.
	base := time.Now().Add(2 * time.Second)
	for i := range k {
		m := nats.NewMsg(fmt.Sprintf("floor.sched.%s.s.%d", name, i))
		at := base.Add(time.Duration(i) * 250 * time.Millisecond).UTC()
		m.Data = []byte(at.Format(time.RFC3339Nano))
		m.Header.Set("Nats-Schedule", "@at "+at.Format(time.RFC3339Nano))
		m.Header.Set("Nats-Schedule-Target", "floor.sched."+name+".fired")
		if _, err := e.js.PublishMsg(ctx, m); err != nil {
			return nil, err
		}
	}
	var out []time.Duration
	err := watch(ctx, e.js, name, []string{"floor.sched." + name + ".fired"}, time.Duration(k)*time.Second+30*time.Second, func(m jetstream.Msg, meta *jetstream.MsgMetadata) bool {
		if at, err := time.Parse(time.RFC3339Nano, string(m.Data())); err == nil {
			out = append(out, meta.Timestamp.Sub(at))
		}
		return len(out) < k
	})
	return out, err
}
