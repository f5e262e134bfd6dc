package eventlog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// hdrExpectLastMsgID makes a publish conditional on the stream's last
// stored message carrying that de-duplication id.
const hdrExpectLastMsgID = "Nats-Expected-Last-Msg-Id"

// errCodeWrongLastMsgID is the server's error code for a publish whose
// Nats-Expected-Last-Msg-Id is not the stream's last (JSStreamWrongLastMsgIDErrF;
// nats.go names no constant for it).
const errCodeWrongLastMsgID jetstream.ErrorCode = 10070

// AppendStep appends the outcomes of nodes the coordinator ran itself
// (facts, as Append writes a worker's: no concurrency check) and then the
// decisions made from the state they lead to (as AppendDecisions does:
// checked against expectLast over the run's decision subjects), in one
// round trip where it can. The outcomes and the first decision are
// published without waiting in between, the decision conditioned on the
// last outcome being the stream's last message (Nats-Expected-Last-Msg-Id),
// so that it never lands without them, nor before them. Where another
// message came in between (another run's event, a duplicate outcome), the
// decision is refused and published again once the outcomes are
// acknowledged: two round trips, as Append then AppendDecisions take. A
// failure leaves a prefix in the log, as those do. It sets each outcome's
// Seq, and returns the sequence of the last event.
//
// Not an atomic batch: nats-server 2.15 stages one on disk (a store of
// its own per batch), which costs a file-backed stream milliseconds where
// a publish costs a tenth of one.
//
// A replicated stream (more than one replica) takes them apart, two round
// trips: there the server checks Nats-Expected-Last-Msg-Id as each
// replica applies the message, not before it is proposed, and a mismatch
// (another run's event came in between, as it does under load) is a
// "critical write error" on every replica, which stops the stream: seen
// in the chaos test at 200 runs on three servers, every server answering
// "JetStream system temporarily unavailable" from then on.
func (s *store) AppendStep(ctx context.Context, runID string, expectLast uint64, outcomes, decisions []*Event) (uint64, error) {
	if err := CheckFacts(outcomes); err != nil {
		return 0, err
	}
	for _, e := range decisions {
		e.decision = true
	}
	if len(outcomes) == 0 || len(decisions) == 0 || s.Replicas() > 1 {
		return s.appendApart(ctx, runID, expectLast, outcomes, decisions)
	}
	ctx, cancel := withDefaultTimeout(ctx, 10*time.Second)
	defer cancel()
	all := make([]*Event, 0, len(outcomes)+len(decisions))
	all = append(append(all, outcomes...), decisions...)
	msgs := make([]*nats.Msg, len(all))
	if err := s.encodeAll(ctx, runID, all, msgs); err != nil {
		return 0, err
	}
	out, dec := msgs[:len(outcomes)], msgs[len(outcomes):]
	filter := DecisionFilter(runID)
	expectLastOn(dec[0], expectLast, filter)
	dec[0].Header.Set(hdrExpectLastMsgID, out[len(out)-1].Header.Get(nats.MsgIdHdr))
	first, err := s.pipeline(ctx, outcomes, out, dec[0])
	if errors.Is(err, errNotLast) {
		// Another message came between: the decision goes in checked
		// as usual, now that the outcomes are in.
		dec[0].Header.Del(hdrExpectLastMsgID)
		return s.appendChain(ctx, dec, decisions, expectLast, filter)
	}
	if err != nil {
		return 0, err
	}
	if len(dec) == 1 {
		return first, nil
	}
	if expectLast != AnySeq {
		expectLast = first
	}
	return s.appendChain(ctx, dec[1:], decisions[1:], expectLast, filter)
}

// errNotLast is a pipelined decision refused because the outcome it
// follows was not the stream's last message.
var errNotLast = errors.New("the outcome is not the stream's last message")

// appendApart appends outcomes, then decisions, each as its own append.
func (s *store) appendApart(ctx context.Context, runID string, expectLast uint64, outcomes, decisions []*Event) (uint64, error) {
	var last uint64
	for _, e := range outcomes {
		seq, err := s.append(ctx, runID, AnySeq, []*Event{e})
		if err != nil {
			return 0, err
		}
		e.Seq, last = seq, seq
	}
	if len(decisions) == 0 {
		return last, nil
	}
	return s.append(ctx, runID, expectLast, decisions)
}

// pipeline publishes the outcomes' messages and the decision's without
// waiting in between, then waits for every ack. It returns the
// decision's sequence, or errNotLast when the decision was refused for
// its Nats-Expected-Last-Msg-Id (the outcomes are in then).
//
// An outcome whose id someone else took (ErrDuplicateMismatch) goes in
// under a fresh id; if the decision landed meanwhile (the message that
// took the id was the stream's last), the outcome now follows its
// decision, and the error is ErrConflict, so that the caller folds the
// run from the log again rather than keep the order it applied.
func (s *store) pipeline(ctx context.Context, outcomes []*Event, out []*nats.Msg, dec *nats.Msg) (uint64, error) {
	futures := make([]jetstream.PubAckFuture, 0, len(out)+1)
	for _, m := range append(out[:len(out):len(out)], dec) {
		f, err := s.js.PublishMsgAsync(m)
		if err != nil {
			// Not sent; those sent before it are acknowledged in their time.
			return 0, fmt.Errorf("publishing: %w", err)
		}
		futures = append(futures, f)
	}
	acks := make([]*jetstream.PubAck, len(futures))
	errs := make([]error, len(futures))
	for i, f := range futures {
		select {
		case acks[i] = <-f.Ok():
		case errs[i] = <-f.Err():
		case <-ctx.Done():
			return 0, fmt.Errorf("waiting for the acks of a step: %w", ctx.Err())
		}
	}
	decSeq, decErr := s.acked(ctx, dec, acks[len(out)], errs[len(out)])
	var apiErr *jetstream.APIError
	notLast := errors.As(errs[len(out)], &apiErr) && apiErr.ErrorCode == errCodeWrongLastMsgID
	renamed := false
	for i, m := range out {
		seq, err := s.acked(ctx, m, acks[i], errs[i])
		if errors.Is(err, ErrDuplicateMismatch) {
			renamed = true
			seq, err = s.publishRenamed(ctx, m, outcomes[i])
		}
		if err != nil {
			return 0, err
		}
		outcomes[i].Seq = seq
	}
	switch {
	case notLast:
		return 0, errNotLast
	case decErr != nil:
		return 0, decErr
	case renamed:
		return 0, fmt.Errorf("%w: an outcome went in under a fresh id after the decision made from it", ErrConflict)
	}
	return decSeq, nil
}
