package client

import (
	"context"
	"fmt"

	"github.com/weft-dev/weft/internal/admission"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/natsconn"
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
	if err := c.inNamespace(ctx); err != nil {
		return 0, err
	}
	admitted, err := c.admission(ctx)
	if err != nil {
		return 0, err
	}
	if admitted {
		return c.gate.Request(ctx, eventlog.JetStream(c.store).Conn(), ev)
	}
	seq, err := c.store.Append(ctx, runID, expectLast, ev)
	if err != nil {
		return 0, admission.QuotaError(err, c.store.StreamName())
	}
	return seq, nil
}

// WithNamespace says which namespace the client is for: every read and
// write checks first (once) that its events stream is that namespace's,
// as the stream's metadata names it, and fails with an error wrapping
// ErrWrongNamespace when it is another's (the connection's credentials
// chose another account). DefaultNamespace is a deployment without
// namespaces.
func WithNamespace(name string) Option { return func(c *Client) { c.namespace = name } }

// DefaultNamespace names the namespace of a deployment without
// namespaces.
const DefaultNamespace = natsconn.DefaultNamespace

// ErrWrongNamespace means the client's connection is in another
// namespace than WithNamespace said.
var ErrWrongNamespace = natsconn.ErrWrongNamespace

// inNamespace checks, once, that the client's stream is WithNamespace's.
func (c *Client) inNamespace(ctx context.Context) error {
	if c.namespace == "" || eventlog.JetStream(c.store) == nil {
		return nil
	}
	c.mu.Lock()
	checked := c.nsChecked
	c.mu.Unlock()
	if checked {
		return nil
	}
	have, err := c.Namespace(ctx)
	if err != nil {
		return err
	}
	if have == "" {
		have = DefaultNamespace
	}
	if have != c.namespace {
		return fmt.Errorf("%w: the client is for namespace %s, but its connection's events stream is namespace %s's: connect with namespace %s's credentials", ErrWrongNamespace, c.namespace, have, c.namespace)
	}
	c.mu.Lock()
	c.nsChecked = true
	c.mu.Unlock()
	return nil
}

// admission says whether the client's writes pass admission: its events
// stream says so (read once).
func (c *Client) admission(ctx context.Context) (bool, error) {
	if eventlog.JetStream(c.store) == nil {
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
	if eventlog.JetStream(c.store) == nil {
		return "", nil
	}
	s, err := c.eventsStream(ctx)
	if err != nil {
		return "", fmt.Errorf("reading the namespace: %w", err)
	}
	return s.CachedInfo().Config.Metadata[eventlog.MetaNamespace], nil
}
