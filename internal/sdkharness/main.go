// Command sdkharness is what the TypeScript SDK's tests (sdk/typescript)
// run the Go engine and the Go codec through: an embedded NATS server with
// JetStream and a coordinator (no worker: the SDK's worker serves the
// queues), optionally under Weft's roles, and a line protocol on stdin and
// stdout through which the tests ask the Go side what it makes of things.
//
// It prints one JSON line when it is ready:
//
//	{"url":"nats://127.0.0.1:…","roles":"<dir of the roles' .env files, or empty>"}
//
// then answers one JSON request per line with one JSON line:
//
//	{"op":"wire","subject":S,"headers":{K:[V]},"data":B64}
//	    decodes the message with pkg/events, builds the same event anew
//	    from its payload (events.New, json.Marshal of the payload struct)
//	    and encodes it as the Go hot path does; says whether subject,
//	    headers and body are byte for byte what was given.
//	{"op":"graph","file":F} or {"op":"graph","text":T,"source":NAME}
//	    the canonical JSON and digest pkg/graph gives the graph.
//	{"op":"state","run":R}
//	    the run's state, folded by pkg/projection (the client's Get).
//	{"op":"history","run":R}
//	    the run's events as Go reads them (the client's History: bodies
//	    kept beside the log resolved, sealed ones opened), each as its
//	    type, node, whether it was sealed, whether it was refused (why),
//	    the size and SHA-256 of its data (not the data itself), and the
//	    stream's timestamp of it (storedNs, ns since the epoch).
//
// It stops when stdin closes, or on SIGTERM.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/weft"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "sdkharness:", err)
		os.Exit(1)
	}
}

// Size: the harness's set-up and run in the order they must happen.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sdkharness", flag.ContinueOnError)
	roles := fs.Bool("roles", false, "run under Weft's roles")
	queues := fs.String("queues", "default", "the task queues (roles are made for them)")
	data := fs.String("data", "", "the server's store directory (default a temporary one)")
	noEngine := fs.Bool("no-engine", false, "answer requests only: start no server")
	verbose := fs.Bool("v", false, "log the engine's work to stderr")
	keyFile := fs.String("encrypt-keys", "", "seal events with this key ring file (as -encrypt-keys)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	h := &harness{ctx: ctx}
	ready := map[string]string{"url": "", "roles": ""}
	if !*noEngine {
		dir := *data
		if dir == "" {
			tmp, err := os.MkdirTemp("", "weft-sdkharness-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(tmp)
			dir = tmp
		}
		opts := []weft.Option{weft.Embedded(filepath.Join(dir, "js")), weft.WithoutWorker(), weft.WithLogger(log), weft.WithQueues(strings.Split(*queues, ",")...)}
		if *roles {
			ready["roles"] = filepath.Join(dir, "roles")
			opts = append(opts, weft.WithRoles(ready["roles"]))
		}
		if *keyFile != "" {
			ring, err := events.LoadKeys(*keyFile)
			if err != nil {
				return err
			}
			opts = append(opts, weft.WithEncryptKeys(ring))
		}
		eng, err := weft.Start(ctx, opts...)
		if err != nil {
			return err
		}
		defer eng.Stop()
		h.eng = eng
		ready["url"] = eng.URL()
	}
	out := json.NewEncoder(stdout)
	if err := out.Encode(ready); err != nil {
		return err
	}
	lines := make(chan []byte)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdin)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			lines <- bytes.Clone(sc.Bytes())
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case line, ok := <-lines:
			if !ok {
				return nil
			}
			if err := out.Encode(h.answer(line)); err != nil {
				return err
			}
		}
	}
}

type harness struct {
	ctx context.Context
	eng *weft.Engine
}

type request struct {
	Op      string              `json:"op"`
	Subject string              `json:"subject"`
	Headers map[string][]string `json:"headers"`
	Data    string              `json:"data"`
	File    string              `json:"file"`
	Text    string              `json:"text"`
	Source  string              `json:"source"`
	Run     string              `json:"run"`
}

func (h *harness) answer(line []byte) map[string]any {
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		return map[string]any{"error": err.Error()}
	}
	switch req.Op {
	case "wire":
		return wire(req)
	case "graph":
		return graphOf(req)
	case "state":
		if h.eng == nil {
			return map[string]any{"error": "no engine"}
		}
		ctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
		defer cancel()
		st, err := h.eng.Client().Get(ctx, req.Run)
		if err != nil {
			return map[string]any{"error": err.Error()}
		}
		return map[string]any{"state": st}
	case "history":
		if h.eng == nil {
			return map[string]any{"error": "no engine"}
		}
		return h.history(req.Run)
	}
	return map[string]any{"error": fmt.Sprintf("unknown op %q", req.Op)}
}

// history is the run's events as Go's client reads them, each by the
// digest of its data.
func (h *harness) history(run string) map[string]any {
	ctx, cancel := context.WithTimeout(h.ctx, 2*time.Minute)
	defer cancel()
	evs, err := h.eng.Client().History(ctx, run)
	if err != nil {
		return map[string]any{"error": err.Error()}
	}
	out := make([]map[string]any, 0, len(evs))
	for _, e := range evs {
		sum := sha256.Sum256(e.Data)
		ev := map[string]any{"type": e.Type, "node": e.NodeID, "sealed": e.KeyID != "", "size": len(e.Data), "sha256": hex.EncodeToString(sum[:]), "storedNs": e.Stored.UnixNano()}
		if e.Refused != nil {
			ev["refused"] = e.Refused.Error()
		}
		out = append(out, ev)
	}
	return map[string]any{"events": out}
}

// wire decodes a message as Go does, builds the same event anew from its
// payload and encodes it as Go does, and compares.
func wire(req request) map[string]any {
	data, err := base64.StdEncoding.DecodeString(req.Data)
	if err != nil {
		return map[string]any{"error": err.Error()}
	}
	hdr := nats.Header(req.Headers)
	ev, err := events.Decode(req.Subject, hdr, data)
	if err != nil {
		return map[string]any{"decodeError": err.Error()}
	}
	p, err := ev.Payload()
	if err != nil {
		return map[string]any{"decodeError": err.Error()}
	}
	at, err := time.Parse(time.RFC3339Nano, hdr.Get("ce-time"))
	if err != nil {
		return map[string]any{"decodeError": "ce-time: " + err.Error()}
	}
	fresh, err := events.New(ev.RunID, ev.ID, at, p)
	if err != nil {
		return map[string]any{"error": err.Error()}
	}
	fresh.TraceParent, fresh.TraceState, fresh.Queue = ev.TraceParent, ev.TraceState, ev.Queue
	msg, err := eventlog.Encode(fresh)
	if err != nil {
		return map[string]any{"error": err.Error()}
	}
	var diffs []string
	if msg.Subject != req.Subject {
		diffs = append(diffs, fmt.Sprintf("subject: Go %q, given %q", msg.Subject, req.Subject))
	}
	for _, k := range slices.Sorted(maps.Keys(msg.Header)) {
		if !slices.Equal(msg.Header[k], hdr[k]) {
			diffs = append(diffs, fmt.Sprintf("header %s: Go %q, given %q", k, msg.Header[k], hdr[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(hdr)) {
		if _, ok := msg.Header[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("header %s: not written by Go, given %q", k, hdr[k]))
		}
	}
	if !bytes.Equal(msg.Data, data) {
		diffs = append(diffs, fmt.Sprintf("data: Go %s, given %s", msg.Data, data))
	}
	return map[string]any{"type": ev.Type, "diffs": diffs, "goHeaders": msg.Header, "goData": string(msg.Data)}
}

func graphOf(req request) map[string]any {
	var g *graph.Graph
	var err error
	switch {
	case req.File != "":
		g, err = graph.LoadFile(req.File, graph.AllowAnyType())
	default:
		g, err = graph.Parse([]byte(req.Text), req.Source, graph.AllowAnyType())
	}
	if err != nil {
		return map[string]any{"error": err.Error()}
	}
	return map[string]any{"canonical": string(g.Canonical()), "digest": g.Digest()}
}
