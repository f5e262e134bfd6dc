package readmodel

import (
	"encoding/json"
	"strings"

	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// Waiting is a status of the read model that the fold does not have: a
// running run that does nothing but wait on a person (a human node) or a
// time (a wait node) is indexed as projection.RunWaiting, under the key
// "waiting.<run>", and its summary lists what it waits on (Summary.Waiting:
// the node, the deadline and, for a human node, the data of a signal that
// answers it). When anything else of the run is active again it goes back
// to running. 'weft list -status waiting' is then one subject filter, like
// every status.

// Waiting is one wait of a run: a node activation waiting on a person
// ("signal") or a time (projection.WaitingForTimer), until its deadline.
type Waiting struct {
	projection.Wait
	// Data is, for a human node, the data of a signal that answers it,
	// for a command to show (graph.SignalExample: from the node's
	// outputSchema, or the keys its outgoing conditions read, with ...
	// to fill in).
	Data string `json:"data,omitempty"`
}

// StatusOf is the status the read model gives a folded run: its own, or
// projection.RunWaiting for a running run that only waits.
func StatusOf(s *projection.State) projection.RunStatus {
	if s.Waiting() {
		return projection.RunWaiting
	}
	return s.Status
}

// WaitsOf lists what a running run waits on (projection.State.Waits), with
// the data that answers each human node.
func WaitsOf(s *projection.State) []Waiting {
	ws := s.Waits()
	if len(ws) == 0 {
		return nil
	}
	out := make([]Waiting, len(ws))
	var def *graph.Definition
	for i, w := range ws {
		out[i] = Waiting{Wait: w}
		if w.For != "signal" {
			continue
		}
		if w.Await != nil {
			// An agent's tool call awaiting approval: approve, or reject
			// with the reason the model is told.
			call, _ := json.Marshal(w.Await.Call)
			out[i].Data = `{"approved": true, "call": ` + string(call) + `}`
			continue
		}
		if def == nil {
			def = &graph.Definition{}
			_ = json.Unmarshal(s.Graph, def) // the fold read it already
		}
		out[i].Data = graph.SignalExample(def, w.Node)
	}
	return out
}

// IndexKey says what of a folded run its read-model entry shows that can
// change while it runs: its status and what it waits on. A coordinator
// puts the run's summary again when it changes.
func IndexKey(s *projection.State) string {
	st := StatusOf(s)
	if st != projection.RunWaiting && st != projection.RunRunning {
		return string(st)
	}
	var b strings.Builder
	b.WriteString(string(st))
	for _, w := range s.Waits() {
		b.WriteByte(' ')
		b.WriteString(w.Node)
		b.WriteByte('/')
		b.WriteString(w.For)
		if w.Deadline != nil {
			b.WriteString(w.Deadline.Format("/2006-01-02T15:04:05.999999999"))
		}
	}
	return b.String()
}

// SignalCommand is the command that answers a human node's wait in run:
// 'weft signal RUN NODE -data DATA', the data quoted for a POSIX shell.
func SignalCommand(run string, w Waiting) string {
	data := w.Data
	if data == "" {
		data = "{}"
	}
	return "weft signal " + run + " " + w.Node + " -data '" + strings.ReplaceAll(data, "'", `'\''`) + "'"
}
