// Package eventstore is the engine's side of pkg/events: what the
// coordinator, the engine, the roles and the tools do with events and the
// store that clients and workers never do.
//
// What it offers:
//
//   - Engine, the store as the engine uses it: events.Store and decisions
//     (AppendDecisions, under per-run optimistic concurrency), durable
//     timers (Schedule, CancelSchedules, TimerStream) and the JetStream
//     context. Of and Must get it from a store events.Open made (or a
//     wrapper that implements it, as the simulator's and the fault
//     injector's do); JetStream is a store's JetStream context.
//   - MarkDecision, which makes an event built in memory a coordinator
//     decision (the engine applies its decisions before they are
//     appended); Encode, the message an event is appended as; DecodeFired,
//     a fired timer as the event appended to its run.
//   - Reads only the engine makes: Each (a history walked in bounded
//     memory), LeaderSeq, LeaderLast and LeaderFirst (served by the
//     stream leader),
//     LastOn (a direct get that names its subject, which a role can be
//     granted for some subjects only), HasEnd, Replicas, and
//     PublishAtomic (the restore of archived runs).
//   - EnsureTimers and StreamConfig, the set-up of the streams.
//   - IdempotencyKey, the key a node attempt's side effects are guarded by.
//
// The subject layout, tokens and stream settings are internal/eventlog's.
package eventstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
)

// Engine is the store as the engine uses it.
type Engine interface {
	events.Store
	// AppendDecisions appends coordinator decisions of one run, each
	// marked a decision, under per-run optimistic concurrency: expectLast
	// is the sequence of the run's last decision the caller decided from
	// (0: none yet; events.AnySeq skips the check), checked over the run's
	// decision subjects (events.ErrConflict). It returns the sequence of
	// the last event.
	AppendDecisions(ctx context.Context, runID string, expectLast uint64, evs ...*events.Event) (uint64, error)
	// Schedule stores ev to be appended at time at: a durable JetStream
	// message schedule, surviving the restart of every process. A timer
	// is one schedule subject: scheduling the same timerID again replaces
	// the pending schedule.
	Schedule(ctx context.Context, ev *events.Event, timerID string, at time.Time) error
	// CancelSchedules drops a run's pending delayed events.
	CancelSchedules(ctx context.Context, runID string) error
	// TimerStream is the name of the timers stream beside the events
	// stream, where Schedule stores timers and they fire
	// (eventlog.FiredSubject); the coordinator appends each fired timer to
	// its run.
	TimerStream() string
	// JetStream is the JetStream context the store uses (nil for a
	// simulated store).
	JetStream() jetstream.JetStream
}

// Of returns st as the engine uses it, or an error when st is not a
// store events.Open made nor a wrapper that implements Engine or unwraps
// to one (Unwrap() events.Store, as events.Store documents).
func Of(st events.Store) (Engine, error) {
	if e, ok := find[Engine](st); ok {
		return e, nil
	}
	return nil, fmt.Errorf("the store %T is not one events.Open made (wrap the store events.Open returns, keeping its engine methods: see internal/eventstore.Engine)", st)
}

// Must is Of for a store known to be events.Open's or a wrapper of it; it
// panics otherwise.
func Must(st events.Store) Engine {
	e, err := Of(st)
	if err != nil {
		panic(err)
	}
	return e
}

// JetStream is the JetStream context of a store (nil for one that has
// none).
func JetStream(st events.Store) jetstream.JetStream {
	if e, err := Of(st); err == nil {
		return e.JetStream()
	}
	return nil
}

// in is pkg/events' engine-only entry points (eventlog.Internals).
var in = eventlog.Internals.(interface {
	MarkDecision(e *events.Event)
	Encode(e *events.Event) (*nats.Msg, error)
	DecodeFired(subject string, hdr nats.Header, data []byte) (*events.Event, error)
	StreamConfig(opts ...events.Option) jetstream.StreamConfig
})

// MarkDecision marks an event built in memory a coordinator decision, as
// the engine's decisions are: it is encoded on a decision subject, and
// the fold takes it as one.
func MarkDecision(e *events.Event) { in.MarkDecision(e) }

// Encode writes the event as a NATS message in CloudEvents binary content
// mode on its subject, with the id as Nats-Msg-Id: the message the store
// appends.
func Encode(e *events.Event) (*nats.Msg, error) { return in.Encode(e) }

// DecodeFired reads a timer that fired in the timers stream (on
// eventlog.FiredSubject(run)) as the TimerFired event the coordinator
// appends to the run: only the coordinator writes the timers stream, and
// the server stamps the fired copy with the schedule it came from
// (Nats-Scheduler), which must be one of the run's timers.
func DecodeFired(subject string, hdr nats.Header, data []byte) (*events.Event, error) {
	return in.DecodeFired(subject, hdr, data)
}

// StreamConfig is the events stream events.Open creates with opts.
func StreamConfig(opts ...events.Option) jetstream.StreamConfig { return in.StreamConfig(opts...) }

// IdempotencyKey is the key a node attempt's side effects are guarded by:
// stable across redeliveries of the same logical execution (run, node,
// activation, item, attempt), different for every other.
func IdempotencyKey(runID string, ref events.NodeRef, attempt int) string {
	h := sha256.Sum256([]byte(runID + "/" + ref.Key() + "/" + strconv.Itoa(attempt)))
	return hex.EncodeToString(h[:16])
}

// ErrStop, returned by the function given to Each, ends the walk early
// without an error.
var ErrStop = errors.New("stop")

// Each calls fn with each event of a run with sequence ≥ from, in log
// order, reading the history in batches of bounded size (a few MB), so
// that a history of any size is read in bounded memory: fn keeps what it
// needs. The walk reaches at least sequence through when it is set, as
// ReadThrough does. fn returning ErrStop ends it without an error; any
// other error of fn ends it with that error. A run with no events gives
// events.ErrRunNotFound when from ≤ 1. A store other than events.Open's
// is read whole with ReadThrough (or Read) and walked.
func Each(ctx context.Context, st events.Store, runID string, from, through uint64, fn func(*events.Event) error) error {
	var err error
	if w, ok := st.(interface {
		Walk(ctx context.Context, runID string, from, through uint64, fn func(*events.Event) error) error
	}); ok {
		err = w.Walk(ctx, runID, from, through, fn)
	} else {
		err = walkRead(ctx, st, runID, from, through, fn)
	}
	if errors.Is(err, ErrStop) {
		return nil
	}
	return err
}

// walkRead is Each over a store that only reads whole.
func walkRead(ctx context.Context, st events.Store, runID string, from, through uint64, fn func(*events.Event) error) error {
	var evs []*events.Event
	var err error
	if through > 0 {
		evs, err = st.ReadThrough(ctx, runID, from, through)
	} else {
		evs, err = st.Read(ctx, runID, from, 0)
	}
	if err != nil {
		return err
	}
	for _, e := range evs {
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

// reader is what events.Open's store reads beyond events.Store.
type reader interface {
	LeaderSeq(ctx context.Context, seq uint64) (*jetstream.RawStreamMsg, error)
	LeaderLast(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error)
	LeaderFirst(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error)
	LastOn(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error)
	HasEnd(ctx context.Context, runID string) (bool, error)
	Replicas() int
	EnsureTimers(ctx context.Context) error
	PublishAtomic(ctx context.Context, msgs []*nats.Msg) (uint64, error)
}

// errNotJetStream is the error of a read a simulated store cannot make.
func errNotJetStream(st events.Store) error {
	return fmt.Errorf("the store %T reads nothing from JetStream directly", st)
}

// readerOf finds events.Open's store in st, also through a wrapper that
// embeds it (Unwrap() events.Store).
func readerOf(st events.Store) (reader, bool) { return find[reader](st) }

// find returns the first of st and the stores it wraps (Unwrap() events.Store)
// that is a T.
func find[T any](st events.Store) (T, bool) {
	for st != nil {
		if t, ok := st.(T); ok {
			return t, true
		}
		u, ok := st.(interface{ Unwrap() events.Store })
		if !ok {
			break
		}
		st = u.Unwrap()
	}
	var zero T
	return zero, false
}

// LeaderSeq returns the message at sequence seq of st's stream, served by
// the stream leader, or nil when there is none: one request, whatever the
// size of the run it belongs to.
func LeaderSeq(ctx context.Context, st events.Store, seq uint64) (*jetstream.RawStreamMsg, error) {
	r, ok := readerOf(st)
	if !ok {
		return nil, errNotJetStream(st)
	}
	return r.LeaderSeq(ctx, seq)
}

// LeaderLast returns the last message on subject in st's stream, served
// by the stream leader (never a replica that is behind), or nil when there
// is none.
func LeaderLast(ctx context.Context, st events.Store, subject string) (*jetstream.RawStreamMsg, error) {
	r, ok := readerOf(st)
	if !ok {
		return nil, errNotJetStream(st)
	}
	return r.LeaderLast(ctx, subject)
}

// LeaderFirst returns the first message on subject in st's stream,
// served by the stream leader, or nil when there is none: what was
// written there first (a run's start, say, whatever was written on its
// subject after it).
func LeaderFirst(ctx context.Context, st events.Store, subject string) (*jetstream.RawStreamMsg, error) {
	r, ok := readerOf(st)
	if !ok {
		return nil, errNotJetStream(st)
	}
	return r.LeaderFirst(ctx, subject)
}

// LastOn returns the last message stored on subject in st's stream, or
// nil when there is none, with a direct get whose request subject names
// subject, so that a role can be granted it for some subjects only (a
// worker reads runs' starts and its own queue's outcomes). Any replica
// may answer, so on a replicated stream a message stored a moment ago may
// not be seen yet (see Replicas). subject must be a literal subject.
func LastOn(ctx context.Context, st events.Store, subject string) (*jetstream.RawStreamMsg, error) {
	r, ok := readerOf(st)
	if !ok {
		return nil, errNotJetStream(st)
	}
	return r.LastOn(ctx, subject)
}

// HasEnd reports whether one of a run's terminal subjects
// (eventlog.TerminalSubjects) holds a message, from the stream's
// per-subject message counts, which the stream leader answers. No message
// is read: a role may be given this check without the right to read runs'
// ends, which hold their outputs.
func HasEnd(ctx context.Context, st events.Store, runID string) (bool, error) {
	r, ok := readerOf(st)
	if !ok {
		return false, errNotJetStream(st)
	}
	return r.HasEnd(ctx, runID)
}

// Replicas is the replica count of st's events stream (1 for a store that
// is not events.Open's): above 1, a direct get may be answered by a
// replica that is behind.
func Replicas(st events.Store) int {
	if r, ok := readerOf(st); ok {
		return r.Replicas()
	}
	return 1
}

// EnsureTimers sets up the timers stream beside st's events stream
// (creating it, made like the live events stream, when it is missing):
// what a coordinator, or the admin's set-up, does before timers are armed.
// A store that is not events.Open's (a simulator's) has nothing to set up.
func EnsureTimers(ctx context.Context, st events.Store) error {
	if r, ok := readerOf(st); ok {
		return r.EnsureTimers(ctx)
	}
	return nil
}

// PublishAtomic appends messages (at most 1000, the server's limit) all
// or nothing to st's stream as a JetStream atomic batch, and returns the
// sequence of the last. A failed check of a
// Nats-Expected-Last-Subject-Sequence header is events.ErrConflict.
func PublishAtomic(ctx context.Context, st events.Store, msgs []*nats.Msg) (uint64, error) {
	r, ok := readerOf(st)
	if !ok {
		return 0, errNotJetStream(st)
	}
	return r.PublishAtomic(ctx, msgs)
}

// Append appends evs as the engine would: a batch of decisions (events of
// a decision type built with events.New, or marked with MarkDecision)
// through AppendDecisions, any other batch through Store.Append, which
// refuses decisions. Tests and benchmarks that stand in for a coordinator
// use it. A batch that mixes the two is appended as its consecutive
// stretches of one kind, in order, and only without a concurrency check
// (expectLast events.AnySeq).
func Append(ctx context.Context, st events.Store, runID string, expectLast uint64, evs ...*events.Event) (uint64, error) {
	var last uint64
	for len(evs) > 0 {
		n := 1
		for n < len(evs) && evs[n].IsDecision() == evs[0].IsDecision() {
			n++
		}
		if n < len(evs) && expectLast != events.AnySeq {
			return 0, fmt.Errorf("%w: a batch that mixes decisions and facts cannot be checked against sequence %d", events.ErrMisplaced, expectLast)
		}
		var err error
		if evs[0].IsDecision() {
			var e Engine
			if e, err = Of(st); err != nil {
				return 0, err
			}
			last, err = e.AppendDecisions(ctx, runID, expectLast, evs[:n]...)
		} else {
			last, err = st.Append(ctx, runID, expectLast, evs[:n]...)
		}
		if err != nil {
			return 0, err
		}
		evs = evs[n:]
	}
	return last, nil
}
