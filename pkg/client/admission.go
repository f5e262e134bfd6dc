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
// (the namespace's stream is full), and nothing is written. Elsewhere the
// client appends itself, as before.

// append writes a client's event of run runID (expectLast as for
// events.Store.Append), through admission when the namespace has it.
func (c *Client) append(ctx context.Context, runID string, expectLast uint64, ev *events.Event) (uint64, error) {
	if js := eventstore.JetStream(c.store); js != nil {
		s, err := c.eventsStream(ctx)
		if err != nil {
			return 0, err
		}
		if eventlog.AdmissionOn(s.CachedInfo().Config) {
			return admission.Request(ctx, js.Conn(), ev)
		}
	}
	seq, err := c.store.Append(ctx, runID, expectLast, ev)
	if err != nil {
		return 0, admission.QuotaError(err, c.store.StreamName())
	}
	return seq, nil
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
