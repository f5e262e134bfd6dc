package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/flow"
	"github.com/weft-dev/weft/pkg/events"
)

// Config is one simulation.
type Config struct {
	// Seed drives everything: the same seed and configuration replay the
	// same simulation, step by step.
	Seed uint64
	// Faults are the fault classes injected.
	Faults FaultSet
	// Runs is how many runs are started (default 6).
	Runs int
	// Bound is the simulated time within which every run must end
	// (default 10 minutes).
	Bound time.Duration
	// DedupWindow is the stream's de-duplication window (default 2
	// minutes, as events.Open sets it).
	DedupWindow time.Duration
	// MaxSteps bounds the simulation (default 50000).
	MaxSteps int
	// Graphs names the graphs runs are started from (default: all of
	// them; see graphs.go).
	Graphs []string
}

func (c *Config) defaults() {
	if c.Runs == 0 {
		c.Runs = 6
	}
	if c.Bound == 0 {
		c.Bound = 10 * time.Minute
	}
	if c.DedupWindow == 0 {
		c.DedupWindow = 2 * time.Minute
	}
	if c.MaxSteps == 0 {
		c.MaxSteps = 50000
	}
}

// Result is what one simulation did.
type Result struct {
	Seed   uint64
	Steps  int
	Checks int // invariant checks made
	// ChecksByKind counts the checks of each invariant.
	ChecksByKind map[string]int
	Runs         int
	Ended        int
	Events       int // messages in the log
	Effects      int // node executions (effects) by workers
	SimTime      time.Duration
	// Violation is the first invariant that failed, nil if none did.
	Violation *Violation
}

// Violation is a failed invariant: which, where, and how to replay it.
type Violation struct {
	Seed      uint64
	Faults    FaultSet
	Graphs    []string
	Step      int
	At        time.Duration // simulated time since the start
	Run       string
	Invariant string
	Detail    string
	// Trace holds the last things the simulator did before the failure.
	Trace []string
	// Log is the tail of the run's log.
	Log []string
}

func (v *Violation) Error() string {
	mk, gt := "", ""
	if len(v.Graphs) > 0 {
		mk = " GRAPHS=" + strings.Join(v.Graphs, ",")
		gt = " -graphs=" + strings.Join(v.Graphs, ",")
	}
	s := fmt.Sprintf("seed %d, step %d (t=%v), run %s: %s: %s\nreplay: make sim SEED=%d FAULTS=%s%s\n    or: go test ./internal/sim -run 'TestSim$' -seed=%d -faults=%s%s",
		v.Seed, v.Step, v.At, v.Run, v.Invariant, v.Detail, v.Seed, v.Faults, mk, v.Seed, v.Faults, gt)
	if len(v.Log) > 0 {
		s += "\nthe run's log, last events:"
		for _, l := range v.Log {
			s += "\n  " + l
		}
	}
	if len(v.Trace) > 0 {
		s += "\nlast steps:"
		for _, t := range v.Trace {
			s += "\n  " + t
		}
	}
	return s
}

// Timings of the simulated infrastructure.
const (
	coordAckWait = 10 * time.Second // the coordinator consumer's (coordinator default)
	workAckWait  = 30 * time.Second // a task queue's
	traceLen     = 40
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Sim is one simulation: the production coordinator, engine and fold, over
// the model of the log, with simulated clients and workers, driven by one
// seeded source of randomness.
type Sim struct {
	cfg    Config
	rng    *rand.Rand
	clock  *clock
	log    *memLog
	store  *memStore
	graphs []*simGraph

	coords []*coordInstance
	// lanes are the partition's two consumers, progress and starts, as
	// the coordinators' (internal/coordinator lanes.go): each run's
	// start on the one, what else a coordinator consumes on the other
	// (eventlog.Consumed), so a start may come after its run's later
	// events, and a coordinator's own decisions do not come back.
	lanes     [2]*consumer
	queues    map[string]*consumer
	queueList []string
	workers   []*simWorker
	client    *procStore
	runs      []*simRun
	later     []lateDup
	effects   []effect
	val       *validator
	gen       int
	step      int
	trace     []string
	quiet     *slog.Logger
	// flowKV is the model of the flow bucket all coordinators share, and
	// flowLimiter the validator's view of it (flow.go).
	flowKV      *memKV
	flowLimiter *flow.Limiter
	lastSweep   time.Time
}

// simRun is a run the simulated client starts.
type simRun struct {
	id       string
	g        *simGraph
	startAt  time.Time
	started  bool
	cancelAt time.Time // zero: never
	// signals are the signals the client will send, earliest first.
	signals []plannedSignal
}

// plannedSignal is one send of a signal. A retried send has the logical
// id of the one it retries, and so (as pkg/client derives it, from the
// run, the node, the activation and the data) the same event id.
type plannedSignal struct {
	at      time.Time
	node    string
	logical string
}

// planSignal plans a signal to a run's human node, and its retry when
// signals are sent twice.
func (s *Sim) planSignal(r *simRun, node string, iteration int, at time.Time) {
	logical := fmt.Sprintf("%s/%s/%d", r.id, node, iteration)
	r.signals = append(r.signals, plannedSignal{at: at, node: node, logical: logical})
	if s.chance(SignalDup, 0.5) {
		r.signals = append(r.signals, plannedSignal{at: at.Add(time.Duration(s.rng.IntN(5000)) * time.Millisecond), node: node, logical: logical})
	}
	slices.SortStableFunc(r.signals, func(a, b plannedSignal) int { return a.at.Compare(b.at) })
}

// onWaiting is told of a human node's activation that waits for a signal:
// for graphs whose person answers each wait, a signal is planned.
func (s *Sim) onWaiting(run, node string, iteration int) {
	for _, r := range s.runs {
		if r.id == run && r.g.reactive {
			s.planSignal(r, node, iteration, s.clock.now.Add(time.Duration(200+s.rng.IntN(10000))*time.Millisecond))
		}
	}
}

// Run runs one simulation.
func Run(cfg Config) (*Result, error) {
	s, err := newSim(cfg)
	if err != nil {
		return nil, err
	}
	return s.loop(), nil
}

func newSim(cfg Config) (*Sim, error) {
	cfg.defaults()
	gs, err := graphs()
	if err != nil {
		return nil, err
	}
	if len(cfg.Graphs) > 0 {
		var picked []*simGraph
		for _, g := range gs {
			if slices.Contains(cfg.Graphs, g.name) {
				picked = append(picked, g)
			}
		}
		if len(picked) != len(cfg.Graphs) {
			return nil, fmt.Errorf("unknown graph in %q", cfg.Graphs)
		}
		gs = picked
	}
	s := &Sim{
		cfg:    cfg,
		rng:    rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x5eed)),
		clock:  &clock{now: epoch},
		graphs: gs,
		queues: map[string]*consumer{},
		quiet:  slog.New(slog.DiscardHandler),
	}
	s.log = newMemLog(s.clock, cfg.DedupWindow)
	s.store = &memStore{log: s.log}
	s.flowKV = newMemKV()
	s.flowLimiter = s.newLimiter()
	s.lastSweep = epoch
	s.val = newValidator(s)
	s.lanes = [2]*consumer{newConsumer("coordinator", s.clock, coordAckWait), newConsumer("coordinator-starts", s.clock, coordAckWait)}
	s.log.onAppend = s.onAppend
	if cfg.Faults[LateTimer] {
		s.log.lateTimer = func() time.Duration {
			if s.rng.IntN(4) == 0 {
				return time.Duration(s.rng.IntN(20000)) * time.Millisecond
			}
			return 0
		}
	}
	s.client = &procStore{sim: s, name: "client", kind: kindClient}
	nc := 1
	if cfg.Faults[MultiCoordinator] {
		nc = 2 + s.rng.IntN(2)
	}
	for range nc {
		s.coords = append(s.coords, s.newCoord())
	}
	for range 1 + s.rng.IntN(3) {
		s.workers = append(s.workers, s.newWorker())
	}
	s.planRuns()
	return s, nil
}

// planRuns picks the runs the client starts, and when it cancels and
// signals them.
func (s *Sim) planRuns() {
	for i := range s.cfg.Runs {
		g := s.graphs[s.rng.IntN(len(s.graphs))]
		r := &simRun{id: fmt.Sprintf("r%02d-%s", i, g.name), g: g, startAt: epoch.Add(time.Duration(s.rng.IntN(5000)) * time.Millisecond)}
		if s.cfg.Faults[Cancel] && s.rng.IntN(4) == 0 {
			r.cancelAt = r.startAt.Add(time.Duration(s.rng.IntN(60000)) * time.Millisecond)
		}
		if !g.reactive {
			for _, node := range g.human {
				s.planSignal(r, node, 1, r.startAt.Add(time.Duration(s.rng.IntN(60000))*time.Millisecond))
			}
		}
		s.runs = append(s.runs, r)
	}
}

// chance reports, when fault f is on, an event of probability p.
func (s *Sim) chance(f Fault, p float64) bool {
	return s.cfg.Faults[f] && s.rng.Float64() < p
}

// note records a line of the trace printed with a violation.
func (s *Sim) note(format string, args ...any) {
	line := fmt.Sprintf("[%d t=%v] ", s.step, s.clock.now.Sub(epoch)) + fmt.Sprintf(format, args...)
	if len(s.trace) >= traceLen {
		s.trace = s.trace[1:]
	}
	s.trace = append(s.trace, line)
}

// advance moves the clock on; the server fires the timers that come due.
func (s *Sim) advance(d time.Duration) {
	s.clock.now = s.clock.now.Add(d)
	s.log.fireDue()
}

// onAppend routes every message written to the consumers and the
// validator.
func (s *Sim) onAppend(m *message) {
	switch {
	case m.run == "" || !eventlog.Consumed(m.subject):
	case m.subject == eventlog.StartedSubject(m.run):
		s.lanes[1].add(m)
	default:
		s.lanes[0].add(m)
	}
	if m.ev.Refused == nil && m.ev.Type == events.NodeReady {
		q := m.ev.Queue
		c := s.queues[q]
		if c == nil {
			c = newConsumer("work-"+q, s.clock, workAckWait)
			s.queues[q] = c
			s.queueList = append(s.queueList, q)
			slices.Sort(s.queueList)
		}
		c.add(m)
	} else if m.junk && m.ev.Queue != "" {
		if c := s.queues[m.ev.Queue]; c != nil {
			c.add(m)
		}
	}
	s.val.onAppend(m)
}

// action is one thing the generator may do next.
type action struct {
	name   string
	weight int
	do     func()
}

// loop runs steps until every run ended and nothing is left to deliver, an
// invariant fails, or the step budget is spent.
func (s *Sim) loop() *Result {
	res := &Result{Seed: s.cfg.Seed, Runs: len(s.runs)}
	defer func() {
		res.Checks = s.val.checks
		res.ChecksByKind = s.val.byKind
		res.Events = len(s.log.msgs)
		res.Effects = len(s.effects)
		res.SimTime = s.clock.now.Sub(epoch)
		res.Ended = s.val.ended()
	}()
	for s.step = 1; s.step <= s.cfg.MaxSteps; s.step++ {
		res.Steps = s.step
		acts := s.actions()
		if len(acts) == 0 {
			if !s.idle() {
				break // settled
			}
		} else {
			s.pick(acts).do()
			s.advance(time.Duration(s.rng.IntN(10)) * time.Millisecond)
		}
		if v := s.val.check(); v != nil {
			res.Violation = v
			return res
		}
	}
	if res.Steps > s.cfg.MaxSteps {
		res.Violation = s.val.violation("", "bounded simulation", fmt.Sprintf("did not settle within %d steps", s.cfg.MaxSteps))
		return res
	}
	res.Violation = s.val.final()
	return res
}

func (s *Sim) pick(acts []action) action {
	total := 0
	for _, a := range acts {
		total += a.weight
	}
	n := s.rng.IntN(total)
	for _, a := range acts {
		if n < a.weight {
			return a
		}
		n -= a.weight
	}
	return acts[len(acts)-1]
}

// actions lists what may happen now.
func (s *Sim) actions() []action {
	acts := s.clientActions()
	acts = append(acts, s.processActions()...)
	if len(s.later) > 0 && !s.later[0].at.After(s.clock.now) {
		acts = append(acts, action{"late duplicate", 4, s.lateDuplicate})
	}
	// A sweep is due whatever else is (a coordinator sweeps on its
	// clock): a holder left by a decision never written, of a run since
	// ended, is given back by it alone.
	if t, ok := s.sweepDue(); ok && !t.After(s.clock.now) {
		acts = append(acts, action{"sweep", 2, s.sweep})
	}
	if len(acts) == 0 {
		return nil
	}
	acts = append(acts, s.faultActions()...)
	return append(acts, action{"tick", 2, func() { s.advance(time.Duration(s.rng.IntN(300)) * time.Millisecond) }})
}

// clientActions are the starts, cancels and signals due now.
func (s *Sim) clientActions() []action {
	now := s.clock.now
	var acts []action
	for _, r := range s.runs {
		if !r.started && !r.startAt.After(now) {
			acts = append(acts, action{"start " + r.id, 5, func() { s.startRun(r) }})
		}
		if r.started && !r.cancelAt.IsZero() && !r.cancelAt.After(now) {
			acts = append(acts, action{"cancel " + r.id, 3, func() { s.cancelRun(r) }})
		}
		if r.started && len(r.signals) > 0 && !r.signals[0].at.After(now) {
			acts = append(acts, action{"signal " + r.id, 3, func() { s.signalRun(r) }})
		}
	}
	return acts
}

// processActions are the coordinators' and workers' steps possible now.
func (s *Sim) processActions() []action {
	var acts []action
	for _, l := range s.lanes {
		if !l.ready() {
			continue
		}
		for _, c := range s.coords {
			if len(c.inbox) < 16 {
				acts = append(acts, action{"deliver " + l.name + " to " + c.name, 5, func() { s.deliverCoord(c, l) }})
			}
		}
	}
	for _, c := range s.coords {
		if len(c.inbox) > 0 {
			acts = append(acts, action{"handle in " + c.name, 12, func() { s.handleCoord(c) }})
		}
	}
	queueReady := false
	for _, q := range s.queueList {
		queueReady = queueReady || s.queues[q].ready()
	}
	for _, w := range s.workers {
		if queueReady && len(w.items) < 2 {
			acts = append(acts, action{"pull by " + w.name, 6, func() { s.pull(w) }})
		}
		for _, it := range w.items {
			if !it.at.After(s.clock.now) {
				acts = append(acts, action{"work by " + w.name, 8, func() { s.work(w, it) }})
			}
		}
	}
	return acts
}

// faultActions are the faults the configuration allows, drawn now.
func (s *Sim) faultActions() []action {
	var acts []action
	if s.cfg.Faults[Junk] && s.rng.IntN(40) == 0 {
		acts = append(acts, action{"junk", 1, s.junk})
	}
	if s.cfg.Faults[CrashCoordinator] && s.rng.IntN(30) == 0 {
		acts = append(acts, action{"crash coordinator", 1, s.crashCoord})
	}
	if s.cfg.Faults[CrashWorker] && s.rng.IntN(20) == 0 {
		acts = append(acts, action{"crash worker", 1, s.crashWorker})
	}
	return acts
}

// idle moves the clock to the next time something is due, and reports
// whether there is one. With nothing due and runs not ended, the clock
// moves past their bound, so the check fails naming them.
func (s *Sim) idle() bool {
	var next time.Time
	for _, t := range s.dueTimes() {
		// A time not after now is due already, and waits for a process
		// that is busy.
		if t.After(s.clock.now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if next.IsZero() {
		if s.val.ended() == len(s.runs) {
			return false
		}
		// Nothing can happen any more, and runs have not ended: they
		// never will. Move to the first deadline to name them.
		next = s.val.firstDeadline()
	}
	if next.After(s.clock.now) {
		s.clock.now = next
	}
	s.log.fireDue()
	return true
}

// dueTimes lists the times at which something is due: a client's action,
// a redelivery, a worker's work done, a late duplicate, a sweep, a timer.
func (s *Sim) dueTimes() []time.Time {
	var ts []time.Time
	for _, r := range s.runs {
		switch {
		case !r.started:
			ts = append(ts, r.startAt)
		default:
			if !r.cancelAt.IsZero() {
				ts = append(ts, r.cancelAt)
			}
			if len(r.signals) > 0 {
				ts = append(ts, r.signals[0].at)
			}
		}
	}
	for _, l := range s.lanes {
		if t, ok := l.nextDue(); ok {
			ts = append(ts, t)
		}
	}
	for _, q := range s.queueList {
		if t, ok := s.queues[q].nextDue(); ok {
			ts = append(ts, t)
		}
	}
	for _, w := range s.workers {
		for _, it := range w.items {
			ts = append(ts, it.at)
		}
	}
	if len(s.later) > 0 && s.val.ended() < len(s.runs) {
		ts = append(ts, s.later[0].at)
	}
	if t, ok := s.sweepDue(); ok {
		ts = append(ts, t)
	}
	if t := s.log.nextTimer(); t != nil {
		// A timer left behind by an ended run (its purge failed) fires
		// into it, changes nothing, and is purged again: the final check
		// is that none is left once that happened.
		ts = append(ts, t.at)
	}
	return ts
}

// startRun appends a run's run-started event, as a client does; a failed
// start is tried again.
func (s *Sim) startRun(r *simRun) {
	g := r.g.g
	p := &events.RunStartedData{GraphName: g.Definition().Name, GraphDigest: g.Digest(), Graph: g.Canonical(), StartedBy: "sim"}
	if r.g.input != "" {
		p.Input = json.RawMessage(r.g.input)
	}
	e, err := events.New(r.id, r.id, s.clock.now, p)
	if err != nil {
		panic(err)
	}
	if _, err := s.client.Append(context.Background(), r.id, 0, e); err != nil && !errors.Is(err, events.ErrRunExists) {
		s.note("client: starting %s: %v; trying again", r.id, err)
		r.startAt = s.clock.now.Add(500 * time.Millisecond)
		return
	}
	s.note("client: started %s", r.id)
	r.started = true
}

func (s *Sim) cancelRun(r *simRun) {
	s.gen++
	e, err := events.New(r.id, fmt.Sprintf("cancel-%d", s.gen), s.clock.now, &events.RunCancelRequestedData{By: "sim", Reason: "cancelled by the simulated client"})
	if err != nil {
		panic(err)
	}
	if _, err := s.client.Append(context.Background(), r.id, events.AnySeq, e); err != nil {
		r.cancelAt = s.clock.now.Add(500 * time.Millisecond)
		return
	}
	s.note("client: cancel requested for %s", r.id)
	r.cancelAt = time.Time{}
}

// signalRun sends a signal to a run's human node, with the id the client
// derives for it: a retried send has the id of the send it retries.
func (s *Sim) signalRun(r *simRun) {
	sig := r.signals[0]
	id := "signal:" + sig.logical
	e, err := events.New(r.id, id, s.clock.now, &events.SignalReceivedData{Node: sig.node, Data: json.RawMessage(`{"approved":true}`), By: "sim"})
	if err != nil {
		panic(err)
	}
	s.val.signals[id] = sig.logical
	if _, err := s.client.Append(context.Background(), r.id, events.AnySeq, e); err != nil {
		r.signals[0].at = s.clock.now.Add(500 * time.Millisecond)
		return
	}
	s.note("client: signal %s to %s (%s)", id, r.id, sig.logical)
	r.signals = r.signals[1:]
}

// lateDuplicate publishes again what a writer published earlier.
func (s *Sim) lateDuplicate() {
	d := s.later[0]
	s.later = s.later[1:]
	_, err := s.store.append(context.Background(), d.run, d.expect, d.evs...)
	s.note("network: late duplicate of %d event(s) of %s (%s): %v", len(d.evs), d.run, d.evs[0].Type, err)
}

// junk publishes, on a started run's subjects, bytes that are not an
// event, or a valid CloudEvent of a type this version does not know.
func (s *Sim) junk() {
	var started []*simRun
	for _, r := range s.runs {
		if r.started {
			started = append(started, r)
		}
	}
	if len(started) == 0 {
		return
	}
	r := started[s.rng.IntN(len(started))]
	base := eventlog.RunBase(r.id)
	subjects := []string{base + "d.retry", base + "d.routed", base + "w.default.invoked", base + "c.signal", base + "n.timer", base + "d.future"}
	subj := subjects[s.rng.IntN(len(subjects))]
	hdr := map[string][]string{}
	data := []byte("\x00junk")
	if s.rng.IntN(2) == 0 {
		s.gen++
		hdr = map[string][]string{
			"ce-specversion": {"1.0"}, "ce-id": {fmt.Sprintf("future-%d", s.gen)}, "ce-type": {"dev.weft.future.v9"},
			"ce-source": {"weft"}, "ce-runid": {r.id}, "content-type": {"application/json"},
		}
		data = []byte(`{"from":"a newer weft"}`)
	}
	m := s.log.write(subj, hdr, data, r.id, true)
	s.note("junk at %d on %s", m.seq, subj)
}
