package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/weft-dev/weft/internal/nodeconfig"
	"github.com/weft-dev/weft/internal/worker"
	"github.com/weft-dev/weft/pkg/events"
)

// HTTP defaults and limits.
const (
	DefaultHTTPTimeout  = 10 * time.Second
	DefaultMaxBody      = 1 << 20
	DefaultMaxRedirects = 5
)

// Failure types of the http executor.
const (
	FailureHTTPStatus       = "HTTPStatus"
	FailureHTTPNetwork      = "HTTPNetworkError"
	FailureResponseTooLarge = "ResponseTooLarge"
	FailureTooManyRedirects = "TooManyRedirects"
)

// HTTPConfig configures http.
type HTTPConfig struct {
	// URL is an absolute http(s) URL without credentials (user:pass@ is
	// refused: use a secret reference in a header).
	URL    string `json:"url"`
	Method string `json:"method,omitempty"` // default GET
	// Headers are sent as given, with every ${secret:NAME} replaced by the
	// worker's secret NAME. Authorization, Cookie and Proxy-Authorization
	// must take their values from secret references.
	Headers map[string]string `json:"headers,omitempty"`
	// Body is sent JSON-encoded (with Content-Type application/json unless
	// a header says otherwise).
	Body    any      `json:"body,omitempty"`
	Timeout Duration `json:"timeout,omitempty"` // default 10s
	// ExpectStatus lists the statuses that are a success (default 200-299).
	ExpectStatus []int `json:"expectStatus,omitempty"`
}

// HTTP sends an HTTP request and outputs {"status", "headers", "body"}: the
// body decoded as JSON when the response says it is JSON, else as a string.
// The work item's idempotency key is sent as the Idempotency-Key header.
//
// What it may reach is the worker's Policy (see AddressPolicy): checked on
// the address actually dialled, for the first request and for every
// redirect; at most MaxRedirects redirects are followed. A refused address
// fails the node with a non-retryable "AddressDenied" naming the host and
// the rule. Secrets referenced by headers are sent only to hosts the policy
// names (not to any public host), are dropped on a redirect to another
// host, and are scrubbed from the output and from errors.
//
// An unexpected status fails the node: 5xx, 408 and 429 retryably, others
// not. Network errors and timeouts are retryable. A body larger than MaxBody
// is a non-retryable "ResponseTooLarge".
type HTTP struct {
	// Policy decides which hosts and addresses may be reached (nil: public
	// addresses only, any host name).
	Policy *AddressPolicy
	// Secrets resolves ${secret:NAME} in headers (nil: none).
	Secrets Secrets
	// SecretHeaders names request headers, besides SensitiveHeaders, whose
	// values must be secret references (and which, like those, are dropped
	// on a redirect to another host).
	SecretHeaders []string
	// MaxBody caps the response body (default 1 MiB).
	MaxBody int64
	// MaxRedirects caps the redirects followed (default 5; negative: none).
	MaxRedirects int
	// Client, when set, sends the requests instead of a client dialling
	// through Policy: the program that sets it answers for what it reaches.
	// Redirects are still checked against Policy by host name.
	Client *http.Client

	once   sync.Once
	client *http.Client
}

// redirectKey carries a request's secret headers to CheckRedirect.
type redirectKey struct{}

type redirectInfo struct {
	secretHeaders []string
}

func (h *HTTP) policy() *AddressPolicy {
	if h.Policy == nil {
		return &AddressPolicy{}
	}
	return h.Policy
}

func (h *HTTP) httpClient() *http.Client {
	h.once.Do(func() {
		c := &http.Client{}
		if h.Client != nil {
			*c = *h.Client
		} else {
			c.Transport = h.policy().Transport()
		}
		c.CheckRedirect = h.checkRedirect
		h.client = c
	})
	return h.client
}

// checkRedirect caps redirects, re-checks the new host against the policy
// (the dial checks its address), and drops secret headers when the host
// changes.
func (h *HTTP) checkRedirect(req *http.Request, via []*http.Request) error {
	limit := h.MaxRedirects
	if limit == 0 {
		limit = DefaultMaxRedirects
	}
	if len(via) > max(limit, 0) {
		return &redirectError{n: len(via), limit: max(limit, 0), to: req.URL.Redacted()}
	}
	if err := h.policy().checkHost(req.URL.Hostname(), urlPort(req.URL)); err != nil {
		return err
	}
	if info, ok := req.Context().Value(redirectKey{}).(*redirectInfo); ok && req.URL.Host != via[0].URL.Host {
		for _, k := range info.secretHeaders {
			req.Header.Del(k)
		}
	}
	return nil
}

type redirectError struct {
	n, limit int
	to       string
}

func (e *redirectError) Error() string {
	return fmt.Sprintf("redirect %d to %s: the worker follows at most %d redirects", e.n, e.to, e.limit)
}

// Execute implements worker.Node.
func (h *HTTP) Execute(ctx context.Context, in *worker.Input) (*worker.Result, error) {
	var cfg HTTPConfig
	if err := decodeConfig(in, &cfg); err != nil {
		return nil, err
	}
	info := &redirectInfo{}
	req, used, err := h.request(context.WithValue(ctx, redirectKey{}, info), in, &cfg, info)
	if err != nil {
		return nil, err
	}
	res, err := h.do(req, in, &cfg, used)
	if err != nil && len(used) > 0 {
		var we *worker.Error
		if errors.As(err, &we) {
			we.Message = scrub(we.Message, used)
			if we.Cause != nil {
				we.Cause = errors.New(scrub(we.Cause.Error(), used))
			}
		}
	}
	return res, err
}

func (h *HTTP) do(req *http.Request, in *worker.Input, cfg *HTTPConfig, secrets []string) (*worker.Result, error) {
	timeout := time.Duration(cfg.Timeout)
	if timeout == 0 {
		timeout = DefaultHTTPTimeout
	}
	ctx, cancel := context.WithTimeout(req.Context(), timeout)
	defer cancel()
	req = req.WithContext(ctx)
	where := fmt.Sprintf("http node %q: %s %s", in.NodeID, req.Method, redact(req.URL))

	resp, err := h.httpClient().Do(req)
	if err != nil {
		return nil, requestError(err, where, timeout)
	}
	defer resp.Body.Close()

	limit := h.MaxBody
	if limit <= 0 {
		limit = DefaultMaxBody
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, &worker.Error{Type: FailureHTTPNetwork, Message: where + ": reading the response", Retryable: true, Cause: err}
	}
	if int64(len(body)) > limit {
		return nil, worker.NonRetryable(FailureResponseTooLarge, fmt.Sprintf("%s: the response body is larger than the worker's %d-byte limit (-http-max-body)", where, limit))
	}
	// What the server echoes of the secrets sent is not kept.
	hs := headers(resp.Header)
	if len(secrets) > 0 {
		body = []byte(scrub(string(body), secrets))
		for k, v := range hs {
			hs[k] = scrub(v.(string), secrets)
		}
	}
	out := map[string]any{
		"status":  resp.StatusCode,
		"headers": hs,
		"body":    decodeBody(resp.Header.Get("Content-Type"), body),
	}
	if !expected(cfg.ExpectStatus, resp.StatusCode) {
		return nil, statusError(resp, where, out)
	}
	return &worker.Result{Output: out}, nil
}

// requestError is the failure of a request that got no response: refused
// by the address policy or the redirect limit, timed out, or the network's.
func requestError(err error, where string, timeout time.Duration) error {
	var denied *DeniedError
	var redir *redirectError
	switch {
	case errors.As(err, &denied):
		return worker.NonRetryable(FailureAddressDenied, fmt.Sprintf("%s: %v", where, denied))
	case errors.As(err, &redir):
		return worker.NonRetryable(FailureTooManyRedirects, fmt.Sprintf("%s: %v", where, redir))
	case errors.Is(err, context.DeadlineExceeded):
		return &worker.Error{Type: events.FailureTimeout, Message: fmt.Sprintf("%s: no response within %s", where, timeout), Retryable: true}
	}
	return &worker.Error{Type: FailureHTTPNetwork, Message: where, Retryable: true, Cause: err}
}

// statusError is the failure of a response whose status the node did not
// expect (out its output, as details): a 429 backs the rate limit's whole
// key off; 5xx, 408 are retryable.
func statusError(resp *http.Response, where string, out map[string]any) error {
	s := resp.StatusCode
	if s == http.StatusTooManyRequests {
		// The whole key of the node's rate limit backs off (internal/flow).
		msg := fmt.Sprintf("%s: status 429 Too Many Requests", where)
		return worker.RateLimited(msg, retryAfter(resp.Header.Get("Retry-After"), time.Now()))
	}
	return &worker.Error{
		Type:      FailureHTTPStatus,
		Message:   fmt.Sprintf("%s: unexpected status %d %s", where, s, http.StatusText(s)),
		Retryable: s >= 500 || s == http.StatusRequestTimeout || s == http.StatusTooManyRequests,
		Details:   out,
	}
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date; a
// second when it is absent or unreadable.
func retryAfter(h string, now time.Time) time.Duration {
	if n, err := strconv.Atoi(strings.TrimSpace(h)); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(t.Sub(now), 0)
	}
	return time.Second
}

// request builds the request; used holds the secret values it carries.
func (h *HTTP) request(ctx context.Context, in *worker.Input, cfg *HTTPConfig, info *redirectInfo) (*http.Request, []string, error) {
	u, msg := checkHTTPURL(cfg.URL)
	if msg != "" {
		return nil, nil, configError(in, "url: "+msg)
	}
	if bad := nodeconfig.CheckHeaders(cfg.Headers, h.SecretHeaders...); len(bad) > 0 {
		return nil, nil, configError(in, strings.Join(bad, "; "))
	}
	method := strings.ToUpper(cfg.Method)
	if method == "" {
		method = http.MethodGet
	}
	var body io.Reader
	if cfg.Body != nil {
		b, err := json.Marshal(cfg.Body)
		if err != nil {
			return nil, nil, configError(in, "body: "+err.Error())
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, nil, configError(in, err.Error())
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Idempotency-Key", in.IdempotencyKey)
	var used []string
	for _, k := range slices.Sorted(maps.Keys(cfg.Headers)) {
		v := cfg.Headers[k]
		if nodeconfig.HasSecretRef(v) {
			if !h.policy().names(u.Hostname(), urlPort(u)) {
				return nil, nil, worker.NonRetryable(FailureAddressDenied, fmt.Sprintf("http node %q: headers.%s: secrets are sent only to hosts the worker's allow-list names (-http-allow), and %q is not one", in.NodeID, k, u.Hostname()))
			}
			val, vals, err := expandSecrets(v, h.Secrets)
			if err != nil {
				return nil, nil, configError(in, "headers."+k+": "+err.Error())
			}
			used = append(used, vals...)
			info.secretHeaders = append(info.secretHeaders, k)
			v = val
		} else if nodeconfig.Sensitive(k, h.SecretHeaders) {
			info.secretHeaders = append(info.secretHeaders, k)
		}
		req.Header.Set(k, v)
	}
	return req, used, nil
}

// checkHTTPURL parses an http node's URL, or says what is wrong with it
// (never repeating a password it holds).
func checkHTTPURL(raw string) (*url.URL, string) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		if u != nil && u.User != nil {
			return nil, "want an absolute http(s) URL without credentials"
		}
		return nil, fmt.Sprintf("want an absolute http(s) URL, got %q", raw)
	}
	if u.User != nil {
		return nil, fmt.Sprintf("%s holds credentials (user:password@): a graph must not hold secrets, since events copy it; send them in a header that references a secret configured on the worker, e.g. \"Authorization\": \"Basic ${secret:NAME}\"", u.Redacted())
	}
	if nodeconfig.HasSecretRef(raw) {
		return nil, "secret references are allowed in header values only"
	}
	return u, ""
}

// checkHTTPConfig checks the parts of an http node's configuration that
// must hold before the graph is accepted: no credentials in the URL, no
// literal credentials in sensitive headers. It returns one message per
// problem, each starting with the field.
func checkHTTPConfig(raw json.RawMessage) []string {
	var cfg struct {
		URL     string            `json:"url"`
		Headers map[string]string `json:"headers"`
	}
	if json.Unmarshal(raw, &cfg) != nil {
		return nil // the executor reports a malformed config
	}
	var bad []string
	if cfg.URL != "" {
		if _, msg := checkHTTPURL(cfg.URL); msg != "" && strings.Contains(msg, "credentials") {
			bad = append(bad, "url: "+msg)
		}
	}
	return append(bad, nodeconfig.CheckHeaders(cfg.Headers)...)
}

func expected(want []int, status int) bool {
	if len(want) == 0 {
		return status >= 200 && status < 300
	}
	return slices.Contains(want, status)
}

// headers flattens response headers, joining repeated ones with ", ".
func headers(h http.Header) map[string]any {
	out := make(map[string]any, len(h))
	for k, vs := range h {
		out[k] = strings.Join(vs, ", ")
	}
	return out
}

func decodeBody(contentType string, body []byte) any {
	if len(body) == 0 {
		return nil
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	if mt == "application/json" || strings.HasSuffix(mt, "+json") {
		var v any
		if json.Unmarshal(body, &v) == nil {
			return v
		}
	}
	return string(body)
}

// redact drops credentials from a URL for messages.
func redact(u *url.URL) string { return u.Redacted() }

// urlPort is the port a URL dials.
func urlPort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}
