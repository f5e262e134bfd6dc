package conformance

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/workqueue"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// What the cases check, written from docs/worker-protocol.md rather than
// taken from the Go SDK, so that the kit holds the Go SDK to the document
// as it holds any other.

// refKey is an item's ref key: "<node>/<iteration>[/<item>]".
func refKey(node string, iteration int, item *int) string {
	k := node + "/" + strconv.Itoa(iteration)
	if item != nil {
		k += "/" + strconv.Itoa(*item)
	}
	return k
}

// outcomeID is the id of a worker's event about one delivery of an item:
// "<run>:<kind>:<key>:<attempt>:<delivery>".
func outcomeID(run, kind, key string, attempt, delivery int) string {
	return fmt.Sprintf("%s:%s:%s:%d:%d", run, kind, key, attempt, delivery)
}

// idempotencyKey is hex(sha256("<run>/<key>/<attempt>"))[0:32].
func idempotencyKey(run, key string, attempt int) string {
	sum := sha256.Sum256([]byte(run + "/" + key + "/" + strconv.Itoa(attempt)))
	return hex.EncodeToString(sum[:])[:32]
}

// freshIDRE matches an id written again after a squatted one: the id,
// "~" and 16 characters of Weft's base32 alphabet.
func freshIDRE(id string) *regexp.Regexp {
	return regexp.MustCompile("^" + regexp.QuoteMeta(id) + "~[0-9a-v]{16}$")
}

// seqSet is a set of stream sequences, filled from the server's
// advisories of terminated messages.
type seqSet struct {
	mu   sync.Mutex
	seqs map[uint64]bool
}

func newSeqSet() *seqSet { return &seqSet{seqs: map[uint64]bool{}} }

func (s *seqSet) onAdvisory(m *nats.Msg) {
	var a struct {
		StreamSeq uint64 `json:"stream_seq"`
	}
	if json.Unmarshal(m.Data, &a) == nil && a.StreamSeq > 0 {
		s.mu.Lock()
		s.seqs[a.StreamSeq] = true
		s.mu.Unlock()
	}
}

func (s *seqSet) has(seq uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seqs[seq]
}

// compile compiles a graph definition for the kit (any node type).
func compile(def map[string]any) (*graph.Graph, error) {
	b, err := json.Marshal(def)
	if err != nil {
		return nil, err
	}
	return graph.Parse(b, "conformance", graph.AllowAnyType())
}

// chain is a graph START → nodes… → END, every node on the kit's queue.
func chain(name string, nodes ...map[string]any) map[string]any {
	edges := []map[string]any{}
	prev := "START"
	for _, n := range nodes {
		if _, ok := n["queue"]; !ok {
			n["queue"] = Queue
		}
		edges = append(edges, map[string]any{"from": prev, "to": n["id"]})
		prev = n["id"].(string)
	}
	edges = append(edges, map[string]any{"from": prev, "to": "END"})
	return map[string]any{"name": name, "nodes": nodes, "edges": edges}
}

// node is a node of the graph: its id, type, config and other fields.
func node(id, typ string, config any, fields map[string]any) map[string]any {
	n := map[string]any{"id": id, "type": typ}
	if config != nil {
		n["config"] = config
	}
	for k, v := range fields {
		n[k] = v
	}
	return n
}

// retry is a retry policy without jitter.
func retry(attempts int, initial string) map[string]any {
	return map[string]any{"maxAttempts": attempts, "initialInterval": initial, "backoffCoefficient": 2, "jitter": 0}
}

// startRun starts a run of def with input.
func (k *kit) startRun(ctx context.Context, def map[string]any, input any) (string, error) {
	g, err := compile(def)
	if err != nil {
		return "", fmt.Errorf("the kit's graph %s: %w", def["name"], err)
	}
	var opts []client.StartOption
	if input != nil {
		opts = append(opts, client.WithInput(input))
	}
	run, err := k.client.Start(ctx, g, opts...)
	if err != nil {
		return "", fmt.Errorf("starting a run of %s: %w", def["name"], err)
	}
	return run, nil
}

// history reads a run's events as the admin; none yet is no error.
func (k *kit) history(ctx context.Context, run string) ([]*events.Event, error) {
	evs, err := k.admin.Read(ctx, run, 0, 0)
	if errors.Is(err, events.ErrRunNotFound) {
		return nil, nil
	}
	return evs, err
}

// waitFor reads a run's events until cond holds of them, or ctx ends; the
// error then says what was waited for and what the run holds.
func (k *kit) waitFor(ctx context.Context, run, what string, cond func([]*events.Event) bool) ([]*events.Event, error) {
	var evs []*events.Event
	for {
		var err error
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		evs, err = k.history(rctx, run)
		cancel()
		if err == nil && cond(evs) {
			return evs, nil
		}
		if p := k.current(); p != nil {
			if err := p.unexpectedExit(); err != nil {
				return evs, err
			}
		}
		select {
		case <-ctx.Done():
			return evs, fmt.Errorf("timed out waiting for %s; run %s holds: %s", what, run, summary(evs))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitEnd waits until the run has ended and returns its state and events.
func (k *kit) waitEnd(ctx context.Context, run string) (*projection.State, []*events.Event, error) {
	evs, err := k.waitFor(ctx, run, "the run to end", func(evs []*events.Event) bool {
		return projection.Fold(evs).Status.Ended()
	})
	if err != nil {
		return nil, evs, err
	}
	return projection.Fold(evs), evs, nil
}

// wantStatus checks a run's status.
func wantStatus(st *projection.State, want projection.RunStatus, evs []*events.Event) error {
	if st.Status != want {
		why := ""
		if st.Error != nil {
			why = " (" + st.Error.Error() + ")"
		}
		return fmt.Errorf("run %s is %s%s, want %s; it holds: %s", st.RunID, st.Status, why, want, summary(evs))
	}
	return nil
}

// ofType returns the run's valid events of type t about node (any node
// when node is empty), in log order.
func ofType(evs []*events.Event, t events.Type, node string) []*events.Event {
	var out []*events.Event
	for _, e := range evs {
		if e.Refused == nil && e.Type == t && (node == "" || e.NodeID == node) {
			out = append(out, e)
		}
	}
	return out
}

// payload decodes an event's payload as T.
func payload[T any](e *events.Event) *T {
	p, err := e.Payload()
	if err != nil {
		return new(T)
	}
	if v, ok := any(p).(*T); ok {
		return v
	}
	return new(T)
}

// workerSubject checks that a worker's event is on its queue's subject
// for its kind: weft.r.<slot>.<run>.w.conf.<kind>.
func workerSubject(e *events.Event, kind string) error {
	if !strings.HasSuffix(e.Subject(), ".w."+Queue+"."+kind) || e.IsDecision() {
		return fmt.Errorf("%s %s is on %s, want …w.%s.%s", e.Type, e.ID, e.Subject(), Queue, kind)
	}
	return nil
}

// jsonEqual reports whether two JSON texts hold the same value.
func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// mustJSON encodes v.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// summary lists a run's events briefly, for a failure's message.
func summary(evs []*events.Event) string {
	if len(evs) == 0 {
		return "no events"
	}
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "\n    %d %s", e.Seq, strings.TrimPrefix(strings.TrimSuffix(string(e.Type), ".v1"), "dev.weft."))
		if e.Refused != nil {
			fmt.Fprintf(&b, " REFUSED (%v)", e.Refused)
			continue
		}
		if e.NodeID != "" {
			fmt.Fprintf(&b, " %s attempt %d", e.NodeID, e.Attempt)
		}
		fmt.Fprintf(&b, " id %s", e.ID)
		if d := string(e.Data); len(d) > 0 {
			if len(d) > 160 {
				d = d[:160] + "…"
			}
			fmt.Fprintf(&b, " %s", d)
		}
	}
	return b.String()
}

// consumer is the queue consumer's state, as the admin sees it.
func (k *kit) consumer(ctx context.Context) (*jetstream.ConsumerInfo, error) {
	c, err := k.adminJS.Consumer(ctx, k.admin.StreamName(), workqueue.QueueConsumer(Queue))
	if err != nil {
		return nil, err
	}
	return c.Info(ctx)
}

// waitDelivered waits until the queue's consumer has delivered the
// message at seq at least once.
func (k *kit) waitDelivered(ctx context.Context, seq uint64) error {
	for {
		info, err := k.consumer(ctx)
		if err == nil && info.Delivered.Stream >= seq {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the queue never delivered the item at sequence %d (consumer: %+v, last error %v)", seq, info, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// sleepCtx sleeps d, or less when ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
