package ui_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/readmodel"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/internal/ui"
	"github.com/weft-dev/weft/pkg/projection"
)

const goodPassword = "correct-horse-staple"

// clock is a test's clock: it moves when the test says.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// door serves the UI with cfg on the test's clock, its log in a buffer,
// behind a "proxy" (the test itself, on loopback) whose X-Forwarded-For
// says which client each request is.
type door struct {
	t   *testing.T
	url string
	log *testkit.Buffer
	clk *clock
	js  jetstream.JetStream
	// stream is the events stream's name.
	stream string
}

func newDoor(t *testing.T, cfg ui.Config) *door {
	t.Helper()
	d := &door{t: t, log: &testkit.Buffer{}, clk: newClock()}
	cfg.Log = slog.New(slog.NewTextHandler(d.log, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	ui.SetClock(&cfg, d.clk.now)
	url, store := serve(t, cfg)
	d.url, d.js, d.stream = url, eventlog.JetStream(store), store.StreamName()
	return d
}

// as sends a request from client (an address) with user and password
// (none when user is "") and headers h.
func (d *door) as(client, method, path, user, password string, h http.Header) response {
	d.t.Helper()
	if h == nil {
		h = http.Header{}
	}
	h.Set("X-Forwarded-For", client)
	if user != "" {
		req, _ := http.NewRequest(method, d.url, nil)
		req.SetBasicAuth(user, password)
		h.Set("Authorization", req.Header.Get("Authorization"))
	}
	return fetch(d.t, method, d.url+path, h)
}

func (d *door) lines(msg string) []string {
	var out []string
	for l := range strings.SplitSeq(d.log.String(), "\n") {
		if strings.Contains(l, `msg="`+msg+`"`) {
			out = append(out, l)
		}
	}
	return out
}

// TestUIPasswordRules: a short password is refused at start, and so is
// a password hash that is not bcrypt's or too cheap, and a plain
// password with a hash.
func TestUIPasswordRules(t *testing.T) {
	defer ui.LowerHashCost()()
	line, err := ui.HashPassword("ada", goodPassword, 4)
	if err != nil {
		t.Fatal(err)
	}
	_, hash, _ := strings.Cut(line, ":")
	for _, tt := range []struct {
		name    string
		cfg     ui.Config
		wantErr string
	}{
		{"12 characters", ui.Config{User: "ada", Password: "abcdefghijkl"}, ""},
		{"12 characters, not ASCII", ui.Config{User: "ada", Password: "ééééééééééé1"}, ""},
		{"11 characters", ui.Config{User: "ada", Password: "abcdefghijk"}, "11 characters, want at least 12"},
		{"one character", ui.Config{User: "ada", Password: "x"}, "want at least 12"},
		{"over bcrypt's 72 bytes", ui.Config{User: "ada", Password: strings.Repeat("x", 73)}, "at most 72"},
		{"a hash", ui.Config{User: "ada", PasswordHash: hash}, ""},
		{"a password and a hash", ui.Config{User: "ada", Password: goodPassword, PasswordHash: hash}, "not both"},
		{"not a hash", ui.Config{User: "ada", PasswordHash: goodPassword}, "not a bcrypt hash"},
		{"a hash without a user", ui.Config{PasswordHash: hash}, "both or neither"},
		{"a user with a colon", ui.Config{User: "a:b", Password: goodPassword}, "no ':'"},
		{"a negative limit", ui.Config{Limits: ui.Limits{LivePerClient: -1}}, "live streams per client -1"},
		{"more per client than in all", ui.Config{Limits: ui.Limits{LivePerClient: 10, Live: 5}}, "over the 5 in all"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Validate: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("Validate: %v, want an error saying %q", err, tt.wantErr)
			}
		})
	}
	if err := ui.CheckPassword("short"); !errors.Is(err, ui.ErrWeakPassword) {
		t.Errorf("CheckPassword(short): %v, want ErrWeakPassword", err)
	}
	if _, err := ui.HashPassword("ada", "short", 4); !errors.Is(err, ui.ErrWeakPassword) {
		t.Errorf("HashPassword(short): %v, want ErrWeakPassword", err)
	}
	// The real minimum cost: a cheap hash (htpasswd -B's default is 5)
	// is refused by name.
	ui.LowerHashCost()() // restores MinHashCost
	if err := (&ui.Config{User: "ada", PasswordHash: hash}).Validate(); err == nil || !strings.Contains(err.Error(), "cost 4: want at least 10") {
		t.Errorf("a hash of cost 4: %v", err)
	}
	if _, err := ui.HashPassword("ada", goodPassword, 9); err == nil {
		t.Error("HashPassword took cost 9")
	}
}

// TestUIPasswordFile: the file's one USER:HASH line, with comments; the
// errors name the file and the line, and never hold the hash.
func TestUIPasswordFile(t *testing.T) {
	defer ui.LowerHashCost()()
	line, err := ui.HashPassword("ada", goodPassword, 4)
	if err != nil {
		t.Fatal(err)
	}
	_, hash, _ := strings.Cut(line, ":")
	dir := t.TempDir()
	write := func(body string) string {
		p := filepath.Join(dir, "passwd")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	user, got, err := ui.ReadPasswordFile(write("# the UI's user\n\n" + line + "\n"))
	if err != nil || user != "ada" || got != hash {
		t.Fatalf("ReadPasswordFile: %q %q %v", user, got, err)
	}
	for _, tt := range []struct{ name, body, want string }{
		{"empty", "# nothing\n", "no USER:BCRYPT-HASH line"},
		{"two users", line + "\n" + line + "\n", ":2: a second user"},
		{"a plain password", "ada:" + goodPassword + "\n", ":1: not a bcrypt hash"},
		{"no user", ":" + hash + "\n", ":1: want USER:BCRYPT-HASH"},
		{"no colon", hash + "\n", "want USER:BCRYPT-HASH"},
	} {
		_, _, err := ui.ReadPasswordFile(write(tt.body))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
		if err != nil && (strings.Contains(err.Error(), hash) || strings.Contains(err.Error(), goodPassword)) {
			t.Errorf("%s: the error shows the secret: %v", tt.name, err)
		}
	}
	if _, _, err := ui.ReadPasswordFile(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}

	// Served: the hash is checked, and the right password is not
	// re-hashed on each request.
	d := newDoor(t, ui.Config{User: "ada", PasswordHash: hash})
	if r := d.as("10.0.0.1", http.MethodGet, "/api/config", "ada", goodPassword, nil); r.status != http.StatusOK {
		t.Fatalf("the right password: %d %s", r.status, r.body)
	}
	if r := d.as("10.0.0.1", http.MethodGet, "/api/config", "ada", goodPassword+"x", nil); r.status != http.StatusUnauthorized {
		t.Fatalf("a wrong password: %d %s", r.status, r.body)
	}
	if r := d.as("10.0.0.1", http.MethodGet, "/api/config", "bob", goodPassword, nil); r.status != http.StatusUnauthorized {
		t.Fatalf("a wrong user: %d %s", r.status, r.body)
	}
}

// TestUILoginLimits: a client's failed logins are each logged (its
// address, never a password), and after LoginFailures it is locked out
// with 429 and Retry-After, for twice as long with each further failure,
// the right password included; other clients are not. Its first login
// is logged, the next ones are not.
func TestUILoginLimits(t *testing.T) {
	d := newDoor(t, ui.Config{User: "ada", Password: goodPassword})
	const attacker, other = "203.0.113.7", "198.51.100.1"
	var guesses []string
	for i := range 5 {
		g := "guess-" + strings.Repeat("x", i) + "-secret"
		guesses = append(guesses, g)
		if r := d.as(attacker, http.MethodGet, "/api/config", "ada", g, nil); r.status != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d %s, want 401", i+1, r.status, r.body)
		}
	}
	for _, pw := range []string{"another-guess", goodPassword} {
		r := d.as(attacker, http.MethodGet, "/api/config", "ada", pw, nil)
		wantError(t, "locked out", r, http.StatusTooManyRequests, "")
		if got := r.header.Get("Retry-After"); got != "1" {
			t.Errorf("locked out: Retry-After %q, want 1", got)
		}
	}
	if r := d.as(other, http.MethodGet, "/api/config", "ada", goodPassword, nil); r.status != http.StatusOK {
		t.Errorf("another client while one is locked out: %d %s", r.status, r.body)
	}
	// Without credentials, a locked-out client is asked for them: no
	// check, nothing to count.
	if r := d.as(attacker, http.MethodGet, "/api/config", "", "", nil); r.status != http.StatusUnauthorized {
		t.Errorf("locked out, no credentials: %d", r.status)
	}
	d.clk.advance(time.Second)
	if r := d.as(attacker, http.MethodGet, "/api/config", "ada", "sixth-guess-secret", nil); r.status != http.StatusUnauthorized {
		t.Fatalf("after the lockout: %d %s", r.status, r.body)
	}
	r := d.as(attacker, http.MethodGet, "/api/config", "ada", goodPassword, nil)
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "2" {
		t.Errorf("after a sixth failure: %d, Retry-After %q; want 429 for 2 s", r.status, r.header.Get("Retry-After"))
	}
	d.clk.advance(2 * time.Second)
	if r := d.as(attacker, http.MethodGet, "/api/config", "ada", goodPassword, nil); r.status != http.StatusOK {
		t.Errorf("the right password after the lockout: %d %s", r.status, r.body)
	}
	// Failures are forgotten after the window without one.
	d.clk.advance(ui.DefaultLoginWindow)
	for range 4 {
		d.as(attacker, http.MethodGet, "/api/config", "ada", "fresh-guess-secret", nil)
	}
	if r := d.as(attacker, http.MethodGet, "/api/config", "ada", goodPassword, nil); r.status != http.StatusOK {
		t.Errorf("four failures after the window: %d, want the fifth try checked", r.status)
	}

	failed := d.lines("ui: login failed")
	if len(failed) != 5+1+4 {
		t.Errorf("%d lines of failed logins, want 10:\n%s", len(failed), d.log)
	}
	for _, l := range failed {
		if !strings.Contains(l, "remote=127.0.0.1:") || !strings.Contains(l, "client="+attacker) || !strings.Contains(l, "user=ada") {
			t.Errorf("a failure's line lacks the remote address, the client or the user: %s", l)
		}
	}
	if l := failed[4]; !strings.Contains(l, "failures=5") || !strings.Contains(l, "lockout=1s") {
		t.Errorf("the fifth failure's line: %s, want failures=5 lockout=1s", l)
	}
	// Refusals are counted, not logged one by one: the first, then at
	// most a line every 10 s with the count since (the test's clock
	// moved less).
	if refused := d.lines("ui: logins refused: the client is locked out (logged once every 10 s per client)"); len(refused) != 1 || !strings.Contains(refused[0], "count=1 lockout=1s") {
		t.Errorf("lines of refused logins: %q", refused)
	}
	logins := d.lines("ui: login")
	if len(logins) != 2 || !strings.Contains(logins[0], "client="+other) || !strings.Contains(logins[1], "client="+attacker) {
		t.Errorf("logins logged: %q, want the first of each client", logins)
	}
	for _, secret := range append(guesses, goodPassword, "sixth-guess-secret", "fresh-guess-secret", "another-guess") {
		if strings.Contains(d.log.String(), secret) {
			t.Errorf("a password is in the log: %q", secret)
		}
	}
	// A password typed as the user is not logged either.
	d.as("192.0.2.9", http.MethodGet, "/api/config", "my-password-by-mistake", "x", nil)
	if strings.Contains(d.log.String(), "my-password-by-mistake") {
		t.Error("a wrong user name is in the log")
	}
	if l := d.lines("ui: login failed"); !strings.Contains(l[len(l)-1], "user=(other)") {
		t.Errorf("a wrong user's failure: %s, want user=(other)", l[len(l)-1])
	}
}

// TestUILoginsAtOnce: a client's logins are checked one at a time, so
// many sent at once get no more checks than its failures allow.
func TestUILoginsAtOnce(t *testing.T) {
	d := newDoor(t, ui.Config{User: "ada", Password: goodPassword})
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			r := d.as("203.0.113.8", http.MethodGet, "/api/config", "ada", "wrong-password-1", nil)
			mu.Lock()
			codes[r.status]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if codes[http.StatusUnauthorized] != ui.DefaultLoginFailures || codes[http.StatusTooManyRequests] != 50-ui.DefaultLoginFailures {
		t.Errorf("50 failures at once: %v, want %d checked (401), the rest 429", codes, ui.DefaultLoginFailures)
	}
}

// TestUILoginBudget: failures from many clients spend the server's
// budget; then new clients are refused (the right password included)
// until it refills, while clients that logged in are still checked.
func TestUILoginBudget(t *testing.T) {
	d := newDoor(t, ui.Config{User: "ada", Password: goodPassword, Limits: ui.Limits{GlobalFailures: 3, GlobalRefill: time.Minute}})
	if r := d.as("192.0.2.1", http.MethodGet, "/api/config", "ada", goodPassword, nil); r.status != http.StatusOK {
		t.Fatalf("a login: %d", r.status)
	}
	for _, c := range []string{"203.0.113.1", "203.0.113.2", "203.0.113.3"} {
		if r := d.as(c, http.MethodGet, "/api/config", "ada", "wrong-password-1", nil); r.status != http.StatusUnauthorized {
			t.Fatalf("failure from %s: %d", c, r.status)
		}
	}
	r := d.as("203.0.113.4", http.MethodGet, "/api/config", "ada", goodPassword, nil)
	wantError(t, "a new client, the budget spent", r, http.StatusTooManyRequests, "")
	if r.header.Get("Retry-After") != "60" {
		t.Errorf("Retry-After %q, want 60", r.header.Get("Retry-After"))
	}
	if r := d.as("192.0.2.1", http.MethodGet, "/api/config", "ada", goodPassword, nil); r.status != http.StatusOK {
		t.Errorf("a client that logged in, the budget spent: %d", r.status)
	}
	if r := d.as("192.0.2.1", http.MethodGet, "/api/config", "ada", "typo-password", nil); r.status != http.StatusUnauthorized {
		t.Errorf("a typo of a client that logged in: %d, want it checked", r.status)
	}
	if n := len(d.lines("ui: logins refused: the server's budget of failed logins is spent (logged once every 10 s)")); n != 1 {
		t.Errorf("%d lines about the spent budget, want 1", n)
	}
	d.clk.advance(time.Minute)
	if r := d.as("203.0.113.4", http.MethodGet, "/api/config", "ada", goodPassword, nil); r.status != http.StatusOK {
		t.Errorf("a new client once the budget refilled: %d", r.status)
	}
}

// TestUIClients: a client is the peer's address, or behind a trusted
// proxy the nearest untrusted address it forwarded for; IPv6 clients
// are counted by /64.
func TestUIClients(t *testing.T) {
	d := newDoor(t, ui.Config{User: "ada", Password: goodPassword, Limits: ui.Limits{LoginFailures: 1}})
	lockOut := func(xff string) {
		t.Helper()
		if r := d.as(xff, http.MethodGet, "/api/config", "ada", "wrong-password-1", nil); r.status != http.StatusUnauthorized {
			t.Fatalf("X-Forwarded-For %q: %d", xff, r.status)
		}
	}
	locked := func(xff string) bool {
		t.Helper()
		return d.as(xff, http.MethodGet, "/api/config", "ada", goodPassword, nil).status == http.StatusTooManyRequests
	}
	lockOut("2001:db8:1:2::1")
	if !locked("2001:db8:1:2::ffff") || locked("2001:db8:1:3::1") {
		t.Error("IPv6 clients are not counted by /64")
	}
	// The client is the last hop that is not a trusted proxy: a forged
	// hop on the left does not change it.
	lockOut("198.51.100.9, 203.0.113.50")
	if !locked("1.2.3.4, 203.0.113.50") || !locked("203.0.113.50, 127.0.0.2") || locked("203.0.113.51") {
		t.Error("the client is not the nearest untrusted hop")
	}
	if !locked("::ffff:203.0.113.50") {
		t.Error("an IPv4-mapped address is another client")
	}
	lines := d.lines("ui: login failed")
	if len(lines) == 0 || !strings.Contains(lines[0], "client=2001:db8:1:2::/64") {
		t.Errorf("an IPv6 client's line: %q", lines)
	}

	// Without trusted proxies, X-Forwarded-For is not believed.
	url, _ := serve(t, ui.Config{User: "ada", Password: goodPassword, Limits: ui.Limits{LoginFailures: 1}})
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.SetBasicAuth("ada", "wrong-password-1")
	fetch(t, http.MethodGet, url+"/api/config", http.Header{"Authorization": req.Header["Authorization"], "X-Forwarded-For": {"203.0.113.1"}})
	req.SetBasicAuth("ada", goodPassword)
	if r := fetch(t, http.MethodGet, url+"/api/config", http.Header{"Authorization": req.Header["Authorization"], "X-Forwarded-For": {"203.0.113.2"}}); r.status != http.StatusTooManyRequests {
		t.Errorf("an untrusted X-Forwarded-For changed the client: %d", r.status)
	}
}

// TestUICrossOrigin: an action (any POST) a browser says comes from
// another origin is refused with 403, before credentials are asked; so
// is an API request from another site's page. Same-origin requests and
// requests without the browsers' headers (curl, scripts) pass.
func TestUICrossOrigin(t *testing.T) {
	url, _ := serve(t, ui.Config{User: "ada", Password: goodPassword})
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.SetBasicAuth("ada", goodPassword)
	auth := req.Header.Get("Authorization")
	host := strings.TrimPrefix(url, "http://")
	for _, tt := range []struct {
		name, method, path string
		h                  map[string]string
		want               int
	}{
		{"POST from another origin", "POST", "/api/runs/r1/cancel", map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden},
		{"POST from another origin, no credentials", "POST", "/api/runs/r1/signal", map[string]string{"Origin": "http://evil.example", "Authorization": ""}, http.StatusForbidden},
		{"POST cross-site", "POST", "/api/runs/r1/fork", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "http://evil.example"}, http.StatusForbidden},
		{"POST same-site (another port)", "POST", "/api/runs/r1/cancel", map[string]string{"Sec-Fetch-Site": "same-site", "Origin": "http://127.0.0.1:1"}, http.StatusForbidden},
		{"POST with a forged matching Origin, cross-site", "POST", "/api/runs/r1/cancel", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "http://" + host}, http.StatusForbidden},
		{"PUT from another origin", "PUT", "/api/runs/r1", map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden},
		{"GET of the API cross-site", "GET", "/api/runs", map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"a live stream cross-site", "GET", "/api/live/runs", map[string]string{"Sec-Fetch-Site": "same-site"}, http.StatusForbidden},
		{"POST same-origin", "POST", "/api/runs/r1/cancel", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://" + host}, http.StatusNotFound},
		{"POST with the Origin of the Host (an older browser)", "POST", "/api/runs/r1/cancel", map[string]string{"Origin": "http://" + host}, http.StatusNotFound},
		{"POST without browser headers", "POST", "/api/runs/r1/cancel", nil, http.StatusNotFound},
		{"a page opened from a link elsewhere", "GET", "/runs/r1", map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusOK},
	} {
		h := http.Header{ui.ActionHeader: {"1"}, "Authorization": {auth}}
		for k, v := range tt.h {
			if v == "" {
				h.Del(k)
			} else {
				h.Set(k, v)
			}
		}
		r := fetch(t, tt.method, url+tt.path, h)
		if r.status != tt.want {
			t.Errorf("%s: %d %s, want %d", tt.name, r.status, r.body, tt.want)
			continue
		}
		if tt.want == http.StatusForbidden {
			wantError(t, tt.name, r, http.StatusForbidden, "Origin")
		}
	}
}

// TestUILiveLimits: live streams are limited per client and in all,
// with a 429 that says which; a closed stream frees its place.
func TestUILiveLimits(t *testing.T) {
	d := newDoor(t, ui.Config{Limits: ui.Limits{LivePerClient: 2, Live: 3}})
	if _, err := readmodel.Ensure(context.Background(), d.js, d.stream, slog.Default()); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, url: d.url}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	open := func(ctx context.Context, client string) *sseStream {
		return e.openWith(ctx, "/api/live/runs", http.Header{"X-Forwarded-For": {client}})
	}
	open(ctx, "10.0.0.1")
	actx, acancel := context.WithCancel(ctx)
	a2 := open(actx, "10.0.0.1")
	r := d.as("10.0.0.1", http.MethodGet, "/api/live/runs", "", "", nil)
	wantError(t, "a third stream of a client", r, http.StatusTooManyRequests, "")
	if !strings.Contains(string(r.body), "this client has 2 live streams open") || r.header.Get("Retry-After") == "" {
		t.Errorf("a third stream of a client: %s, Retry-After %q", r.body, r.header.Get("Retry-After"))
	}
	open(ctx, "10.0.0.2")
	r = d.as("10.0.0.3", http.MethodGet, "/api/live/runs", "", "", nil)
	if r.status != http.StatusTooManyRequests || !strings.Contains(string(r.body), "the server has 3 live streams open") {
		t.Errorf("a fourth stream in all: %d %s", r.status, r.body)
	}
	acancel()
	for range a2.events {
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		rr := d.as("10.0.0.1", http.MethodGet, "/api/live/runs/nosuchrun", "", "", nil)
		if rr.status == http.StatusNotFound {
			break // the place is free: the stream's answer is the run's
		}
		if time.Now().After(deadline) {
			t.Fatalf("the closed stream's place was not freed: %d %s", rr.status, rr.body)
		}
		// Polls: the door's freed place is its map's state, not an event.
		time.Sleep(20 * time.Millisecond)
	}
}

// TestUILiveSharesOneWatch: every live run list shares one KV watch (one
// consumer of the read model's bucket), which hands each change to each
// of them; it goes with the last.
func TestUILiveSharesOneWatch(t *testing.T) {
	url, store := serve(t, ui.Config{})
	js := eventlog.JetStream(store)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := readmodel.Ensure(ctx, js, store.StreamName(), slog.Default()); err != nil {
		t.Fatal(err)
	}
	kvStream, err := js.Stream(ctx, "KV_"+readmodel.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	consumers := func() int {
		t.Helper()
		info, err := kvStream.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Consumers
	}
	e := &env{t: t, url: url}
	sctx, scancel := context.WithCancel(ctx)
	var streams []*sseStream
	for range 20 {
		streams = append(streams, e.open(sctx, "/api/live/runs"))
	}
	if n := consumers(); n != 1 {
		t.Errorf("20 live run lists: %d consumers of the bucket, want 1", n)
	}
	kv, err := js.KeyValue(ctx, readmodel.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	sum, _ := json.Marshal(readmodel.Summary{RunID: "r1", Graph: "g", Status: projection.RunRunning})
	if _, err := kv.Put(ctx, "test.r1", sum); err != nil {
		t.Fatal(err)
	}
	for i, s := range streams {
		ev, ok := s.next()
		for ok && ev.name == "comment" {
			ev, ok = s.next()
		}
		if !ok || ev.name != "run" || !strings.Contains(ev.data, `"runId":"r1"`) {
			t.Errorf("stream %d: %+v (open %v), want the run's summary", i, ev, ok)
		}
	}
	scancel()
	for _, s := range streams {
		for range s.events {
		}
	}
	// Polls: a consumer's deletion on the server sends no event to this test.
	for deadline := time.Now().Add(20 * time.Second); consumers() != 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the watch outlived its streams: %d consumers", consumers())
		}
	}
}
