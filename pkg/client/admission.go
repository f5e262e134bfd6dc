package client

import (
	"context"
	"fmt"

	"github.com/weft-dev/weft/internal/admission"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/eventstore"
	"github.com/weft-dev/weft/pkg/events"
)

// Writes. In a namespace with admission (its events stream's metadata
// says so; internal/admission), a client may not append to any run: it
// asks the namespace's coordinators, which admit its start, signal or
// cancel request within the namespace's limits and append it. A refusal
// wraps ErrAdmission (over a limit: the error says which) or ErrQuota
// (the namespace's stream is full), and nothing is written. After a
// refusal for a limit, the client refuses that kind of write itself, with
// the same error, for as long as the coordinator said it would refuse it
// anyway (at most a second): a caller that retries at once costs nobody
// anything. Elsewhere the client appends itself, as before.

// append writes a client's event of run runID (expectLast as for
// events.Store.Append), through admission when the namespace has it.
func (c *Client) append(ctx context.Context, runID string, expectLast uint64, ev *events.Event) (uint64, error) {
	admitted, err := c.admission(ctx)
	if err != nil {
		return 0, err
	}
	if admitted {
		return c.gate.Request(ctx, eventstore.JetStream(c.store).Conn(), ev)
	}
	seq, err := c.store.Append(ctx, runID, expectLast, ev)
	if err != nil {
		return 0, admission.QuotaError(err, c.store.StreamName())
	}
	return seq, nil
}

// admission says whether the client's writes pass admission: its events
// stream says so (read once).
func (c *Client) admission(ctx context.Context) (bool, error) {
	if eventstore.JetStream(c.store) == nil {
		return false, nil
	}
	s, err := c.eventsStream(ctx)
	if err != nil {
		return false, err
	}
	return eventlog.AdmissionOn(s.CachedInfo().Config), nil
}

// Namespace is the namespace the client's connection is in, as its
// events stream names it; "" for a deployment without namespaces.
func (c *Client) Namespace(ctx context.Context) (string, error) {
	if eventstore.JetStream(c.store) == nil {
		return "", nil
	}
	s, err := c.eventsStream(ctx)
	if err != nil {
		return "", fmt.Errorf("reading the namespace: %w", err)
	}
	return s.CachedInfo().Config.Metadata[eventlog.MetaNamespace], nil
}
