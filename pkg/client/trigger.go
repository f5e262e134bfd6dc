package client

import (
	"context"
	"fmt"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/trigger"
	"github.com/weft-dev/weft/pkg/graph"
)

// Event triggers start one run per message on a subject of a JetStream
// stream (internal/trigger has the details): the run id derives from the
// message's Nats-Msg-Id or an -id expression, so a message that comes
// again starts no second run.

// Trigger is an event trigger's definition.
type Trigger = trigger.Definition

// TriggerState is what the coordinators recorded of a trigger: runs
// started, duplicates, messages filtered out, bad messages.
type TriggerState = trigger.State

// Errors of triggers.
var (
	ErrTriggerNotFound = trigger.ErrNotFound
	ErrTriggerExists   = trigger.ErrExists
)

// TriggerOptions are a trigger's settings: the stream (default: the one
// that captures the subject) and the CEL expressions.
type TriggerOptions struct {
	Stream string
	Filter string
	Input  string
	ID     string
	// Webhook names the webhook of 'weft serve' that publishes on the
	// subject: the trigger's runs are then labelled as its.
	Webhook string
}

func (c *Client) triggers(ctx context.Context) (*trigger.Store, error) {
	return trigger.Open(ctx, eventlog.JetStream(c.store))
}

// CreateTrigger creates trigger name: every message on subject starts a
// run of g. The expressions are compiled and the stream checked first;
// nothing is created when one is wrong.
func (c *Client) CreateTrigger(ctx context.Context, name, subject string, g *graph.Graph, o TriggerOptions) (*Trigger, error) {
	if g == nil {
		return nil, fmt.Errorf("creating trigger %s: -graph: required", name)
	}
	d := &Trigger{Name: name, Subject: subject, Stream: o.Stream, Filter: o.Filter, Input: o.Input, ID: o.ID, Webhook: o.Webhook, CreatedAt: time.Now().UTC()}
	d.SetGraph(g)
	ts, err := c.triggers(ctx)
	if err != nil {
		return nil, err
	}
	if err := ts.Create(ctx, d); err != nil {
		return nil, fmt.Errorf("creating trigger %s: %w", name, err)
	}
	return d, nil
}

// ListTriggers lists the triggers.
func (c *Client) ListTriggers(ctx context.Context) ([]*Trigger, error) {
	ts, err := c.triggers(ctx)
	if err != nil {
		return nil, err
	}
	return ts.List(ctx)
}

// TriggerDescription is a trigger with what it did.
type TriggerDescription struct {
	Trigger *Trigger     `json:"trigger"`
	State   TriggerState `json:"state"`
	// Pending counts the messages waiting in its consumer (-1: unknown).
	Pending int64 `json:"pending"`
}

// DescribeTrigger returns a trigger, its counts and its latest bad
// messages.
func (c *Client) DescribeTrigger(ctx context.Context, name string) (*TriggerDescription, error) {
	ts, err := c.triggers(ctx)
	if err != nil {
		return nil, err
	}
	d, _, err := ts.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	st, _, err := ts.State(ctx, name)
	if err != nil {
		return nil, err
	}
	out := &TriggerDescription{Trigger: d, State: *st, Pending: -1}
	if cons, err := eventlog.JetStream(c.store).Consumer(ctx, d.Stream, trigger.ConsumerName(name)); err == nil {
		out.Pending = int64(cons.CachedInfo().NumPending) + int64(cons.CachedInfo().NumAckPending)
	}
	return out, nil
}

// PauseTrigger pauses a trigger: its messages wait in the stream.
func (c *Client) PauseTrigger(ctx context.Context, name, note string) error {
	ts, err := c.triggers(ctx)
	if err != nil {
		return err
	}
	return ts.SetPaused(ctx, name, true, note)
}

// UnpauseTrigger resumes a paused trigger.
func (c *Client) UnpauseTrigger(ctx context.Context, name string) error {
	ts, err := c.triggers(ctx)
	if err != nil {
		return err
	}
	return ts.SetPaused(ctx, name, false, "")
}

// DeleteTrigger deletes a trigger and (through the coordinators) its
// consumer; its runs stay.
func (c *Client) DeleteTrigger(ctx context.Context, name string) error {
	ts, err := c.triggers(ctx)
	if err != nil {
		return err
	}
	return ts.Delete(ctx, name)
}
