package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/internal/readmodel"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// apiError is an answer's error: its status, message and the parameter or
// body field to blame, if one is.
type apiError struct {
	Status  int    `json:"-"`
	Message string `json:"error"`
	Field   string `json:"field,omitempty"`
}

func (e *apiError) Error() string { return e.Message }

// badParam is a 400 that names the parameter.
func badParam(field, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Message: field + ": " + fmt.Sprintf(format, args...), Field: field}
}

// writeJSON writes v as the answer. encoding/json escapes <, > and & in
// strings, so event data never reads as markup even where a browser
// sniffs.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(v); err != nil {
		status = http.StatusInternalServerError
		b.Reset()
		_ = json.NewEncoder(&b).Encode(apiError{Message: "encoding the answer: " + err.Error()})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

func writeError(w http.ResponseWriter, status int, msg, field string) {
	writeJSON(w, status, apiError{Message: msg, Field: field})
}

// fail answers err with the status it calls for.
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	e := classify(err)
	if r.Method == http.MethodPost && e.Status == http.StatusServiceUnavailable {
		// An append the server's NATS user may not make is dropped
		// without an answer: it looks like a NATS that does not answer.
		e.Message += " (if this server connects as Weft's ui role, it may not act: give it the client role's credentials, or run it with -read-only)"
	}
	if e.Status >= 500 {
		s.log.Warn("ui: answering with an error", logattr.Method, r.Method, logattr.Path, r.URL.Path, logattr.Status, e.Status, logattr.Error, err)
	}
	writeJSON(w, e.Status, e)
}

// classify maps an error of the client library or of NATS to an answer.
func classify(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var mbe *http.MaxBytesError
	msg := err.Error()
	switch {
	case errors.As(err, &mbe):
		return &apiError{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("body larger than %d bytes", mbe.Limit), Field: "body"}
	case errors.Is(err, events.ErrRunNotFound), errors.Is(err, readmodel.ErrNotFound), errors.Is(err, client.ErrScheduleNotFound):
		return &apiError{Status: http.StatusNotFound, Message: msg}
	case errors.Is(err, client.ErrNoSuchPosition):
		return &apiError{Status: http.StatusNotFound, Message: msg, Field: "at"}
	case errors.Is(err, events.ErrInvalidID):
		return &apiError{Status: http.StatusBadRequest, Message: msg, Field: "id"}
	case errors.Is(err, graph.ErrUnknownNode):
		return &apiError{Status: http.StatusBadRequest, Message: msg, Field: "node"}
	case errors.Is(err, client.ErrInvalidInput):
		return &apiError{Status: http.StatusBadRequest, Message: msg, Field: "data"}
	case errors.Is(err, client.ErrRunEnded), errors.Is(err, client.ErrSignalRefused),
		errors.Is(err, client.ErrIncompatibleGraph), errors.Is(err, projection.ErrForkChild), errors.Is(err, projection.ErrInvalidForkState):
		return &apiError{Status: http.StatusConflict, Message: msg}
	case unreachable(err):
		return &apiError{Status: http.StatusServiceUnavailable, Message: "NATS is not reachable: " + msg}
	}
	return &apiError{Status: http.StatusInternalServerError, Message: msg}
}

// unreachable says whether err means NATS did not answer.
func unreachable(err error) bool {
	for _, target := range []error{
		nats.ErrConnectionClosed, nats.ErrConnectionReconnecting, nats.ErrDisconnected,
		nats.ErrNoServers, nats.ErrTimeout, nats.ErrNoResponders,
		jetstream.ErrNoStreamResponse, jetstream.ErrJetStreamNotEnabled,
		context.DeadlineExceeded,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}
