// Command ledgerworker is the chaos test's side-effecting worker: a worker
// process (built on the public SDK, package worker) whose one node type,
// "ledger", writes its attempt's idempotency key to a ledger, a JetStream
// KV bucket on the same cluster, with Create, so a second write of the same
// key is refused by the server and seen. Every attempt to write is also
// recorded, with what the ledger answered, on a subject of its own, so that
// the test sees re-executions that the key absorbed.
//
// The node sometimes fails, retryably, by a rule on its key (so that every
// delivery of one attempt behaves alike, and different attempts differently):
// see ledger.Rule. Attempts after ledger.MaxFailingAttempt always succeed, so a run
// with enough retries allowed always completes.
//
// The node adds a number to the run's state key "total" (a sum reducer) and
// outputs {"add": n}: n is config.add, or local.item for a mapped node.
//
// The ledger stands for an external system: under Weft's roles the worker's
// own user may not touch it, so with WEFT_LEDGER_NATS_USER and
// WEFT_LEDGER_NATS_PASSWORD set the ledger is reached over a second
// connection, as that user; without them, over the worker's connection.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/daemon"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/internal/natsconn"
	"github.com/weft-dev/weft/internal/reliability/ledger"
	"github.com/weft-dev/weft/pkg/worker"
)

var errUsage = errors.New("usage")

func main() { daemon.Main("ledgerworker", errUsage, run) }

// Size: the chaos worker's whole life (flags, connect, register, serve), in
// order.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg natsconn.Config
	fs := flag.NewFlagSet("ledgerworker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg.RegisterFlags(fs)
	queue := fs.String("queue", ledger.Queue, "task queue to pull from")
	name := fs.String("name", "", "worker name")
	concurrency := fs.Int("concurrency", 16, "nodes run at once")
	ackWait := fs.Duration("ack-wait", 0, "queue ack wait (0: keep the queue's)")
	bucket := fs.String("bucket", ledger.Bucket, "ledger KV bucket")
	writes := fs.String("writes", ledger.WritesSubj, "subject every attempt to write is recorded on")
	hold := fs.Duration("hold", 0, "how long an effect takes: the delivery waits this long between beginning it and writing the ledger")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	// The connection flags' environment (WEFT_NATS_USER, WEFT_NATS_PASSWORD:
	// the worker role's credentials), as nodeworker takes it.
	if err := natsconn.ApplyEnv(fs); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	cfg.Name = "weft-ledgerworker " + *name
	// A key ring (-encrypt-keys, WEFT_ENCRYPT_KEYS), as nodeworker takes it.
	if err := cfg.UseKeys(log); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	nc, err := cfg.Connect("")
	if err != nil {
		return err
	}
	defer nc.Close()
	store, err := cfg.OpenStore(ctx, nc, nil)
	if err != nil {
		return fmt.Errorf("opening the events store: %w", err)
	}
	js := eventlog.JetStream(store)
	if user := os.Getenv("WEFT_LEDGER_NATS_USER"); user != "" {
		lcfg := natsconn.Config{URL: cfg.URL, User: user, Password: os.Getenv("WEFT_LEDGER_NATS_PASSWORD"), Name: "weft-ledgerworker ledger " + *name}
		lnc, err := lcfg.Connect("")
		if err != nil {
			return fmt.Errorf("connecting to the ledger: %w", err)
		}
		defer lnc.Close()
		if js, err = jetstream.New(lnc); err != nil {
			return err
		}
	}
	var kv jetstream.KeyValue
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		bctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		kv, err = js.KeyValue(bctx, *bucket)
		cancel()
		if err == nil {
			break
		}
		log.Warn("binding the ledger bucket", logattr.Error, err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
	opts := []worker.Option{worker.WithQueues(*queue), worker.WithConcurrency(*concurrency), worker.WithLogger(log)}
	if *name != "" {
		opts = append(opts, worker.WithName(*name))
	}
	if *ackWait > 0 {
		opts = append(opts, worker.WithAckWait(*ackWait))
	}
	w, err := worker.New(store, opts...)
	if err != nil {
		return err
	}
	process := strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	w.Handle(ledger.NodeType, &ledgerNode{kv: kv, js: js, writes: *writes, worker: w.Name(), process: process, log: log, hold: *hold})
	return w.Run(ctx)
}

type ledgerNode struct {
	kv      jetstream.KeyValue
	js      jetstream.JetStream
	writes  string
	worker  string
	process string
	log     *slog.Logger
	hold    time.Duration
}

type ledgerConfig struct {
	Add *float64 `json:"add,omitempty"`
}

// Execute implements worker.Node.
func (l *ledgerNode) Execute(ctx context.Context, in *worker.Input) (*worker.Result, error) {
	var cfg ledgerConfig
	if len(in.Config) > 0 {
		if err := json.Unmarshal(in.Config, &cfg); err != nil {
			return nil, worker.NonRetryable("ValidationError", "ledger config: "+err.Error())
		}
	}
	var add float64
	switch {
	case cfg.Add != nil:
		add = *cfg.Add
	default:
		local, _ := in.Local.(map[string]any)
		n, ok := local["item"].(float64)
		if !ok {
			return nil, worker.NonRetryable("ValidationError", fmt.Sprintf("ledger: no config.add and no numeric local.item (local %v)", in.Local))
		}
		add = n
	}
	key := in.IdempotencyKey
	rule := ledger.Rule(key, in.Attempt)
	if rule == ledger.FailBefore {
		return nil, worker.Retryable("ChaosBefore", "failing before the effect, by rule")
	}
	// The effect takes -hold, from when it began to the ledger's write.
	began := time.Now().UTC()
	if l.hold > 0 {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(l.hold): // the effect's duration (-hold)
		}
	}
	if err := l.write(ctx, key, ledger.Entry{
		Run: in.RunID, Node: in.NodeID, Iteration: in.Iteration, Item: in.Item,
		Attempt: in.Attempt, Delivery: in.Delivery, Worker: l.worker, Process: l.process,
	}, began); err != nil {
		return nil, err
	}
	if rule == ledger.FailAfter {
		return nil, worker.Retryable("ChaosAfter", "failing after the effect, by rule")
	}
	return &worker.Result{
		Output:  map[string]any{"add": add},
		Updates: map[string]any{"total": add},
	}, nil
}

// write creates the key in the ledger, trying again while the cluster is
// unavailable (a Create that timed out may have landed: the entry then says
// it is this process's own), and records the attempt.
func (l *ledgerNode) write(ctx context.Context, key string, e ledger.Entry, began time.Time) error {
	body, _ := json.Marshal(e)
	rec := ledger.Write{Key: key, Entry: e, Began: began}
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err := l.kv.Create(cctx, key, body)
		cancel()
		if err == nil {
			rec.Result = "created"
			rec.Created = l.createdAt(ctx, key)
			break
		}
		if errors.Is(err, jetstream.ErrKeyExists) {
			gctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			prior, gerr := l.kv.Get(gctx, key)
			cancel()
			if gerr != nil {
				l.log.Warn("ledger get", logattr.Key, key, logattr.Error, gerr)
				err = gerr
			} else {
				var p ledger.Entry
				_ = json.Unmarshal(prior.Value(), &p)
				if p.Same(e) {
					rec.Result = "created" // our own Create, retried
				} else {
					rec.Result, rec.Prior = "exists", &p
				}
				break
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		l.log.Warn("ledger create", logattr.Key, key, logattr.Error, err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
	// The record is for the test's eyes; a lost one is not an error of the
	// node (the ledger entry is what counts).
	out, _ := json.Marshal(rec)
	var err error
	for try := 0; try < 10; try++ {
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
		_, err = l.js.Publish(pctx, l.writes, out)
		cancel()
		if err == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		l.log.Warn("recording a ledger write", logattr.Key, key, logattr.Error, err)
	}
	return nil
}

// createdAt is when the server stored the ledger key (zero when it cannot
// be read now: the write's record then has no span).
func (l *ledgerNode) createdAt(ctx context.Context, key string) time.Time {
	gctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	e, err := l.kv.Get(gctx, key)
	if err != nil {
		return time.Time{}
	}
	return e.Created().UTC()
}
