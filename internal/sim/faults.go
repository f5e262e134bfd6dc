package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
)

// Fault is a class of fault the simulator injects.
type Fault string

// The fault classes. Each is off unless the configuration turns it on.
const (
	// AppendFail: an append fails before it is written (a chain of
	// appends may fail part-way, leaving a prefix in the log).
	AppendFail Fault = "append-fail"
	// AppendLostAck: an append is written and the writer gets an error
	// (the acknowledgement was lost; JetStream timed out).
	AppendLostAck Fault = "append-lost-ack"
	// AppendSlow: an append takes simulated time, during which due timers
	// fire (a back-off shorter than the append).
	AppendSlow Fault = "append-slow"
	// DupPublish: a written append is published again, at once or late
	// (possibly after the de-duplication window).
	DupPublish Fault = "dup-publish"
	// ScheduleFail: scheduling a timer fails, before or after the server
	// stored it; dropping a run's timers fails.
	ScheduleFail Fault = "schedule-fail"
	// ReadFail: reading a run fails.
	ReadFail Fault = "read-fail"
	// Junk: undecodable bytes, and valid CloudEvents of a type this
	// version does not know, on a run's subjects.
	Junk Fault = "junk"
	// CrashCoordinator: a coordinator dies at any store call (before or
	// after it took effect) or between events; a new one starts with an
	// empty cache.
	CrashCoordinator Fault = "crash-coordinator"
	// CrashWorker: a worker dies between any two of its steps.
	CrashWorker Fault = "crash-worker"
	// Redeliver: acknowledgements are lost, so coordinator events and work
	// items come again after the ack wait.
	Redeliver Fault = "redeliver"
	// StallWorker: a worker runs a node past the ack wait without
	// heartbeating: the item goes to a second worker, and the first
	// one's outcome comes late.
	StallWorker Fault = "stall-worker"
	// MultiCoordinator: two or three coordinators share the consumer,
	// each handling part of the stream.
	MultiCoordinator Fault = "multi-coordinator"
	// Cancel: clients cancel runs at random times.
	Cancel Fault = "cancel"
	// LateTimer: the server fires timers late.
	LateTimer Fault = "late-timer"
	// SignalDup: a client sends a signal twice (a retried request).
	SignalDup Fault = "signal-dup"
)

// AllFaults lists every fault class, in a fixed order.
var AllFaults = []Fault{
	AppendFail, AppendLostAck, AppendSlow, DupPublish, ScheduleFail, ReadFail, Junk,
	CrashCoordinator, CrashWorker, Redeliver, StallWorker, MultiCoordinator, Cancel, LateTimer, SignalDup,
}

// FaultSet is a set of enabled fault classes.
type FaultSet map[Fault]bool

// ParseFaults reads a comma-separated list of fault classes; "all" is every
// class, "none" or "" is none.
func ParseFaults(s string) (FaultSet, error) {
	fs := FaultSet{}
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		switch name {
		case "", "none":
		case "all":
			for _, f := range AllFaults {
				fs[f] = true
			}
		default:
			if !slices.Contains(AllFaults, Fault(name)) {
				return nil, fmt.Errorf("unknown fault class %q (known: %s)", name, FaultSet{}.with(AllFaults...))
			}
			fs[Fault(name)] = true
		}
	}
	return fs, nil
}

func (fs FaultSet) with(fl ...Fault) FaultSet {
	out := FaultSet{}
	for f := range fs {
		out[f] = true
	}
	for _, f := range fl {
		out[f] = true
	}
	return out
}

// String lists the set in AllFaults order, comma-separated ("none" when
// empty), as ParseFaults reads it.
func (fs FaultSet) String() string {
	var names []string
	for _, f := range AllFaults {
		if fs[f] {
			names = append(names, string(f))
		}
	}
	if len(names) == 0 {
		return "none"
	}
	if len(names) == len(AllFaults) {
		return "all"
	}
	return strings.Join(names, ",")
}

// childStartFails reports whether a coordinator's decisions that start
// a child run fail before write (AppendFail, often): the child's start is
// in already (it is appended first), so the parent's wait comes only when
// its event comes again, and the child may end before.
func (p *procStore) childStartFails(runID string, evs []*events.Event) bool {
	if p.kind != kindCoordinator || !startsChild(evs) || !p.sim.chance(AppendFail, 0.3) {
		return false
	}
	p.sim.note("%s: the decisions of %s that start a child run fail before write", p.name, runID)
	return true
}

// startsChild reports whether evs are decisions that start a child run
// (a subgraph node's wait and its child-run-started).
func startsChild(evs []*events.Event) bool {
	return slices.ContainsFunc(evs, func(e *events.Event) bool { return e.Type == events.ChildRunStarted })
}

// errInjected marks a failure the simulator injected. Injected failures
// wrap context.DeadlineExceeded too: what a NATS call that failed returns,
// and what the coordinator classifies as transient.
var errInjected = errors.New("sim: injected fault")

// crash is the panic value that kills a simulated process at a store call.
type crash struct{ proc string }

// procKind is what a simulated process is.
type procKind int

const (
	kindClient procKind = iota
	kindCoordinator
	kindWorker
)

// procStore is one process's view of the store: the model behind a
// wrapper that injects the enabled faults. Every process (client,
// coordinator, worker) has its own.
type procStore struct {
	sim  *Sim
	name string
	kind procKind
	// onRead and onDecided report, for a coordinator, what its cache now
	// holds (see coordInstance).
	onRead    func(run string, evs []*events.Event)
	onDecided func(run string, seqs []uint64)
}

var _ events.Store = (*procStore)(nil)

// crashPoint kills a coordinator at a store call, when that fault is on.
func (p *procStore) crashPoint() {
	if p.kind == kindCoordinator && p.sim.chance(CrashCoordinator, 0.01) {
		p.sim.note("crash %s at a store call", p.name)
		panic(crash{p.name})
	}
}

func (p *procStore) Append(ctx context.Context, runID string, expectLast uint64, evs ...*events.Event) (uint64, error) {
	s := p.sim
	p.crashPoint()
	if s.chance(AppendFail, 0.04) {
		// Part of a chain may be written before the failure.
		if k := s.rng.IntN(len(evs)); k > 0 {
			_, _ = s.store.append(ctx, runID, expectLast, evs[:k]...)
		}
		s.note("%s: append of %d event(s) to %s fails before write", p.name, len(evs), runID)
		return 0, fmt.Errorf("%w: append failed: %w", errInjected, context.DeadlineExceeded)
	}
	if p.childStartFails(runID, evs) {
		return 0, fmt.Errorf("%w: append failed: %w", errInjected, context.DeadlineExceeded)
	}
	if s.chance(AppendSlow, 0.05) {
		d := time.Duration(100+s.rng.IntN(3000)) * time.Millisecond
		s.note("%s: append to %s takes %v", p.name, runID, d)
		s.advance(d)
	}
	seq, err := s.store.append(ctx, runID, expectLast, evs...)
	if err == nil && s.chance(DupPublish, 0.05) {
		// A retried publish: at once (de-duplicated), or late.
		if s.rng.IntN(2) == 0 {
			_, _ = s.store.append(ctx, runID, expectLast, evs...)
		} else {
			at := s.clock.now.Add(time.Duration(s.rng.Int64N(int64(3 * s.cfg.DedupWindow))))
			s.later = append(s.later, lateDup{at: at, run: runID, expect: expectLast, evs: evs})
		}
	}
	if err == nil {
		p.crashPoint() // written, and the writer never learns it
		if s.chance(AppendLostAck, 0.04) {
			s.note("%s: append to %s written at %d, ack lost", p.name, runID, seq)
			return 0, fmt.Errorf("%w: %w", errInjected, context.DeadlineExceeded)
		}
		if p.onDecided != nil && len(evs) > 0 && evs[0].IsDecision() {
			seqs := make([]uint64, 0, len(evs))
			for _, e := range evs {
				if d, ok := s.log.dedup[e.ID]; ok {
					seqs = append(seqs, d.seq)
				}
			}
			p.onDecided(runID, seqs)
		}
	}
	return seq, err
}

// AppendDecisions is Append of decisions, marked as such.
func (p *procStore) AppendDecisions(ctx context.Context, runID string, expectLast uint64, evs ...*events.Event) (uint64, error) {
	for _, e := range evs {
		eventlog.MarkDecision(e)
	}
	return p.Append(ctx, runID, expectLast, evs...)
}

// AppendStep is Append of the outcomes, then AppendDecisions, with the
// faults of each.
func (p *procStore) AppendStep(ctx context.Context, runID string, expectLast uint64, outcomes, decisions []*events.Event) (uint64, error) {
	last, err := p.Append(ctx, runID, events.AnySeq, outcomes...)
	if err != nil || len(decisions) == 0 {
		return last, err
	}
	return p.AppendDecisions(ctx, runID, expectLast, decisions...)
}

func (p *procStore) Read(ctx context.Context, runID string, from, upTo uint64) ([]*events.Event, error) {
	p.crashPoint()
	if p.sim.chance(ReadFail, 0.05) {
		return nil, fmt.Errorf("%w: reading %s: %w", errInjected, runID, context.DeadlineExceeded)
	}
	return p.sim.store.Read(ctx, runID, from, upTo)
}

// ReadThrough is the read a coordinator folds a run into its cache from
// (eventlog.Each); a plain Read (a child run's start checked, a parent's
// nonce looked up) fills no cache, and is not reported to onRead.
func (p *procStore) ReadThrough(ctx context.Context, runID string, from, through uint64) ([]*events.Event, error) {
	evs, err := p.Read(ctx, runID, from, 0)
	if err == nil && p.onRead != nil && from <= 1 {
		p.onRead(runID, evs)
	}
	return evs, err
}

func (p *procStore) LastSeq(ctx context.Context, runID string) (uint64, error) {
	p.crashPoint()
	if p.sim.chance(ReadFail, 0.05) {
		return 0, fmt.Errorf("%w: %w", errInjected, context.DeadlineExceeded)
	}
	return p.sim.store.LastSeq(ctx, runID)
}

func (p *procStore) Schedule(ctx context.Context, ev *events.Event, timerID string, at time.Time) error {
	s := p.sim
	p.crashPoint()
	if s.chance(ScheduleFail, 0.08) {
		if s.rng.IntN(2) == 0 {
			_ = s.store.Schedule(ctx, ev, timerID, at)
			s.note("%s: schedule %s of %s stored, ack lost", p.name, timerID, ev.RunID)
		} else {
			s.note("%s: schedule %s of %s fails", p.name, timerID, ev.RunID)
		}
		return fmt.Errorf("%w: scheduling %s: %w", errInjected, timerID, context.DeadlineExceeded)
	}
	err := s.store.Schedule(ctx, ev, timerID, at)
	p.crashPoint()
	return err
}

func (p *procStore) CancelSchedules(ctx context.Context, runID string) error {
	p.crashPoint()
	if p.sim.chance(ScheduleFail, 0.08) {
		p.sim.note("%s: dropping the timers of %s fails", p.name, runID)
		return fmt.Errorf("%w: purging timers of %s: %w", errInjected, runID, context.DeadlineExceeded)
	}
	return p.sim.store.CancelSchedules(ctx, runID)
}

func (p *procStore) StreamName() string             { return p.sim.store.StreamName() }
func (p *procStore) TimerStream() string            { return p.sim.store.TimerStream() }
func (p *procStore) JetStream() jetstream.JetStream { return nil }
func (p *procStore) MaxEventSize() int              { return p.sim.store.MaxEventSize() }

// lateDup is a publish repeated late by the network or a client library.
type lateDup struct {
	at     time.Time
	run    string
	expect uint64
	evs    []*events.Event
}
