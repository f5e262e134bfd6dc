package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
)

// The in-memory log is a model of the events stream as JetStream keeps it:
// one total order of messages (the stream sequence), subjects, message-id
// de-duplication within a window of (simulated) time, expected-last-
// subject-sequence checks over a filter, and durable message schedules.
// memLog is the server; memStore is a client of it with the production
// store's semantics (events.Store), the one every simulated process uses
// through its fault-injecting wrapper.

// message is one stored message.
type message struct {
	seq     uint64
	subject string
	header  nats.Header
	data    []byte
	stored  time.Time
	run     string // the run whose subjects it is on
	junk    bool   // published by the junk generator
	// ev is the validator's own decoding of the message (events.DecodeStored);
	// it is never handed to the code under test.
	ev *events.Event
}

// schedule is a pending durable timer.
type schedule struct {
	subject string // weft.t.<slot>.<run>.<timer>
	target  string
	header  nats.Header
	data    []byte
	at      time.Time // when the server fires it (late firing included)
	run     string
	order   uint64 // publish order, to fire timers due together deterministically
}

// dedupEntry remembers a message id inside the de-duplication window.
type dedupEntry struct {
	seq uint64
	at  time.Time
}

// memLog is the model of the stream.
type memLog struct {
	clock    *clock
	window   time.Duration
	maxSize  int
	msgs     []*message // msgs[i].seq == i+1
	byRun    map[string][]*message
	dedup    map[string]dedupEntry
	scheds   map[string]*schedule
	schedSeq uint64
	// fresh counts the ids made fresh for events whose id was taken.
	fresh int
	// onAppend is called for every message written, in order.
	onAppend func(*message)
	// lateTimer, when set, says how late the server fires a timer.
	lateTimer func() time.Duration
}

func newMemLog(c *clock, window time.Duration) *memLog {
	return &memLog{clock: c, window: window, maxSize: 1 << 20, byRun: map[string][]*message{}, dedup: map[string]dedupEntry{}, scheds: map[string]*schedule{}}
}

// matches reports whether subject matches filter (only trailing ">" and
// single-token "*" wildcards, as Weft's filters use).
func matches(filter, subject string) bool {
	ft := strings.Split(filter, ".")
	st := strings.Split(subject, ".")
	for i, f := range ft {
		if f == ">" {
			return len(st) > i
		}
		if i >= len(st) || (f != "*" && f != st[i]) {
			return false
		}
	}
	return len(ft) == len(st)
}

// lastOn is the sequence of the run's last message on filter, 0 if none.
// Every message counts, decodable or not: JetStream's check is over the
// subjects, not over what the messages say.
func (l *memLog) lastOn(run, filter string) uint64 {
	ms := l.byRun[run]
	for i := len(ms) - 1; i >= 0; i-- {
		if matches(filter, ms[i].subject) {
			return ms[i].seq
		}
	}
	return 0
}

// dupOf returns the sequence a message id is de-duplicated to, if it is
// inside the window.
func (l *memLog) dupOf(id string) (uint64, bool) {
	if id == "" {
		return 0, false
	}
	d, ok := l.dedup[id]
	if !ok || l.clock.now.Sub(d.at) >= l.window {
		return 0, false
	}
	return d.seq, true
}

// publish is one JetStream publish: de-duplication first (a duplicate is
// acknowledged with the first message's sequence, whatever its expected
// sequence says, as JetStream does), then the expected-last-subject-
// sequence check, then the write.
func (l *memLog) publish(m *nats.Msg) (seq uint64, dup bool, err error) {
	id := m.Header.Get(nats.MsgIdHdr)
	if s, ok := l.dupOf(id); ok {
		return s, true, nil
	}
	run, _ := eventlog.RunOf(m.Subject)
	if v := m.Header.Get("Nats-Expected-Last-Subject-Sequence"); v != "" {
		want, _ := strconv.ParseUint(v, 10, 64)
		filter := m.Header.Get("Nats-Expected-Last-Subject-Sequence-Subject")
		if filter == "" {
			filter = m.Subject
		}
		if got := l.lastOn(run, filter); got != want {
			return 0, false, fmt.Errorf("%w: wrong last sequence: %d (expected %d)", events.ErrConflict, got, want)
		}
	}
	if len(m.Data) > l.maxSize {
		return 0, false, fmt.Errorf("appending event: %w", nats.ErrMaxPayload)
	}
	hdr := nats.Header{}
	for k, v := range m.Header {
		if strings.HasPrefix(k, "Nats-Expected") {
			continue
		}
		hdr[k] = append([]string(nil), v...)
	}
	msg := l.write(m.Subject, hdr, m.Data, run, false)
	if id != "" {
		l.dedup[id] = dedupEntry{seq: msg.seq, at: l.clock.now}
	}
	return msg.seq, false, nil
}

func (l *memLog) write(subject string, hdr nats.Header, data []byte, run string, junk bool) *message {
	msg := &message{seq: uint64(len(l.msgs)) + 1, subject: subject, header: hdr, data: data, stored: l.clock.now, run: run, junk: junk}
	msg.ev = events.DecodeStored(subject, hdr, data, msg.seq, msg.stored)
	l.msgs = append(l.msgs, msg)
	if run != "" {
		l.byRun[run] = append(l.byRun[run], msg)
	}
	if l.onAppend != nil {
		l.onAppend(msg)
	}
	return msg
}

// schedulePublish stores a message schedule. A schedule whose id is inside
// the de-duplication window is dropped (acknowledged as a duplicate), as
// JetStream does: the id stays taken after the timer fired.
func (l *memLog) schedulePublish(m *nats.Msg, target string, at time.Time) {
	id := m.Header.Get(nats.MsgIdHdr)
	if _, ok := l.dupOf(id); ok {
		return
	}
	run, _ := eventlog.RunOf(target)
	hdr := nats.Header{}
	for k, v := range m.Header {
		if k == nats.MsgIdHdr || strings.HasPrefix(k, "Nats-Schedule") || strings.HasPrefix(k, "Nats-Expected") {
			continue
		}
		hdr[k] = append([]string(nil), v...)
	}
	if l.lateTimer != nil {
		at = at.Add(l.lateTimer())
	}
	l.schedSeq++
	// A new schedule on a subject replaces the one pending there.
	l.scheds[m.Subject] = &schedule{subject: m.Subject, target: target, header: hdr, data: m.Data, at: at, run: run, order: l.schedSeq}
	if id != "" {
		l.dedup[id] = dedupEntry{at: l.clock.now}
	}
}

// cancelSchedules purges a run's pending timers.
func (l *memLog) cancelSchedules(run string) {
	prefix := strings.TrimSuffix(eventlog.ScheduleFilter(run), ">")
	for subj := range l.scheds {
		if strings.HasPrefix(subj, prefix) {
			delete(l.scheds, subj)
		}
	}
}

// nextTimer is the earliest pending timer, nil if none.
func (l *memLog) nextTimer() *schedule {
	var best *schedule
	for _, s := range l.scheds {
		if best == nil || s.at.Before(best.at) || (s.at.Equal(best.at) && s.order < best.order) {
			best = s
		}
	}
	return best
}

// fireDue fires every timer due by now, in time order: the scheduled
// message is written on its target subject, without a message id.
func (l *memLog) fireDue() int {
	n := 0
	for {
		s := l.nextTimer()
		if s == nil || s.at.After(l.clock.now) {
			return n
		}
		delete(l.scheds, s.subject)
		l.write(s.target, s.header, s.data, s.run, false)
		n++
	}
}

// pendingTimers lists the runs' pending timer subjects.
func (l *memLog) pendingTimersOf(run string) []string {
	var out []string
	for subj, s := range l.scheds {
		if s.run == run {
			out = append(out, subj)
		}
	}
	return out
}

// memStore is events.Store over the model, with the production store's
// client-side semantics: encoding and size checks, chained appends under
// optimistic concurrency, duplicate acks confirmed against the stored
// message, a repeated run start answered with the recorded one.
type memStore struct{ log *memLog }

var _ eventlog.Engine = (*memStore)(nil)

func (s *memStore) encode(e *events.Event) (*nats.Msg, error) {
	if !eventlog.ValidToken(e.RunID) {
		return nil, fmt.Errorf("%w: run id %q", events.ErrInvalidID, e.RunID)
	}
	m, err := eventlog.Encode(e)
	if err != nil {
		return nil, err
	}
	size := len(m.Data) + len(m.Subject)
	for k, vs := range m.Header {
		for _, v := range vs {
			size += len(k) + len(v) + 4
		}
	}
	if max := s.MaxEventSize(); size > max-512 {
		return nil, fmt.Errorf("%w: %s event for node %q is %d bytes, the limit is %d", events.ErrPayloadTooLarge, e.Type, e.NodeID, size, max-512)
	}
	return m, nil
}

// Append appends facts, as the production store's Append: a decision is
// refused (eventlog.CheckFacts).
func (s *memStore) Append(ctx context.Context, runID string, expectLast uint64, evs ...*events.Event) (uint64, error) {
	if err := eventlog.CheckFacts(evs); err != nil {
		return 0, err
	}
	return s.append(ctx, runID, expectLast, evs...)
}

// AppendDecisions appends decisions, each marked as one, under the same
// optimistic concurrency as the production store's.
func (s *memStore) AppendDecisions(ctx context.Context, runID string, expectLast uint64, evs ...*events.Event) (uint64, error) {
	for _, e := range evs {
		eventlog.MarkDecision(e)
	}
	return s.append(ctx, runID, expectLast, evs...)
}

// AppendStep appends outcomes, then decisions, each as its own append: a
// prefix may land, which covers what the production store's pipelined
// step may leave (never a decision without the outcomes before it).
func (s *memStore) AppendStep(ctx context.Context, runID string, expectLast uint64, outcomes, decisions []*events.Event) (uint64, error) {
	last, err := s.Append(ctx, runID, events.AnySeq, outcomes...)
	if err != nil || len(decisions) == 0 {
		return last, err
	}
	return s.AppendDecisions(ctx, runID, expectLast, decisions...)
}

// append appends evs, facts or decisions: the simulated processes' appends
// (procStore) reach the log through it, as the real ones reach JetStream.
func (s *memStore) append(_ context.Context, runID string, expectLast uint64, evs ...*events.Event) (uint64, error) {
	if len(evs) == 0 {
		return expectLast, nil
	}
	msgs := make([]*nats.Msg, len(evs))
	for i, e := range evs {
		if e.RunID != runID {
			return 0, fmt.Errorf("%w: appending an event of run %q to run %q", events.ErrMalformedEvent, e.RunID, runID)
		}
		m, err := s.encode(e)
		if err != nil {
			return 0, err
		}
		msgs[i] = m
	}
	filter := eventlog.DecisionFilter(runID)
	if evs[0].Type == events.RunStarted {
		filter = eventlog.RunFilter(runID)
	}
	var last uint64
	for i, m := range msgs {
		if expectLast != events.AnySeq {
			m.Header.Set("Nats-Expected-Last-Subject-Sequence", strconv.FormatUint(expectLast, 10))
			m.Header.Set("Nats-Expected-Last-Subject-Sequence-Subject", filter)
		}
		seq, err := s.publishOne(m)
		if errors.Is(err, events.ErrDuplicateMismatch) {
			// Someone took the id first: written under a fresh one, as
			// the production store does (its suffix is random; here it
			// counts, so that a seed replays exactly).
			s.log.fresh++
			id := m.Header.Get(nats.MsgIdHdr) + "~f" + strconv.Itoa(s.log.fresh)
			m.Header.Set(nats.MsgIdHdr, id)
			m.Header.Set("ce-id", id)
			evs[i].ID = id
			seq, err = s.publishOne(m)
		}
		if err != nil {
			if expectLast == 0 && errors.Is(err, events.ErrConflict) && evs[0].Type == events.RunStarted {
				return s.sameStart(evs[0])
			}
			return 0, err
		}
		last = seq
		if expectLast != events.AnySeq {
			expectLast = seq
		}
	}
	return last, nil
}

// publishOne publishes m, a duplicate confirmed (confirm).
func (s *memStore) publishOne(m *nats.Msg) (uint64, error) {
	seq, dup, err := s.log.publish(m)
	if err == nil && dup {
		err = s.confirm(m, seq)
	}
	return seq, err
}

// confirm checks that the message stored at seq is m, as the production
// store does for a duplicate ack.
func (s *memStore) confirm(m *nats.Msg, seq uint64) error {
	got := s.log.msgs[seq-1]
	if got.subject != m.Subject || got.header.Get("ce-type") != m.Header.Get("ce-type") || !bytes.Equal(got.data, m.Data) {
		return fmt.Errorf("%w: id %q at sequence %d", events.ErrDuplicateMismatch, m.Header.Get(nats.MsgIdHdr), seq)
	}
	if got.header.Get("ce-time") != m.Header.Get("ce-time") && m.Header.Get("Nats-Expected-Last-Subject-Sequence") != "" {
		return fmt.Errorf("%w: %s was written at sequence %d by another decision", events.ErrConflict, m.Header.Get(nats.MsgIdHdr), seq)
	}
	return nil
}

func (s *memStore) sameStart(e *events.Event) (uint64, error) {
	subj := e.Subject() // a client's start, or a child run's (a decision)
	ms := s.log.byRun[e.RunID]
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].subject != subj {
			continue
		}
		got, err := events.Decode(ms[i].subject, ms[i].header, ms[i].data)
		if err == nil && got.ID == e.ID && bytes.Equal(got.Data, e.Data) {
			return ms[i].seq, nil
		}
		break
	}
	return 0, fmt.Errorf("%w: %s", events.ErrRunExists, e.RunID)
}

func (s *memStore) Read(_ context.Context, runID string, from, upTo uint64) ([]*events.Event, error) {
	if !eventlog.ValidToken(runID) {
		return nil, fmt.Errorf("%w: run id %q", events.ErrInvalidID, runID)
	}
	var out []*events.Event
	for _, m := range s.log.byRun[runID] {
		if m.seq < from {
			continue
		}
		if upTo > 0 && m.seq > upTo {
			break
		}
		out = append(out, events.DecodeStored(m.subject, m.header, m.data, m.seq, m.stored))
	}
	if len(out) == 0 && from <= 1 {
		return nil, fmt.Errorf("%w: %s", events.ErrRunNotFound, runID)
	}
	return out, nil
}

func (s *memStore) ReadThrough(ctx context.Context, runID string, from, _ uint64) ([]*events.Event, error) {
	return s.Read(ctx, runID, from, 0)
}

func (s *memStore) LastSeq(_ context.Context, runID string) (uint64, error) {
	ms := s.log.byRun[runID]
	if len(ms) == 0 {
		return 0, fmt.Errorf("%w: %s", events.ErrRunNotFound, runID)
	}
	return ms[len(ms)-1].seq, nil
}

func (s *memStore) Schedule(_ context.Context, ev *events.Event, timerID string, at time.Time) error {
	m, err := s.encode(ev)
	if err != nil {
		return err
	}
	target := m.Subject
	m.Subject = eventlog.ScheduleSubject(ev.RunID, timerID)
	m.Header.Set(nats.MsgIdHdr, "sched:"+ev.ID)
	s.log.schedulePublish(m, target, at)
	return nil
}

func (s *memStore) CancelSchedules(_ context.Context, runID string) error {
	s.log.cancelSchedules(runID)
	return nil
}

func (s *memStore) StreamName() string             { return "WEFT" }
func (s *memStore) TimerStream() string            { return "WEFT" + eventlog.TimerStreamSuffix }
func (s *memStore) JetStream() jetstream.JetStream { return nil }
func (s *memStore) MaxEventSize() int              { return s.log.maxSize }

// clock is the simulated time every process reads.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }
