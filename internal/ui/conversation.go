package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/worker/builtin"
)

// conversationView is an agent node's conversation, from its step events
// (GET /api/runs/{id}/conversation).
type conversationView struct {
	Node      string `json:"node"`
	Iteration int    `json:"iteration"`
	// Key is the activation's key ("node/iteration"), as the streamed
	// tokens name it.
	Key      string        `json:"key"`
	Steps    []stepView    `json:"steps"`
	Messages []messageView `json:"messages"`
	Turns    int           `json:"turns"`
	Usage    builtin.Usage `json:"usage"`
	// Live is set while the activation has not finished: its model calls
	// may stream tokens (GET /api/live/runs/{id}/tokens).
	Live bool `json:"live"`
}

// stepView is one recorded step.
type stepView struct {
	Step     int       `json:"step"`
	Kind     string    `json:"kind"`
	Tool     string    `json:"tool,omitempty"`
	Attempt  int       `json:"attempt"`
	Position int       `json:"position"`
	Time     time.Time `json:"time"`
}

// messageView is a message of the conversation, with the step that added
// it (0: the prompts the loop began with).
type messageView struct {
	builtin.Message
	Step int `json:"step"`
}

// conversation answers GET /api/runs/{id}/conversation?node=N[&iteration=I]:
// the conversation of an agent node's activation (the latest iteration by
// default) as its last step recorded it, each message with the step that
// added it, and the steps.
func (s *server) conversation(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	node := q.Get("node")
	if node == "" {
		s.fail(w, r, badParam("node", "required: the agent node's id"))
		return
	}
	iteration, err := intParam(q, "iteration", 0, 1, 1<<31-1)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx, cancel := readCtx(r)
	defer cancel()
	id, log, ok := s.runLog(ctx, w, r)
	if !ok {
		return
	}
	v, err := conversationOf(log, node, iteration)
	if err != nil {
		s.fail(w, r, &apiError{Status: http.StatusNotFound, Message: fmt.Sprintf("run %s: %v", id, err), Field: "node"})
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// conversationOf reads an activation's conversation from a run's log:
// the steps the fold counted (a stale attempt's are passed over), the
// last one's messages.
func conversationOf(log *runLog, node string, iteration int) (*conversationView, error) {
	if iteration == 0 {
		if iteration = latestIteration(log, node); iteration == 0 {
			return nil, fmt.Errorf("node %q has not run", node)
		}
	}
	v := &conversationView{Node: node, Iteration: iteration, Steps: []stepView{}, Messages: []messageView{}}
	v.Key = events.NodeRef{Node: node, Iteration: iteration}.Key()
	last, sizes := v.readSteps(log)
	if log.final != nil && log.final.Status.Ended() {
		v.Live = false
	}
	v.Turns, v.Usage = last.Turns, last.Usage
	for i, m := range last.Messages {
		step := 0
		if m.Role == "assistant" || m.Role == "tool" || len(sizes) == 0 || i >= sizes[0] {
			for k, n := range sizes {
				if i < n {
					step = v.Steps[k].Step
					break
				}
			}
		}
		v.Messages = append(v.Messages, messageView{Message: m, Step: step})
	}
	return v, nil
}

// latestIteration is the last iteration of node made ready (0: none).
func latestIteration(log *runLog, node string) int {
	it := 0
	for _, e := range log.events {
		if p, err := e.Payload(); err == nil {
			if d, ok := p.(*events.NodeReadyData); ok && d.Node == node && d.Item == nil {
				it = max(it, d.Iteration)
			}
		}
	}
	return it
}

// readSteps fills v's steps and whether the activation is live from the
// log, and returns its last step and the conversation's length after
// each step.
func (v *conversationView) readSteps(log *runLog) (last builtin.AgentStep, sizes []int) {
	for i, e := range log.events {
		p, err := e.Payload()
		if err != nil || log.folded[i] != nil {
			continue
		}
		switch d := p.(type) {
		case *events.NodeReadyData:
			v.Live = v.Live || d.NodeRef.Key() == v.Key
		case *events.NodeInvokedData:
			v.Live = v.Live && d.NodeRef.Key() != v.Key
		case *events.NodeFailedData:
			v.Live = v.Live && d.NodeRef.Key() != v.Key
		case *events.NodeStepData:
			var st builtin.AgentStep
			if d.NodeRef.Key() != v.Key || json.Unmarshal(d.Data, &st) != nil {
				continue
			}
			last = st
			sizes = append(sizes, len(st.Messages))
			v.Steps = append(v.Steps, stepView{Step: d.Step, Kind: d.Kind, Tool: st.Tool, Attempt: d.Attempt, Position: i + 1, Time: eventTime(e)})
		}
	}
	return last, sizes
}

// eventTime is the stream's timestamp of an event, else the writer's.
func eventTime(e *events.Event) time.Time {
	if !e.Stored.IsZero() {
		return e.Stored
	}
	return e.Time
}

// tokenView is one piece of streamed text.
type tokenView struct {
	Node string `json:"node"` // the activation's key
	Step int    `json:"step"`
	Text string `json:"text"`
}

// liveTokens answers GET /api/live/runs/{id}/tokens: an event "ready"
// once the server listens, then an event "token" for each piece of text
// the run's nodes stream (core NATS, outside the log: what was published
// before "ready" is not sent; the step event holds the whole message),
// until the client goes away.
func (s *server) liveTokens(w http.ResponseWriter, r *http.Request) {
	id, err := runID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	st := newStream(w)
	st.mu.Lock()
	err = st.start()
	st.mu.Unlock()
	if err != nil {
		return
	}
	stopPing := pinger(ctx, st, s.cfg.Ping, cancel)
	defer stopPing()
	ready := func() { _ = st.send("ready", "", []byte("{}")) }
	err = s.cl.FollowTokensReady(ctx, id, ready, func(tk client.Token) bool {
		b, err := json.Marshal(tokenView{Node: tk.Node, Step: tk.Step, Text: tk.Text})
		return err == nil && st.send("token", "", b) == nil
	})
	if err != nil && ctx.Err() == nil {
		b, _ := json.Marshal(apiError{Message: err.Error()})
		_ = st.send("error", "", b)
	}
}
