package ui

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
)

// decodeBody reads a request's JSON body into v, refusing unknown fields
// and trailing data. An empty body leaves v as it is when empty is true.
func decodeBody(r *http.Request, v any, empty bool) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	var mbe *http.MaxBytesError
	switch {
	case errors.Is(err, io.EOF) && empty:
		return nil
	case errors.Is(err, io.EOF):
		return badParam("body", "want a JSON object, got an empty body")
	case errors.As(err, &mbe):
		return err
	case err != nil:
		return badParam("body", "not the JSON this action takes: %v", err)
	}
	if dec.More() {
		return badParam("body", "more than one JSON value")
	}
	return nil
}

type signalRequest struct {
	Node string          `json:"node"`
	Data json.RawMessage `json:"data"`
	ID   string          `json:"id"`
}

// signal answers POST /api/runs/{id}/signal.
func (s *server) signal(w http.ResponseWriter, r *http.Request) {
	id, err := runID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var req signalRequest
	if err := decodeBody(r, &req, false); err != nil {
		s.fail(w, r, err)
		return
	}
	switch {
	case req.Node == "":
		s.fail(w, r, badParam("node", "the node to signal is required"))
		return
	case req.ID != "" && !eventlog.ValidToken(req.ID):
		s.fail(w, r, badParam("id", "%q: letters, digits, '_' and '-', at most %d", req.ID, eventlog.MaxTokenLen))
		return
	}
	if req.ID == "" {
		req.ID = eventlog.RandomID()
	}
	var data any
	if len(req.Data) > 0 {
		data = req.Data
	}
	ctx, cancel := readCtx(r)
	defer cancel()
	if err := s.cl.Signal(ctx, id, req.Node, data, client.WithSignalID(req.ID)); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"id": eventlog.DecisionID(id, events.SignalReceived, req.ID)})
}

type cancelRequest struct {
	Reason string `json:"reason"`
}

// cancel answers POST /api/runs/{id}/cancel.
func (s *server) cancel(w http.ResponseWriter, r *http.Request) {
	id, err := runID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var req cancelRequest
	if err := decodeBody(r, &req, true); err != nil {
		s.fail(w, r, err)
		return
	}
	ctx, cancel := readCtx(r)
	defer cancel()
	if err := s.cl.Cancel(ctx, id, req.Reason); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

type forkRequest struct {
	At *int `json:"at"`
}

// fork answers POST /api/runs/{id}/fork.
func (s *server) fork(w http.ResponseWriter, r *http.Request) {
	id, err := runID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var req forkRequest
	if err := decodeBody(r, &req, false); err != nil {
		s.fail(w, r, err)
		return
	}
	if req.At == nil || *req.At < 1 {
		s.fail(w, r, badParam("at", "want the position (1 or more) of the event to fork after"))
		return
	}
	ctx, cancel := readCtx(r)
	defer cancel()
	newID, err := s.cl.Fork(ctx, id, *req.At)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"runId": newID})
}
