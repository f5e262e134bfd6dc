package sim

import (
	"context"
	"fmt"
	"time"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/pkg/events"
)

// coordInstance is one coordinator process: the production Coordinator,
// driven through HandleEvent with what the shared durable consumer
// delivers to it, as its Run loop would.
type coordInstance struct {
	name  string
	c     *coordinator.Coordinator
	inbox []delivery
	// lastD is the consumer sequence of the last delivery of each lane: a
	// gap means another coordinator took part of the stream, so every
	// cached run is unverified: the simulator hands a run's next event in
	// as redelivered, which re-reads it (see doc.go).
	lastD map[*consumer]uint64
	stale map[string]bool
	// known holds, per run, the sequences of the log the cached state is
	// known to hold: read, handled, or decided here. A run's cached state
	// is compared with a fresh fold only when it holds every event of the
	// run's log.
	known map[string]map[uint64]bool
	// touched lists runs handled in the current step.
	touched map[string]bool
	dead    bool
}

func (s *Sim) newCoord() *coordInstance {
	s.gen++
	ci := &coordInstance{name: fmt.Sprintf("c%d", s.gen), lastD: map[*consumer]uint64{}, stale: map[string]bool{}, known: map[string]map[uint64]bool{}, touched: map[string]bool{}}
	st := &procStore{sim: s, name: ci.name, kind: kindCoordinator}
	st.onRead = func(run string, evs []*events.Event) {
		k := map[uint64]bool{}
		for _, e := range evs {
			k[e.Seq] = true
		}
		ci.known[run] = k
	}
	st.onDecided = func(run string, seqs []uint64) {
		k := ci.known[run]
		if k == nil {
			k = map[uint64]bool{}
			ci.known[run] = k
		}
		for _, q := range seqs {
			k[q] = true
		}
	}
	ci.c = coordinator.New(st, coordinator.WithClock(s.clock.Now), coordinator.WithLogger(s.quiet), coordinator.WithFlow(s.newLimiter()))
	s.note("coordinator %s starts", ci.name)
	return ci
}

// deliverCoord gives a lane's next message to a coordinator.
func (s *Sim) deliverCoord(ci *coordInstance, l *consumer) {
	d, ok := l.next()
	if !ok {
		return
	}
	if last := ci.lastD[l]; last != 0 && d.dseq != last+1 {
		for run := range ci.known {
			ci.stale[run] = true
		}
	}
	ci.lastD[l] = d.dseq
	ci.inbox = append(ci.inbox, d)
}

// handleCoord handles one delivered event in a coordinator: the next event
// of one of the runs it holds (a run's events are handled in order, runs
// interleave, as the shards of Run do).
func (s *Sim) handleCoord(ci *coordInstance) {
	// Pick a run among the inbox's, then take its first event.
	run := ci.inbox[s.rng.IntN(len(ci.inbox))].msg.run
	i := 0
	for ci.inbox[i].msg.run != run {
		i++
	}
	d := ci.inbox[i]
	ci.inbox = append(ci.inbox[:i:i], ci.inbox[i+1:]...)
	m := d.msg
	// As Run does: a message the engine does not accept keeps its place
	// (Refused), and is handled like any other.
	e := events.DecodeStored(m.subject, m.header, m.data, m.seq, m.stored)
	if e.Refused != nil {
		s.note("%s passes over undecodable %d", ci.name, m.seq)
	}
	redelivered := d.count > 1 || ci.stale[run]
	delete(ci.stale, run)
	if redelivered {
		delete(ci.known, run) // the cache is dropped and the run read again
	}
	ci.touched[run] = true
	err, crashed := s.callCoord(ci, e, redelivered)
	if crashed {
		return
	}
	if err != nil {
		delete(ci.known, run)
		d.cons.nak(m.seq, backoff(d.count))
		s.note("%s: %s %d of %s failed: %v", ci.name, short(e.Type), m.seq, run, err)
		return
	}
	if k := ci.known[run]; k != nil {
		k[m.seq] = true
	} else if e.Type == events.RunStarted && !redelivered {
		ci.known[run] = map[uint64]bool{m.seq: true}
	}
	if s.chance(Redeliver, 0.05) {
		s.note("%s: ack of %d lost", ci.name, m.seq)
		return
	}
	d.cons.ack(m.seq)
}

// backoff is the coordinator's wait before an event that failed on its
// delivery n comes again (internal/coordinator/errors.go). Run fails the
// run instead when the error is permanent, or after 20 deliveries of one
// that is not transient; the seam has no way to do that, so the simulator
// only injects transient failures, and a permanent one shows as a run
// that does not end.
func backoff(n int) time.Duration {
	d := 100 * time.Millisecond
	for i := 1; i < n && d < 10*time.Second; i++ {
		d *= 2
	}
	return min(d, 10*time.Second)
}

// callCoord calls HandleEvent, turning a simulated crash into a dead
// instance replaced by a new one.
func (s *Sim) callCoord(ci *coordInstance, e *events.Event, redelivered bool) (err error, crashed bool) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(crash); !ok {
				panic(r)
			}
			s.replaceCoord(ci)
			crashed = true
		}
	}()
	return ci.c.HandleEvent(context.Background(), e, redelivered), false
}

// crashCoord kills a coordinator between two events.
func (s *Sim) crashCoord() {
	ci := s.coords[s.rng.IntN(len(s.coords))]
	s.note("crash %s between events", ci.name)
	s.replaceCoord(ci)
}

// replaceCoord throws a coordinator away, with what it held, and starts a
// new one with an empty cache: the events it held come again after the
// ack wait.
func (s *Sim) replaceCoord(ci *coordInstance) {
	ci.dead = true
	for i, c := range s.coords {
		if c == ci {
			s.coords[i] = s.newCoord()
		}
	}
}

func short(t events.Type) string {
	p := string(t)
	if len(p) > 9 && p[:9] == "dev.weft." {
		p = p[9:]
	}
	return p
}
