package eventlog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// AnySeq, as the expected last sequence of an append, skips the per-run
// optimistic concurrency check. Workers append their outcomes this way: an
// outcome is a fact about an attempt, not a decision taken from the run's
// state, and its de-duplication key keeps it single.
const AnySeq uint64 = math.MaxUint64

// maxBatch is the most events one atomic batch holds (the server's default
// limit).
const maxBatch = 1000

// chainMax is the most events appended as a chain of single appends rather
// than an atomic batch. An atomic batch costs the server a temporary store
// on disk (nats-server 2.15), far more than a few single appends; a
// decision is usually two events (routed, ready).
const chainMax = 8

// Store is the JetStream event store: what clients and workers read and
// append. Open returns it; client.New and worker.New take it, or a
// wrapper of it that has an Unwrap() Store method returning it (they also
// use the connection and streams behind it).
type Store interface {
	// Append appends facts of one run: a run-started (expectLast 0: the
	// run must have no events yet, ErrRunExists otherwise, unless it is
	// the very same start again; one that names a parent run is refused
	// with a ParentClaimError, since only the engine starts child runs),
	// signals and cancel requests of a
	// client, and workers' reports (expectLast AnySeq). An event whose id
	// someone else took first (ErrDuplicateMismatch) is written under a
	// fresh id, set on the event. Events go on the subjects their types
	// put them on. A coordinator decision (IsDecision) is refused with
	// ErrMisplaced and nothing is written: the engine appends decisions
	// itself, under per-run optimistic concurrency (engine.go),
	// and NATS permissions let only the coordinator's role write their
	// subjects. It returns the sequence of the last event.
	Append(ctx context.Context, runID string, expectLast uint64, evs ...*Event) (uint64, error)
	// Read returns a run's events with sequence ≥ from, in order, stopping
	// at upTo when it is not zero. A run with no events gives ErrRunNotFound
	// when from ≤ 1. Messages on the run's subjects that are not valid
	// events come back with Event.Refused set, in their place. Read never
	// misses an event acknowledged before it was called, even when a
	// replica that is behind answers.
	Read(ctx context.Context, runID string, from, upTo uint64) ([]*Event, error)
	// ReadThrough is Read to the end of the run's history, which must
	// reach at least sequence through (the caller knows an event there):
	// reads that come back short are repeated, then served by the leader.
	ReadThrough(ctx context.Context, runID string, from, through uint64) ([]*Event, error)
	// LastSeq returns the sequence of a run's last event.
	LastSeq(ctx context.Context, runID string) (uint64, error)
	// StreamName is the name of the events stream.
	StreamName() string
	// MaxEventSize is the largest encoded event the server takes.
	MaxEventSize() int
}

type store struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	cfg    config
	stream jetstream.Stream
}

func (s *store) StreamName() string { return s.cfg.Stream }
func (s *store) MaxEventSize() int  { return int(s.nc.MaxPayload()) }

// The engine's side of the store (Engine, engine.go): methods of
// the implementation, outside the Store interface.

// TimerStream is the name of the timers stream beside the events stream,
// where Schedule stores timers and they fire (FiredSubject).
func (s *store) TimerStream() string { return s.cfg.Stream + TimerStreamSuffix }

// JetStream is the JetStream context the store uses.
func (s *store) JetStream() jetstream.JetStream { return s.js }

// AppendDecisions appends coordinator decisions of one run under per-run
// optimistic concurrency: expectLast is the sequence of the run's last
// decision the caller decided from (0: none yet), checked over the run's
// decision subjects, so two coordinators never both land a decision from
// the same state (ErrConflict). Up to 8 events go in as a chain of single
// appends, each checked against the one before; more as atomic batches
// (chunks of 1000, each chained on the last). A chain cut short by a
// crash leaves a prefix of the decision in the log, which deciding again
// from the folded state completes: decisions are a function of the state,
// with ids derived from what they decide. Every event is marked a
// decision.
func (s *store) AppendDecisions(ctx context.Context, runID string, expectLast uint64, evs ...*Event) (uint64, error) {
	for _, e := range evs {
		e.decision = true
	}
	return s.append(ctx, runID, expectLast, evs)
}

const (
	hdrExpectLastSubjSeq     = "Nats-Expected-Last-Subject-Sequence"
	hdrExpectLastSubjSeqSubj = "Nats-Expected-Last-Subject-Sequence-Subject"
	hdrBatchID               = "Nats-Batch-Id"
	hdrBatchSeq              = "Nats-Batch-Sequence"
	hdrBatchCommit           = "Nats-Batch-Commit"
	hdrSchedule              = "Nats-Schedule"
	hdrScheduleTarget        = "Nats-Schedule-Target"
)

// encode encodes an event, with its body kept beside the log when it is
// large (offload.go), and checks it fits in one message.
func (s *store) encode(ctx context.Context, e *Event) (*nats.Msg, error) {
	if !ValidToken(e.RunID) {
		return nil, fmt.Errorf("%w: run id %q", ErrInvalidID, e.RunID)
	}
	m, err := encode(e)
	if err != nil {
		return nil, err
	}
	if err := s.offload(ctx, e.RunID, m); err != nil {
		return nil, err
	}
	size := len(m.Data) + len(m.Subject)
	for k, vs := range m.Header {
		for _, v := range vs {
			size += len(k) + len(v) + 4
		}
	}
	if max := s.MaxEventSize(); size > max-512 {
		return nil, fmt.Errorf("%w: %s event for node %q is %d bytes, the limit is %d", ErrPayloadTooLarge, e.Type, e.NodeID, size, max-512)
	}
	return m, nil
}

func (s *store) Append(ctx context.Context, runID string, expectLast uint64, evs ...*Event) (uint64, error) {
	if err := CheckFacts(evs); err != nil {
		return 0, err
	}
	return s.append(ctx, runID, expectLast, evs)
}

// CheckFacts is what Store.Append checks before it writes anything: no
// event of evs is a coordinator decision (ErrMisplaced). Every Store
// implementation makes the same check (see logtest).
func CheckFacts(evs []*Event) error {
	for _, e := range evs {
		if e.decision {
			return fmt.Errorf("%w: %s for run %q is a coordinator decision: only the engine appends decisions (a client starts runs, signals and cancels; a worker reports outcomes)", ErrMisplaced, e.Type, e.RunID)
		}
	}
	return nil
}

// append writes evs to runID's history, checked against expectLast on
// the run's decisions (its whole history for a run-started): up to
// chainMax events as a chain of single appends, more as atomic batches.
func (s *store) append(ctx context.Context, runID string, expectLast uint64, evs []*Event) (uint64, error) {
	if len(evs) == 0 {
		return expectLast, nil
	}
	ctx, cancel := withDefaultTimeout(ctx, 10*time.Second)
	defer cancel()
	msgs := make([]*nats.Msg, len(evs)) // here, not in encodeAll: a few stay on the stack
	if err := s.encodeAll(ctx, runID, evs, msgs); err != nil {
		return 0, err
	}
	filter := DecisionFilter(runID)
	if evs[0].Type == RunStarted {
		filter = RunFilter(runID)
	}
	if len(msgs) <= chainMax {
		return s.appendChain(ctx, msgs, evs, expectLast, filter)
	}
	return s.appendBatches(ctx, msgs, expectLast, filter)
}

// encodeAll encodes the events of one append, all of run runID, into
// msgs.
func (s *store) encodeAll(ctx context.Context, runID string, evs []*Event, msgs []*nats.Msg) error {
	for i, e := range evs {
		if e.RunID != runID {
			return fmt.Errorf("%w: appending an event of run %q to run %q", ErrMalformedEvent, e.RunID, runID)
		}
		m, err := s.encode(ctx, e)
		if err != nil {
			return err
		}
		msgs[i] = m
	}
	return nil
}

// expectLastOn makes m's append conditional on the last sequence of
// filter's subjects being seq (none for AnySeq).
func expectLastOn(m *nats.Msg, seq uint64, filter string) {
	if seq != AnySeq {
		m.Header.Set(hdrExpectLastSubjSeq, strconv.FormatUint(seq, 10))
		m.Header.Set(hdrExpectLastSubjSeqSubj, filter)
	}
}

// appendChain appends msgs (the encoded evs) one by one, each checked
// against the one before.
func (s *store) appendChain(ctx context.Context, msgs []*nats.Msg, evs []*Event, expectLast uint64, filter string) (uint64, error) {
	var last uint64
	for i, m := range msgs {
		expectLastOn(m, expectLast, filter)
		seq, err := s.publishOne(ctx, m)
		if errors.Is(err, ErrDuplicateMismatch) {
			seq, err = s.publishRenamed(ctx, m, evs[i])
		}
		if err != nil {
			if expectLast == 0 && errors.Is(err, ErrConflict) && evs[0].Type == RunStarted {
				return s.sameStart(ctx, evs[0])
			}
			return 0, err
		}
		last = seq
		if expectLast != AnySeq {
			expectLast = seq
		}
	}
	return last, nil
}

// publishRenamed publishes m, the encoded e, again under a fresh id:
// someone took its id first. The optimistic concurrency check (for
// decisions) or the fold's fencing (for outcomes) keeps it single; a
// squatted id never stalls a run.
func (s *store) publishRenamed(ctx context.Context, m *nats.Msg, e *Event) (uint64, error) {
	id := m.Header.Get(nats.MsgIdHdr) + "~" + RandomID()
	m.Header.Set(nats.MsgIdHdr, id)
	m.Header.Set(headerPrefix+"id", id)
	e.ID = id // what the caller wrote, as it is in the log
	return s.publishOne(ctx, m)
}

// appendBatches appends msgs as atomic batches of up to maxBatch, each
// checked against the one before.
func (s *store) appendBatches(ctx context.Context, msgs []*nats.Msg, expectLast uint64, filter string) (uint64, error) {
	var last uint64
	for start := 0; start < len(msgs); start += maxBatch {
		chunk := msgs[start:min(start+maxBatch, len(msgs))]
		expectLastOn(chunk[0], expectLast, filter)
		var err error
		if last, err = s.publishBatch(ctx, chunk); err != nil {
			return 0, err
		}
		if expectLast != AnySeq {
			expectLast = last
		}
	}
	return last, nil
}

// sameStart answers a run-started that found its run existing: starting
// the same run again (a retried request, the same event, on the same
// subject: a client's, or a child run's decision subject) succeeds with
// the recorded start's sequence; any other start is ErrRunExists.
func (s *store) sameStart(ctx context.Context, e *Event) (uint64, error) {
	subject, err := e.subjectOf()
	if err != nil {
		return 0, err
	}
	m, err := s.leaderGet(ctx, map[string]any{"last_by_subj": subject})
	if err == nil && m != nil {
		if got, derr := Decode(m.Subject, m.Header, m.Data); derr == nil && got.ID == e.ID && bytes.Equal(got.Data, e.Data) {
			return m.Sequence, nil
		}
	}
	return 0, fmt.Errorf("%w: %s", ErrRunExists, e.RunID)
}

func (s *store) publishOne(ctx context.Context, m *nats.Msg) (uint64, error) {
	ack, err := s.js.PublishMsg(ctx, m)
	return s.acked(ctx, m, ack, err)
}

// acked is the sequence at which m, published, is in the log: its ack,
// or the error the publish came back with; a duplicate ack is confirmed.
func (s *store) acked(ctx context.Context, m *nats.Msg, ack *jetstream.PubAck, err error) (uint64, error) {
	if err != nil {
		return 0, mapPublishError(err)
	}
	if ack.Duplicate {
		// JetStream kept an earlier message with this id. It counts as
		// this append only if it is this event: a retried publish whose
		// first ack was lost. Anyone may have published under the id
		// first (ids of decisions are predictable), so look. A worker's
		// outcome is looked up by its subject, which the worker's role
		// may read (see confirmOnSubject).
		confirm := s.confirm
		if IsWorkerSubject(m.Subject) {
			confirm = s.confirmOnSubject
		}
		if err := confirm(ctx, m, ack.Sequence); err != nil {
			return 0, err
		}
	}
	return ack.Sequence, nil
}

// confirm checks that the message stored at seq is m: same subject, type,
// data and time, as a retried publish of m is. The same event made at
// another time (two coordinators deciding the same thing from different
// states, or at different moments) is, for a checked append, a conflict:
// the caller folds the run again and finds the decision made, rather than
// keep its own time for it. Anything else under m's id is someone else's
// message (ErrDuplicateMismatch). It reads from the stream leader, which
// has every acknowledged message.
func (s *store) confirm(ctx context.Context, m *nats.Msg, seq uint64) error {
	got, err := s.leaderGet(ctx, map[string]any{"seq": seq})
	if err != nil {
		return fmt.Errorf("confirming duplicate of %s at sequence %d: %w", m.Header.Get(nats.MsgIdHdr), seq, err)
	}
	if got == nil || got.Subject != m.Subject || got.Header.Get(headerPrefix+"type") != m.Header.Get(headerPrefix+"type") || !sameData(m.Subject, msgEnvelope(m), got.Header, m.Header, got.Data, m.Data) {
		return fmt.Errorf("%w: id %q at sequence %d", ErrDuplicateMismatch, m.Header.Get(nats.MsgIdHdr), seq)
	}
	if got.Header.Get(hdrTime) != m.Header.Get(hdrTime) && m.Header.Get(hdrExpectLastSubjSeq) != "" {
		// A checked append: the same decision was made elsewhere, or
		// earlier, from a state that may differ; a fact sent again (a
		// retried signal) is the fact that is there.
		return fmt.Errorf("%w: %s was written at sequence %d by another decision", ErrConflict, m.Header.Get(nats.MsgIdHdr), seq)
	}
	return nil
}

// leaderGet is a get served by the stream leader (not a direct get, which
// any replica may answer from behind). It returns nil when there is no
// such message.
func (s *store) leaderGet(ctx context.Context, req map[string]any) (*jetstream.RawStreamMsg, error) {
	return LeaderGet(ctx, s.nc, s.cfg.Stream, req)
}

// LeaderLast returns the last message on subject in the events stream,
// served by the stream leader (never a replica that is behind), or nil
// when there is none.
func (s *store) LeaderLast(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	ctx, cancel := withDefaultTimeout(ctx, 5*time.Second)
	defer cancel()
	return s.leaderGet(ctx, map[string]any{"last_by_subj": subject})
}

// LeaderFirst returns the first message on subject in the events stream,
// served by the stream leader, or nil when there is none: what was
// written there first, whatever was written after it.
func (s *store) LeaderFirst(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	ctx, cancel := withDefaultTimeout(ctx, 5*time.Second)
	defer cancel()
	return s.leaderGet(ctx, map[string]any{"seq": 1, "next_by_subj": subject})
}

// LeaderSeq returns the message at sequence seq of the events stream,
// served by the stream leader, or nil when there is none: one request,
// whatever the size of the run it belongs to.
func (s *store) LeaderSeq(ctx context.Context, seq uint64) (*jetstream.RawStreamMsg, error) {
	ctx, cancel := withDefaultTimeout(ctx, 5*time.Second)
	defer cancel()
	return s.leaderGet(ctx, map[string]any{"seq": seq})
}

// LeaderGet is the JetStream API's message get of stream
// (STREAM.MSG.GET, answered by the stream's leader, never a replica that
// is behind), req its request ("seq", "next_by_subj", "last_by_subj"):
// the message, or nil when there is none.
func LeaderGet(ctx context.Context, nc *nats.Conn, stream string, req map[string]any) (*jetstream.RawStreamMsg, error) {
	body, _ := json.Marshal(req)
	resp, err := nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+stream, body)
	if err != nil {
		return nil, err
	}
	var r struct {
		Message *struct {
			Subject string    `json:"subject"`
			Seq     uint64    `json:"seq"`
			Header  []byte    `json:"hdrs"`
			Data    []byte    `json:"data"`
			Time    time.Time `json:"time"`
		} `json:"message"`
		Error *struct {
			Code        int    `json:"code"`
			ErrCode     int    `json:"err_code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		return nil, fmt.Errorf("unreadable answer %q: %w", resp.Data, err)
	}
	if r.Error != nil {
		if r.Error.Code == 404 {
			return nil, nil
		}
		if r.Error.Code == 503 {
			return nil, fmt.Errorf("%s: %w", r.Error.Description, nats.ErrNoResponders)
		}
		return nil, fmt.Errorf("%s (code %d)", r.Error.Description, r.Error.ErrCode)
	}
	if r.Message == nil {
		return nil, nil
	}
	out := &jetstream.RawStreamMsg{Subject: r.Message.Subject, Sequence: r.Message.Seq, Data: r.Message.Data, Time: r.Message.Time}
	if len(r.Message.Header) > 0 {
		if out.Header, err = nats.DecodeHeadersMsg(r.Message.Header); err != nil {
			return nil, fmt.Errorf("message %d: %w", r.Message.Seq, err)
		}
	}
	return out, nil
}

// batchAck is the server's answer to an atomic batch commit.
type batchAck struct {
	Stream string `json:"stream"`
	Seq    uint64 `json:"seq"`
	Count  int    `json:"count"`
	Error  *struct {
		Code        int    `json:"code"`
		ErrCode     int    `json:"err_code"`
		Description string `json:"description"`
	} `json:"error"`
}

// publishBatch appends messages all or nothing as a JetStream atomic batch.
func (s *store) publishBatch(ctx context.Context, msgs []*nats.Msg) (uint64, error) {
	return publishAtomic(ctx, s.nc, msgs)
}

// PublishAtomic appends messages all or nothing (see publishAtomic): the
// restore of archived runs.
func (s *store) PublishAtomic(ctx context.Context, msgs []*nats.Msg) (uint64, error) {
	return publishAtomic(ctx, s.nc, msgs)
}

// publishAtomic appends messages (at most 1000, the server's limit) all
// or nothing as a JetStream atomic batch, and returns the sequence of the
// last. A failed check of a Nats-Expected-Last-Subject-Sequence header is
// ErrConflict. Consumers see none of the messages before all are stored.
func publishAtomic(ctx context.Context, nc *nats.Conn, msgs []*nats.Msg) (uint64, error) {
	if len(msgs) == 0 || len(msgs) > maxBatch {
		return 0, fmt.Errorf("an atomic batch holds 1 to %d messages, not %d", maxBatch, len(msgs))
	}
	id := RandomID()
	for i, m := range msgs {
		if m.Header == nil {
			m.Header = nats.Header{}
		}
		m.Header.Set(hdrBatchID, id)
		m.Header.Set(hdrBatchSeq, strconv.Itoa(i+1))
		if i < len(msgs)-1 {
			if err := nc.PublishMsg(m); err != nil {
				return 0, fmt.Errorf("publishing batch: %w", err)
			}
		}
	}
	commit := msgs[len(msgs)-1]
	commit.Header.Set(hdrBatchCommit, "1")
	resp, err := nc.RequestMsgWithContext(ctx, commit)
	if err != nil {
		return 0, fmt.Errorf("committing batch of %d events: %w", len(msgs), err)
	}
	var ack batchAck
	if err := json.Unmarshal(resp.Data, &ack); err != nil {
		return 0, fmt.Errorf("committing batch: unreadable ack %q: %w", resp.Data, err)
	}
	if ack.Error != nil {
		switch ack.Error.ErrCode {
		case int(jetstream.JSErrCodeStreamWrongLastSequence), int(jetstream.JSErrCodeStreamWrongLastSequenceConstant), 10201, 10158:
			return 0, fmt.Errorf("%w: %s", ErrConflict, ack.Error.Description)
		}
		return 0, fmt.Errorf("committing batch of %d events: %s (code %d)", len(msgs), ack.Error.Description, ack.Error.ErrCode)
	}
	return ack.Seq, nil
}

func mapPublishError(err error) error {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case jetstream.JSErrCodeStreamWrongLastSequence, jetstream.JSErrCodeStreamWrongLastSequenceConstant, 10158:
			return fmt.Errorf("%w: %s", ErrConflict, apiErr.Description)
		}
	}
	return fmt.Errorf("appending event: %w", err)
}

func (s *store) Read(ctx context.Context, runID string, from, upTo uint64) ([]*Event, error) {
	return s.read(ctx, runID, from, upTo, 0)
}

func (s *store) ReadThrough(ctx context.Context, runID string, from, through uint64) ([]*Event, error) {
	return s.read(ctx, runID, from, 0, through)
}

// freshTries is how often a read that comes back short of a known
// sequence is repeated before it goes to the stream leader.
const freshTries = 3

// readBatchBytes bounds the bytes of one batched direct get: without it
// the server sends up to its max_pending (64 MB by default) in one burst,
// past which it cuts the reader off as a slow consumer; a run whose
// history was larger could not be read at all. At least one message is
// always sent, so any event fits.
const readBatchBytes = 4 << 20

// batchTimeout bounds one batch of a read (not the whole read: a large
// history takes as many batches as it needs).
const batchTimeout = 30 * time.Second

// read reads a run's history from a sequence, up to upTo (0: to the end),
// and, when through is set, at least through that sequence, into a slice.
func (s *store) read(ctx context.Context, runID string, from, upTo, through uint64) ([]*Event, error) {
	var out []*Event
	err := s.walk(ctx, runID, from, upTo, through, func(e *Event) error {
		out = append(out, e)
		return nil
	})
	return out, err
}

// Walk calls fn with each event of a run with sequence ≥ from, in log
// order, reading the history in batches of bounded size (a few MB), so
// that a history of any size is read in bounded memory. The walk reaches
// at least sequence through when it is set, as ReadThrough does. An error
// of fn ends it with that error. A run with no events gives
// ErrRunNotFound when from ≤ 1.
func (s *store) Walk(ctx context.Context, runID string, from, through uint64, fn func(*Event) error) error {
	return s.walk(ctx, runID, from, 0, through, fn)
}

// walk reads a run's history from a sequence, up to upTo (0: to the end),
// and, when through is set, at least through that sequence, handing each
// event to fn. Direct gets may be answered by a replica that is behind
// the leader; a read that comes back short of through is repeated from
// where it stopped, then done on the leader. Without through (and without
// upTo), the leader says first where the run's history ends, so that a
// read never misses an acknowledged event.
func (s *store) walk(ctx context.Context, runID string, from, upTo, through uint64, fn func(*Event) error) error {
	if !ValidToken(runID) {
		return fmt.Errorf("%w: run id %q", ErrInvalidID, runID)
	}
	from = max(from, 1)
	first := from
	filter := RunFilter(runID)
	through, want, err := s.walkBounds(ctx, runID, filter, from, upTo, through)
	if err != nil {
		return err
	}
	seen := false
	for try := 0; ; {
		n, pending, err := s.walkBatch(ctx, filter, &from, upTo, want, fn)
		if err != nil {
			return err
		}
		seen = seen || n > 0
		if pending > 0 && n > 0 {
			try, want = 0, clampBatch(pending)
			continue
		}
		want = maxBatch
		if through == 0 || from > through {
			if !seen && first <= 1 {
				return fmt.Errorf("%w: %s", ErrRunNotFound, runID)
			}
			return nil
		}
		if try++; try >= freshTries {
			return s.walkRestOnLeader(ctx, runID, from, upTo, through, seen, fn)
		}
		if err := sleepCtx(ctx, time.Duration(try)*5*time.Millisecond); err != nil {
			return err
		}
	}
}

// walkBounds is the sequence a walk must reach (through, or, when neither
// through nor upTo is set and replicas may be behind, the run's last as
// the leader has it) and the size of its first batch (a walk from the
// start asks for as many as the run has: see count).
func (s *store) walkBounds(ctx context.Context, runID, filter string, from, upTo, through uint64) (reach uint64, want int, err error) {
	if through == 0 && upTo == 0 && s.cfg.Replicas > 1 {
		if through, err = s.LastSeq(ctx, runID); err != nil {
			return 0, 0, err
		}
	}
	if from != 1 {
		return through, maxBatch, nil
	}
	n, err := s.count(ctx, filter)
	if err != nil {
		return 0, 0, err
	}
	return through, clampBatch(n), nil
}

// walkBatch reads one batch of up to want events of filter from *from and
// hands each to fn, moving *from past it; n is how many it handed, pending
// how many the server says are left after them.
func (s *store) walkBatch(ctx context.Context, filter string, from *uint64, upTo uint64, want int, fn func(*Event) error) (n int, pending uint64, err error) {
	bctx, cancel := withDefaultTimeout(ctx, batchTimeout)
	batch, pending, err := s.readBatch(bctx, filter, *from, upTo, want)
	cancel()
	if err != nil {
		return 0, 0, err
	}
	for _, e := range batch {
		if err := fn(e); err != nil {
			return 0, 0, err
		}
		*from = e.Seq + 1
	}
	return len(batch), pending, nil
}

// walkRestOnLeader ends a walk whose reads came back short of through
// freshTries times: the rest is read from the stream leader, which must
// have it.
func (s *store) walkRestOnLeader(ctx context.Context, runID string, from, upTo, through uint64, seen bool, fn func(*Event) error) error {
	next, err := s.walkLeader(ctx, runID, from, upTo, fn)
	if err != nil {
		return err
	}
	if next == from && !seen {
		return fmt.Errorf("%w: %s", ErrRunNotFound, runID)
	}
	if next <= through {
		return fmt.Errorf("reading run %s: the stream leader has it up to %d, expected %d", runID, next-1, through)
	}
	return nil
}

// walkLeader reads message by message from the stream leader: slow, and
// never behind. It is what a read falls back on when replicas keep coming
// back short of what it must reach.
func (s *store) walkLeader(ctx context.Context, runID string, from, upTo uint64, fn func(*Event) error) (next uint64, err error) {
	for {
		gctx, cancel := withDefaultTimeout(ctx, batchTimeout)
		m, err := s.leaderGet(gctx, map[string]any{"seq": from, "next_by_subj": RunFilter(runID)})
		cancel()
		if err != nil {
			return from, fmt.Errorf("reading run %s from the stream leader: %w", runID, err)
		}
		if m == nil || (upTo > 0 && m.Sequence > upTo) {
			return from, nil
		}
		if err := fn(DecodeStored(m.Subject, m.Header, m.Data, m.Sequence, m.Time)); err != nil {
			return from, err
		}
		from = m.Sequence + 1
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// A read asks for as many messages as the server says the run has. A
// batched direct get with a wildcard filter (a run's is one) that runs out
// of matches before its batch is full goes on looking through every block
// after the run's last message: over 64k subjects the server has no index
// to skip them by (nats-server filestore, LoadNextMsg), so reading an old
// run loaded every later block of the stream, which made retention's
// sweep load the whole stream into the server's memory. A batch of exactly
// the pending count ends at the run's last message. Counting is cheap from
// the stream's first sequence (the server's subject index answers), so a
// read from the start counts first (count) and then asks from the start
// again; a read from further on asks for a full batch, and each batch
// after the first asks for what the one before left pending.

// count returns how many messages of filter the stream holds, from the
// server's subject index: a batch of one from sequence 1, whose end
// marker says how many are left. 0 when it cannot tell (none, or a
// replica that answered without them): the read then asks for a full
// batch, as before.
func (s *store) count(ctx context.Context, filter string) (uint64, error) {
	ctx, cancel := withDefaultTimeout(ctx, batchTimeout)
	defer cancel()
	first, pending, err := s.readBatch(ctx, filter, 1, 0, 1)
	if err != nil {
		return 0, err
	}
	return uint64(len(first)) + pending, nil
}

// clampBatch is the batch to ask for when n messages are pending: n, at
// least 1, at most maxBatch; 0 (not known) asks for a full batch.
func clampBatch(n uint64) int {
	if n == 0 || n > maxBatch {
		return maxBatch
	}
	return int(n)
}

// readBatch is one batched direct get: up to batch (at most 1000)
// messages of filter from a sequence, in one round trip. pending is how
// many the server says are left after them.
func (s *store) readBatch(ctx context.Context, filter string, from, upTo uint64, batch int) ([]*Event, uint64, error) {
	req, _ := json.Marshal(map[string]any{"seq": from, "next_by_subj": filter, "batch": batch, "up_to_seq": upTo, "max_bytes": readBatchBytes})
	inbox := s.nc.NewRespInbox()
	// A channel just big enough for one batch and its end marker: a
	// synchronous subscription would allocate 64k slots on every read.
	ch := make(chan *nats.Msg, batch+2)
	sub, err := s.nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return nil, 0, err
	}
	defer sub.Unsubscribe()
	if err := s.nc.PublishRequest("$JS.API.DIRECT.GET."+s.cfg.Stream, inbox, req); err != nil {
		return nil, 0, err
	}
	var out []*Event
	// The bytes of the batch as read, large payloads resolved: past
	// readBatchBytes, the rest of the batch is counted, not decoded, and
	// read by the next batch (a history of references to 50 MB objects
	// is not resolved 1000 at a time).
	var resolved, skipped uint64
	for {
		var m *nats.Msg
		select {
		case m = <-ch:
		case <-ctx.Done():
			return nil, 0, fmt.Errorf("reading %s: %w", filter, ctx.Err())
		}
		if end, pending, err := batchEnd(filter, m); end {
			if err != nil {
				return nil, 0, err
			}
			return out, pending + skipped, nil
		}
		seq, _ := strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
		if upTo > 0 && seq > upTo {
			// The server bounds only multi-last gets by up_to_seq; stop here.
			return out, skipped, nil
		}
		if resolved > readBatchBytes {
			skipped++
			continue
		}
		ts, _ := time.Parse(time.RFC3339Nano, m.Header.Get("Nats-Time-Stamp"))
		// A message that is not a valid event keeps its place, refused
		// (see DecodeStored): the history around it stays readable.
		e := DecodeStored(m.Header.Get("Nats-Subject"), m.Header, m.Data, seq, ts)
		resolved += uint64(len(e.Data))
		out = append(out, e)
	}
}

// batchEnd reads a status message of a batched direct get: end is set
// when m ends the batch (then pending is what the server says is left, or
// err why the batch failed); a message without a status is an event.
func batchEnd(filter string, m *nats.Msg) (end bool, pending uint64, err error) {
	switch m.Header.Get("Status") {
	case "":
		return false, 0, nil
	case "404", "408":
		return true, 0, nil
	case "204": // end of batch
		pending, _ := strconv.ParseUint(m.Header.Get("Nats-Num-Pending"), 10, 64)
		return true, pending, nil
	case "503":
		// No replica answered (a leader election, a lost server): a
		// passing condition, worth waiting for.
		return true, 0, fmt.Errorf("reading %s: %w", filter, nats.ErrNoResponders)
	default:
		return true, 0, fmt.Errorf("reading %s: status %s %s", filter, m.Header.Get("Status"), m.Header.Get("Description"))
	}
}

func (s *store) LastSeq(ctx context.Context, runID string) (uint64, error) {
	ctx, cancel := withDefaultTimeout(ctx, 10*time.Second)
	defer cancel()
	m, err := s.leaderGet(ctx, map[string]any{"last_by_subj": RunFilter(runID)})
	if err != nil {
		return 0, fmt.Errorf("reading last event of run %s: %w", runID, err)
	}
	if m == nil {
		return 0, fmt.Errorf("%w: %s", ErrRunNotFound, runID)
	}
	return m.Sequence, nil
}

func (s *store) Schedule(ctx context.Context, ev *Event, timerID string, at time.Time) error {
	ctx, cancel := withDefaultTimeout(ctx, 10*time.Second)
	defer cancel()
	m, err := s.encode(ctx, ev)
	if err != nil {
		return err
	}
	m.Subject = ScheduleSubject(ev.RunID, timerID)
	target := FiredSubject(ev.RunID)
	// No message id: a schedule published on a timer's subject replaces
	// the one there, so arming a timer again is harmless at any time, also
	// beyond the de-duplication window.
	m.Header.Del(nats.MsgIdHdr)
	m.Header.Set(hdrSchedule, "@at "+at.UTC().Format(time.RFC3339Nano))
	m.Header.Set(hdrScheduleTarget, target)
	if _, err := s.js.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("scheduling %s for %s: %w", ev.Type, at.Format(time.RFC3339), err)
	}
	return nil
}

func (s *store) CancelSchedules(ctx context.Context, runID string) error {
	ctx, cancel := withDefaultTimeout(ctx, 10*time.Second)
	defer cancel()
	ts, err := s.js.Stream(ctx, s.TimerStream())
	if err != nil {
		return err
	}
	if err := ts.Purge(ctx, jetstream.WithPurgeSubject(ScheduleFilter(runID))); err != nil {
		return err
	}
	return ts.Purge(ctx, jetstream.WithPurgeSubject(FiredSubject(runID)))
}

// withDefaultTimeout bounds ctx when the caller set no deadline.
func withDefaultTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
}
