// Package batchops is what a batch job (internal/batch) does to each run,
// over the client: cancel, terminate, signal, reset and delete, each
// idempotent by the job and the run, so that a job resumed after a crash
// applies nothing twice. The CLI's 'weft batch' and the UI's batch actions
// share it.
// Layer: a face, beside pkg/client.
package batchops

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/weft-dev/weft/internal/batch"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/readmodel"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
)

// Ops are the operations a batch job may do.
var Ops = []string{"cancel", "terminate", "signal", "reset", "delete"}

// errSkipped marks a run the operation does not apply to.
var errSkipped = errors.New("skipped")

// ops is the client and store the operations use.
type ops struct {
	cl    *client.Client
	store events.Store
}

// Do is job j's operation on one run, idempotent by the job and the run:
// cancel, terminate, signal and reset over cl, delete over store (the
// admin's: it purges the run's subjects).
func Do(j *batch.Job, cl *client.Client, store events.Store) batch.Do {
	s := &ops{cl: cl, store: store}
	var apply func(ctx context.Context, run string) (string, error)
	switch j.Op {
	case "cancel", "terminate":
		apply = s.request(j)
	case "signal":
		apply = s.signal(j)
	case "reset":
		apply = s.reset(j)
	case "delete":
		apply = s.remove(j)
	default:
		apply = func(context.Context, string) (string, error) {
			return "", fmt.Errorf("batch job %s: unknown operation %q", j.ID, j.Op)
		}
	}
	return func(ctx context.Context, run string) (string, string) {
		detail, err := apply(ctx, run)
		switch {
		case errors.Is(err, errSkipped):
			return batch.Skipped, strings.TrimPrefix(err.Error(), errSkipped.Error()+": ")
		case errors.Is(err, client.ErrRunEnded), errors.Is(err, readmodel.ErrNotEnded):
			return batch.Skipped, err.Error()
		case err != nil:
			return batch.Failed, err.Error()
		}
		return batch.Done, detail
	}
}

// request cancels or terminates a run. Its request's id is derived from
// the run; its reason names the job, so that a run found ended by the
// job's own request (before an interruption) counts as done.
func (s *ops) request(j *batch.Job) func(context.Context, string) (string, error) {
	tag := "(batch " + j.ID + ")"
	reason := strings.TrimSpace(j.Args["reason"] + " " + tag)
	send := s.cl.Cancel
	if j.Op == "terminate" {
		send = s.cl.Terminate
	}
	return func(ctx context.Context, run string) (string, error) {
		err := send(ctx, run, reason)
		if errors.Is(err, client.ErrRunEnded) && s.requested(ctx, run, tag) {
			return "(requested before an interruption)", nil
		}
		return "", err
	}
}

// requested reports whether run's log has a cancel request whose reason
// carries tag.
func (s *ops) requested(ctx context.Context, run, tag string) bool {
	evs, err := s.cl.History(ctx, run)
	if err != nil {
		return false
	}
	for _, ev := range evs {
		if ev.Type == events.RunCancelRequested && bytes.Contains(ev.Data, []byte(tag)) {
			return true
		}
	}
	return false
}

// signal sends the job's signal, with the id "batch-<job>": sent again,
// it changes nothing.
func (s *ops) signal(j *batch.Job) func(context.Context, string) (string, error) {
	var payload any
	if d := j.Args["data"]; d != "" {
		payload = json.RawMessage(d)
	}
	id := client.WithSignalID("batch-" + j.ID)
	return func(ctx context.Context, run string) (string, error) {
		return "", s.cl.Signal(ctx, run, j.Args["node"], payload, id)
	}
}

// reset forks the run from before the job's node was last activated, as
// ResetRunID, and cancels it. A fork found made (before an interruption)
// has its run cancelled, if it was not yet, and counts as done.
func (s *ops) reset(j *batch.Job) func(context.Context, string) (string, error) {
	node := j.Args["node"]
	return func(ctx context.Context, run string) (string, error) {
		newID := batch.ResetRunID(j.ID, run)
		_, err := s.cl.Reset(ctx, run, client.ResetTarget{Node: node}, client.WithForkRunID(newID))
		switch {
		case errors.Is(err, events.ErrRunExists):
			cerr := s.cl.Cancel(ctx, run, fmt.Sprintf("reset to node %s, new run %s", node, newID))
			if cerr != nil && !errors.Is(cerr, client.ErrRunEnded) {
				return "", fmt.Errorf("forked as %s before an interruption; cancelling it: %w", newID, cerr)
			}
			return "(new run " + newID + ", forked before an interruption)", nil
		case errors.Is(err, client.ErrNodeNeverRan), errors.Is(err, graph.ErrUnknownNode):
			return "", fmt.Errorf("%w: %w", errSkipped, err)
		case err != nil:
			return "", err
		}
		return "(new run " + newID + ")", nil
	}
}

// remove deletes an ended run (archived first, as the job's -archive
// says). A run found gone is skipped, and says so.
func (s *ops) remove(j *batch.Job) func(context.Context, string) (string, error) {
	archive := j.Args["archive"]
	if archive == "" {
		archive = "none"
	}
	return func(ctx context.Context, run string) (string, error) {
		arch, err := readmodel.ParseArchive(ctx, eventlog.JetStream(s.store), s.store.StreamName(), archive, false)
		if err != nil {
			return "", err
		}
		r, err := readmodel.Remove(ctx, s.store, run, arch)
		switch {
		case errors.Is(err, readmodel.ErrNotEnded):
			return "", fmt.Errorf("%w: has not ended: cancel or terminate it first", errSkipped)
		case errors.Is(err, events.ErrRunNotFound):
			return "", fmt.Errorf("%w: not found (deleted already, before an interruption or by someone else)", errSkipped)
		case err != nil:
			return "", err
		}
		d := fmt.Sprintf("(%d events)", r.Events)
		if r.Archived != "" {
			d += ", archived to " + r.Archived
		}
		return d, nil
	}
}
