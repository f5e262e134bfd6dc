package trigger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/expr"
	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/internal/schedule"
	"github.com/weft-dev/weft/internal/setup"
	"github.com/weft-dev/weft/pkg/events"
)

// Concurrency is how many messages of one trigger a runner handles at
// once.
const Concurrency = 64

// Runner consumes the triggers' streams and starts their runs. Every
// coordinator process runs one; they share each trigger's consumer.
type Runner struct {
	store events.Store
	js    jetstream.JetStream
	kv    jetstream.KeyValue
	keys  jetstream.KeyValue
	log   *slog.Logger

	mu     sync.Mutex
	active map[string]*active
	wg     sync.WaitGroup
}

// active is a trigger being consumed.
type active struct {
	def    *Definition
	rev    uint64
	cancel context.CancelFunc
	done   chan struct{}
}

// Option configures a Runner.
type Option func(*Runner)

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(r *Runner) { r.log = l } }

// NewRunner returns the runner of store's deployment's triggers.
func NewRunner(store events.Store, opts ...Option) *Runner {
	r := &Runner{store: store, js: eventlog.JetStream(store), log: slog.Default(), active: map[string]*active{}}
	for _, o := range opts {
		o(r)
	}
	r.log = r.log.With(logattr.Component, "triggers")
	return r
}

// Run consumes the triggers until ctx ends.
func (r *Runner) Run(ctx context.Context) error {
	err := setup.Retry(ctx, r.log, "opening the schedules buckets", nil, func(ctx context.Context) error {
		// Created when missing, as the schedule runner does (under the
		// roles the admin created them): waiting for the other runner
		// to create them left this one backing off for seconds.
		replicas, err := setup.StreamReplicas(ctx, r.js, r.store.StreamName())
		if err != nil {
			return err
		}
		cfgs := schedule.KVConfigs(replicas)
		if r.kv, err = setup.EnsureKV(ctx, r.js, cfgs[0], r.log); err != nil {
			return err
		}
		r.keys, err = setup.EnsureKV(ctx, r.js, cfgs[1], r.log)
		return err
	})
	if err != nil {
		return nil //nolint:nilerr // ctx ended
	}
	defer func() {
		r.mu.Lock()
		for _, a := range r.active {
			a.cancel()
		}
		r.mu.Unlock()
		r.wg.Wait()
	}()
	for ctx.Err() == nil {
		w, err := r.kv.Watch(ctx, defPrefix+">")
		if err != nil {
			if !sleep(ctx, time.Second) {
				return nil
			}
			continue
		}
		for e := range w.Updates() {
			if e != nil {
				r.onDefinition(ctx, e)
			}
		}
		_ = w.Stop()
		sleep(ctx, 100*time.Millisecond)
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (r *Runner) onDefinition(ctx context.Context, e jetstream.KeyValueEntry) {
	name := strings.TrimPrefix(e.Key(), defPrefix)
	r.mu.Lock()
	old := r.active[name]
	delete(r.active, name)
	r.mu.Unlock()
	if old != nil {
		old.cancel()
		<-old.done
	}
	if e.Operation() != jetstream.KeyValuePut {
		if old != nil {
			// The consumer goes with the trigger.
			if err := r.js.DeleteConsumer(ctx, old.def.Stream, ConsumerName(name)); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
				r.log.Warn("deleting a deleted trigger's consumer", logattr.Trigger, name, logattr.Error, err)
			}
		}
		return
	}
	var d Definition
	b, err := schedule.OpenDefinition(e.Key(), e.Value())
	if err == nil {
		err = json.Unmarshal(b, &d)
	}
	if err != nil {
		r.log.Error("a trigger definition that does not decode", logattr.Trigger, name, logattr.Error, err)
		return
	}
	progs, err := d.compile()
	if err != nil || d.Name != name {
		r.log.Error("a trigger definition that does not compile", logattr.Trigger, name, logattr.Error, err)
		return
	}
	cctx, cancel := context.WithCancel(ctx)
	a := &active{def: &d, rev: e.Revision(), cancel: cancel, done: make(chan struct{})}
	r.mu.Lock()
	r.active[name] = a
	r.mu.Unlock()
	if d.Paused {
		// Its messages wait in the stream.
		close(a.done)
		return
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer close(a.done)
		c := &consumer{r: r, def: &d, progs: progs}
		c.run(cctx)
	}()
}

// consumer consumes one trigger.
type consumer struct {
	r     *Runner
	def   *Definition
	progs programs
	key   []byte

	started, duplicates, filtered, bad atomic.Int64
	mu                                 sync.Mutex
	lastBad                            []BadMessage
}

// run consumes the trigger's messages, starting a run of each, until ctx
// ends; it sets the consumer up again after a failure.
func (c *consumer) run(ctx context.Context) {
	log := c.r.log.With(logattr.Trigger, c.def.Name)
	c.loadKey(ctx, log)
	var flushes sync.WaitGroup
	flushCtx, stopFlush := context.WithCancel(context.WithoutCancel(ctx))
	flushes.Go(func() {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				c.flush(flushCtx)
				return
			case <-t.C:
				c.flush(flushCtx)
			}
		}
	})
	defer func() { flushes.Wait(); stopFlush() }()
	for ctx.Err() == nil {
		if !c.consume(ctx, log) {
			return
		}
	}
}

// loadKey reads (or makes) the trigger's key, trying again each second
// until it has it or ctx ends.
func (c *consumer) loadKey(ctx context.Context, log *slog.Logger) {
	for ctx.Err() == nil {
		key, err := schedule.EnsureKey(ctx, c.r.keys, "trigger", c.def.Name)
		if err == nil {
			c.key = key
			return
		}
		log.Warn("reading the trigger's key", logattr.Error, err)
		if !sleep(ctx, time.Second) {
			return
		}
	}
}

// consume sets the trigger's consumer up and hands its messages to
// Concurrency handlers until its iterator closes; false when ctx ended
// while it waited to try again after a failure.
func (c *consumer) consume(ctx context.Context, log *slog.Logger) bool {
	cons, err := setup.EnsureConsumer(ctx, c.r.js, c.def.Stream, jetstream.ConsumerConfig{
		Durable:       ConsumerName(c.def.Name),
		Description:   "Weft trigger " + c.def.Name + ": starts a run per message",
		FilterSubject: c.def.Subject,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       30 * time.Second,
		MaxAckPending: 4 * Concurrency,
		MaxDeliver:    -1,
	})
	if err != nil {
		log.Warn("setting up the trigger's consumer", logattr.Error, err)
		return sleep(ctx, time.Second)
	}
	iter, err := cons.Messages(jetstream.PullMaxMessages(2 * Concurrency))
	if err != nil {
		return sleep(ctx, time.Second)
	}
	stop := context.AfterFunc(ctx, iter.Drain)
	work := make([]chan jetstream.Msg, Concurrency)
	var wg sync.WaitGroup
	for i := range work {
		work[i] = make(chan jetstream.Msg, 4)
		wg.Go(func() {
			for m := range work[i] {
				c.handle(ctx, m, log)
			}
		})
	}
	distribute(ctx, iter, work)
	for _, w := range work {
		close(w)
	}
	wg.Wait()
	stop()
	return true
}

// distribute hands the iterator's messages out to the handlers' queues,
// by their identity's hash, so that two copies of one message
// (republished) are handled one after the other, and the second finds
// the first's run. It returns when the iterator is closed, or ctx ends.
func distribute(ctx context.Context, iter jetstream.MessagesContext, work []chan jetstream.Msg) {
	for {
		m, err := iter.Next()
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) || ctx.Err() != nil {
				return
			}
			continue
		}
		h := fnv.New32a()
		if id := m.Headers().Get(nats.MsgIdHdr); id != "" {
			_, _ = h.Write([]byte(id))
		} else {
			_, _ = h.Write(m.Data())
		}
		work[h.Sum32()%Concurrency] <- m
	}
}

// errBad marks a message the trigger cannot map.
type errBad struct{ error }

// handle starts the run of one message, or records why not.
func (c *consumer) handle(ctx context.Context, m jetstream.Msg, log *slog.Logger) {
	err := c.start(ctx, m)
	var bad errBad
	switch {
	case err == nil:
		_ = m.Ack()
	case errors.As(err, &bad):
		c.bad.Add(1)
		meta, _ := m.Metadata()
		b := BadMessage{Subject: m.Subject(), Error: bad.Error(), At: time.Now().UTC(), Stream: c.def.Stream}
		if meta != nil {
			b.Seq = meta.Sequence.Stream
		}
		c.mu.Lock()
		c.lastBad = append(c.lastBad, b)
		c.mu.Unlock()
		log.Warn("a message the trigger cannot map to a run", logattr.Subject, m.Subject(), logattr.Error, bad.error)
		_ = m.Term()
	default:
		n := uint64(1)
		if meta, merr := m.Metadata(); merr == nil {
			n = meta.NumDelivered
		}
		log.Warn("starting a trigger's run; the message comes again", logattr.Error, err)
		_ = m.NakWithDelay(min(time.Duration(n)*100*time.Millisecond, 5*time.Second))
	}
}

// Mapped is what a message maps to.
type Mapped struct {
	// Skip is set when the filter passed over the message.
	Skip  bool
	Key   string
	Input json.RawMessage
}

// Map applies a definition's expressions to a message: what 'weft trigger
// create' checks and the runner does. An error is the message's fault.
func Map(ctx context.Context, d *Definition, subject string, hdr nats.Header, data []byte, fallbackKey string) (*Mapped, error) {
	p, err := d.compile()
	if err != nil {
		return nil, err
	}
	return mapMsg(ctx, p, subject, hdr, data, fallbackKey)
}

// mapMsg applies a definition's compiled expressions to a message: its
// filter, then its input and its key.
func mapMsg(ctx context.Context, p programs, subject string, hdr nats.Header, data []byte, fallbackKey string) (*Mapped, error) {
	var body any
	if err := json.Unmarshal(data, &body); err != nil {
		body = string(data)
	}
	headers := map[string]any{}
	for k, vs := range hdr {
		if len(vs) > 0 {
			headers[k] = vs[0]
		}
	}
	msgID := hdr.Get(nats.MsgIdHdr)
	vars := expr.Vars{State: body, Local: map[string]any{"subject": subject, "headers": headers, "id": msgID}}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if p.filter != nil {
		ok, err := p.filter.EvalBool(ctx, vars)
		if err != nil {
			return nil, fmt.Errorf("-filter: %w", err)
		}
		if !ok {
			return &Mapped{Skip: true}, nil
		}
	}
	input, err := p.mapInput(ctx, vars, body)
	if err != nil {
		return nil, err
	}
	key, err := p.mapKey(ctx, vars, msgID, fallbackKey)
	if err != nil {
		return nil, err
	}
	return &Mapped{Input: input, Key: key}, nil
}

// mapInput is a message's run input: -input's value, else the body,
// which must be a JSON object.
func (p programs) mapInput(ctx context.Context, vars expr.Vars, body any) (json.RawMessage, error) {
	v := body
	if p.input != nil {
		var err error
		if v, err = p.input.Eval(ctx, vars); err != nil {
			return nil, fmt.Errorf("-input: %w", err)
		}
		if _, ok := v.(map[string]any); !ok {
			return nil, fmt.Errorf("-input %q: gives %s, want a JSON object", p.input.Source(), kindOf(v))
		}
	} else if _, ok := body.(map[string]any); !ok {
		return nil, fmt.Errorf("the message body is %s, not a JSON object: give -input to map it", kindOf(body))
	}
	b, _ := json.Marshal(v)
	return b, nil
}

// mapKey is a message's key, from which its run id comes: -id's value,
// else the message's id, else fallbackKey.
func (p programs) mapKey(ctx context.Context, vars expr.Vars, msgID, fallbackKey string) (string, error) {
	switch {
	case p.id != nil:
		v, err := p.id.Eval(ctx, vars)
		if err != nil {
			return "", fmt.Errorf("-id: %w", err)
		}
		var key string
		switch x := v.(type) {
		case string:
			key = x
		case float64:
			key = strconv.FormatFloat(x, 'f', -1, 64)
		}
		if key == "" {
			return "", fmt.Errorf("-id %q: gives %s, want a non-empty string", p.id.Source(), kindOf(v))
		}
		return "id:" + key, nil
	case msgID != "":
		return "msgid:" + msgID, nil
	}
	return fallbackKey, nil
}

func kindOf(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case string:
		if x == "" {
			return "an empty string"
		}
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a bool"
	}
	return fmt.Sprintf("%T", v)
}

// RunID is the run id of the message whose key is key.
func RunID(key []byte, name, msgKey string) string {
	return name + "-" + schedule.KeyedID(key, "trigger", name, msgKey)
}

func (c *consumer) start(ctx context.Context, m jetstream.Msg) error {
	fallback := ""
	if meta, err := m.Metadata(); err == nil {
		fallback = "seq:" + c.def.Stream + ":" + strconv.FormatUint(meta.Sequence.Stream, 10)
	}
	mp, err := mapMsg(ctx, c.progs, m.Subject(), m.Headers(), m.Data(), fallback)
	if err != nil {
		return errBad{err}
	}
	if mp.Skip {
		c.filtered.Add(1)
		return nil
	}
	id := RunID(c.key, c.def.Name, mp.Key)
	// A run already started under the id: the message came again
	// (redelivered, or republished under the same id). Two deliveries at
	// once both get past this look; the append below still starts one
	// run (its id is the event's, de-duplicated, and the start checks the
	// run has no history).
	if _, err := c.r.store.LastSeq(ctx, id); err == nil {
		c.duplicates.Add(1)
		return nil
	} else if !errors.Is(err, events.ErrRunNotFound) {
		return err
	}
	ev, err := events.New(id, id, time.Time{}, &events.RunStartedData{
		GraphName: c.def.GraphName, GraphDigest: c.def.GraphDigest, Graph: c.def.Graph, Input: mp.Input,
		StartedBy: startedBy(c.def),
		Trigger:   triggerRef(c.def, mp.Key),
	})
	if err != nil {
		return errBad{err}
	}
	// The engine's start, on the run's decision subject, which only the
	// coordinator role may write (events.TriggerClaimError).
	eventlog.MarkDecision(ev)
	_, err = eventlog.Append(ctx, c.r.store, id, 0, ev)
	switch {
	case err == nil:
		c.started.Add(1)
	case errors.Is(err, events.ErrRunExists):
		c.duplicates.Add(1)
	case errors.Is(err, events.ErrPayloadTooLarge), errors.Is(err, events.ErrMalformedEvent), errors.Is(err, events.ErrInvalidID):
		return errBad{err}
	default:
		return err
	}
	return nil
}

// flush adds the counts since the last flush to the trigger's state.
func (c *consumer) flush(ctx context.Context) {
	s, d, f, b := c.started.Swap(0), c.duplicates.Swap(0), c.filtered.Swap(0), c.bad.Swap(0)
	c.mu.Lock()
	bad := c.lastBad
	c.lastBad = nil
	c.mu.Unlock()
	if s == 0 && d == 0 && f == 0 && b == 0 && len(bad) == 0 {
		return
	}
	for ctx.Err() == nil {
		e, err := c.r.kv.Get(ctx, stPrefix+c.def.Name)
		var st State
		var rev uint64
		if err == nil {
			_ = json.Unmarshal(e.Value(), &st)
			rev = e.Revision()
		} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
			sleep(ctx, 100*time.Millisecond)
			continue
		}
		st.Started += s
		st.Duplicates += d
		st.Filtered += f
		st.Bad += b
		st.LastBad = append(st.LastBad, bad...)
		if len(st.LastBad) > MaxBad {
			st.LastBad = st.LastBad[len(st.LastBad)-MaxBad:]
		}
		v, _ := json.Marshal(st)
		if rev == 0 {
			_, err = c.r.kv.Create(ctx, stPrefix+c.def.Name, v)
		} else {
			_, err = c.r.kv.Update(ctx, stPrefix+c.def.Name, v, rev)
		}
		if err == nil {
			return
		}
		sleep(ctx, 10*time.Millisecond)
	}
}

// triggerRef is what a run of trigger d records of its origin: the
// trigger, or, for a trigger its definition says a webhook feeds, that
// webhook (through the trigger).
func triggerRef(d *Definition, key string) *events.TriggerRef {
	if d.Webhook != "" {
		return &events.TriggerRef{Kind: events.TriggerWebhook, Name: d.Name, Webhook: d.Webhook, Key: key}
	}
	return &events.TriggerRef{Kind: events.TriggerEvent, Name: d.Name, Key: key}
}

// startedBy is a run's StartedBy: "trigger:<name>", or
// "webhook:<webhook>" for a webhook's trigger.
func startedBy(d *Definition) string {
	if d.Webhook != "" {
		return "webhook:" + d.Webhook
	}
	return "trigger:" + d.Name
}
