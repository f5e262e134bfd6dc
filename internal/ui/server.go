package ui

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/batch"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
)

// Defaults and limits of the server.
const (
	// DefaultAddr is where the UI listens unless told otherwise.
	DefaultAddr = "127.0.0.1:8233"
	// MaxBody is the largest request body taken.
	MaxBody = 1 << 20
	// PingInterval is how often a live stream sends a comment, so that
	// proxies do not close it.
	PingInterval = 15 * time.Second
	// ActionHeader must be set to "1" on every POST: a cross-site form
	// cannot set it.
	ActionHeader = "X-Weft-Action"
	// TraceIDPlaceholder is replaced by a run's trace id in TraceURL.
	TraceIDPlaceholder = "{traceId}"
)

// readTimeout bounds every read of the log an API request makes, and
// actionTimeout an action: a person waits for its answer, and an append
// the server's NATS user may not make never gets one.
const (
	readTimeout   = 30 * time.Second
	actionTimeout = 15 * time.Second
)

// securityHeaders are set on every answer. The policy allows the page's
// own scripts and styles (and inline style attributes, which graph layout
// sets) and data: images (icons); nothing from elsewhere, no framing.
var securityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
	"X-Content-Type-Options":  "nosniff",
	"Referrer-Policy":         "no-referrer",
	"X-Frame-Options":         "DENY",
}

// Config configures the UI server.
type Config struct {
	// Store is the events store the server reads (required).
	Store events.Store
	// Client reads and steers runs; default client.New(Store).
	Client *client.Client
	// ReadOnly refuses every action (signal, cancel, fork) with 403.
	ReadOnly bool
	// User and Password, when set, are required on every request (HTTP
	// basic auth). Both or neither; the password has at least
	// MinPasswordLength characters.
	User, Password string
	// PasswordHash is a bcrypt hash of the password, in place of
	// Password (ReadPasswordFile reads one, HashPassword makes one).
	PasswordHash string
	// TrustedProxies are the addresses of reverse proxies in front of
	// the server: a request from one is counted as the client's its
	// X-Forwarded-For names (Limits), not the proxy's.
	TrustedProxies []netip.Prefix
	// Limits bound failed logins and live streams; zero fields take the
	// defaults.
	Limits Limits
	// TraceURL links a run's trace id to a tracing UI: a URL with
	// {traceId} in it, e.g. http://localhost:16686/trace/{traceId}.
	TraceURL string
	// Version is what /api/config reports; default the module's build
	// version.
	Version string
	// Summarize says in one line what an event states (the timeline's
	// summary); default none.
	Summarize func(*events.Event) string
	// Files are the front end's files, with index.html at the root;
	// default the embedded build (see dist).
	Files fs.FS
	// NoConsumerList says the connection may not list the events
	// stream's consumers (Weft's client and ui roles may not): the work
	// waiting on each queue is reported unknown without asking, which
	// would only time out and log a permissions violation.
	NoConsumerList bool
	// Ping is how often live streams send a keep-alive comment; default
	// PingInterval.
	Ping time.Duration
	// Log is the logger; default slog.Default(). Logins go to it: each
	// failure at warn, a client's first success in a while at info.
	Log *slog.Logger

	// now is the clock of the limits; default time.Now (tests set it).
	now func() time.Time
}

// Validate reports every problem with the settings at once (New also
// needs a Store).
//
// Size: a flat list of independent option checks; all errors are collected.
func (c *Config) Validate() error {
	var errs []error
	switch {
	case c.Password != "" && c.PasswordHash != "":
		errs = append(errs, errors.New("ui: a password or its hash (a password file), not both"))
	case (c.User == "") != (c.Password == "" && c.PasswordHash == ""):
		errs = append(errs, errors.New("ui: a user and a password, both or neither"))
	}
	if c.User != "" {
		if err := checkUser(c.User); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Password != "" {
		if err := CheckPassword(c.Password); err != nil {
			errs = append(errs, fmt.Errorf("ui: %w", err))
		}
	}
	if c.PasswordHash != "" {
		if err := checkHash(c.PasswordHash); err != nil {
			errs = append(errs, fmt.Errorf("ui: password hash: %w", err))
		}
	}
	if err := c.Limits.validate(); err != nil {
		errs = append(errs, err)
	}
	if c.TraceURL != "" {
		u, err := url.Parse(strings.ReplaceAll(c.TraceURL, TraceIDPlaceholder, "x"))
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			errs = append(errs, fmt.Errorf("ui: trace URL %q: want an absolute http(s) URL", c.TraceURL))
		case !strings.Contains(c.TraceURL, TraceIDPlaceholder):
			errs = append(errs, fmt.Errorf("ui: trace URL %q: want %s in it", c.TraceURL, TraceIDPlaceholder))
		}
	}
	if c.Ping < 0 {
		errs = append(errs, fmt.Errorf("ui: ping interval %v: want a positive duration", c.Ping))
	}
	return errors.Join(errs...)
}

// server answers the API and serves the files.
type server struct {
	cfg   Config
	cl    *client.Client
	js    jetstream.JetStream
	log   *slog.Logger
	files fs.FS
	index []byte
	logs  *logCache
	feed  *runsFeed
	door  *door
	creds *credentials // nil without credentials
	// xorigin refuses state-changing requests from another origin.
	xorigin *http.CrossOriginProtection

	// Whether this server may run batch jobs (batches.go), found out
	// once, and their store when it may.
	rightsOnce sync.Once
	rightsAre  rights
	jobs       *batch.Store

	// The last failure to list the queues' consumers, and when.
	consumersMu  sync.Mutex
	consumersErr error
	consumersAt  time.Time
}

// New returns the UI's handler: the API of API.md under /api/, the front
// end's files elsewhere.
func New(cfg Config) (http.Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Store == nil {
		return nil, errors.New("ui: no events store")
	}
	js := eventlog.JetStream(cfg.Store)
	if js == nil {
		return nil, fmt.Errorf("ui: the store %T is not one events.Open made, nor a wrapper of one with an Unwrap() events.Store method", cfg.Store)
	}
	cfg.withDefaults()
	s := &server{
		cfg: cfg, cl: cfg.Client, js: js, log: cfg.Log, logs: newLogCache(cfg.Store, cfg.Client),
		feed:    newRunsFeed(js, cfg.Log),
		door:    newDoor(cfg.Limits, cfg.TrustedProxies, cfg.now),
		xorigin: http.NewCrossOriginProtection(),
	}
	if cfg.User != "" {
		s.creds = newCredentials(&cfg)
	}
	if err := s.loadFiles(cfg.Files); err != nil {
		return nil, err
	}
	api := s.api()
	mux := http.NewServeMux()
	mux.Handle("/api/live/", s.limitLive(s.guardAPI(api)))
	mux.Handle("/api/", compressed(s.guardAPI(api)))
	mux.HandleFunc("/", s.static)
	return s.secure(mux), nil
}

// withDefaults fills in what cfg leaves out.
func (cfg *Config) withDefaults() {
	if cfg.Client == nil {
		cfg.Client = client.New(cfg.Store)
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Ping == 0 {
		cfg.Ping = PingInterval
	}
	if cfg.Version == "" {
		cfg.Version = buildVersion()
	}
	if cfg.Summarize == nil {
		cfg.Summarize = func(*events.Event) string { return "" }
	}
	if cfg.now == nil {
		cfg.now = time.Now
	}
	cfg.Limits.withDefaults()
}

// api routes the API of API.md.
func (s *server) api() *http.ServeMux {
	api := http.NewServeMux()
	api.HandleFunc("GET /api/config", s.config)
	api.HandleFunc("GET /api/runs", s.listRuns)
	api.HandleFunc("GET /api/runs/{id}", s.getRun)
	api.HandleFunc("GET /api/runs/{id}/events", s.runEvents)
	api.HandleFunc("GET /api/runs/{id}/state", s.runState)
	api.HandleFunc("GET /api/runs/{id}/conversation", s.conversation)
	api.HandleFunc("POST /api/runs/{id}/signal", s.signal)
	api.HandleFunc("POST /api/runs/{id}/cancel", s.cancel)
	api.HandleFunc("POST /api/runs/{id}/fork", s.fork)
	api.HandleFunc("POST /api/runs/{id}/reset", s.reset)
	api.HandleFunc("POST /api/runs", s.start)
	api.HandleFunc("POST /api/batches", s.startBatch)
	api.HandleFunc("GET /api/batches/{id}", s.getBatch)
	api.HandleFunc("GET /api/workers", s.workers)
	api.HandleFunc("GET /api/schedules", s.listSchedules)
	api.HandleFunc("GET /api/schedules/{name}", s.getSchedule)
	api.HandleFunc("POST /api/schedules/{name}/pause", s.pauseSchedule(true))
	api.HandleFunc("POST /api/schedules/{name}/unpause", s.pauseSchedule(false))
	api.HandleFunc("POST /api/schedules/{name}/trigger", s.triggerSchedule)
	api.HandleFunc("GET /api/live/runs", s.liveRuns)
	api.HandleFunc("GET /api/live/runs/{id}", s.liveRun)
	api.HandleFunc("GET /api/live/runs/{id}/tokens", s.liveTokens)
	api.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no API at %s %s", r.Method, r.URL.Path), "")
	})
	return api
}

// secure sets the security headers, refuses requests from other
// origins where they could change something, and checks credentials, on
// every path.
func (s *server) secure(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range securityHeaders {
			w.Header().Set(k, v)
		}
		if err := s.sameOrigin(r); err != nil {
			writeError(w, http.StatusForbidden, err.Error(), "Origin")
			return
		}
		if s.creds == nil && !loopbackHost(r.Host) {
			// Without credentials the UI is for this machine only: a
			// page elsewhere that rebinds its own name to 127.0.0.1
			// (DNS rebinding) must not reach it as same-origin.
			writeError(w, http.StatusForbidden, fmt.Sprintf("host %q refused: without credentials the UI answers only to localhost, 127.0.0.1 or [::1]", r.Host), "Host")
			return
		}
		if s.creds != nil && !s.login(w, r) {
			return
		}
		next.ServeHTTP(w, r)
	})
}

// sameOrigin refuses a state-changing request (any method but GET, HEAD
// and OPTIONS) that a browser says comes from another origin
// (Sec-Fetch-Site, or else an Origin that is not the Host), and any API
// request that a browser says another site's page made: the API has no
// cross-origin callers (it sends no CORS headers), and a page elsewhere
// must not hold a client's live streams open either. A request without
// these headers is not a browser's, or a same-origin one of an old
// browser.
func (s *server) sameOrigin(r *http.Request) error {
	if err := s.xorigin.Check(r); err != nil {
		return fmt.Errorf("cross-origin %s refused (Origin %q, Sec-Fetch-Site %q): actions are taken only from the UI's own pages", r.Method, r.Header.Get("Origin"), r.Header.Get("Sec-Fetch-Site"))
	}
	if strings.HasPrefix(r.URL.Path, "/api/") {
		switch site := r.Header.Get("Sec-Fetch-Site"); site {
		case "", "same-origin", "none":
		default:
			return fmt.Errorf("%s request refused (Sec-Fetch-Site %q): the API answers only the UI's own pages", site, site)
		}
	}
	return nil
}

// login checks a request's credentials, under the limits on failures,
// logging each failure and a client's first success in a while; false
// when it answered the request itself (401 or 429).
func (s *server) login(w http.ResponseWriter, r *http.Request) bool {
	user, pass, ok := r.BasicAuth()
	if !ok {
		// No credentials yet: the browser asks for them. Not a failed
		// login.
		w.Header().Set("WWW-Authenticate", `Basic realm="weft", charset="UTF-8"`)
		writeError(w, http.StatusUnauthorized, "credentials required", "")
		return false
	}
	key := s.door.clientOf(r)
	l, refused, err := s.door.begin(r.Context(), key)
	if err != nil {
		return false // the client went away while it waited its turn
	}
	if refused != nil {
		switch {
		case refused.toLog > 0:
			s.log.Warn("ui: logins refused: the client is locked out (logged once every 10 s per client)", logattr.Remote, r.RemoteAddr, logattr.Client, showClient(key), logattr.Count, refused.toLog, logattr.Lockout, refused.retry)
		case refused.budget && s.door.logDue(&s.door.loggedBudget):
			s.log.Warn("ui: logins refused: the server's budget of failed logins is spent (logged once every 10 s)", logattr.Remote, r.RemoteAddr, logattr.Client, showClient(key))
		}
		refused.write(w)
		return false
	}
	good, knownUser := s.creds.check(user, pass)
	res := l.end(good)
	shown := "(other)"
	if knownUser {
		shown = s.cfg.User
	}
	if good {
		if res.first {
			s.log.Info("ui: login", logattr.Remote, r.RemoteAddr, logattr.Client, showClient(key), logattr.User, shown)
		}
		return true
	}
	attrs := []any{logattr.Remote, r.RemoteAddr, logattr.Client, showClient(key), logattr.User, shown, logattr.Failures, res.failures}
	if res.lockout > 0 {
		attrs = append(attrs, logattr.Lockout, res.lockout)
	}
	s.log.Warn("ui: login failed", attrs...)
	w.Header().Set("WWW-Authenticate", `Basic realm="weft", charset="UTF-8"`)
	writeError(w, http.StatusUnauthorized, "credentials required", "")
	return false
}

// limitLive holds a live stream to the limits on them (per client, in
// all): one over is answered 429.
func (s *server) limitLive(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := s.door.clientOf(r)
		done, refused := s.door.openLive(key)
		if refused != nil {
			if s.door.logDue(&s.door.loggedLive) {
				s.log.Warn("ui: live stream refused (logged once every 10 s)", logattr.Remote, r.RemoteAddr, logattr.Client, showClient(key), logattr.Error, refused.msg)
			}
			refused.write(w)
			return
		}
		defer done()
		next.ServeHTTP(w, r)
	})
}

// guardAPI refuses actions in read-only mode or without ActionHeader, and
// says at once when NATS is not reachable.
func (s *server) guardAPI(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		if r.Method == http.MethodPost {
			switch {
			case s.cfg.ReadOnly:
				writeError(w, http.StatusForbidden, "the UI is read-only: actions are refused", "")
				return
			case r.Header.Get(ActionHeader) != "1":
				writeError(w, http.StatusForbidden, "an action needs the header "+ActionHeader+": 1", ActionHeader)
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
		}
		if r.URL.Path != "/api/config" {
			if nc := s.js.Conn(); !nc.IsConnected() {
				writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("NATS is not reachable (connection %s); the server reconnects by itself", strings.ToLower(nc.Status().String())), "")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

type configView struct {
	ReadOnly bool   `json:"readOnly"`
	TraceURL string `json:"traceUrl"`
	Version  string `json:"version"`
	// Rights are the actions beyond the client's this server may take
	// (batch jobs), and why not.
	Rights rights `json:"rights"`
}

func (s *server) config(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, configView{ReadOnly: s.cfg.ReadOnly, TraceURL: s.cfg.TraceURL, Version: s.cfg.Version, Rights: s.rights()})
}

// buildVersion is the main module's version as the build recorded it.
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "devel"
}

// readCtx bounds a request's reads of the log, or its action.
func readCtx(r *http.Request) (context.Context, context.CancelFunc) {
	if r.Method == http.MethodPost {
		return context.WithTimeout(r.Context(), actionTimeout)
	}
	return context.WithTimeout(r.Context(), readTimeout)
}

// loopbackHost says whether a request's Host names this machine.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	return Loopback(strings.ToLower(strings.Trim(host, "[]")))
}
