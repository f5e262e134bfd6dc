package sim

import (
	"context"
	"fmt"

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
	// lastD is the consumer sequence of the last delivery: a gap means
	// another coordinator took part of the stream (Run then marks every
	// cached run unverified; the simulator hands the run's next event in as
	// redelivered, which re-reads it the same way).
	lastD uint64
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
	ci := &coordInstance{name: fmt.Sprintf("c%d", s.gen), stale: map[string]bool{}, known: map[string]map[uint64]bool{}, touched: map[string]bool{}}
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
	ci.c = coordinator.New(st, coordinator.WithClock(s.clock.Now), coordinator.WithLogger(s.quiet))
	s.note("coordinator %s starts", ci.name)
	return ci
}

// deliverCoord gives the consumer's next message to a coordinator.
func (s *Sim) deliverCoord(ci *coordInstance) {
	d, ok := s.coordCons.next()
	if !ok {
		return
	}
	if ci.lastD != 0 && d.dseq != ci.lastD+1 {
		for run := range ci.known {
			ci.stale[run] = true
		}
	}
	ci.lastD = d.dseq
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
		s.coordCons.nak(m.seq, coordNakWait)
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
	s.coordCons.ack(m.seq)
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
