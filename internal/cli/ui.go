package cli

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"strings"

	"github.com/weft-dev/weft/internal/natsconn"
	"github.com/weft-dev/weft/internal/ui"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
)

// uiEnv maps the UI's flags to their environment variables.
var uiEnv = map[string]string{
	"addr":            "WEFT_UI_ADDR",
	"ui-user":         "WEFT_UI_USER",
	"ui-password":     "WEFT_UI_PASSWORD",
	"password-file":   "WEFT_UI_PASSWORD_FILE",
	"trace-url":       "WEFT_UI_TRACE_URL",
	"trusted-proxy":   "WEFT_UI_TRUSTED_PROXIES",
	"live-per-client": "WEFT_UI_LIVE_PER_CLIENT",
	"live-max":        "WEFT_UI_LIVE_MAX",
}

var cmdUI = &command{
	name:    "ui",
	args:    "[hash-password]",
	summary: "serve the web UI: runs, their graphs, timelines and state at any event",
	help: `Serves the web UI and its API (internal/ui/API.md) on -addr, reading the
log through NATS; the browser needs no NATS access. It listens on loopback
by default; another address needs credentials, which every request then
needs (HTTP basic auth): -password-file FILE, a line USER:BCRYPT-HASH that
'weft ui hash-password' writes (best: no password in the environment), or
-ui-user and -ui-password (at least 12 characters). Failed logins are
logged and limited: after 5 from one client it is locked out (429, for 1 s,
doubling to 15 min), and the server takes 30 in a burst, then one a second,
from clients that have not logged in. Live streams are limited to
-live-per-client per client and -live-max in all (429 over), and share one
watch of the read model. Behind a reverse proxy, name it with
-trusted-proxy so that clients are told apart by X-Forwarded-For. Actions
from another origin are refused (403). -read-only refuses every action
(signal, cancel, fork): use it when connecting with Weft's ui role, which
reads and writes nothing; actions need the client role's credentials.
-trace-url links each run's trace id to a tracing UI, e.g.
http://localhost:16686/trace/{traceId} for Jaeger. 'weft dev' serves the
UI too (its -ui flag).

'weft ui hash-password -user NAME' reads a password (from the terminal,
not shown, or the first line of its input) and prints the password file's
line for it.`,
	run: func(e *env, c *command, args []string) error {
		if len(args) > 0 && args[0] == "hash-password" {
			return uiHashPassword(e, cmdUIHashPassword, args[1:])
		}
		return e.skeleton(c.with(0, 0, connUI, uiFlags), args)
	},
}

// uiFlags is the flags function of 'weft ui' (not hash-password).
func uiFlags(fs *flag.FlagSet) action {
	addr := fs.String("addr", ui.DefaultAddr, "address to listen on (env WEFT_UI_ADDR); not a loopback one only with credentials")
	readOnly := fs.Bool("read-only", false, "refuse every action: signal, cancel, fork")
	user := fs.String("ui-user", "", "user the UI asks for (HTTP basic auth; env WEFT_UI_USER)")
	password := fs.String("ui-password", "", fmt.Sprintf("password the UI asks for, at least %d characters; prefer -password-file, or the environment, which ps does not show (env WEFT_UI_PASSWORD)", ui.MinPasswordLength))
	passwordFile := fs.String("password-file", "", "file with the UI's user and bcrypt password hash, USER:HASH ('weft ui hash-password' writes it; env WEFT_UI_PASSWORD_FILE)")
	traceURL := fs.String("trace-url", "", "link to a run's trace, with {traceId} in it (env WEFT_UI_TRACE_URL)")
	proxies := fs.String("trusted-proxy", "", "addresses or networks of reverse proxies in front of the UI, comma separated: their X-Forwarded-For names the client (env WEFT_UI_TRUSTED_PROXIES)")
	livePerClient := fs.Int("live-per-client", ui.DefaultLivePerClient, "live streams one client may have open (env WEFT_UI_LIVE_PER_CLIENT)")
	liveMax := fs.Int("live-max", ui.DefaultLive, "live streams open at once, in all (env WEFT_UI_LIVE_MAX)")
	verbose := fs.Bool("v", false, "log the server's debug lines too")
	var cfg ui.Config
	check := func(e *env, x *call) error {
		c := x.cmd
		if err := natsconn.ApplyEnv(fs, uiEnv); err != nil {
			return &usageError{cmd: c, msg: err.Error()}
		}
		// Logins (and failed ones) are logged at info and warn: shown
		// without -v.
		level := slog.LevelInfo
		if *verbose {
			level = slog.LevelDebug
		}
		cfg = ui.Config{ReadOnly: *readOnly, User: *user, Password: *password, TraceURL: *traceURL,
			Limits: ui.Limits{LivePerClient: *livePerClient, Live: *liveMax},
			Log:    slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level}))}
		if *livePerClient < 1 || *liveMax < 1 {
			return &usageError{cmd: c, msg: fmt.Sprintf("-live-per-client %d, -live-max %d: want at least 1", *livePerClient, *liveMax)}
		}
		if err := uiPasswordFile(&cfg, *passwordFile); err != nil {
			return &usageError{cmd: c, msg: "-password-file: " + err.Error()}
		}
		var err error
		if cfg.TrustedProxies, err = parseProxies(*proxies); err != nil {
			return &usageError{cmd: c, msg: "-trusted-proxy: " + err.Error()}
		}
		if err := cfg.Validate(); err != nil {
			return &usageError{cmd: c, msg: err.Error()}
		}
		if err := ui.CheckAddr(*addr, cfg.User != ""); err != nil {
			return &usageError{cmd: c, msg: "-addr: " + err.Error()}
		}
		return nil
	}
	return action{check: check, do: func(e *env, x *call) error {
		store, opts := x.store, x.opts
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
	}}
}

var cmdUIHashPassword = &command{
	name: "ui hash-password",
	help: fmt.Sprintf(`Reads a password, from the terminal (asked twice, not shown) or the first
line of the input (printf %%s "$PW" | weft ui hash-password -user ops), and
prints the line of a UI password file for -user: USER:BCRYPT-HASH. Give
the file to 'weft ui -password-file' (or WEFT_UI_PASSWORD_FILE, also read
by 'weft dev'). The password needs at least %d characters (at most %d
bytes: bcrypt ignores the rest).`, ui.MinPasswordLength, ui.MaxPasswordLength),
}

// uiHashPassword runs 'weft ui hash-password'.
func uiHashPassword(e *env, c *command, args []string) error {
	flags := func(fs *flag.FlagSet) action {
		user := fs.String("user", "", "the UI's user (required)")
		cost := fs.Int("cost", ui.DefaultHashCost, fmt.Sprintf("bcrypt cost, %d or more: each step doubles the time a login's check takes", ui.MinHashCost))
		return action{do: func(e *env, x *call) error {
			c := x.cmd
			if *user == "" {
				return &usageError{cmd: c, msg: "-user: the UI's user is required"}
			}
			password, err := readPassword(e)
			if err != nil {
				return err
			}
			line, err := ui.HashPassword(*user, password, *cost)
			if err != nil {
				return &usageError{cmd: c, msg: err.Error()}
			}
			fmt.Fprintln(e.stdout, line)
			return nil
		}}
	}
	return e.skeleton(c.with(0, 0, connNone, flags), args)
}

// readPassword reads a password: from a terminal twice, without echo,
// else the first line of the input.
func readPassword(e *env) (string, error) {
	if f, ok := e.stdin.(*os.File); ok && isTerminal(f) {
		fmt.Fprint(e.stderr, "Password: ")
		p1, err := readHidden(f)
		fmt.Fprintln(e.stderr)
		if err != nil {
			return "", fmt.Errorf("reading the password: %w", err)
		}
		if err := ui.CheckPassword(p1); err != nil {
			return "", err
		}
		fmt.Fprint(e.stderr, "Again: ")
		p2, err := readHidden(f)
		fmt.Fprintln(e.stderr)
		if err != nil {
			return "", fmt.Errorf("reading the password: %w", err)
		}
		if p1 != p2 {
			return "", errors.New("the two passwords differ")
		}
		return p1, nil
	}
	if e.stdin == nil {
		return "", errors.New("no password: give it on the input")
	}
	line, err := bufio.NewReader(io.LimitReader(e.stdin, 4096)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("reading the password: %w", err)
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("no password on the input")
	}
	return line, nil
}

// uiPasswordFile sets cfg's user and password hash from the password
// file at path, if there is one; refused with a plain password.
func uiPasswordFile(cfg *ui.Config, path string) error {
	if path == "" {
		return nil
	}
	if cfg.User != "" || cfg.Password != "" {
		return errors.New("a password file, or -ui-user and -ui-password (WEFT_UI_USER, WEFT_UI_PASSWORD), not both")
	}
	user, hash, err := ui.ReadPasswordFile(path)
	if err != nil {
		return err
	}
	cfg.User, cfg.PasswordHash = user, hash
	return nil
}

// parseProxies parses -trusted-proxy: addresses and networks, comma
// separated.
func parseProxies(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("%q: want an address or a network (10.0.0.0/8)", f)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
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
// (WEFT_UI_USER and WEFT_UI_PASSWORD, or WEFT_UI_PASSWORD_FILE;
// WEFT_UI_TRACE_URL).
func uiFromEnv(log *slog.Logger) (ui.Config, error) {
	cfg := ui.Config{
		User: os.Getenv("WEFT_UI_USER"), Password: os.Getenv("WEFT_UI_PASSWORD"),
		TraceURL: os.Getenv("WEFT_UI_TRACE_URL"), Log: log,
	}
	if err := uiPasswordFile(&cfg, os.Getenv("WEFT_UI_PASSWORD_FILE")); err != nil {
		return cfg, fmt.Errorf("WEFT_UI_PASSWORD_FILE: %w", err)
	}
	return cfg, nil
}

// devUI checks 'weft dev -ui': nil when the UI is off.
func devUI(c *command, addr string, log *slog.Logger) (*ui.Config, error) {
	if addr == "" || addr == "off" {
		return nil, nil
	}
	cfg, err := uiFromEnv(log)
	if err != nil {
		return nil, &usageError{cmd: c, msg: "-ui: " + err.Error()}
	}
	if err := cfg.Validate(); err != nil {
		return nil, &usageError{cmd: c, msg: "-ui: " + err.Error()}
	}
	if err := ui.CheckAddr(addr, cfg.User != ""); err != nil {
		return nil, &usageError{cmd: c, msg: "-ui: " + err.Error()}
	}
	return &cfg, nil
}
