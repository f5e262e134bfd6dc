package ui_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/readmodel"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/internal/ui"
	"github.com/weft-dev/weft/pkg/events"
)

// serve serves the UI over a store of a fresh server, without an engine.
func serve(t *testing.T, cfg ui.Config) (string, events.Store) {
	t.Helper()
	_, store := testkit.Store(t)
	cfg.Store = store
	h, err := ui.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return hs.URL, store
}

func fetch(t *testing.T, method, url string, h http.Header) response {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// TestUIAuth: with credentials set, every path needs them. (The limits
// on failures are TestUILoginLimits'.)
func TestUIAuth(t *testing.T) {
	url, _ := serve(t, ui.Config{User: "ada", Password: "correct-horse-staple", Limits: ui.Limits{LoginFailures: 1000}})
	basic := func(u, p string) http.Header {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.SetBasicAuth(u, p)
		return req.Header
	}
	for _, path := range []string{"/", "/runs/x", "/api/config", "/api/runs", "/api/live/runs"} {
		for name, h := range map[string]http.Header{"none": nil, "wrong password": basic("ada", "guess"), "wrong user": basic("bob", "correct-horse-staple"), "empty": basic("", "")} {
			r := fetch(t, http.MethodGet, url+path, h)
			if r.status != http.StatusUnauthorized || !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Basic ") {
				t.Errorf("GET %s with %s credentials: %d, WWW-Authenticate %q; want 401", path, name, r.status, r.header.Get("WWW-Authenticate"))
			}
			if r.header.Get("Content-Security-Policy") == "" {
				t.Errorf("GET %s with %s credentials: no security headers on the 401", path, name)
			}
		}
	}
	if r := fetch(t, http.MethodGet, url+"/api/config", basic("ada", "correct-horse-staple")); r.status != http.StatusOK {
		t.Errorf("GET /api/config with the credentials: %d %s", r.status, r.body)
	}
	if _, err := ui.New(ui.Config{Store: nil, User: "ada"}); err == nil {
		t.Error("New took a user without a password (and no store)")
	}
}

// TestUIReadOnly: a read-only UI refuses every action and says so.
func TestUIReadOnly(t *testing.T) {
	url, _ := serve(t, ui.Config{ReadOnly: true})
	var cfg struct{ ReadOnly bool }
	r := fetch(t, http.MethodGet, url+"/api/config", nil)
	r.decode(t, &cfg)
	if !cfg.ReadOnly {
		t.Errorf("/api/config: %s, want readOnly", r.body)
	}
	for _, action := range []string{"signal", "cancel", "fork"} {
		r := fetch(t, http.MethodPost, url+"/api/runs/somerun/"+action, http.Header{ui.ActionHeader: {"1"}})
		wantError(t, "read-only "+action, r, http.StatusForbidden, "")
	}
}

// TestUISecurityHeaders: every answer carries the security headers.
func TestUISecurityHeaders(t *testing.T) {
	url, _ := serve(t, ui.Config{})
	want := map[string]string{
		"X-Content-Type-Options": "nosniff",
		"Referrer-Policy":        "no-referrer",
		"X-Frame-Options":        "DENY",
	}
	for _, path := range []string{"/", "/runs/abc", "/api/config", "/api/runs", "/api/nothing", "/api/runs/nosuchrun"} {
		r := fetch(t, http.MethodGet, url+path, nil)
		for k, v := range want {
			if got := r.header.Get(k); got != v {
				t.Errorf("GET %s: %s %q, want %q", path, k, got, v)
			}
		}
		csp := r.header.Get("Content-Security-Policy")
		for _, d := range []string{"default-src 'self'", "style-src 'self' 'unsafe-inline'", "img-src 'self' data:", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, d) {
				t.Errorf("GET %s: CSP %q lacks %q", path, csp, d)
			}
		}
		if strings.Contains(csp, "script-src") && !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("GET %s: CSP %q allows other scripts", path, csp)
		}
	}
}

// TestUINATSDown: when the server's connection to NATS is gone, the API
// says so with 503; the page's files and config are still served.
func TestUINATSDown(t *testing.T) {
	srv := testkit.Server(t)
	nc, js := testkit.Connect(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store, err := events.Open(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	h, err := ui.New(ui.Config{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	nc.Close()
	for _, path := range []string{"/api/runs", "/api/runs/somerun", "/api/workers", "/api/live/runs"} {
		r := fetch(t, http.MethodGet, hs.URL+path, nil)
		wantError(t, "NATS down: GET "+path, r, http.StatusServiceUnavailable, "")
		if !strings.Contains(string(r.body), "NATS is not reachable") {
			t.Errorf("GET %s: %s, want it to say NATS is not reachable", path, r.body)
		}
	}
	for _, path := range []string{"/", "/api/config"} {
		if r := fetch(t, http.MethodGet, hs.URL+path, nil); r.status != http.StatusOK {
			t.Errorf("NATS down: GET %s: %d", path, r.status)
		}
	}
}

// TestUIPlaceholder: a UI built without its front end serves the
// placeholder page, which says how to build it, on every page path; a
// built one serves its index and assets.
func TestUIPlaceholder(t *testing.T) {
	placeholder, err := os.ReadFile("placeholder.html")
	if err != nil {
		t.Fatal(err)
	}
	url, _ := serve(t, ui.Config{Files: fstest.MapFS{"README": {Data: []byte("not a page")}}})
	for _, path := range []string{"/", "/index.html", "/runs/abc", "/workers", "/README"} {
		r := fetch(t, http.MethodGet, url+path, nil)
		if r.status != http.StatusOK || string(r.body) != string(placeholder) || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
			t.Errorf("GET %s without a build: %d %q, want the placeholder", path, r.status, r.header.Get("Content-Type"))
		}
	}
	if !strings.Contains(string(placeholder), "make ui") {
		t.Error("the placeholder does not say to run make ui")
	}

	const index = `<!doctype html><script type="module" src="/assets/app-1234.js"></script>`
	url, _ = serve(t, ui.Config{Files: fstest.MapFS{
		"index.html":         {Data: []byte(index)},
		"assets/app-1234.js": {Data: []byte("console.log(1)")},
	}})
	for path, want := range map[string]string{"/": index, "/runs/abc": index, "/assets/app-1234.js": "console.log(1)"} {
		if r := fetch(t, http.MethodGet, url+path, nil); r.status != http.StatusOK || string(r.body) != want {
			t.Errorf("GET %s with a build: %d %s", path, r.status, r.body)
		}
	}
	if r := fetch(t, http.MethodGet, url+"/assets/missing.js", nil); r.status != http.StatusNotFound {
		t.Errorf("GET a missing asset: %d, want 404", r.status)
	}

	// The embedded files: the build when there is one, else the
	// placeholder.
	want := placeholder
	if b, err := os.ReadFile("dist/index.html"); err == nil {
		want = b
	}
	url, _ = serve(t, ui.Config{})
	if r := fetch(t, http.MethodGet, url+"/runs/abc", nil); r.status != http.StatusOK || string(r.body) != string(want) {
		t.Errorf("GET /runs/abc from the embedded files: %d, not the expected page", r.status)
	}
}

// TestUICheckAddr: loopback addresses are served as they are; any other
// needs credentials.
func TestUICheckAddr(t *testing.T) {
	for _, tt := range []struct {
		addr    string
		creds   bool
		wantErr error
	}{
		{"127.0.0.1:8233", false, nil},
		{"localhost:8233", false, nil},
		{"[::1]:8233", false, nil},
		{"127.0.0.2:0", false, nil},
		{"0.0.0.0:8233", false, ui.ErrExposed},
		{":8233", false, ui.ErrExposed},
		{"[::]:8233", false, ui.ErrExposed},
		{"192.168.1.10:8233", false, ui.ErrExposed},
		{"example.com:8233", false, ui.ErrExposed},
		{"0.0.0.0:8233", true, nil},
	} {
		err := ui.CheckAddr(tt.addr, tt.creds)
		if !errors.Is(err, tt.wantErr) {
			t.Errorf("CheckAddr(%q, %v) = %v, want %v", tt.addr, tt.creds, err, tt.wantErr)
		}
		if err != nil && (!strings.Contains(err.Error(), "-ui-user") || !strings.Contains(err.Error(), "WEFT_UI_PASSWORD")) {
			t.Errorf("CheckAddr(%q): %v does not name the flags and variables", tt.addr, err)
		}
	}
	if err := ui.CheckAddr("8233", false); err == nil {
		t.Error("CheckAddr took an address without a host part")
	}
}

// TestUIStart: Start refuses a non-loopback address without credentials,
// says when the port is taken, and serves until closed.
func TestUIStart(t *testing.T) {
	_, store := testkit.Store(t)
	ctx := context.Background()
	if _, err := ui.Start(ctx, "0.0.0.0:0", ui.Config{Store: store}); !errors.Is(err, ui.ErrExposed) {
		t.Errorf("Start on 0.0.0.0 without credentials: %v", err)
	}
	s, err := ui.Start(ctx, "127.0.0.1:0", ui.Config{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if r := fetch(t, http.MethodGet, s.URL()+"/api/config", nil); r.status != http.StatusOK {
		t.Errorf("GET /api/config: %d", r.status)
	}
	_, err = ui.Start(ctx, s.Addr().String(), ui.Config{Store: store})
	if err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("Start on a taken port: %v, want it to say the address is in use", err)
	}
	// A live stream does not hold Close up.
	if _, err := readmodel.Ensure(ctx, eventlog.JetStream(store), store.StreamName(), slog.Default()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(s.URL() + "/api/live/runs")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/live/runs: %d", resp.StatusCode)
	}
	s.Close()
	if _, err := io.ReadAll(resp.Body); err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("reading the stream after Close: %v", err)
	}
	if _, err := net.DialTimeout("tcp", s.Addr().String(), time.Second); err == nil {
		t.Error("the server still listens after Close")
	}
}

// TestUIGzip: answers are gzipped for clients that accept it; live
// streams are not.
func TestUIGzip(t *testing.T) {
	url, store := serve(t, ui.Config{})
	if _, err := readmodel.Ensure(context.Background(), eventlog.JetStream(store), store.StreamName(), slog.Default()); err != nil {
		t.Fatal(err)
	}
	r := fetch(t, http.MethodGet, url+"/api/runs", http.Header{"Accept-Encoding": {"gzip"}})
	if r.header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("GET /api/runs accepting gzip: Content-Encoding %q", r.header.Get("Content-Encoding"))
	}
	zr, err := gzip.NewReader(bytes.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil || !json.Valid(b) || r.header.Get("Content-Type") != "application/json" {
		t.Errorf("gunzipped answer %q (%v), Content-Type %q", b, err, r.header.Get("Content-Type"))
	}
	if r := fetch(t, http.MethodGet, url+"/api/runs", http.Header{"Accept-Encoding": {"gzip;q=0, identity"}}); r.header.Get("Content-Encoding") != "" || !json.Valid(r.body) {
		t.Errorf("gzip;q=0: Content-Encoding %q", r.header.Get("Content-Encoding"))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/api/live/runs", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Encoding") != "" {
		t.Errorf("live stream: %d, Content-Encoding %q", resp.StatusCode, resp.Header.Get("Content-Encoding"))
	}
}

// TestUIHost: without credentials the UI answers only to requests for a
// loopback host (a DNS-rebinding page's requests name its own host).
func TestUIHost(t *testing.T) {
	for _, tt := range []struct {
		host  string
		creds bool
		want  int
	}{
		{"127.0.0.1:8233", false, http.StatusOK},
		{"LOCALHOST:5173", false, http.StatusOK},
		{"[::1]:8233", false, http.StatusOK},
		{"evil.example:8233", false, http.StatusForbidden},
		{"evil.example", false, http.StatusForbidden},
		{"10.0.0.1:8233", false, http.StatusForbidden},
		{"evil.example:8233", true, http.StatusOK},
	} {
		cfg := ui.Config{}
		if tt.creds {
			cfg.User, cfg.Password = "ada", "correct-horse-staple"
		}
		url, _ := serve(t, cfg)
		req, _ := http.NewRequest(http.MethodGet, url+"/api/config", nil)
		req.Host = tt.host
		if tt.creds {
			req.SetBasicAuth("ada", "correct-horse-staple")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("Host %s (credentials %v): %d, want %d", tt.host, tt.creds, resp.StatusCode, tt.want)
		}
	}
}
