package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/weft-dev/weft/internal/logattr"
	"math"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/batch"
	"github.com/weft-dev/weft/internal/batchops"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
)

// The actions of this file: batch jobs over a selection of runs (the
// durable jobs of internal/batch, as 'weft batch' runs them), a run reset
// from a node, and a run started from a graph (one already run, or one
// pasted). Batch jobs write the weft-batches bucket, which under the roles
// only the admin may: the server finds out once (rights) and says why
// not, so that the page disables those actions and labels them.

// maxBatchRuns is the most runs one batch job of the UI takes.
const maxBatchRuns = 1000

// uiBatchOps are the operations the UI's batch actions offer.
var uiBatchOps = []string{"cancel", "terminate", "signal", "reset", "delete"}

// rights are what the server's NATS user may do beyond reading: a
// client's actions on runs (start, signal, cancel, fork, reset), and batch
// jobs.
type rights struct {
	Actions    bool   `json:"actions"`
	ActionsWhy string `json:"actionsWhy,omitempty"`
	Batch      bool   `json:"batch"`
	BatchWhy   string `json:"batchWhy,omitempty"`
}

// rights finds out, once, whether the server may run batch jobs: its
// user writes the weft-batches bucket. The probe is a publish whose
// expected last sequence no key can have, so JetStream refuses it
// (writable: the refusal comes back) and nothing is stored; a user that
// may not publish there gets no answer.
func (s *server) rights() rights {
	s.rightsOnce.Do(func() {
		if s.cfg.ReadOnly {
			s.rightsAre = rights{ActionsWhy: "the UI is read-only", BatchWhy: "the UI is read-only"}
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
		defer cancel()
		s.rightsAre.Actions = true
		if err := s.probeActions(ctx); err != nil {
			s.log.Info("ui: actions off: this server's NATS user may not write runs' events", logattr.Error, err)
			s.rightsAre = rights{ActionsWhy: "this UI's NATS user may not act on runs (it reads only: Weft's ui role)"}
		}
		jobs, err := batch.Open(ctx, s.js, 1, true)
		if err == nil {
			err = probeWrite(ctx, s.js, "$KV."+batch.Bucket+".probe")
		}
		if err != nil {
			s.log.Info("ui: batch actions off: this server's NATS user may not write batch jobs", logattr.Error, err)
			s.rightsAre.BatchWhy = "this UI's NATS user may not run batch jobs (the admin's role may)"
			return
		}
		s.jobs, s.rightsAre.Batch = jobs, true
	})
	return s.rightsAre
}

// probeActions says whether the connection may append a client's events
// (nil): a cancel request's subject of a run no one has, probed as
// probeWrite does. Where the stream takes clients' events through the
// engine's admission (a namespace), the client asks the coordinators
// instead, and the answer to each action says.
func (s *server) probeActions(ctx context.Context) error {
	if st, err := s.js.Stream(ctx, s.cfg.Store.StreamName()); err == nil && eventlog.AdmissionOn(st.CachedInfo().Config) {
		return nil
	}
	run := "probe-" + eventlog.RandomID()
	ev, err := events.New(run, eventlog.RandomID(), time.Time{}, &events.RunCancelRequestedData{Reason: "probe"})
	if err != nil {
		return err
	}
	return probeWrite(ctx, s.js, ev.Subject())
}

// probeWrite says whether the connection may publish on subject of a
// stream (nil), without writing anything: the publish expects a last
// sequence no subject has, so JetStream refuses it, and a user that may
// not publish there gets no answer at all.
func probeWrite(ctx context.Context, js jetstream.JetStream, subject string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := js.Publish(ctx, subject, nil, jetstream.WithExpectLastSequencePerSubject(math.MaxInt64))
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
		return nil
	}
	if err == nil {
		return errors.New("the probe was stored")
	}
	return err
}

// batchRequest is a batch action on a selection: Node is the node to
// signal or to reset each run to (signal and reset only), Data the
// signal's data as JSON text (signal only; none sends no data).
type batchRequest struct {
	Operation string   `json:"operation"`
	Runs      []string `json:"runs"`
	Reason    string   `json:"reason"`
	Node      string   `json:"node"`
	Data      string   `json:"data"`
}

// startBatch answers POST /api/batches: a durable batch job over the runs,
// run by this server; GET /api/batches/{id} reads its progress.
func (s *server) startBatch(w http.ResponseWriter, r *http.Request) {
	var req batchRequest
	if err := decodeBody(r, &req, false); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := checkBatch(req); err != nil {
		s.fail(w, r, err)
		return
	}
	if rt := s.rights(); !rt.Batch {
		writeError(w, http.StatusForbidden, rt.BatchWhy, "")
		return
	}
	j := &batch.Job{ID: "b-" + events.NewRunID(), Op: req.Operation, Runs: req.Runs, Rate: 50, By: "ui " + s.cl.Identity(), Created: time.Now().UTC()}
	j.Args = batchArgs(req)
	ctx, cancel := readCtx(r)
	defer cancel()
	if _, err := s.jobs.Create(ctx, j); err != nil {
		s.fail(w, r, err)
		return
	}
	host, _ := os.Hostname()
	j, rev, err := s.jobs.Claim(ctx, j.ID, fmt.Sprintf("ui %s:%d", host, os.Getpid()), false)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	go func() {
		// The job outlives the request; a server stopped mid-job leaves
		// it for 'weft batch resume'.
		if _, err := s.jobs.Run(context.Background(), j, rev, batchops.Do(j, s.cl, s.cfg.Store), nil); err != nil {
			s.log.Warn("ui: batch job stopped", logattr.Job, j.ID, logattr.Error, err)
		}
	}()
	writeJSON(w, http.StatusAccepted, map[string]string{"id": j.ID})
}

// batchArgs are the job's arguments, as 'weft batch' gives them: the
// reason, the node, and the signal's data (compacted).
func batchArgs(req batchRequest) map[string]string {
	args := map[string]string{}
	if req.Reason != "" {
		args["reason"] = req.Reason
	}
	if req.Node != "" {
		args["node"] = req.Node
	}
	if strings.TrimSpace(req.Data) != "" {
		var b bytes.Buffer
		if json.Compact(&b, []byte(req.Data)) == nil {
			args["data"] = b.String()
		}
	}
	if len(args) == 0 {
		return nil
	}
	return args
}

// checkBatch says what is wrong with a batch request.
func checkBatch(req batchRequest) error {
	if !slices.Contains(uiBatchOps, req.Operation) {
		return badParam("operation", "%q: want cancel, terminate, signal, reset or delete", req.Operation)
	}
	if err := checkBatchArgs(req); err != nil {
		return err
	}
	switch {
	case len(req.Runs) == 0:
		return badParam("runs", "select at least one run")
	case len(req.Runs) > maxBatchRuns:
		return badParam("runs", "%d runs: at most %d in one batch (use 'weft batch -q' for more)", len(req.Runs), maxBatchRuns)
	}
	for i, id := range req.Runs {
		if !eventlog.ValidToken(id) {
			return badParam("runs", "[%d] %q is not a run id", i, id)
		}
		if slices.Contains(req.Runs[:i], id) {
			return badParam("runs", "[%d] %s given twice", i, id)
		}
	}
	return nil
}

// checkBatchArgs says what is wrong with a batch request's node and data:
// signal and reset need a node; only signal takes data, and it must be
// JSON.
func checkBatchArgs(req batchRequest) error {
	withNode := batch.Takes(req.Operation, "node")
	switch {
	case withNode && req.Node == "":
		return badParam("node", "the node to %s is required", map[string]string{"signal": "signal", "reset": "reset each run to"}[req.Operation])
	case withNode && !eventlog.ValidToken(req.Node):
		return badParam("node", "%q is not a node id", req.Node)
	case !withNode && req.Node != "":
		return badParam("node", "a node is for signal and reset only, not %s", req.Operation)
	case !batch.Takes(req.Operation, "data") && req.Data != "":
		return badParam("data", "data is for signal only, not %s", req.Operation)
	}
	if d := strings.TrimSpace(req.Data); d != "" && !json.Valid([]byte(d)) {
		var v any
		err := json.Unmarshal([]byte(d), &v)
		return badParam("data", "not JSON: %v", err)
	}
	return nil
}

// getBatch answers GET /api/batches/{id}: the job, its state, its tally
// and each run's outcome.
func (s *server) getBatch(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := batch.CheckID(id); err != nil {
		s.fail(w, r, badParam("id", "%v", err))
		return
	}
	ctx, cancel := readCtx(r)
	defer cancel()
	jobs, err := batch.Open(ctx, s.js, 1, false)
	if err != nil {
		s.fail(w, r, &apiError{Status: http.StatusNotFound, Message: err.Error()})
		return
	}
	j, _, err := jobs.Job(ctx, id)
	if errors.Is(err, batch.ErrUnknownJob) {
		s.fail(w, r, &apiError{Status: http.StatusNotFound, Message: err.Error()})
		return
	} else if err != nil {
		s.fail(w, r, err)
		return
	}
	outs, err := jobs.Outcomes(ctx, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	rows := make([]batch.Outcome, 0, len(j.Runs))
	for _, run := range j.Runs {
		if o, ok := outs[run]; ok {
			rows = append(rows, o)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"job": j, "state": j.State(time.Now()), "tally": batch.TallyOf(j, outs), "outcomes": rows})
}

type resetRequest struct {
	Node string `json:"node"`
}

// reset answers POST /api/runs/{id}/reset: the run forked from just
// before the node last ran, and cancelled ('weft reset -to').
func (s *server) reset(w http.ResponseWriter, r *http.Request) {
	id, err := runID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var req resetRequest
	if err := decodeBody(r, &req, false); err != nil {
		s.fail(w, r, err)
		return
	}
	if req.Node == "" {
		s.fail(w, r, badParam("node", "the node to reset to is required"))
		return
	}
	ctx, cancel := readCtx(r)
	defer cancel()
	newID, err := s.cl.Reset(ctx, id, client.ResetTarget{Node: req.Node})
	if errors.Is(err, client.ErrNodeNeverRan) {
		s.fail(w, r, &apiError{Status: http.StatusConflict, Message: err.Error(), Field: "node"})
		return
	} else if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"runId": newID})
}

type startRequest struct {
	// Graph is a graph's YAML or JSON text; FromRun names a run whose
	// graph to run again. One of them.
	Graph   string          `json:"graph"`
	FromRun string          `json:"fromRun"`
	Input   json.RawMessage `json:"input"`
}

// start answers POST /api/runs: a new run of a pasted graph or of a run's
// graph, with an input (a JSON object).
func (s *server) start(w http.ResponseWriter, r *http.Request) {
	var req startRequest
	if err := decodeBody(r, &req, false); err != nil {
		s.fail(w, r, err)
		return
	}
	ctx, cancel := readCtx(r)
	defer cancel()
	g, err := s.startGraph(ctx, req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var opts []client.StartOption
	if len(req.Input) > 0 && string(req.Input) != "null" {
		var obj map[string]any
		if err := json.Unmarshal(req.Input, &obj); err != nil {
			s.fail(w, r, badParam("input", "want a JSON object: %v", err))
			return
		}
		opts = append(opts, client.WithInput(obj))
	}
	id, err := s.cl.Start(ctx, g, opts...)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"runId": id})
}

// startGraph is the graph a start request names.
func (s *server) startGraph(ctx context.Context, req startRequest) (*graph.Graph, error) {
	switch {
	case (req.Graph == "") == (req.FromRun == ""):
		return nil, badParam("graph", "give a graph (YAML or JSON) or a run whose graph to run (fromRun), one of them")
	case req.FromRun != "":
		if !eventlog.ValidToken(req.FromRun) {
			return nil, badParam("fromRun", "%q is not a run id", req.FromRun)
		}
		st, err := s.cl.Get(ctx, req.FromRun)
		if err != nil {
			return nil, err
		}
		g, err := graph.Parse(st.Graph, "run "+req.FromRun)
		if err != nil {
			return nil, badParam("fromRun", "its graph: %v", err)
		}
		return g, nil
	}
	g, err := graph.Parse([]byte(req.Graph), "the pasted graph")
	if err != nil {
		return nil, badParam("graph", "%v", err)
	}
	return g, nil
}
