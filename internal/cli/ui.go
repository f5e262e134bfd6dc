package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/weft-dev/weft/internal/natsconn"
	"github.com/weft-dev/weft/internal/ui"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
)

// uiEnv maps the UI's flags to their environment variables.
var uiEnv = map[string]string{
	"addr":        "WEFT_UI_ADDR",
	"ui-user":     "WEFT_UI_USER",
	"ui-password": "WEFT_UI_PASSWORD",
	"trace-url":   "WEFT_UI_TRACE_URL",
}

var cmdUI = &command{
	name:    "ui",
	summary: "serve the web UI: runs, their graphs, timelines and state at any event",
	help: `Serves the web UI and its API (internal/ui/API.md) on -addr, reading the
log through NATS; the browser needs no NATS access. It listens on loopback
by default; another address needs -ui-user and -ui-password (every request
then needs them, as HTTP basic auth). -read-only refuses every action
(signal, cancel, fork): use it when connecting with Weft's ui role, which
reads and writes nothing; actions need the client role's credentials. -trace-url links each run's trace id to a tracing UI,
e.g. http://localhost:16686/trace/{traceId} for Jaeger. 'weft dev' serves
the UI too (its -ui flag).`,
	run: func(e *env, c *command, args []string) error {
		fs, _ := e.flagSet(c)
		ncfg := natsFlags(fs)
		addr := fs.String("addr", ui.DefaultAddr, "address to listen on (env WEFT_UI_ADDR); not a loopback one only with -ui-user and -ui-password")
		readOnly := fs.Bool("read-only", false, "refuse every action: signal, cancel, fork")
		user := fs.String("ui-user", "", "user the UI asks for (HTTP basic auth; env WEFT_UI_USER)")
		password := fs.String("ui-password", "", "password the UI asks for; prefer the environment, which ps does not show (env WEFT_UI_PASSWORD)")
		traceURL := fs.String("trace-url", "", "link to a run's trace, with {traceId} in it (env WEFT_UI_TRACE_URL)")
		verbose := fs.Bool("v", false, "log the server's warnings and requests' failures in full")
		if _, err := e.parse(c, fs, args, 0, 0); err != nil {
			return err
		}
		if err := natsconn.ApplyEnv(fs, uiEnv); err != nil {
			return &usageError{cmd: c, msg: err.Error()}
		}
		cfg := ui.Config{ReadOnly: *readOnly, User: *user, Password: *password, TraceURL: *traceURL, Log: logger(e.stderr, *verbose)}
		if err := cfg.Validate(); err != nil {
			return &usageError{cmd: c, msg: err.Error()}
		}
		if err := ui.CheckAddr(*addr, cfg.User != ""); err != nil {
			return &usageError{cmd: c, msg: "-addr: " + err.Error()}
		}
		store, opts, closeConn, err := e.connectStoreAs(c, ncfg, false, natsconn.RoleUI)
		if err != nil {
			return err
		}
		defer closeConn()
		srv, err := startUI(e.ctx, *addr, cfg, store, opts...)
		if err != nil {
			return fmt.Errorf("-addr: %w", err)
		}
		defer srv.Close()
		mode := ""
		if cfg.ReadOnly {
			mode = " (read-only)"
		}
		fmt.Fprintf(e.stdout, "UI: %s%s\n", srv.URL(), mode)
		<-e.ctx.Done()
		return nil
	},
}

// startUI serves the UI over store, with the timeline's summaries of
// 'weft events'. Actions are recorded as the UI's user's when it has one
// ("ada via weft ui"), else as the user running it.
func startUI(ctx context.Context, addr string, cfg ui.Config, store events.Store, opts ...client.Option) (*ui.Server, error) {
	if cfg.User != "" {
		opts = append(opts, client.WithIdentity(cfg.User+" via weft ui"))
	}
	cfg.Store, cfg.Client = store, client.New(store, opts...)
	cfg.Summarize = func(ev *events.Event) string {
		var r timelineRow
		return eventSummary(ev, &r, eventTime(ev))
	}
	return ui.Start(ctx, addr, cfg)
}

// uiFromEnv is the UI configuration 'weft dev' takes from the environment
// (WEFT_UI_USER, WEFT_UI_PASSWORD, WEFT_UI_TRACE_URL).
func uiFromEnv(log *slog.Logger) ui.Config {
	return ui.Config{
		User: os.Getenv("WEFT_UI_USER"), Password: os.Getenv("WEFT_UI_PASSWORD"),
		TraceURL: os.Getenv("WEFT_UI_TRACE_URL"), Log: log,
	}
}

// devUI checks 'weft dev -ui': nil when the UI is off.
func devUI(c *command, addr string, log *slog.Logger) (*ui.Config, error) {
	if addr == "" || addr == "off" {
		return nil, nil
	}
	cfg := uiFromEnv(log)
	if err := cfg.Validate(); err != nil {
		return nil, &usageError{cmd: c, msg: "-ui: " + err.Error()}
	}
	if err := ui.CheckAddr(addr, cfg.User != ""); err != nil {
		return nil, &usageError{cmd: c, msg: "-ui: " + err.Error()}
	}
	return &cfg, nil
}
