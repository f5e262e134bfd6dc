// The engine's side of the log: what the coordinator, the decider, the
// roles and the tools do with events and the store that clients and
// workers never do (see doc.go).

package eventlog

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
)

// Engine is the store as the engine uses it.
type Engine interface {
	Store
	// AppendDecisions appends coordinator decisions of one run, each
	// marked a decision, under per-run optimistic concurrency: expectLast
	// is the sequence of the run's last decision the caller decided from
	// (0: none yet; AnySeq skips the check), checked over the run's
	// decision subjects (ErrConflict). It returns the sequence of
	// the last event.
	AppendDecisions(ctx context.Context, runID string, expectLast uint64, evs ...*Event) (uint64, error)
	// AppendStep appends the outcomes of nodes the coordinator ran
	// itself (facts, unchecked, as Append writes a worker's) followed by
	// the decisions made from the state they lead to (checked as
	// AppendDecisions does), in one round trip where it can: a step of a
	// chain of local nodes. The decisions never land without the
	// outcomes before them; a failure may leave a prefix. It sets each
	// outcome's Seq and returns the sequence of the last event.
	AppendStep(ctx context.Context, runID string, expectLast uint64, outcomes, decisions []*Event) (uint64, error)
	// Schedule stores ev to be appended at time at: a durable JetStream
	// message schedule, surviving the restart of every process. A timer
	// is one schedule subject: scheduling the same timerID again replaces
	// the pending schedule.
	Schedule(ctx context.Context, ev *Event, timerID string, at time.Time) error
	// CancelSchedules drops a run's pending delayed
	CancelSchedules(ctx context.Context, runID string) error
	// TimerStream is the name of the timers stream beside the events
	// stream, where Schedule stores timers and they fire
	// (FiredSubject); the coordinator appends each fired timer to
	// its run.
	TimerStream() string
	// JetStream is the JetStream context the store uses (nil for a
	// simulated store).
	JetStream() jetstream.JetStream
}

// Of returns st as the engine uses it, or an error when st is not a
// store Open made nor a wrapper that implements Engine or unwraps
// to one (Unwrap() Store, as Store documents).
func Of(st Store) (Engine, error) {
	if e, ok := find[Engine](st); ok {
		return e, nil
	}
	return nil, fmt.Errorf("the store %T is not one Open made (wrap the store Open returns, keeping its engine methods: see eventlog.Engine)", st)
}

// Must is Of for a store known to be Open's or a wrapper of it; it
// panics otherwise.
func Must(st Store) Engine {
	e, err := Of(st)
	if err != nil {
		panic(err)
	}
	return e
}

// JetStream is the JetStream context of a store (nil for one that has
// none).
func JetStream(st Store) jetstream.JetStream {
	if e, err := Of(st); err == nil {
		return e.JetStream()
	}
	return nil
}

// MarkDecision marks an event built in memory a coordinator decision, as
// the engine's decisions are: it is encoded on a decision subject, and
// the fold takes it as one.
func MarkDecision(e *Event) { e.decision = true }

// Encode writes the event as a NATS message in CloudEvents binary content
// mode on its subject, with the id as Nats-Msg-Id: the message the store
// appends.
func Encode(e *Event) (*nats.Msg, error) { return encode(e) }

// DecodeFired reads a timer that fired in the timers stream (on
// FiredSubject(run)) as the TimerFired event the coordinator
// appends to the run: only the coordinator writes the timers stream, and
// the server stamps the fired copy with the schedule it came from
// (Nats-Scheduler), which must be one of the run's timers.
func DecodeFired(subject string, hdr nats.Header, data []byte) (*Event, error) {
	return decodeFired(subject, hdr, data)
}

// OpenStreamConfig is the events stream Open creates with opts.
func OpenStreamConfig(opts ...Option) jetstream.StreamConfig { return streamConfig(opts...) }

// IdempotencyKey is the key a node attempt's side effects are guarded by:
// stable across redeliveries of the same logical execution (run, node,
// activation, item, attempt), different for every other.
func IdempotencyKey(runID string, ref NodeRef, attempt int) string {
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
// ErrRunNotFound when from ≤ 1. A store other than Open's
// is read whole with ReadThrough (or Read) and walked.
func Each(ctx context.Context, st Store, runID string, from, through uint64, fn func(*Event) error) error {
	var err error
	if w, ok := st.(interface {
		Walk(ctx context.Context, runID string, from, through uint64, fn func(*Event) error) error
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
func walkRead(ctx context.Context, st Store, runID string, from, through uint64, fn func(*Event) error) error {
	var evs []*Event
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

// reader is what Open's store reads beyond Store.
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
func errNotJetStream(st Store) error {
	return fmt.Errorf("the store %T reads nothing from JetStream directly", st)
}

// readerOf finds Open's store in st, also through a wrapper that
// embeds it (Unwrap() Store).
func readerOf(st Store) (reader, bool) { return find[reader](st) }

// find returns the first of st and the stores it wraps (Unwrap() Store)
// that is a T.
func find[T any](st Store) (T, bool) {
	for st != nil {
		if t, ok := st.(T); ok {
			return t, true
		}
		u, ok := st.(interface{ Unwrap() Store })
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
func LeaderSeq(ctx context.Context, st Store, seq uint64) (*jetstream.RawStreamMsg, error) {
	r, ok := readerOf(st)
	if !ok {
		return nil, errNotJetStream(st)
	}
	return r.LeaderSeq(ctx, seq)
}

// LeaderLast returns the last message on subject in st's stream, served
// by the stream leader (never a replica that is behind), or nil when there
// is none.
func LeaderLast(ctx context.Context, st Store, subject string) (*jetstream.RawStreamMsg, error) {
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
func LeaderFirst(ctx context.Context, st Store, subject string) (*jetstream.RawStreamMsg, error) {
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
func LastOn(ctx context.Context, st Store, subject string) (*jetstream.RawStreamMsg, error) {
	r, ok := readerOf(st)
	if !ok {
		return nil, errNotJetStream(st)
	}
	return r.LastOn(ctx, subject)
}

// HasEnd reports whether one of a run's terminal subjects
// (TerminalSubjects) holds a message, from the stream's
// per-subject message counts, which the stream leader answers. No message
// is read: a role may be given this check without the right to read runs'
// ends, which hold their outputs.
func HasEnd(ctx context.Context, st Store, runID string) (bool, error) {
	r, ok := readerOf(st)
	if !ok {
		return false, errNotJetStream(st)
	}
	return r.HasEnd(ctx, runID)
}

// Replicas is the replica count of st's events stream (1 for a store that
// is not Open's): above 1, a direct get may be answered by a
// replica that is behind.
func Replicas(st Store) int {
	if r, ok := readerOf(st); ok {
		return r.Replicas()
	}
	return 1
}

// EnsureTimers sets up the timers stream beside st's events stream
// (creating it, made like the live events stream, when it is missing):
// what a coordinator, or the admin's set-up, does before timers are armed.
// A store that is not Open's (a simulator's) has nothing to set up.
func EnsureTimers(ctx context.Context, st Store) error {
	if r, ok := readerOf(st); ok {
		return r.EnsureTimers(ctx)
	}
	return nil
}

// PublishAtomic appends messages (at most 1000, the server's limit) all
// or nothing to st's stream as a JetStream atomic batch, and returns the
// sequence of the last. A failed check of a
// Nats-Expected-Last-Subject-Sequence header is ErrConflict.
func PublishAtomic(ctx context.Context, st Store, msgs []*nats.Msg) (uint64, error) {
	r, ok := readerOf(st)
	if !ok {
		return 0, errNotJetStream(st)
	}
	return r.PublishAtomic(ctx, msgs)
}

// Append appends evs as the engine would: a batch of decisions (events of
// a decision type built with New, or marked with MarkDecision)
// through AppendDecisions, any other batch through Store.Append, which
// refuses decisions. Tests and benchmarks that stand in for a coordinator
// use it. A batch that mixes the two is appended as its consecutive
// stretches of one kind, in order, and only without a concurrency check
// (expectLast AnySeq).
func Append(ctx context.Context, st Store, runID string, expectLast uint64, evs ...*Event) (uint64, error) {
	var last uint64
	for len(evs) > 0 {
		n := 1
		for n < len(evs) && evs[n].IsDecision() == evs[0].IsDecision() {
			n++
		}
		if n < len(evs) && expectLast != AnySeq {
			return 0, fmt.Errorf("%w: a batch that mixes decisions and facts cannot be checked against sequence %d", ErrMisplaced, expectLast)
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
