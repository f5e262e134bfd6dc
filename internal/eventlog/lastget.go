package eventlog

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Reads that NATS permissions can scope. A batched direct get
// ($JS.API.DIRECT.GET.<stream>, filter in the body) and a get on the
// stream leader ($JS.API.STREAM.MSG.GET.<stream>, sequence or subject in
// the body) read any message: permissions see only the request subject.
// A direct get of the last message on a subject names that subject in
// the request subject ($JS.API.DIRECT.GET.<stream>.<subject>), so a role
// can be granted it for some subjects only: a worker reads runs' starts
// and its own queue's outcomes, nothing else, and counts runs' ends
// (HasEnd) without reading them (see internal/natsconn's roles and
// deploy/SECURITY.md). NATS permissions match a "*" token of a request
// subject like any token, so a right to read one subject of every run is
// the right to read the latest such message of any run.

// LastOn returns the last message stored on subject in the events stream, or
// nil when there is none, with a direct get whose request subject names
// subject. Any replica may answer, so on a replicated stream a message
// stored a moment ago may not be seen yet (see Replicas). subject must be
// a literal subject: a wildcard would read the last message of any
// subject it matches.
func (s *store) LastOn(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	if subject == "" || strings.ContainsAny(subject, "*> \t") {
		return nil, fmt.Errorf("%w: %q is not a literal subject", ErrInvalidID, subject)
	}
	ctx, cancel := withDefaultTimeout(ctx, 5*time.Second)
	defer cancel()
	return lastOn(ctx, s.nc, s.cfg.Stream, subject)
}

func lastOn(ctx context.Context, nc *nats.Conn, stream, subject string) (*jetstream.RawStreamMsg, error) {
	resp, err := nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+stream+"."+subject, nil)
	if err != nil {
		return nil, fmt.Errorf("reading the last message on %s: %w", subject, err)
	}
	switch status := resp.Header.Get("Status"); status {
	case "":
	case "404":
		return nil, nil
	case "503":
		return nil, fmt.Errorf("reading the last message on %s: %w", subject, nats.ErrNoResponders)
	default:
		return nil, fmt.Errorf("reading the last message on %s: status %s %s", subject, status, resp.Header.Get("Description"))
	}
	seq, err := strconv.ParseUint(resp.Header.Get("Nats-Sequence"), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("reading the last message on %s: an answer without a sequence", subject)
	}
	ts, _ := time.Parse(time.RFC3339Nano, resp.Header.Get("Nats-Time-Stamp"))
	return &jetstream.RawStreamMsg{Subject: resp.Header.Get("Nats-Subject"), Sequence: seq, Header: resp.Header, Data: resp.Data, Time: ts}, nil
}

// Replicas is the replica count of the events stream: above 1, a direct
// get may be answered by a replica that is behind.
func (s *store) Replicas() int { return max(s.cfg.Replicas, 1) }

// confirmOnSubject is confirm for the outcomes of workers (worker-class
// subjects, appended with AnySeq), whose role may not read a message by
// its sequence: it reads the last message on m's own subject instead.
// When that is the message at seq, it is compared as confirm does. When
// the last message on the subject is older than seq (or there is none),
// the message at seq is on another subject: someone else took the id
// (ErrDuplicateMismatch). When it is newer, something was written on the
// subject since (another node's outcome of the same run and queue), and
// the message at seq cannot be read back: the append is treated as a
// mismatch too, so the event is written again under a fresh id. At worst
// an outcome is then in the log twice, under two ids; the fold counts one
// outcome per attempt and passes over the other (pkg/projection), which
// is visible, where losing it would strand the attempt. On a replicated
// stream a replica that is behind is given a few tries to catch up.
func (s *store) confirmOnSubject(ctx context.Context, m *nats.Msg, seq uint64) error {
	id := m.Header.Get(nats.MsgIdHdr)
	for try := 0; ; try++ {
		got, err := lastOn(ctx, s.nc, s.cfg.Stream, m.Subject)
		if err != nil {
			return fmt.Errorf("confirming duplicate of %s at sequence %d: %w", id, seq, err)
		}
		switch {
		case got != nil && got.Sequence == seq:
			if got.Header.Get(headerPrefix+"type") != m.Header.Get(headerPrefix+"type") || got.Header.Get(nats.MsgIdHdr) != id || !sameData(m.Subject, msgEnvelope(m), got.Header, m.Header, got.Data, m.Data) {
				return fmt.Errorf("%w: id %q at sequence %d", ErrDuplicateMismatch, id, seq)
			}
			return nil
		case got != nil && got.Sequence > seq:
			return fmt.Errorf("%w: id %q at sequence %d, which is no longer the last on %s (cannot be read back)", ErrDuplicateMismatch, id, seq, m.Subject)
		}
		if s.cfg.Replicas <= 1 || try >= freshTries {
			return fmt.Errorf("%w: id %q at sequence %d, not on %s", ErrDuplicateMismatch, id, seq, m.Subject)
		}
		if err := sleepCtx(ctx, time.Duration(try+1)*5*time.Millisecond); err != nil {
			return err
		}
	}
}

// HasEnd reports whether one of a run's terminal subjects
// (TerminalSubjects) holds a message, from the stream's per-subject
// message counts (stream information with a subject filter), which the
// stream leader answers. No message is read: a role may be given this
// check without the right to read runs' ends, which hold their outputs.
// Whether the message there is a valid event is not looked at.
func (s *store) HasEnd(ctx context.Context, runID string) (bool, error) {
	if !ValidToken(runID) {
		return false, fmt.Errorf("%w: run id %q", ErrInvalidID, runID)
	}
	ctx, cancel := withDefaultTimeout(ctx, 5*time.Second)
	defer cancel()
	terminal := TerminalSubjects(runID)
	req, _ := json.Marshal(map[string]any{"subjects_filter": RunBase(runID) + ClassCoordinator + ".*"})
	resp, err := s.nc.RequestWithContext(ctx, "$JS.API.STREAM.INFO."+s.cfg.Stream, req)
	if err != nil {
		return false, fmt.Errorf("counting the ends of run %s: %w", runID, err)
	}
	var r struct {
		State struct {
			Subjects map[string]uint64 `json:"subjects"`
		} `json:"state"`
		Error *struct {
			Code        int    `json:"code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		return false, fmt.Errorf("counting the ends of run %s: unreadable answer: %w", runID, err)
	}
	if r.Error != nil {
		return false, fmt.Errorf("counting the ends of run %s: %s (code %d)", runID, r.Error.Description, r.Error.Code)
	}
	for _, s := range terminal {
		if r.State.Subjects[s] > 0 {
			return true, nil
		}
	}
	return false, nil
}
