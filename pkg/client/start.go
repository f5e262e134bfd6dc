package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/internal/telemetry"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
)

// StartOption configures Start.
type StartOption func(*startOptions)

type startOptions struct {
	runID      string
	input      any
	invocation any
	retention  *time.Duration
	priority   int
	fairness   string
}

// WithPriority sets the run's priority, 1 (lowest) to 5 (highest; default
// 3): where its attempts wait for a concurrency slot, higher priorities
// go first. Its child runs inherit it.
func WithPriority(p int) StartOption { return func(o *startOptions) { o.priority = p } }

// WithFairnessKey sets the run's fairness key (a tenant, a user): within a
// priority, the attempts waiting for a slot take turns by key, so a key
// with few runs is not queued behind one with many. Its child runs
// inherit it.
func WithFairnessKey(k string) StartOption { return func(o *startOptions) { o.fairness = k } }

// WithRetention sets how long the run is kept once it ended, overriding
// its graph's retention and the coordinator's default (see package runs).
// A negative duration is refused by Start.
func WithRetention(d time.Duration) StartOption { return func(o *startOptions) { o.retention = &d } }

// WithInput sets the run's input: a JSON object (a map, a struct, or
// json.RawMessage / []byte holding an object) that seeds the shared state,
// key by key.
func WithInput(v any) StartOption { return func(o *startOptions) { o.input = v } }

// WithInvocation sets the run's invocation state: a JSON object of runtime
// context that conditions and nodes can read and never change.
func WithInvocation(v any) StartOption { return func(o *startOptions) { o.invocation = v } }

// WithRunID starts the run under a given id instead of a new one from
// events.NewRunID. The id becomes a subject token: letters, digits, '-' and
// '_', starting with a letter or digit, at most 128 characters. Ids from
// events.NewRunID sort by time, which List relies on for its order.
func WithRunID(id string) StartOption { return func(o *startOptions) { o.runID = id } }

// Start starts a run of g and returns its id. It returns as soon as the
// run-started event is in the log; use Wait for the outcome. The
// run-started carries a random nonce (events.NewNonce), from which the
// ids of the run's child runs are derived, so that they cannot be known
// without reading the run.
//
// The run is one trace: with a TracerProvider installed, Start opens a
// "run <graph>" span (a child of the span in ctx, if any) whose context
// run-started carries and every later event of the run continues.
func (c *Client) Start(ctx context.Context, g *graph.Graph, opts ...StartOption) (string, error) {
	if g == nil {
		return "", errors.New("starting a run: nil graph")
	}
	var o startOptions
	for _, opt := range opts {
		opt(&o)
	}
	runID, err := runIDOf(o.runID)
	if err != nil {
		return "", fmt.Errorf("starting a run: %w", err)
	}
	data, err := o.runStarted(g)
	if err != nil {
		return "", fmt.Errorf("starting a run of %s: %w", g.Definition().Name, err)
	}
	data.StartedBy = c.identity
	ev, err := events.New(runID, runID, time.Time{}, data)
	if err != nil {
		return "", err
	}
	ctx = telemetry.WithProviders(ctx, c.providers)
	ctx, span := telemetry.StartRun(ctx, runID, g.Definition().Name, ev.Subject())
	defer span.End()
	telemetry.Inject(ctx, ev)
	// The event id is the run id, so JetStream takes a retried start as a
	// duplicate of the first and acknowledges it without an error. A start
	// of an id that has a history is refused here, before the append (with
	// admission, by the coordinator that appends it).
	if admitted, err := c.admission(ctx); err != nil {
		return "", fmt.Errorf("starting run %s: %w", runID, err)
	} else if !admitted {
		if _, err := c.store.LastSeq(ctx, runID); err == nil {
			return "", fmt.Errorf("starting run %s: %w", runID, events.ErrRunExists)
		} else if !errors.Is(err, events.ErrRunNotFound) {
			return "", fmt.Errorf("starting run %s: %w", runID, err)
		}
	}
	if _, err := c.append(ctx, runID, 0, ev); err != nil {
		telemetry.Fail(span, err)
		return "", fmt.Errorf("starting run %s: %w", runID, err)
	}
	c.log.DebugContext(ctx, "run started", logattr.RunID, runID, logattr.Graph, g.Definition().Name)
	return runID, nil
}

// runIDOf checks a run id given by the caller, or makes a new one when
// none is.
func runIDOf(id string) (string, error) {
	if id == "" {
		return events.NewRunID(), nil
	}
	if !eventlog.ValidToken(id) {
		return "", fmt.Errorf("run id %q: %w (letters, digits, '-' and '_', at most 128)", id, events.ErrInvalidID)
	}
	return id, nil
}

// runStarted checks the options of a start of g and makes its run-started
// event's data (but for who starts it).
func (o *startOptions) runStarted(g *graph.Graph) (*events.RunStartedData, error) {
	if o.priority != 0 && (o.priority < events.MinPriority || o.priority > events.MaxPriority) {
		return nil, fmt.Errorf("priority %d: want %d to %d", o.priority, events.MinPriority, events.MaxPriority)
	}
	var retention string
	if o.retention != nil {
		if *o.retention < 0 {
			return nil, fmt.Errorf("retention %s: must not be negative", *o.retention)
		}
		retention = o.retention.String()
	}
	input, err := jsonObject("input", o.input)
	if err != nil {
		return nil, err
	}
	invocation, err := jsonObject("invocation", o.invocation)
	if err != nil {
		return nil, err
	}
	return &events.RunStartedData{
		GraphName:   g.Definition().Name,
		GraphDigest: g.Digest(),
		Graph:       g.Canonical(),
		Input:       input,
		Invocation:  invocation,
		Retention:   retention,
		Nonce:       events.NewNonce(),
		Priority:    o.priority,
		FairnessKey: o.fairness,
	}, nil
}

// jsonObject encodes v as a compact JSON object; nil and null give nil.
func jsonObject(what string, v any) (json.RawMessage, error) {
	var raw []byte
	switch x := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		raw = x
	case []byte:
		raw = x
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("%w: %s does not encode as JSON: %v", ErrInvalidInput, what, err)
		}
		raw = b
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, fmt.Errorf("%w: %s is not valid JSON: %v", ErrInvalidInput, what, err)
	}
	if raw[0] != '{' {
		return nil, fmt.Errorf("%w: %s must be a JSON object, got %s", ErrInvalidInput, what, jsonKind(raw))
	}
	return buf.Bytes(), nil
}

// jsonData encodes a signal's data: any JSON value.
func jsonData(v any) (json.RawMessage, error) {
	var raw []byte
	switch x := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		raw = x
	case []byte:
		raw = x
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("%w: signal data does not encode as JSON: %v", ErrInvalidInput, err)
		}
		return b, nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, fmt.Errorf("%w: signal data is not valid JSON: %v", ErrInvalidInput, err)
	}
	return buf.Bytes(), nil
}

func jsonKind(raw []byte) string {
	switch raw[0] {
	case '[':
		return "a list"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	default:
		return "a number"
	}
}
