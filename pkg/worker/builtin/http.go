package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/worker"
)

// HTTP defaults.
const (
	DefaultHTTPTimeout = 10 * time.Second
	DefaultMaxBody     = 4 << 20
)

// Failure types of the http executor.
const (
	FailureHTTPStatus       = "HTTPStatus"
	FailureHTTPNetwork      = "HTTPNetworkError"
	FailureResponseTooLarge = "ResponseTooLarge"
)

// HTTPConfig configures http.
type HTTPConfig struct {
	URL     string            `json:"url"`
	Method  string            `json:"method,omitempty"` // default GET
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
// An unexpected status fails the node: 5xx, 408 and 429 retryably, others
// not. Network errors and timeouts are retryable. A body larger than MaxBody
// is a non-retryable failure.
type HTTP struct {
	// Client sends the requests (default http.DefaultClient).
	Client *http.Client
	// MaxBody caps the response body (default 4 MiB).
	MaxBody int64
}

// Execute implements worker.Node.
func (h *HTTP) Execute(ctx context.Context, in *worker.Input) (*worker.Result, error) {
	var cfg HTTPConfig
	if err := decodeConfig(in, &cfg); err != nil {
		return nil, err
	}
	req, err := h.request(ctx, in, &cfg)
	if err != nil {
		return nil, err
	}
	timeout := time.Duration(cfg.Timeout)
	if timeout == 0 {
		timeout = DefaultHTTPTimeout
	}
	ctx, cancel := context.WithTimeout(req.Context(), timeout)
	defer cancel()
	req = req.WithContext(ctx)

	client := h.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, &worker.Error{Type: events.FailureTimeout, Message: fmt.Sprintf("%s %s: no response within %s", req.Method, redact(req.URL), timeout), Retryable: true}
		}
		return nil, &worker.Error{Type: FailureHTTPNetwork, Message: fmt.Sprintf("%s %s", req.Method, redact(req.URL)), Retryable: true, Cause: err}
	}
	defer resp.Body.Close()

	limit := h.MaxBody
	if limit <= 0 {
		limit = DefaultMaxBody
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, &worker.Error{Type: FailureHTTPNetwork, Message: fmt.Sprintf("%s %s: reading the response", req.Method, redact(req.URL)), Retryable: true, Cause: err}
	}
	if int64(len(body)) > limit {
		return nil, worker.NonRetryable(FailureResponseTooLarge, fmt.Sprintf("%s %s: response body is larger than the %d-byte limit", req.Method, redact(req.URL), limit))
	}
	out := map[string]any{
		"status":  resp.StatusCode,
		"headers": headers(resp.Header),
		"body":    decodeBody(resp.Header.Get("Content-Type"), body),
	}
	if !expected(cfg.ExpectStatus, resp.StatusCode) {
		s := resp.StatusCode
		return nil, &worker.Error{
			Type:      FailureHTTPStatus,
			Message:   fmt.Sprintf("%s %s: unexpected status %d %s", req.Method, redact(req.URL), s, http.StatusText(s)),
			Retryable: s >= 500 || s == http.StatusRequestTimeout || s == http.StatusTooManyRequests,
			Details:   out,
		}
	}
	return &worker.Result{Output: out}, nil
}

func (h *HTTP) request(ctx context.Context, in *worker.Input, cfg *HTTPConfig) (*http.Request, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, configError(in, fmt.Sprintf("url: want an absolute http(s) URL, got %q", cfg.URL))
	}
	method := strings.ToUpper(cfg.Method)
	if method == "" {
		method = http.MethodGet
	}
	var body io.Reader
	if cfg.Body != nil {
		b, err := json.Marshal(cfg.Body)
		if err != nil {
			return nil, configError(in, "body: "+err.Error())
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, configError(in, err.Error())
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Idempotency-Key", in.IdempotencyKey)
	for k, v := range cfg.Headers {
		req.Header.Set(k, v)
	}
	return req, nil
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
