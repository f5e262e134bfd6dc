package ui_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/internal/ui"
)

// FuzzUIRequests: whatever the path, query and body, the API answers with
// JSON and a status other than 500, and never hangs (live streams are
// left out: they are meant to stay open).
func FuzzUIRequests(f *testing.F) {
	_, store := testkit.Store(f)
	h, err := ui.New(ui.Config{Store: store})
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []struct{ method, target, body string }{
		{"GET", "/api/runs?status=running,failed&limit=3", ""},
		{"GET", "/api/runs?since=2026-01-01T00:00:00Z&until=2025-01-01T00:00:00Z", ""},
		{"GET", "/api/runs?cursor=%00&q=%2F", ""},
		{"GET", "/api/runs/abc/events?from=99999999999999999999", ""},
		{"GET", "/api/runs/abc/state?at=-1", ""},
		{"POST", "/api/runs/abc/signal", `{"node":"a","data":{"x":[1,2,{"y":null}]}}`},
		{"POST", "/api/runs/abc/signal", `{"node":"a","data":` + strings.Repeat("[", 10000)},
		{"POST", "/api/runs/abc/fork", `{"at":1e99}`},
		{"POST", "/api/runs/abc/cancel", `{"reason":"\u0000"} {}`},
		{"GET", "/api/runs/%2e%2e/events", ""},
	} {
		f.Add(seed.method, seed.target, seed.body)
	}
	f.Fuzz(func(t *testing.T, method, target, body string) {
		if method != http.MethodGet && method != http.MethodPost {
			return
		}
		if !strings.HasPrefix(target, "/api/") || strings.HasPrefix(target, "/api/live/") || strings.ContainsAny(target, " \r\n\t#") {
			return
		}
		if _, err := url.ParseRequestURI(target); err != nil {
			return // no client sends it
		}
		req := httptest.NewRequest(method, "http://127.0.0.1:8233"+target, strings.NewReader(body))
		req.Header.Set(ui.ActionHeader, "1")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 && rec.Code != http.StatusServiceUnavailable {
			t.Errorf("%s %s %q: %d %s", method, target, body, rec.Code, rec.Body)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" || !json.Valid(rec.Body.Bytes()) {
			t.Errorf("%s %s %q: %s %s, want JSON", method, target, body, ct, rec.Body)
		}
	})
}
