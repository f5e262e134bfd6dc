package setup_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/setup"
	"github.com/weft-dev/weft/internal/testkit"
)

var errConfig = errors.New("bad configuration")

func TestRetry(t *testing.T) {
	fatal := func(err error) bool { return errors.Is(err, errConfig) }
	tests := []struct {
		name    string
		fails   []error
		wantErr error
		tries   int
		logged  int // distinct waits logged
	}{
		{"at once", nil, nil, 1, 0},
		{"after an outage", []error{errors.New("no responders"), errors.New("no responders"), errors.New("timeout")}, nil, 4, 2},
		{"alternating errors", []error{errors.New("a"), errors.New("b"), errors.New("a"), errors.New("b")}, nil, 5, 2},
		{"configuration error", []error{errors.New("no responders"), errConfig}, errConfig, 2, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			tries := 0
			err := setup.Retry(context.Background(), slog.New(slog.NewTextHandler(&logs, nil)), "the stream", fatal, func(context.Context) error {
				tries++
				if tries <= len(tt.fails) {
					return tt.fails[tries-1]
				}
				return nil
			})
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("got %v, want %v", err, tt.wantErr)
			}
			if tries != tt.tries {
				t.Fatalf("%d tries, want %d", tries, tt.tries)
			}
			if n := strings.Count(logs.String(), "waiting for NATS"); n != tt.logged {
				t.Fatalf("%d waits logged, want %d:\n%s", n, tt.logged, logs.String())
			}
		})
	}
}

func TestRetryEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	tries := 0
	err := setup.Retry(ctx, slog.New(slog.DiscardHandler), "the stream", nil, func(context.Context) error {
		if tries++; tries == 3 {
			cancel()
		}
		return errors.New("unavailable")
	})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "unavailable") {
		t.Fatalf("got %v, want the last error and the context's", err)
	}
}

func TestEnsureKV(t *testing.T) {
	srv := testkit.Server(t)
	_, js := testkit.Connect(t, srv)
	ctx := context.Background()
	cfg := jetstream.KeyValueConfig{Bucket: "b", History: 1, TTL: time.Minute}
	if _, err := setup.EnsureKV(ctx, js, cfg, nil); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	other := cfg
	other.TTL, other.Replicas = time.Hour, 3
	for range 2 {
		kv, err := setup.EnsureKV(ctx, js, other, slog.New(slog.NewTextHandler(&logs, nil)))
		if err != nil {
			t.Fatal(err)
		}
		st, err := kv.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.TTL() != time.Minute {
			t.Fatalf("the bucket was changed: ttl %s", st.TTL())
		}
	}
	for _, want := range []string{"setting=ttl have=1m0s want=1h0m0s", "setting=replicas have=1 want=3"} {
		if n := strings.Count(logs.String(), want); n != 1 {
			t.Errorf("%q logged %d times, want once:\n%s", want, n, logs.String())
		}
	}
}
