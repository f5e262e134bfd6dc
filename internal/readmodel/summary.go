package readmodel

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// Bucket is the KV bucket of the read model.
const Bucket = "weft-runs"

// DefaultRetention is how long an ended run is kept when neither the run
// nor its graph says otherwise, and the coordinator is not told.
const DefaultRetention = 7 * 24 * time.Hour

// Limits of search attributes.
const (
	// MaxSearchAttributes is the most attributes a graph may declare.
	MaxSearchAttributes = graph.MaxSearchAttributes
	// MaxAttrValue is the longest value kept; longer values are cut.
	MaxAttrValue = 256
)

// AttrChain is the engine's search attribute of a run of a chain of
// continuations: the chain's id (Summary.Chain).
const AttrChain = "chain"

// Summary is a run's entry in the read model.
type Summary struct {
	RunID       string               `json:"runId"`
	Graph       string               `json:"graph,omitempty"`
	GraphDigest string               `json:"graphDigest,omitempty"`
	Status      projection.RunStatus `json:"status"`
	StartedAt   time.Time            `json:"startedAt,omitzero"`
	EndedAt     time.Time            `json:"endedAt,omitzero"`
	// Parent is the run that started this one as a child, if any.
	Parent string `json:"parent,omitempty"`
	// Origin is the schedule, trigger or webhook that started the run,
	// if one did ("schedule nightly", "webhook github (trigger gh)").
	Origin string `json:"origin,omitempty"`
	// Attrs are the run's search attributes.
	Attrs map[string]string `json:"attrs,omitempty"`
	// Retention is how long the run is kept once ended; ExpiresAt, set
	// once it ended, is when it may be removed.
	Retention string    `json:"retention,omitempty"`
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
	// Terminated marks a run ended by 'weft terminate'.
	Terminated bool `json:"terminated,omitempty"`
	// ForkedFrom is the run and point a forked run was forked from.
	ForkedFrom *events.ForkRef `json:"forkedFrom,omitempty"`
	// Chain, Link and Previous place a run of a chain of continuations
	// (continue-as-new): the chain's id (its first run's), the run's
	// place in it, and the run it continues; ContinuedAs is its
	// continuation. A run that neither continues nor was continued has
	// none. The chain's id is also the engine's search attribute "chain".
	Chain       string `json:"chain,omitempty"`
	Link        int    `json:"link,omitempty"`
	Previous    string `json:"previous,omitempty"`
	ContinuedAs string `json:"continuedAs,omitempty"`
	// Restored is when the run was last put back from an archive
	// (Restore). Written by the admin before the run's messages, it is
	// what tells the coordinators that messages marked restored are
	// (eventlog.HdrRestored is a header, which any writer could set).
	Restored time.Time `json:"restored,omitzero"`
	// Waiting lists what a running run waits on: its human nodes waiting
	// for a signal and its wait nodes waiting for their time (see
	// Waiting). A run with nothing else active has status
	// projection.RunWaiting.
	Waiting []Waiting `json:"waiting,omitempty"`
}

// Key is the summary's key in the bucket: "<status>.<run>".
func (s Summary) Key() string { return key(s.Status, s.RunID) }

func key(st projection.RunStatus, run string) string { return string(st) + "." + run }

// Statuses are the statuses a run in the read model can have.
var Statuses = []projection.RunStatus{
	projection.RunRunning, projection.RunWaiting, projection.RunCancelling, projection.RunCompleted, projection.RunFailed, projection.RunCancelled,
}

// graphSettings are what the read model reads from a run's graph.
type graphSettings struct {
	Retention        string   `json:"retention"`
	SearchAttributes []string `json:"searchAttributes"`
}

// Summarize returns the read-model entry of a folded run. def is the
// retention of a run whose start and graph name none.
func Summarize(s *projection.State, def time.Duration) Summary {
	sum := Summary{
		RunID: s.RunID, Graph: s.GraphName, GraphDigest: s.GraphDigest, Status: StatusOf(s),
		Terminated: s.Cancel != nil && s.Cancel.Terminate, ForkedFrom: s.Fork, Waiting: WaitsOf(s),
	}
	if s.StartedAt != nil {
		sum.StartedAt = s.StartedAt.UTC()
	}
	if s.Parent != nil {
		sum.Parent = s.Parent.RunID
	}
	var g graphSettings
	_ = json.Unmarshal(s.Graph, &g) // the fold parsed it already
	sum.Attrs = searchAttrs(g.SearchAttributes, s.Invocation, s.Input)
	if t := s.Trigger; t != nil && (t.Kind == events.TriggerSchedule || t.Kind == events.TriggerEvent || t.Kind == events.TriggerWebhook) {
		sum.addOrigin(t)
	}
	if s.Chain != nil || s.ContinuedAs != "" {
		sum.addChain(s)
	}
	ret := retention(def, s.Retention, g.Retention)
	sum.Retention = ret.String()
	if s.Status.Ended() && s.EndedAt != nil {
		sum.EndedAt = s.EndedAt.UTC()
		sum.ExpiresAt = sum.EndedAt.Add(ret)
	}
	return sum
}

// addOrigin records the schedule or trigger that started the run: the
// engine's own attribute, "schedule=<name>" for a schedule's runs,
// "trigger=<name>" for a trigger's (a webhook is a trigger, and its runs
// are also "webhook=<webhook>"), over any the graph declares under that
// name.
func (sum *Summary) addOrigin(t *events.TriggerRef) {
	k := t.Kind
	if sum.Attrs == nil {
		sum.Attrs = map[string]string{}
	}
	if k == events.TriggerWebhook {
		k = events.TriggerEvent
		if t.Webhook != "" {
			sum.Attrs[events.TriggerWebhook] = t.Webhook
		}
	}
	sum.Attrs[k] = t.Name
	sum.Origin = t.Origin()
}

// addChain records the chain of continuations the run is a link of, and
// its AttrChain attribute.
func (sum *Summary) addChain(s *projection.State) {
	sum.Chain, sum.Link, sum.ContinuedAs = s.ChainID(), s.ChainLink(), s.ContinuedAs
	if s.Chain != nil {
		sum.Previous = s.Chain.Previous
	}
	if sum.Attrs == nil {
		sum.Attrs = map[string]string{}
	}
	sum.Attrs[AttrChain] = sum.Chain
}

// retention is the first of the settings given (the run's start's, then
// its graph's) that is a retention, else def.
func retention(def time.Duration, settings ...string) time.Duration {
	for _, r := range settings {
		if d, err := ParseRetention(r); r != "" && err == nil {
			return d
		}
	}
	return def
}

// ParseRetention reads a retention setting: a Go duration ("720h"),
// zero or more.
func ParseRetention(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("retention %q: want a duration such as 720h", v)
	}
	if d < 0 {
		return 0, fmt.Errorf("retention %q: must not be negative", v)
	}
	return d, nil
}

// searchAttrs takes the named attributes from the first of the objects
// that has each.
func searchAttrs(names []string, objs ...json.RawMessage) map[string]string {
	if len(names) == 0 {
		return nil
	}
	maps := make([]map[string]json.RawMessage, 0, len(objs))
	for _, o := range objs {
		var m map[string]json.RawMessage
		if len(o) > 0 && json.Unmarshal(o, &m) == nil {
			maps = append(maps, m)
		}
	}
	out := map[string]string{}
	for _, n := range names[:min(len(names), MaxSearchAttributes)] {
		for _, m := range maps {
			if v, ok := attrValue(m[n]); ok {
				out[n] = v
				break
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func attrValue(raw json.RawMessage) (string, bool) {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return "", false
	}
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case float64:
		s = strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		s = strconv.FormatBool(x)
	default:
		return "", false
	}
	if len(s) > MaxAttrValue {
		s = s[:MaxAttrValue]
	}
	return s, true
}

// validRun reports whether run can be a key token.
func validRun(run string) bool { return eventlog.ValidToken(run) }

// SubjectsPerRun is the most subjects a run leaves in the events stream,
// for a graph whose nodes use the given number of task queues. Subjects
// are per run and per kind of event, never per node, attempt, iteration
// or timer (pending timers live in the timers stream, one subject each,
// purged when the run ends), so the bound does not grow with a run's
// retries, loops or timers:
//
//	client:      started, signal, cancelreq                          3
//	worker:      w.<queue>.{invoking,invoked,nodefailed,
//	             nodecancelled,heartbeat}                            5 per queue
//	decisions:   completed, failed, cancelled, skipped, waiting,
//	             routed, retry, childstarted, invoked, nodefailed    10
//	             ready.<queue>                                       1 per queue
//	notices:     timer, childfinished                                2
//
// that is 15 + 6 per queue: 21 for a graph on one queue.
func SubjectsPerRun(queues int) int { return 15 + 6*queues }
