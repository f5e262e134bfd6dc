// Command goworker is the Go SDK's conformance worker: it registers the
// node types of docs/conformance.md on the queue WEFT_QUEUE and runs until
// SIGTERM (a graceful drain) or SIGKILL. The conformance kit
// (internal/conformance, 'weft conformance -worker') builds and starts it
// with the environment that document lists.
//
// -break MODE makes it wrong on purpose, for the kit's own tests (that a
// case fails when the worker is wrong): fatal-retryable, effect-key,
// slow-inprogress (in-progress acks less often than the ack wait),
// ignore-timeout (conf.slow ignores its context), no-hooks.
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
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weft-dev/weft/internal/daemon"
	"github.com/weft-dev/weft/internal/natsconn"
	"github.com/weft-dev/weft/pkg/worker"
)

var errUsage = errors.New("usage")

func main() { daemon.Main("goworker", errUsage, run) }

// breaks are the ways -break makes the worker wrong.
var breaks = map[string]bool{"fatal-retryable": true, "effect-key": true, "slow-inprogress": true, "ignore-timeout": true, "no-hooks": true}

func run(ctx context.Context, args []string, _, stderr io.Writer) error {
	fs := flag.NewFlagSet("goworker", flag.ContinueOnError)
	broken := fs.String("break", "", "make the worker wrong on purpose (the kit's own tests)")
	if err := daemon.ParseFlags(fs, args, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if *broken != "" && !breaks[*broken] {
		return fmt.Errorf("%w: -break %q: unknown", errUsage, *broken)
	}
	queue, effects := os.Getenv("WEFT_QUEUE"), os.Getenv("WEFT_CONF_EFFECTS")
	if queue == "" || effects == "" {
		return fmt.Errorf("%w: WEFT_QUEUE and WEFT_CONF_EFFECTS must be set", errUsage)
	}
	cfg := natsconn.Config{
		URL: os.Getenv("WEFT_NATS_URL"), User: os.Getenv("WEFT_NATS_USER"), Password: os.Getenv("WEFT_NATS_PASSWORD"),
		Creds: os.Getenv("WEFT_NATS_CREDS"), InboxPrefix: os.Getenv("WEFT_NATS_INBOX_PREFIX"),
		Stream: os.Getenv("WEFT_STREAM"), Name: "weft conformance goworker",
	}
	if cfg.Stream == "" {
		cfg.Stream = "WEFT"
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	// The key ring of a sealed run of the kit, if any (WEFT_ENCRYPT_KEYS).
	if err := cfg.UseKeys(log); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	nc, err := cfg.Connect("", nats.RetryOnFailedConnect(true))
	if err != nil {
		return err
	}
	defer nc.Close()
	store, err := cfg.OpenStore(ctx, nc, log)
	if err != nil {
		return err
	}
	opts := []worker.Option{worker.WithQueues(queue), worker.WithLogger(log), worker.WithDrainTimeout(20 * time.Second)}
	if name := os.Getenv("WEFT_WORKER_NAME"); name != "" {
		opts = append(opts, worker.WithName(name))
	}
	if *broken == "slow-inprogress" {
		opts = append(opts, worker.WithHeartbeat(10*time.Second))
	}
	w, err := worker.New(store, opts...)
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	register(w, effects, *broken)
	return w.Run(ctx)
}

// register adds the conformance node types, wrong as broken says.
//
// Size: a table: one registration per conformance node type.
func register(w *worker.Worker, effects, broken string) {
	w.Handle("conf.echo", worker.NodeFunc(func(_ context.Context, in *worker.Input) (*worker.Result, error) {
		var cfg struct {
			Output json.RawMessage `json:"output"`
		}
		if err := config(in, &cfg); err != nil {
			return nil, err
		}
		if cfg.Output != nil {
			return &worker.Result{Output: cfg.Output}, nil
		}
		return &worker.Result{Output: in.State}, nil
	}))
	w.Handle("conf.fail", worker.NodeFunc(func(_ context.Context, in *worker.Input) (*worker.Result, error) {
		var cfg struct {
			Times int `json:"times"`
		}
		if err := config(in, &cfg); err != nil {
			return nil, err
		}
		if in.Attempt <= cfg.Times {
			return nil, worker.Retryable("ConfFail", fmt.Sprintf("attempt %d of %d failing", in.Attempt, cfg.Times))
		}
		return &worker.Result{Output: map[string]int{"attempt": in.Attempt}}, nil
	}))
	w.Handle("conf.fatal", worker.NodeFunc(func(_ context.Context, in *worker.Input) (*worker.Result, error) {
		return nil, &worker.Error{Type: "ConfFatal", Message: "fatal", Details: map[string]string{"node": in.NodeID}, Retryable: broken == "fatal-retryable"}
	}))
	w.Handle("conf.slow", worker.NodeFunc(func(ctx context.Context, in *worker.Input) (*worker.Result, error) {
		if broken == "ignore-timeout" {
			ctx = context.WithoutCancel(ctx)
		}
		return slow(ctx, in)
	}))
	w.Handle("conf.block", worker.NodeFunc(func(ctx context.Context, _ *worker.Input) (*worker.Result, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}))
	w.Handle("conf.effect", worker.NodeFunc(func(ctx context.Context, in *worker.Input) (*worker.Result, error) {
		var cfg struct {
			Ms int `json:"ms"`
		}
		if err := config(in, &cfg); err != nil {
			return nil, err
		}
		key := in.IdempotencyKey
		if broken == "effect-key" {
			key = in.RunID + "/" + in.NodeID
		}
		if err := appendLine(effects, key); err != nil {
			return nil, err
		}
		if err := sleep(ctx, time.Duration(cfg.Ms)*time.Millisecond); err != nil {
			return nil, err
		}
		return &worker.Result{Output: map[string]string{"key": key}}, nil
	}))
	w.Handle("conf.validate", validateNode{})
	if broken != "no-hooks" {
		w.Handle("conf.hooks", &hooksNode{})
	}
	w.Handle("conf.throw", worker.NodeFunc(func(context.Context, *worker.Input) (*worker.Result, error) {
		return nil, errors.New("thrown")
	}))
}

// config decodes the node's config into v; none leaves v as it is.
func config(in *worker.Input, v any) error {
	if len(in.Config) == 0 {
		return nil
	}
	if err := json.Unmarshal(in.Config, v); err != nil {
		return worker.NonRetryable("ValidationError", "config: "+err.Error())
	}
	return nil
}

func slow(ctx context.Context, in *worker.Input) (*worker.Result, error) {
	var cfg struct {
		Ms     int  `json:"ms"`
		BeatMs int  `json:"beatMs"`
		NoBeat bool `json:"noBeat"`
	}
	if err := config(in, &cfg); err != nil {
		return nil, err
	}
	end := time.NewTimer(time.Duration(cfg.Ms) * time.Millisecond)
	defer end.Stop()
	var beat <-chan time.Time
	if !cfg.NoBeat && cfg.BeatMs > 0 {
		t := time.NewTicker(time.Duration(cfg.BeatMs) * time.Millisecond)
		defer t.Stop()
		beat = t.C
		_ = worker.Heartbeat(ctx, map[string]int{"step": 0})
	}
	for step := 1; ; {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-end.C:
			return &worker.Result{Output: map[string]int{"slept": cfg.Ms}}, nil
		case <-beat:
			_ = worker.Heartbeat(ctx, map[string]int{"step": step})
			step++
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// appendLine appends line and a newline to the file at path, synced.
func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(line + "\n"); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// validateNode refuses input state without ok: true.
type validateNode struct{}

func (validateNode) Validate(in *worker.Input) error {
	if ok, _ := in.State["ok"].(bool); !ok {
		return worker.NonRetryable("ValidationError", `field "ok": want true`)
	}
	return nil
}

func (validateNode) Execute(context.Context, *worker.Input) (*worker.Result, error) {
	return &worker.Result{Output: map[string]bool{"valid": true}}, nil
}

// hooksNode records its steps, in order, in its output.
type hooksNode struct{}

// trace is the output of one execution of hooksNode; each step appends.
type trace struct {
	Trace []string `json:"trace"`
}

func traceOf(in *worker.Input) *trace {
	t, _ := in.Local.(*trace)
	return t
}

func (*hooksNode) Before(_ context.Context, in *worker.Input) error {
	// Input is per execution: the trace rides on it from step to step.
	in.Local = &trace{Trace: []string{"before"}}
	return nil
}

func (*hooksNode) Prep(_ context.Context, in *worker.Input) (any, error) {
	t := traceOf(in)
	t.Trace = append(t.Trace, "prep")
	return t, nil
}

func (*hooksNode) Exec(_ context.Context, prep any) (any, error) {
	t := prep.(*trace)
	t.Trace = append(t.Trace, "exec")
	return t, nil
}

func (*hooksNode) Post(_ context.Context, _ *worker.Input, _, exec any) (*worker.Result, error) {
	t := exec.(*trace)
	t.Trace = append(t.Trace, "post")
	return &worker.Result{Output: t}, nil
}

func (*hooksNode) After(_ context.Context, _ *worker.Input, res *worker.Result) error {
	t := res.Output.(*trace)
	t.Trace = append(t.Trace, "after")
	return nil
}

func (*hooksNode) Execute(context.Context, *worker.Input) (*worker.Result, error) {
	return nil, worker.NonRetryable("ConfHooks", "Execute runs only when the phases do not")
}
