package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weft-dev/weft/internal/natsconn"
	"github.com/weft-dev/weft/internal/telemetry"
	"github.com/weft-dev/weft/internal/ui"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/worker"
)

// defaultGraphFile is the graph demo runs when given none.
const defaultGraphFile = "examples/hello.yaml"

// builtinHello is examples/hello.yaml, for a demo run outside the
// repository.
const builtinHello = `name: hello
version: "1"
description: Greets whoever the input names.
nodes:
  - id: greet
    type: echo
  - id: shout
    type: transform
    config:
      set:
        greeting: "'Hello, ' + input.name + '!'"
edges:
  - {from: START, to: greet}
  - {from: greet, to: shout}
  - {from: shout, to: END}
`

// The demo's default input and invocation suit every graph in examples/.
const (
	demoInput      = `{"name":"Ada"}`
	demoInvocation = `{"user_tier":"premium"}`
)

func logger(w io.Writer, verbose bool) *slog.Logger {
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

var cmdDemo = &command{
	name:    "demo",
	args:    "[GRAPHFILE]",
	summary: "run a graph with an embedded NATS, coordinator and worker, in one process",
	help: `Starts an embedded NATS server with JetStream (file storage in a fresh
temporary directory, or in -data), a coordinator and a worker with the
built-in executors serving every queue the graph uses (with -roles, under
Weft's roles, each part connecting as its own role); runs the graph
(default examples/hello.yaml); waits for the run's end; prints its timeline
and final state; and shuts everything down in order: the worker, the
coordinator, the connection, the server. Exits 1 if the run does not
complete.

A graph whose agent or llm nodes name the endpoint "fake" (as
examples/agent.yaml does) runs them against a scripted fake of an
OpenAI-compatible model that demo starts on 127.0.0.1, and says so: it
calls each of the node's tools once, then answers "[fake model] ...". No
other endpoint is ever replaced by it, and an endpoint named "fake"
configured in WEFT_LLM_ENDPOINTS is refused rather than shadowed.

An agent's tool marked "approval: required" (examples/agent.yaml's note)
pauses the run until a person answers. demo answers while it waits: with
-approve yes or -approve no, every approval that way, without asking (and
says so); else, when stdin is a terminal, it shows the call (tool,
arguments) and asks "approve? [y/N]"; else it prints the command that
answers it, weft signal RUN NODE -nats URL -data '{"approved": true,
"call": "..."}', and waits for it up to -timeout. A rejection is the
tool's result for the model: weft demo -approve no examples/agent.yaml.
With -o json the questions and answers go to stderr.`,
	max: 1,
	flags: func(fs *flag.FlagSet) action {
		dataDir := fs.String("data", "", "JetStream data directory, kept after the demo (default a temporary directory, removed)")
		input := fs.String("input", demoInput, "the run's input: a JSON object, or @FILE")
		invocation := fs.String("invocation", demoInvocation, "the run's invocation state: a JSON object, or @FILE")
		timeout := fs.Duration("timeout", time.Minute, "how long to wait for the run")
		verbose := fs.Bool("v", false, "log the coordinator's and the worker's work")
		roles := fs.Bool("roles", false, "run under Weft's roles (deploy/SECURITY.md): each part connects as its own role")
		encryptKeys := fs.String("encrypt-keys", "", "key ring file: seal events' data with AES-256-GCM (env "+events.EnvEncryptKeys+": the ring itself)")
		approve := fs.String("approve", "", "answer every tool approval the run waits for: yes or no (default: ask at a terminal, else print the weft signal command)")
		return action{do: func(e *env, x *call) error {
			c, pos := x.cmd, x.args
			auto, err := parseApprove(c, *approve)
			if err != nil {
				return err
			}
			in, err := e.objectArg(c, "input", *input)
			if err != nil {
				return err
			}
			inv, err := e.objectArg(c, "invocation", *invocation)
			if err != nil {
				return err
			}
			if *timeout <= 0 {
				return &usageError{cmd: c, msg: fmt.Sprintf("-timeout: want a positive duration, got %s", *timeout)}
			}
			g, source, err := demoGraph(pos)
			if err != nil {
				return err
			}

			cfg := engineConfig{dataDir: *dataDir, port: -1, queues: graphQueues(g.Definition()),
				concurrency: worker.DefaultConcurrency, log: logger(e.stderr, *verbose), roles: *roles}
			if usesFakeModel(g.Definition()) {
				if cfg.fakeModel, err = startFakeModel(e.ctx, 0); err != nil {
					return err
				}
			}
			if cfg.keys, err = events.LoadKeys(*encryptKeys); err != nil {
				return &usageError{cmd: c, msg: "-encrypt-keys: " + err.Error()}
			}
			if cfg.dataDir == "" {
				if cfg.dataDir, err = os.MkdirTemp("", "weft-demo-"); err != nil {
					return err
				}
				cfg.removeDir = true
			} else if err := os.MkdirAll(cfg.dataDir, 0o755); err != nil {
				return err
			}
			clientEnv := ""
			if cfg.roles {
				// On disk (mode 0600, removed with a temporary data
				// directory), so that a command printed for another
				// terminal can connect as the client.
				cfg.rolesDir = filepath.Join(cfg.dataDir, "roles")
				clientEnv = filepath.Join(cfg.rolesDir, natsconn.UserName(natsconn.RoleClient, "")+".env")
			}
			le, err := startEngine(e.ctx, cfg)
			if err != nil {
				if cfg.removeDir {
					_ = os.RemoveAll(cfg.dataDir)
				}
				return err
			}
			defer le.Stop()
			text := x.out != "json"
			if text {
				kept := "removed at exit"
				if !cfg.removeDir {
					kept = "kept"
				}
				fmt.Fprintf(e.stdout, "embedded NATS at %s, data in %s (%s)\n", le.URL(), cfg.dataDir, kept)
				fmt.Fprintf(e.stdout, "graph %s from %s (%s), queues %s\n", g.Definition().Name, source, shortDigest(g.Digest()), strings.Join(cfg.queues, ", "))
				if cfg.fakeModel != "" {
					fmt.Fprintln(e.stdout, fakeModelBanner(cfg.fakeModel))
				}
			}

			cl := client.New(le.Store(), client.WithLogger(cfg.log))
			run, err := cl.Start(e.ctx, g, client.WithInput(in), client.WithInvocation(inv))
			if err != nil {
				return err
			}
			if text {
				fmt.Fprintf(e.stdout, "run %s started with input %s and invocation %s\n\n", run, orDash(string(in)), orDash(string(inv)))
			}
			ctx, cancel := context.WithTimeout(e.ctx, *timeout)
			defer cancel()
			says := e.stdout
			if !text {
				says = e.stderr // stdout is the JSON document
			}
			ap := &approver{cl: cl, run: run, natsURL: le.URL(), clientEnv: clientEnv, auto: auto, ask: auto == "" && stdinTerminal(e.stdin),
				in: bufio.NewReader(e.stdin), out: says, seen: map[string]bool{}, steps: map[string]json.RawMessage{}}
			st, werr := ap.wait(ctx)
			evs, err := cl.History(e.ctx, run)
			if err != nil {
				return err
			}
			if werr != nil {
				if text {
					e.printTimeline(evs)
				}
				if errors.Is(werr, context.DeadlineExceeded) {
					return fmt.Errorf("run %s has not ended after %s", run, *timeout)
				}
				return werr
			}
			if !text {
				if err := e.writeJSON(map[string]any{"runId": run, "status": st.Status, "events": timeline(evs), "state": st}); err != nil {
					return err
				}
				return endedError(st)
			}
			e.printTimeline(evs)
			fmt.Fprintln(e.stdout)
			e.printOutcome(st)
			return endedError(st)
		}}
	},
}

// demoGraph loads the demo's graph: the file named, or examples/hello.yaml,
// or, when that is not there, a built-in copy of it.
func demoGraph(pos []string) (*graph.Graph, string, error) {
	file := defaultGraphFile
	if len(pos) == 1 {
		file = pos[0]
	} else if _, err := os.Stat(file); err != nil {
		g, err := graph.Parse([]byte(builtinHello), "hello.yaml (built in)")
		return g, "the built-in hello.yaml", err
	}
	g, err := graph.LoadFile(file)
	if err != nil {
		return nil, "", graphError(file, err)
	}
	return g, file, nil
}

var cmdDev = &command{
	name:    "dev",
	summary: "run an embedded NATS, a coordinator and a worker until interrupted",
	help: `Runs the whole engine in one process for development: an embedded NATS
server with JetStream on 127.0.0.1 (-port; file storage in -data, kept
between runs), a coordinator, and a worker with the built-in executors on
-queues, and the web UI on -ui (127.0.0.1:8233; 'weft help ui'; its
credentials, needed beyond loopback, from WEFT_UI_PASSWORD_FILE, or
WEFT_UI_USER and WEFT_UI_PASSWORD; its failed logins are logged, its
logins only with -v).
Use the other commands against it from another terminal. Interrupt
(Ctrl-C) to stop it; it shuts down the worker, the coordinator, the
connection and the server, in that order.

With -roles the server admits only the users of Weft's roles
(deploy/SECURITY.md) with the permissions 'weft roles' generates; the
coordinator and the workers (one per queue) connect as their roles. The
credentials are kept in <data>/roles, one <user>.env file per user (mode
0600), and reused at the next start with the same queues; run the other
commands as the client with its file in the environment (set -a; .
<data>/roles/weft-client.env; set +a). Passwords are never printed.

With -fake-model, the llm endpoint "fake" is the built-in scripted fake
model (as 'weft demo' starts for a graph that names it; announced, never a
stand-in for another endpoint), answering at -fake-model-pace, word by
word when streamed, so that the web UI shows an agent's tokens as they
come: weft dev -fake-model, then weft run examples/agent.yaml.`,
	flags: func(fs *flag.FlagSet) action {
		dataDir := fs.String("data", "data/dev", "JetStream data directory")
		port := fs.Int("port", 4222, "port to listen on, on 127.0.0.1 (-1: any free port)")
		queues := fs.String("queues", worker.DefaultQueue, "task queues the worker serves, comma separated (examples/pipeline.yaml also uses cpu)")
		concurrency := fs.Int("concurrency", worker.DefaultConcurrency, "nodes the worker runs at once")
		verbose := fs.Bool("v", false, "log the coordinator's and the worker's work")
		httpAddr := fs.String("http", "", "serve /metrics, /healthz and /readyz on this address, e.g. "+telemetry.DefaultHTTPAddr+" (default off)")
		uiAddr := fs.String("ui", ui.DefaultAddr, `serve the web UI on this address ("" or off: not at all)`)
		roles := fs.Bool("roles", false, "run under Weft's roles, credentials in <data>/roles (see above)")
		encryptKeys := fs.String("encrypt-keys", "", "key ring file: seal events' data with AES-256-GCM (env "+events.EnvEncryptKeys+": the ring itself)")
		fake := fs.Bool("fake-model", false, `serve the llm endpoint "fake" with the built-in scripted fake model (not a real model; see 'weft help demo')`)
		pace := fs.Duration("fake-model-pace", 100*time.Millisecond, "with -fake-model: wait this long before each answer and between the words of a streamed one")
		return action{check: func(e *env, x *call) error {
			if *pace < 0 {
				return &usageError{cmd: x.cmd, msg: fmt.Sprintf("-fake-model-pace: want 0 or more, got %s", *pace)}
			}
			return nil
		}, do: func(e *env, x *call) error {
			c := x.cmd
			cfg := engineConfig{dataDir: *dataDir, port: *port, concurrency: *concurrency, log: logger(e.stderr, *verbose), roles: *roles}
			if *fake {
				var err error
				if cfg.fakeModel, err = startFakeModel(e.ctx, *pace); err != nil {
					return err
				}
			}
			keys, err := events.LoadKeys(*encryptKeys)
			if err != nil {
				return &usageError{cmd: c, msg: "-encrypt-keys: " + err.Error()}
			}
			cfg.keys = keys
			if cfg.roles {
				cfg.rolesDir = filepath.Join(cfg.dataDir, "roles")
			}
			for q := range strings.SplitSeq(*queues, ",") {
				if q = strings.TrimSpace(q); q != "" {
					cfg.queues = append(cfg.queues, q)
				}
			}
			switch {
			case *port < -1 || *port > 65535:
				return &usageError{cmd: c, msg: fmt.Sprintf("-port: want a port number or -1, got %d", *port)}
			case *concurrency < 1:
				return &usageError{cmd: c, msg: fmt.Sprintf("-concurrency: want at least 1, got %d", *concurrency)}
			case len(cfg.queues) == 0:
				return &usageError{cmd: c, msg: "-queues: at least one queue"}
			}
			uiCfg, err := devUI(c, *uiAddr, cfg.log)
			if err != nil {
				return err
			}
			addr := ""
			if *httpAddr != "" {
				if addr, err = telemetry.HTTPAddr(*httpAddr); err != nil {
					return &usageError{cmd: c, msg: "-http: " + err.Error()}
				}
			}
			if err := os.MkdirAll(cfg.dataDir, 0o755); err != nil {
				return err
			}
			var reg *prometheus.Registry
			if addr != "" {
				var stop func()
				if reg, stop, err = devMetrics(e.ctx); err != nil {
					return err
				}
				defer stop()
			}
			le, err := startEngine(e.ctx, cfg)
			if err != nil {
				return err
			}
			defer le.Stop()
			if addr != "" {
				srv, err := serveDev(e.ctx, addr, reg, le, cfg.log)
				if err != nil {
					return err
				}
				defer srv.Close()
				fmt.Fprintf(e.stdout, "weft dev: metrics and health at http://%s (/metrics, /healthz, /readyz)\n", srv.Addr())
			}
			uiURL := ""
			if uiCfg != nil {
				// Under the roles, the UI reads as the client, which may not
				// list consumers.
				uiCfg.NoConsumerList = cfg.roles
				srv, err := startUI(e.ctx, *uiAddr, *uiCfg, le.Store())
				if err != nil {
					return fmt.Errorf("-ui: %w", err)
				}
				defer srv.Close()
				uiURL = srv.URL()
			}
			hint := ""
			if le.URL() != "nats://127.0.0.1:4222" {
				hint = " -nats " + le.URL()
			}
			fmt.Fprintf(e.stdout, "weft dev: NATS with JetStream at %s, data in %s\n", le.URL(), cfg.dataDir)
			fmt.Fprintf(e.stdout, "weft dev: coordinator and worker running (queues %s); interrupt to stop\n", strings.Join(cfg.queues, ", "))
			if cfg.fakeModel != "" {
				fmt.Fprintln(e.stdout, "weft dev: "+fakeModelBanner(cfg.fakeModel))
			}
			if !cfg.roles {
				// Found out, not assumed: what an anonymous connection may do.
				probe := natsconn.Config{Stream: events.DefaultStream}
				if w := probe.AnonymousAccess(e.ctx, le.URL()); w != "" {
					fmt.Fprintf(e.stderr, "weft dev: WARNING: %s. Fine on 127.0.0.1 for development; 'weft dev -roles' runs under Weft's roles.\n", w)
				}
			}
			if cfg.roles {
				env := func(r natsconn.Role) string { return filepath.Join(cfg.rolesDir, natsconn.UserName(r, "")+".env") }
				fmt.Fprintf(e.stdout, "weft dev: under Weft's roles; credentials in %s (mode 0600, one <user>.env per user)\n", cfg.rolesDir)
				fmt.Fprintf(e.stdout, "weft dev: as the client: set -a; . %s; set +a   (the UI: %s, the admin: %s)\n", env(natsconn.RoleClient), env(natsconn.RoleUI), env(natsconn.RoleAdmin))
			}
			if uiURL != "" {
				fmt.Fprintf(e.stdout, "UI: %s\n", uiURL)
			}
			fmt.Fprintf(e.stdout, "try: weft run examples/hello.yaml%s -input '{\"name\":\"Ada\"}' -wait\n", hint)
			<-e.ctx.Done()
			le.Stop()
			fmt.Fprintln(e.stdout, "weft dev: stopped")
			return nil
		}}
	},
}
