package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/internal/setup"
	"github.com/weft-dev/weft/pkg/events"
)

// Runner is the coordinators' side of schedules: it arms each schedule's
// next fire as a one-shot message schedule in the timers stream, and
// handles the fires and the requests. Every coordinator process runs one;
// any of them may handle any fire, and two may handle the same one: the
// run of a fire time has one id, so it starts once.
type Runner struct {
	store   events.Store
	js      jetstream.JetStream
	kv      jetstream.KeyValue
	keys    jetstream.KeyValue
	durable string
	log     *slog.Logger
	now     func() time.Time

	started, skipped atomic.Int64
}

// Option configures a Runner.
type Option func(*Runner)

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(r *Runner) { r.log = l } }

// WithDurable names the fires' consumer "<durable>-schedules" (default
// "coordinator", as the coordinators' consumers).
func WithDurable(d string) Option { return func(r *Runner) { r.durable = d } }

// NewRunner returns the runner of the schedules of store's deployment.
func NewRunner(store events.Store, opts ...Option) *Runner {
	r := &Runner{store: store, js: eventlog.JetStream(store), durable: "coordinator", log: slog.Default(), now: time.Now}
	for _, o := range opts {
		o(r)
	}
	r.log = r.log.With(logattr.Component, "schedules")
	return r
}

// Stats counts what the runner did.
type Stats struct{ Started, Skipped int64 }

// Stats returns the counters.
func (r *Runner) Stats() Stats { return Stats{Started: r.started.Load(), Skipped: r.skipped.Load()} }

// ConsumerName is the durable consumer of schedules' fires.
func ConsumerName(durable string) string { return durable + "-schedules" }

// Run handles fires and requests until ctx ends. Missing buckets are
// waited for.
func (r *Runner) Run(ctx context.Context) error {
	err := setup.Retry(ctx, r.log, "opening the schedules buckets", nil, func(ctx context.Context) error {
		// Created here when missing, as the other buckets are; under the
		// roles the admin created them (internal/provision), and a
		// coordinator may not.
		replicas, err := setup.StreamReplicas(ctx, r.js, r.store.StreamName())
		if err != nil {
			return err
		}
		cfgs := KVConfigs(replicas)
		if r.kv, err = setup.EnsureKV(ctx, r.js, cfgs[0], r.log); err != nil {
			return err
		}
		r.keys, err = setup.EnsureKV(ctx, r.js, cfgs[1], r.log)
		return err
	})
	if err != nil {
		return nil //nolint:nilerr // ctx ended
	}
	r.log.Debug("handling the schedules' fires", logattr.Consumer, ConsumerName(r.durable))
	done := make(chan struct{}, 3)
	go func() { r.watch(ctx, defPrefix+">", r.onDefinition); done <- struct{}{} }()
	go func() { r.watch(ctx, actPrefix+">", r.onRequest); done <- struct{}{} }()
	go func() { r.sweep(ctx); done <- struct{}{} }()
	r.consume(ctx)
	<-done
	<-done
	<-done
	return nil
}

// Overdue fires. A schedule fires through a chain of one-shot message
// schedules, each armed when the one before was handled, and nothing
// re-arms a schedule whose pending fire is gone: a fire purged, or lost
// (nats-server 2.15 marks a schedule in flight when it produces the fire,
// and produces no other until a new message arrives on the schedule's
// subject, so a fire whose proposal is lost leaves it armed and silent).
// The sweep is the safety net, not the clock: every sweepEvery it looks
// at each schedule's state, and one whose next fire time is more than
// overdueAfter past is reconciled (which starts what is due, exactly
// once, by compare-and-set and keyed ids, and arms the next fire):
// TestBrokenChainIsSwept. (The stall TestScheduleFiresOnceThroughKills
// showed on a loaded machine, long taken for a runner fallen silent, was
// its reader's: the runners kept firing, and a describe waited minutes for
// a lost answer; see readTry in store.go.)
const (
	sweepEvery   = 5 * time.Second
	overdueAfter = 5 * time.Second
)

// sweep reconciles overdue schedules until ctx ends.
func (r *Runner) sweep(ctx context.Context) {
	for sleep(ctx, sweepEvery) {
		r.reconcileOverdue(ctx)
	}
}

// reconcileOverdue reconciles each schedule whose next fire is overdue.
func (r *Runner) reconcileOverdue(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, sweepEvery*4)
	defer cancel()
	ss := &Store{kv: r.kv, js: r.js}
	defs, err := ss.List(ctx)
	if err != nil {
		r.log.Warn("sweeping schedules", logattr.Error, err)
		return
	}
	for _, d := range defs {
		st, _, err := ss.State(ctx, d.Name)
		if err != nil {
			r.log.Warn("sweeping schedules", logattr.Schedule, d.Name, logattr.Error, err)
			continue
		}
		tm, err := d.Timing()
		if err != nil {
			continue
		}
		next := tm.Next(from(d, st))
		r.log.Debug("swept a schedule", logattr.Schedule, d.Name, logattr.Last, st.Last, logattr.Due, next)
		if next.IsZero() || r.now().Sub(next) < overdueAfter+time.Duration(d.Jitter) {
			continue
		}
		r.log.Info("a schedule's fire is overdue: reconciling it", logattr.Schedule, d.Name, logattr.Due, next)
		if err := r.Reconcile(ctx, d.Name); err != nil {
			r.log.Warn("reconciling an overdue schedule", logattr.Schedule, d.Name, logattr.Error, err)
		}
	}
}

// watch calls fn for every key under filter, present and to come, until
// ctx ends; a watcher that fails is started again.
func (r *Runner) watch(ctx context.Context, filter string, fn func(context.Context, jetstream.KeyValueEntry)) {
	for ctx.Err() == nil {
		w, err := r.kv.Watch(ctx, filter)
		if err != nil {
			r.log.Warn("watching schedules", logattr.Error, err)
			if !sleep(ctx, time.Second) {
				return
			}
			continue
		}
		for e := range w.Updates() {
			if e != nil {
				fn(ctx, e)
			}
		}
		_ = w.Stop()
		if !sleep(ctx, 100*time.Millisecond) {
			return
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// onDefinition arms a schedule written, and disarms one deleted.
func (r *Runner) onDefinition(ctx context.Context, e jetstream.KeyValueEntry) {
	name := strings.TrimPrefix(e.Key(), defPrefix)
	if e.Operation() != jetstream.KeyValuePut {
		if err := r.disarm(ctx, name); err != nil {
			r.log.Warn("disarming a deleted schedule", logattr.Schedule, name, logattr.Error, err)
		}
		return
	}
	if err := r.arm(ctx, name); err != nil {
		r.log.Warn("arming a schedule", logattr.Schedule, name, logattr.Error, err)
	}
}

// key returns the key of a schedule or trigger, making it on first use.
func (r *Runner) key(ctx context.Context, kind, name string) ([]byte, error) {
	return EnsureKey(ctx, r.keys, kind, name)
}

// EnsureKey returns the key of kind ("schedule", "trigger") name in the
// keys bucket, making a random one on first use: the first writer wins,
// and every coordinator then reads the same.
func EnsureKey(ctx context.Context, keys jetstream.KeyValue, kind, name string) ([]byte, error) {
	k := kind + "." + name
	if e, err := keys.Get(ctx, k); err == nil {
		return e.Value(), nil
	} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, err
	}
	v := newKey()
	if _, err := keys.Create(ctx, k, v); err == nil {
		return v, nil
	} else if !setup.KVConflict(err) {
		return nil, err
	}
	e, err := keys.Get(ctx, k)
	if err != nil {
		return nil, err
	}
	return e.Value(), nil
}

// from is the time after which a schedule's fires are due.
func from(d *Definition, st *State) time.Time {
	if st.Last.After(d.UpdatedAt) {
		return st.Last
	}
	return d.UpdatedAt
}

// arm publishes the schedule's next fire, replacing the one pending: a
// one-shot message schedule at the next nominal time plus its jitter.
// Any coordinator may arm any schedule at any time; arming is a function
// of the definition and the state, and a fire only makes the handler look.
func (r *Runner) arm(ctx context.Context, name string) error {
	st := &Store{kv: r.kv}
	d, _, err := st.Get(ctx, name)
	if errors.Is(err, ErrNotFound) {
		return r.disarm(ctx, name)
	}
	if err != nil {
		return err
	}
	state, _, err := st.State(ctx, name)
	if err != nil {
		return err
	}
	tm, err := d.Timing()
	if err != nil {
		return err
	}
	key, err := r.key(ctx, "schedule", name)
	if err != nil {
		return err
	}
	next := tm.Next(from(d, state))
	if next.IsZero() {
		return r.disarm(ctx, name)
	}
	at := next.Add(jitterOf(key, next, time.Duration(d.Jitter)))
	r.log.Debug("arming a schedule", logattr.Schedule, name, logattr.Due, at)
	return r.publishAt(ctx, eventlog.ScheduleArmSubject(name), name, at)
}

func (r *Runner) publishAt(ctx context.Context, subject, name string, at time.Time) error {
	m := nats.NewMsg(subject)
	m.Data = []byte(name)
	m.Header.Set("Nats-Schedule", "@at "+at.UTC().Format(time.RFC3339Nano))
	m.Header.Set("Nats-Schedule-Target", eventlog.ScheduleFireSubject(name))
	// One fire waits per schedule: a fire not yet handled is replaced by
	// the next, which handles both (the due times come from the state).
	m.Header.Set("Nats-Schedule-Rollup", "sub")
	if _, err := r.js.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("arming schedule %s for %s: %w", name, at.Format(time.RFC3339), err)
	}
	return nil
}

// disarm drops a deleted schedule's pending fires and its state.
func (r *Runner) disarm(ctx context.Context, name string) error {
	ts, err := r.js.Stream(ctx, eventlog.Must(r.store).TimerStream())
	if err != nil {
		return err
	}
	for _, s := range []string{eventlog.ScheduleArmSubject(name), eventlog.ScheduleBufferSubject(name)} {
		if err := ts.Purge(ctx, jetstream.WithPurgeSubject(s)); err != nil {
			return err
		}
	}
	if _, _, err := (&Store{kv: r.kv}).Get(ctx, name); errors.Is(err, ErrNotFound) {
		if err := r.kv.Delete(ctx, stPrefix+name); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return err
		}
	}
	return nil
}

// consume handles the fires until ctx ends.
func (r *Runner) consume(ctx context.Context) {
	for ctx.Err() == nil {
		cons, err := setup.EnsureConsumer(ctx, r.js, eventlog.Must(r.store).TimerStream(), jetstream.ConsumerConfig{
			Durable:       ConsumerName(r.durable),
			Description:   "Weft coordinators: schedules' fires",
			FilterSubject: eventlog.ScheduleFires,
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       30 * time.Second,
			MaxDeliver:    -1,
		})
		if err != nil {
			r.log.Warn("setting up the schedules' consumer", logattr.Error, err)
			if !sleep(ctx, time.Second) {
				return
			}
			continue
		}
		iter, err := cons.Messages(jetstream.PullMaxMessages(16))
		if err != nil {
			r.log.Warn("consuming the schedules' fires", logattr.Error, err)
			if !sleep(ctx, time.Second) {
				return
			}
			continue
		}
		stop := context.AfterFunc(ctx, iter.Drain)
		for {
			msg, err := iter.Next()
			if err != nil {
				if errors.Is(err, jetstream.ErrMsgIteratorClosed) || ctx.Err() != nil {
					break
				}
				continue
			}
			name, ok := eventlog.ScheduleOfFire(msg.Subject())
			if !ok {
				_ = msg.Term()
				continue
			}
			r.log.Debug("a schedule's fire", logattr.Schedule, name)
			if err := r.Reconcile(ctx, name); err != nil {
				r.log.Warn("handling a schedule's fire", logattr.Schedule, name, logattr.Error, err)
				_ = msg.NakWithDelay(time.Second)
				continue
			}
			_ = msg.Ack()
		}
		stop()
	}
}

// Reconcile handles schedule name's fire times due now: each starts its
// run, or is recorded as skipped (paused, too late for the catch-up
// window, or by the overlap policy). The state is changed by
// compare-and-set; a handler that loses the race does it again from the
// winner's state, and starts nothing twice, since a fire time's run has
// one id. The next fire is armed.
func (r *Runner) Reconcile(ctx context.Context, name string) error {
	ss := &Store{kv: r.kv}
	for {
		d, _, err := ss.Get(ctx, name)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		st, rev, err := ss.State(ctx, name)
		if err != nil {
			return err
		}
		key, err := r.key(ctx, "schedule", name)
		if err != nil {
			return err
		}
		now := r.now()
		if err := r.fireDue(ctx, d, st, key, now); err != nil {
			return err
		}
		if err := r.putState(ctx, name, st, rev); setup.KVConflict(err) {
			continue // another coordinator moved it: again, from its state
		} else if err != nil {
			return err
		}
		r.log.Debug("reconciled a schedule", logattr.Schedule, name, logattr.Last, st.Last)
		r.count(st, now)
		if st.Buffer != nil {
			// Look again shortly: the buffered fire starts when the
			// running runs have ended.
			if err := r.publishAt(ctx, eventlog.ScheduleBufferSubject(name), name, now.Add(time.Second)); err != nil {
				return err
			}
		}
		return r.arm(ctx, name)
	}
}

// fireDue records in st what became of each of d's fire times due by now,
// the buffered one first, and the schedule's runs still running.
func (r *Runner) fireDue(ctx context.Context, d *Definition, st *State, key []byte, now time.Time) error {
	tm, err := d.Timing()
	if err != nil {
		return err
	}
	running, err := r.stillRunning(ctx, st.Running)
	if err != nil {
		return err
	}
	if err := r.startBuffered(ctx, d, st, key, now, &running); err != nil {
		return err
	}
	for _, t := range tm.Between(from(d, st), now, MaxBackfill) {
		due := t.Add(jitterOf(key, t, time.Duration(d.Jitter)))
		if due.After(now) {
			break
		}
		st.Last = t
		f, err := r.fire(ctx, d, st, key, t, due, now, &running)
		if err != nil {
			return err
		}
		st.record(f)
	}
	st.Running = running
	return nil
}

// startBuffered starts the buffered fire, if there is one and the runs it
// waited for ended.
func (r *Runner) startBuffered(ctx context.Context, d *Definition, st *State, key []byte, now time.Time, running *[]string) error {
	if st.Buffer == nil || len(*running) > 0 || d.Paused {
		return nil
	}
	t := *st.Buffer
	id, err := r.start(ctx, d, FireRunID(key, d.Name, t), &events.TriggerRef{Kind: events.TriggerSchedule, Name: d.Name, FireTime: t})
	if err != nil {
		return err
	}
	st.Buffer = nil
	st.record(Fire{Nominal: t, At: now, Outcome: Started, RunID: id, Reason: "buffered"})
	*running = append(*running, id)
	return nil
}

// fire decides what becomes of fire time t, due at due (its jitter added),
// seen at now: skipped (paused, too late for the catch-up window, or by
// the overlap policy), buffered, or started (the runs it overlaps
// cancelled first under cancel-other). running is the schedule's running
// runs, updated.
func (r *Runner) fire(ctx context.Context, d *Definition, st *State, key []byte, t, due, now time.Time, running *[]string) (Fire, error) {
	f := Fire{Nominal: t, At: now}
	switch {
	case d.Paused:
		f.Outcome, f.Reason = SkippedPaused, d.PauseNote
	case now.Sub(due) > d.CatchUp():
		f.Outcome, f.Reason = SkippedCatchup, fmt.Sprintf("%s late, the catch-up window is %s", now.Sub(due).Round(time.Millisecond), d.CatchUp())
	case len(*running) > 0 && d.Policy() == OverlapSkip:
		f.Outcome, f.Reason = SkippedOverlap, "running: "+strings.Join(*running, ", ")
	case len(*running) > 0 && d.Policy() == OverlapBufferOne:
		if st.Buffer == nil {
			tt := t
			st.Buffer, f.Outcome = &tt, Buffered
		} else {
			f.Outcome, f.Reason = SkippedOverlap, "a fire is buffered already"
		}
	default:
		if d.Policy() == OverlapCancelOther {
			for _, run := range *running {
				if err := r.cancel(ctx, d.Name, run, t); err != nil {
					return f, err
				}
			}
			*running = nil
		}
		id, err := r.start(ctx, d, FireRunID(key, d.Name, t), &events.TriggerRef{Kind: events.TriggerSchedule, Name: d.Name, FireTime: t})
		if err != nil {
			return f, err
		}
		f.Outcome, f.RunID = Started, id
		*running = append(*running, id)
	}
	return f, nil
}

// count adds the fires recorded at now to the runner's counters.
func (r *Runner) count(st *State, now time.Time) {
	for _, f := range st.Fires {
		if !f.At.Equal(now) {
			continue
		}
		if f.Outcome == Started {
			r.started.Add(1)
		} else if strings.HasPrefix(f.Outcome, "skipped") {
			r.skipped.Add(1)
		}
	}
}

func (r *Runner) putState(ctx context.Context, name string, st *State, rev uint64) error {
	b, _ := json.Marshal(st)
	var err error
	if rev == 0 {
		_, err = r.kv.Create(ctx, stPrefix+name, b)
	} else {
		_, err = r.kv.Update(ctx, stPrefix+name, b, rev)
	}
	return err
}

// stillRunning keeps the runs that have not ended.
func (r *Runner) stillRunning(ctx context.Context, runs []string) ([]string, error) {
	var out []string
	for _, run := range runs {
		ended, err := eventlog.HasEnd(ctx, r.store, run)
		if err != nil {
			return nil, err
		}
		if !ended {
			out = append(out, run)
		}
	}
	return out, nil
}

// start starts the run of id; a run already under id is this start made
// before (no other writer can derive the id), and counts as started. The
// start is the engine's: a decision of the run, on its decision subject,
// which only the coordinator role may write (a client's start naming a
// schedule is refused: events.TriggerClaimError).
func (r *Runner) start(ctx context.Context, d *Definition, id string, ref *events.TriggerRef) (string, error) {
	ev, err := events.New(id, id, r.now(), &events.RunStartedData{
		GraphName: d.GraphName, GraphDigest: d.GraphDigest, Graph: d.Graph,
		Input: d.Input, StartedBy: ref.Kind + ":" + ref.Name, Trigger: ref,
	})
	if err != nil {
		return "", err
	}
	eventlog.MarkDecision(ev)
	if _, err := eventlog.Append(ctx, r.store, id, 0, ev); err != nil && !errors.Is(err, events.ErrRunExists) {
		return "", fmt.Errorf("starting run %s of schedule %s: %w", id, d.Name, err)
	}
	return id, nil
}

// cancel asks a run to cancel (overlap cancel-other), once per fire.
func (r *Runner) cancel(ctx context.Context, name, run string, t time.Time) error {
	ev, err := events.New(run, run+":cancel:schedule:"+t.UTC().Format("20060102T150405Z"), time.Time{}, &events.RunCancelRequestedData{
		By: "schedule:" + name, Reason: "overlap policy cancel-other: the fire of " + t.UTC().Format(time.RFC3339) + " starts a new run",
	})
	if err != nil {
		return err
	}
	if _, err := r.store.Append(ctx, run, events.AnySeq, ev); err != nil {
		return fmt.Errorf("cancelling run %s of schedule %s: %w", run, name, err)
	}
	return nil
}

// onRequest carries out a trigger or backfill request, answers it and
// removes it.
func (r *Runner) onRequest(ctx context.Context, e jetstream.KeyValueEntry) {
	if e.Operation() != jetstream.KeyValuePut {
		return
	}
	name, id, ok := strings.Cut(strings.TrimPrefix(e.Key(), actPrefix), ".")
	if !ok {
		return
	}
	var req Request
	res := &Result{}
	if err := json.Unmarshal(e.Value(), &req); err != nil {
		res.Error = "undecodable request: " + err.Error()
	} else if err := r.carryOut(ctx, name, id, req, res); err != nil {
		if ctx.Err() != nil {
			return
		}
		res.Error = err.Error()
	}
	b, _ := json.Marshal(res)
	if _, err := r.kv.Put(ctx, resPrefix+name+"."+id, b); err != nil {
		r.log.Warn("answering a schedule request", logattr.Schedule, name, logattr.Error, err)
		return
	}
	_ = r.kv.Delete(ctx, e.Key(), jetstream.LastRevision(e.Revision()))
}

func (r *Runner) carryOut(ctx context.Context, name, id string, req Request, res *Result) error {
	ss := &Store{kv: r.kv}
	d, _, err := ss.Get(ctx, name)
	if err != nil {
		return err
	}
	key, err := r.key(ctx, "schedule", name)
	if err != nil {
		return err
	}
	var fires []Fire
	switch req.Kind {
	case "trigger":
		run, err := r.start(ctx, d, ManualRunID(key, name, id), &events.TriggerRef{Kind: events.TriggerSchedule, Name: name, FireTime: req.At, Key: "manual:" + id})
		if err != nil {
			return err
		}
		res.Runs = []string{run}
		fires = append(fires, Fire{Nominal: req.At, At: r.now(), Outcome: TriggeredByHand, RunID: run})
	case "backfill":
		tm, err := d.Timing()
		if err != nil {
			return err
		}
		// A fire time's run has one id, whether it started on time or
		// by a backfill: a backfill over fires that ran starts none.
		for _, t := range tm.Between(req.From.Add(-time.Nanosecond), req.To, MaxBackfill) {
			run, err := r.start(ctx, d, FireRunID(key, name, t), &events.TriggerRef{Kind: events.TriggerSchedule, Name: name, FireTime: t, Key: "backfill:" + id})
			if err != nil {
				return err
			}
			res.Runs = append(res.Runs, run)
			fires = append(fires, Fire{Nominal: t, At: r.now(), Outcome: Backfilled, RunID: run})
		}
	default:
		return fmt.Errorf("unknown request %q", req.Kind)
	}
	// Record them, and count the runs as the schedule's running runs.
	for {
		st, rev, err := ss.State(ctx, name)
		if err != nil {
			return err
		}
		if slices.ContainsFunc(st.Fires, func(f Fire) bool { return len(fires) > 0 && f.RunID == fires[0].RunID }) {
			return nil
		}
		for _, f := range fires {
			st.record(f)
			st.Running = append(st.Running, f.RunID)
		}
		if err := r.putState(ctx, name, st, rev); setup.KVConflict(err) {
			continue
		} else {
			return err
		}
	}
}
