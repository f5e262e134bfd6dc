package coordinator

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/weft-dev/weft/internal/decider"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/internal/telemetry"
	"github.com/weft-dev/weft/pkg/events"
)

// Child runs are believed only when this coordinator's role wrote their
// start. The engine derives a child run's id from its parent, so another
// writer may know it before the child exists, and write there first: a
// run-started of its own that names the parent (which events.Decode
// refuses on a client's subject: only the coordinator may write the
// child's decision subject, where its start goes), a plain run under that
// id, or any message on its subjects. So:
//
//   - a child's start is appended as a decision of the child run, on a run
//     that must have no events (startChildren). When the child's subjects
//     hold anything already, the start is the parent's own only if the
//     child's decision subject holds a start naming this parent and
//     activation (a start written by an earlier decision of the same
//     activation: a coordinator that crashed, or one that decided from
//     another state). Otherwise the child was pre-empted: the parent's
//     decisions are written as decided, and then engine.PreemptedNotice,
//     which fails the node saying why; the run under the child's id is
//     never taken for it.
//   - a run folded from the log, rather than from the cache, has each
//     child run its nodes wait for checked the same way (checkChildren),
//     so that a coordinator that died between the parent's decisions and
//     the notice leaves no node waiting forever for a child that will
//     never report.
//   - a start that claims a parent from a client's subject (an attack, or
//     a child run an older Weft started) keeps its run from existing; when
//     one of its events comes, the parent is told (claimedChild), if the
//     claim is for the id the parent's activation derives: its node, if it
//     waits for that child, fails rather than waits forever.

// startChildren appends the starts of the child runs a decision starts,
// and returns the ones it could not start as this run's (see above).
func (c *Coordinator) startChildren(ctx context.Context, run string, starts []*events.Event) ([]decider.WaitingChild, error) {
	var preempted []decider.WaitingChild
	for _, start := range starts {
		p, err := start.Payload()
		if err != nil {
			return nil, err
		}
		parent := p.(*events.RunStartedData).Parent
		ref := parent.Ref
		telemetry.Inject(ctx, start)
		_, err = c.store.AppendDecisions(ctx, start.RunID, 0, start)
		if err == nil {
			continue
		}
		if !errors.Is(err, events.ErrRunExists) {
			return nil, fmt.Errorf("starting child run %s: %w", start.RunID, err)
		}
		own, err := c.ownChild(ctx, run, ref, start.RunID)
		if err != nil {
			return nil, err
		}
		if !own {
			preempted = append(preempted, decider.WaitingChild{Ref: ref, RunID: start.RunID, Attempt: parent.Attempt})
		}
	}
	return preempted, nil
}

// ownChild reports whether child run child's start is the one run
// parent's activation ref wrote: a decision naming them, on the child's
// decision subject, which only the coordinator role may write.
func (c *Coordinator) ownChild(ctx context.Context, parent string, ref events.NodeRef, child string) (bool, error) {
	start, err := c.decidedStart(ctx, child)
	if err != nil {
		return false, fmt.Errorf("reading the start of child run %s: %w", child, err)
	}
	return decider.IsChildStart(start, parent, ref, child), nil
}

// decidedStart returns the start on a run's decision subject (a child
// run's), or nil when there is none: read from the stream leader, so one
// appended is never missed. A store with no JetStream (the simulator's)
// is read from the run's start instead.
func (c *Coordinator) decidedStart(ctx context.Context, run string) (*events.Event, error) {
	if c.js == nil {
		evs, err := c.store.Read(ctx, run, 1, 0)
		if errors.Is(err, events.ErrRunNotFound) {
			return nil, nil
		}
		for _, e := range evs {
			if e.Type == events.RunStarted && e.IsDecision() {
				return e, nil
			}
		}
		return nil, err
	}
	m, err := eventlog.LeaderFirst(ctx, c.store, eventlog.ChildStartedSubject(run))
	if err != nil || m == nil {
		return nil, err
	}
	return events.DecodeStored(m.Subject, m.Header, m.Data, m.Sequence, m.Time), nil
}

// tellPreempted fails the nodes of run whose child runs were pre-empted:
// one engine.PreemptedNotice each, a notice outside the run's concurrency
// check (as a child's end is), which the run's fold takes as the child's
// failed end.
func (c *Coordinator) tellPreempted(ctx context.Context, run string, preempted []decider.WaitingChild, claimed bool) error {
	for _, p := range preempted {
		notice := decider.PreemptedNoticeFor(run, p, claimed, c.opts.now())
		if notice == nil {
			continue
		}
		msg := "a child run's id holds another writer's events: not taking that run for the child, failing the node"
		if claimed {
			msg = "a run's start claims to be a child of this run from a client's subject: not taking it for the child, failing the node if it waits for that id"
		}
		c.log.WarnContext(ctx, msg, logattr.RunID, run, logattr.NodeID, p.Ref.Node, logattr.Iteration, p.Ref.Iteration, logattr.Child, p.RunID)
		telemetry.Inject(ctx, notice)
		if _, err := c.store.Append(ctx, run, events.AnySeq, notice); err != nil {
			return fmt.Errorf("telling run %s that child run %s was pre-empted: %w", run, p.RunID, err)
		}
		if !claimed {
			c.n.preempted.Add(1)
		}
	}
	return nil
}

// checkChildren checks, for a run folded from the log, that each child run
// its nodes wait for is its own (see above), and fails the nodes whose
// child is not.
func (c *Coordinator) checkChildren(ctx context.Context, ent *runEntry) error {
	if ent.state.Status.Ended() {
		return nil
	}
	var preempted []decider.WaitingChild
	for _, w := range decider.WaitingChildren(ent.state) {
		own, err := c.ownChild(ctx, ent.run, w.Ref, w.RunID)
		if err != nil {
			return err
		}
		if !own {
			preempted = append(preempted, w)
		}
	}
	return c.tellPreempted(ctx, ent.run, preempted, false)
}

// claimedChild handles a run whose start claims a parent from a client's
// subject (events.ParentClaimError): the run does not exist for the
// engine, and if it holds the id the claimed parent's activation derives,
// that parent's node is told its child will never be (a notice that
// changes nothing unless the node waits for exactly this child). Each
// claimed child is told of once per coordinator process (and the notice
// is de-duplicated by its id), so a claimed run's events, which anyone
// may write, do not fill its parent's log.
func (c *Coordinator) claimedChild(ctx context.Context, child string, claim *events.ParentClaimError) error {
	p := claim.Parent
	if p.Ref.Item != nil || p.RunID == child || !eventlog.ValidToken(p.RunID) || c.claims.has(child) {
		return nil
	}
	nonce, ok, err := c.nonceOf(ctx, p.RunID)
	if err != nil {
		return err
	}
	derived := decider.ChildRunID(p.RunID, nonce, p.Ref)
	if p.Attempt > 0 {
		derived = decider.ToolChildRunID(p.RunID, nonce, p.Ref, p.Attempt)
	}
	if ok && derived == child {
		if err := c.tellPreempted(ctx, p.RunID, []decider.WaitingChild{{Ref: p.Ref, RunID: child, Attempt: p.Attempt}}, true); err != nil {
			return err
		}
	}
	c.claims.add(child)
	return nil
}

// maxClaims bounds the claimed children a coordinator remembers.
const maxClaims = 4096

// claimSet is the set of claimed children told of (claimedChild), cleared
// when it outgrows maxClaims.
type claimSet struct {
	mu   sync.Mutex
	runs map[string]struct{}
}

func (s *claimSet) has(run string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.runs[run]
	return ok
}

func (s *claimSet) add(run string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runs == nil || len(s.runs) >= maxClaims {
		s.runs = map[string]struct{}{}
	}
	s.runs[run] = struct{}{}
}

// nonceOf returns the nonce of a run's start; ok is false when the run has
// no start the engine believes. It reads the log, not the run's cached
// entry, which only the goroutine handling that run may touch.
func (c *Coordinator) nonceOf(ctx context.Context, run string) (string, bool, error) {
	var start *events.Event
	if c.js == nil {
		evs, err := c.store.Read(ctx, run, 1, 0)
		if err != nil && !errors.Is(err, events.ErrRunNotFound) {
			return "", false, err
		}
		if len(evs) > 0 {
			start = evs[0]
		}
	} else {
		// A child's start first (only the coordinator writes it), then a
		// client's; the first on the subject: a writer may add others
		// after it, which the fold refuses.
		for _, subject := range []string{eventlog.ChildStartedSubject(run), eventlog.StartedSubject(run)} {
			m, err := eventlog.LeaderFirst(ctx, c.store, subject)
			if err != nil {
				return "", false, err
			}
			if m != nil {
				start = events.DecodeStored(m.Subject, m.Header, m.Data, m.Sequence, m.Time)
				break
			}
		}
	}
	if start == nil || start.Refused != nil || start.Type != events.RunStarted {
		return "", false, nil
	}
	p, err := start.Payload()
	if err != nil {
		return "", false, nil
	}
	return p.(*events.RunStartedData).Nonce, true, nil
}
