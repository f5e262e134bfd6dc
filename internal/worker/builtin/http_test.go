package builtin_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/weft-dev/weft/internal/worker/builtin"
	"github.com/weft-dev/weft/pkg/events"
)

func allow(t *testing.T, entries ...string) *builtin.AddressPolicy {
	t.Helper()
	p, err := builtin.NewAddressPolicy(entries)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// canary is a loopback HTTP server that counts the requests it gets.
type canary struct {
	*httptest.Server
	hits atomic.Int64
}

func newCanary(t *testing.T) *canary {
	c := &canary{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.hits.Add(1)
		_, _ = io.WriteString(w, "canary")
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *canary) port() string {
	_, p, _ := net.SplitHostPort(c.Listener.Addr().String())
	return p
}

// TestHTTPAddressPolicy: addresses in denied ranges are refused whatever
// the host name says, before any connection; the error names the host and
// the rule.
func TestHTTPAddressPolicy(t *testing.T) {
	c := newCanary(t)
	tests := []struct {
		name    string
		policy  *builtin.AddressPolicy
		url     string
		wantMsg string
	}{
		{"loopback literal", nil, "http://127.0.0.1:" + c.port() + "/", "loopback"},
		{"loopback by name", nil, "http://localhost:" + c.port() + "/", "loopback"},
		{"mapped v6", nil, "http://[::ffff:127.0.0.1]:" + c.port() + "/", "loopback"},
		{"metadata", nil, "http://169.254.169.254/latest/meta-data/", "link-local"},
		{"private", nil, "http://10.0.0.1/", "private (10.0.0.0/8)"},
		{"unspecified", nil, "http://0.0.0.0:" + c.port() + "/", "unspecified"},
		{"v6 loopback", nil, "http://[::1]:" + c.port() + "/", "loopback"},
		{"v6 unique local", nil, "http://[fd00:ec2::254]/", "fc00::/7"},
		{"multicast", nil, "http://224.0.0.1/", "multicast"},
		{"link-local with a zone", nil, "http://[fe80::1%25lo]:" + c.port() + "/", "link-local"},
		{"host allowed, range not", allow(t, "localhost"), "http://localhost:" + c.port() + "/", "loopback"},
		{"other port", allow(t, "127.0.0.1:1"), "http://127.0.0.1:" + c.port() + "/", "allow-list"},
		{"not listed", allow(t, "api.example.com"), "http://127.0.0.1:" + c.port() + "/", "not in the worker's allow-list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &builtin.HTTP{Policy: tt.policy}
			_, err := h.Execute(context.Background(), input("http", map[string]any{"url": tt.url}))
			we := failure(t, err, builtin.FailureAddressDenied, false)
			if !strings.Contains(we.Message, tt.wantMsg) || !strings.Contains(we.Message, `http node "n1"`) {
				t.Errorf("message %q does not say %q", we.Message, tt.wantMsg)
			}
		})
	}
	if n := c.hits.Load(); n != 0 {
		t.Errorf("the canary got %d requests", n)
	}

	// Allowed explicitly, the same address is reached.
	for _, entry := range []string{"127.0.0.1", "127.0.0.0/8", "127.0.0.1:" + c.port()} {
		h := &builtin.HTTP{Policy: allow(t, entry)}
		res, err := h.Execute(context.Background(), input("http", map[string]any{"url": c.URL}))
		if err != nil || res.Output.(map[string]any)["body"] != "canary" {
			t.Fatalf("allowed by %q: %+v %v", entry, res, err)
		}
	}
}

// TestHTTPRedirects: every redirect is checked again, and their number is
// capped.
func TestHTTPRedirects(t *testing.T) {
	c := newCanary(t)
	var hops atomic.Int64
	var src *httptest.Server
	src = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/to-canary":
			http.Redirect(w, r, c.URL+"/stolen", http.StatusFound)
		case "/loop":
			hops.Add(1)
			http.Redirect(w, r, src.URL+"/loop", http.StatusFound)
		case "/echo-auth":
			http.Redirect(w, r, "/show", http.StatusFound)
		case "/show":
			_, _ = io.WriteString(w, r.Header.Get("X-Api-Key"))
		}
	}))
	t.Cleanup(src.Close)
	_, port, _ := net.SplitHostPort(src.Listener.Addr().String())
	h := &builtin.HTTP{Policy: allow(t, "127.0.0.1:"+port), MaxRedirects: 3}

	_, err := h.Execute(context.Background(), input("http", map[string]any{"url": src.URL + "/to-canary"}))
	we := failure(t, err, builtin.FailureAddressDenied, false)
	if !strings.Contains(we.Message, "127.0.0.1:"+c.port()) {
		t.Errorf("message %q does not name the canary", we.Message)
	}
	if n := c.hits.Load(); n != 0 {
		t.Errorf("the canary got %d requests", n)
	}

	_, err = h.Execute(context.Background(), input("http", map[string]any{"url": src.URL + "/loop"}))
	we = failure(t, err, builtin.FailureTooManyRedirects, false)
	if n := hops.Load(); n != 4 || !strings.Contains(we.Message, "at most 3 redirects") {
		t.Errorf("%d requests; %s", n, we.Message)
	}
}

// TestHTTPSecrets: a header references a worker secret; the request
// carries its value, the config (what events copy) only the reference,
// and the value is scrubbed from the output and from failures.
func TestHTTPSecrets(t *testing.T) {
	const secret = "s3cr3t-value-42"
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("Authorization"))
		if r.URL.Path == "/fail" {
			http.Error(w, "you sent "+r.Header.Get("Authorization"), http.StatusBadRequest)
			return
		}
		w.Header().Set("X-Echo", r.Header.Get("Authorization"))
		_, _ = io.WriteString(w, "token was "+r.Header.Get("Authorization"))
	}))
	t.Cleanup(srv.Close)
	secrets := builtin.SecretsFromEnv(func(k string) (string, bool) {
		if k == "WEFT_SECRET_API_TOKEN" {
			return secret, true
		}
		return "", false
	})
	h := &builtin.HTTP{Policy: allow(t, "127.0.0.1"), Secrets: secrets}
	cfg := map[string]any{"url": srv.URL + "/ok", "headers": map[string]string{"Authorization": "Bearer ${secret:API_TOKEN}"}}
	in := input("http", cfg)
	if strings.Contains(string(in.Config), secret) {
		t.Fatal("the config holds the secret")
	}
	res, err := h.Execute(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if got.Load() != "Bearer "+secret {
		t.Errorf("sent Authorization %q", got.Load())
	}
	out, _ := json.Marshal(res.Output)
	if strings.Contains(string(out), secret) || !strings.Contains(string(out), "[redacted]") {
		t.Errorf("output shows the secret: %s", out)
	}
	cfg["url"] = srv.URL + "/fail"
	_, err = h.Execute(context.Background(), input("http", cfg))
	we := failure(t, err, builtin.FailureHTTPStatus, false)
	b, _ := json.Marshal(we)
	if strings.Contains(we.Error()+string(b), secret) {
		t.Errorf("failure shows the secret: %s", b)
	}

	for _, tt := range []struct {
		name    string
		cfg     map[string]any
		policy  *builtin.AddressPolicy
		wantTyp string
		wantMsg string
	}{
		{"literal authorization", map[string]any{"url": srv.URL, "headers": map[string]string{"authorization": "Bearer abc"}}, nil, events.FailureValidation, "headers.authorization: a credential must not be written in the graph"},
		{"credentials in url", map[string]any{"url": "http://ada:hunter2@" + strings.TrimPrefix(srv.URL, "http://")}, nil, events.FailureValidation, "holds credentials"},
		{"unknown secret", map[string]any{"url": srv.URL, "headers": map[string]string{"X-Key": "${secret:NOPE}"}}, allow(t, "127.0.0.1"), events.FailureValidation, "secret NOPE is not configured"},
		{"bad name", map[string]any{"url": srv.URL, "headers": map[string]string{"X-Key": "${secret:../etc/passwd}"}}, allow(t, "127.0.0.1"), events.FailureValidation, "a name holds"},
		{"host not named", map[string]any{"url": srv.URL, "headers": map[string]string{"X-Key": "${secret:API_TOKEN}"}}, allow(t, "10.0.0.0/8"), builtin.FailureAddressDenied, "secrets are sent only to hosts"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := &builtin.HTTP{Policy: tt.policy, Secrets: secrets}
			_, err := h.Execute(context.Background(), input("http", tt.cfg))
			we := failure(t, err, tt.wantTyp, false)
			if !strings.Contains(we.Message, tt.wantMsg) || strings.Contains(we.Message, "hunter2") {
				t.Errorf("message %q does not say %q (or shows the password)", we.Message, tt.wantMsg)
			}
		})
	}
}

// TestHTTPSecretDroppedOnRedirect: a secret header does not follow a
// redirect to another host.
func TestHTTPSecretDroppedOnRedirect(t *testing.T) {
	var got atomic.Value
	got.Store("unset")
	dst := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("X-Api-Key"))
	}))
	t.Cleanup(dst.Close)
	src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, dst.URL, http.StatusFound)
	}))
	t.Cleanup(src.Close)
	h := &builtin.HTTP{Policy: allow(t, "127.0.0.1"), Secrets: func(string) (string, bool) { return "k-123456", true }}
	_, err := h.Execute(context.Background(), input("http", map[string]any{"url": src.URL, "headers": map[string]string{"X-Api-Key": "${secret:K}"}}))
	if err != nil {
		t.Fatal(err)
	}
	if got.Load() != "" {
		t.Errorf("the redirect target got X-Api-Key %q", got.Load())
	}
}

func TestCheckHTTPConfig(t *testing.T) {
	got := builtin.CheckHTTPConfig([]byte(`{"url": "https://u:p@api.example.com/x", "headers": {"Cookie": "a=b", "Authorization": "Bearer ${secret:T}", "X": "y"}}`))
	if len(got) != 2 || !strings.HasPrefix(got[0], "url: https://u:xxxxx@api.example.com/x holds credentials") || !strings.HasPrefix(got[1], "headers.Cookie: ") {
		t.Errorf("CheckHTTPConfig = %q", got)
	}
	if got := builtin.CheckHTTPConfig([]byte(`{"url": "https://api.example.com/x", "headers": {"Authorization": "Bearer ${secret:T}"}}`)); len(got) != 0 {
		t.Errorf("a good config: %q", got)
	}
}

func TestNewAddressPolicy(t *testing.T) {
	if _, err := builtin.NewAddressPolicy([]string{"api.example.com", "*.example.org", "10.0.0.0/8", "127.0.0.1:8080", "[::1]:9", "fd00::/8"}); err != nil {
		t.Fatal(err)
	}
	_, err := builtin.NewAddressPolicy([]string{"10.0.0.0/33", "a b", "x:0", "http://x"})
	if err == nil || strings.Count(err.Error(), "\n") != 3 {
		t.Errorf("want four problems, got %v", err)
	}
}

// TestHTTPSecretHeaders: a header the worker marks secret must be a
// reference, like Authorization.
func TestHTTPSecretHeaders(t *testing.T) {
	h := &builtin.HTTP{Policy: allow(t, "127.0.0.1"), SecretHeaders: []string{"X-Api-Key"}}
	_, err := h.Execute(context.Background(), input("http", map[string]any{"url": "http://127.0.0.1:1/", "headers": map[string]string{"x-api-key": "literal-key-value"}}))
	we := failure(t, err, events.FailureValidation, false)
	if !strings.Contains(we.Message, "headers.x-api-key: a credential must not be written") || strings.Contains(we.Message, "literal-key-value") {
		t.Errorf("message = %q", we.Message)
	}
}

func TestSecretSources(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "TOKEN"), []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(dir), "OUTSIDE"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := builtin.SecretsFromEnv(func(k string) (string, bool) {
		return map[string]string{"WEFT_SECRET_TOKEN": "from-env", "WEFT_SECRET_OTHER": "other"}[k], k != "WEFT_SECRET_NONE"
	})
	s := builtin.SecretsFromDir(dir).Or(env)
	for _, tt := range []struct {
		name, want string
		ok         bool
	}{
		{"TOKEN", "from-file", true},
		{"OTHER", "other", true},
		{"../OUTSIDE", "", false},
		{"NONE", "", false},
	} {
		if v, ok := s(tt.name); v != tt.want || ok != tt.ok {
			t.Errorf("%s = %q %v, want %q %v", tt.name, v, ok, tt.want, tt.ok)
		}
	}
}

// TestHTTP429: a 429 is a RateLimited failure whose details carry the
// Retry-After, in seconds or as a date.
func TestHTTP429(t *testing.T) {
	for _, tt := range []struct {
		header string
		want   int64 // ms
	}{{"7", 7000}, {"", 1000}, {"soon", 1000}} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if tt.header != "" {
				w.Header().Set("Retry-After", tt.header)
			}
			w.WriteHeader(http.StatusTooManyRequests)
		}))
		h := &builtin.HTTP{Policy: allow(t, "127.0.0.1")}
		_, err := h.Execute(context.Background(), input("http", map[string]any{"url": srv.URL}))
		srv.Close()
		we := failure(t, err, events.FailureRateLimited, true)
		d, _ := we.Details.(map[string]any)
		if d["retryAfterMs"] != tt.want {
			t.Errorf("Retry-After %q: details %v, want retryAfterMs %d", tt.header, we.Details, tt.want)
		}
	}
}
