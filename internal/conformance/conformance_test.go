package conformance_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/conformance"
	"github.com/weft-dev/weft/internal/testkit"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testkit.Cleanup()
	os.Exit(code)
}

// goWorker builds the Go SDK's conformance worker, once per test binary.
func goWorker(t *testing.T) string {
	t.Helper()
	return filepath.Join(testkit.Build(t, "github.com/weft-dev/weft/internal/conformance/goworker"), "goworker")
}

// lineWriter logs each line written to it.
type lineWriter struct{ t *testing.T }

func (w lineWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// TestGoSDK runs the kit's quick subset against the Go SDK's conformance
// worker, as a separate process under the worker role: every case must
// pass. 'make conformance' runs all of them.
func TestGoSDK(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	o := conformance.Options{Worker: []string{goWorker(t)}, Short: true, Out: lineWriter{t}}
	if testing.Verbose() {
		o.Log = lineWriter{t}
	}
	results, err := conformance.Run(ctx, o)
	var names []string
	for _, r := range results {
		names = append(names, r.Name)
		if r.Status != conformance.Pass {
			t.Errorf("%s %s: %s", r.Status, r.Name, r.Why)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if want := conformance.CaseNames(true); !slices.Equal(names, want) {
		t.Fatalf("ran %q, want the short cases %q", names, want)
	}
}

// TestKitCatchesWrongWorkers runs cases against a worker that is wrong on
// purpose (goworker -break) and wants each to fail: the kit's checks bite.
func TestKitCatchesWrongWorkers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the kit once per way of being wrong")
	}
	bin := goWorker(t)
	tests := []struct {
		brk, cases string
		want       conformance.Status
		why        string // in the failure's message
	}{
		{"fatal-retryable", "fatal", conformance.Fail, "ConfFatal"},
		{"effect-key", "effect", conformance.Fail, "idempotency key"},
		{"slow-inprogress", "in-progress", conformance.Fail, "in progress"},
		{"ignore-timeout", "start-to-close", conformance.Fail, "must enforce timeoutMs"},
		{"no-hooks", "hooks", conformance.Skip, "conf.hooks"},
	}
	for _, tc := range tests {
		t.Run(tc.brk, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			results, err := conformance.Run(ctx, conformance.Options{
				Worker: []string{bin, "-break", tc.brk},
				Match:  regexp.MustCompile("^(" + tc.cases + ")$"),
				Out:    lineWriter{t},
			})
			if len(results) != 1 {
				t.Fatalf("results %+v (error %v), want one for %s", results, err, tc.cases)
			}
			if r := results[0]; r.Status != tc.want || !strings.Contains(r.Why, tc.why) {
				t.Fatalf("%s %s: %s; want %s, saying %q", r.Status, r.Name, r.Why, tc.want, tc.why)
			}
			if (tc.want == conformance.Fail) != (err != nil) {
				t.Fatalf("Run's error %v with a case %s", err, tc.want)
			}
		})
	}
}

func TestSplitCommand(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{"bin/goworker", []string{"bin/goworker"}, false},
		{"  node  sdk/typescript/dist/conformance/worker.js ", []string{"node", "sdk/typescript/dist/conformance/worker.js"}, false},
		{`python3 -m 'weft conformance' "a b"c`, []string{"python3", "-m", "weft conformance", "a bc"}, false},
		{`node ''`, []string{"node", ""}, false},
		{"", nil, true},
		{`node 'x`, nil, true},
	}
	for _, tc := range tests {
		got, err := conformance.SplitCommand(tc.in)
		if (err != nil) != tc.wantErr || !slices.Equal(got, tc.want) {
			t.Errorf("SplitCommand(%q) = %q, %v; want %q (error: %v)", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}
