package eventlog_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/testkit"
)

// bufLogger logs to l.
func bufLogger(l *testkit.Buffer) *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

func TestOpenUsesAnExistingStreamAsItIs(t *testing.T) {
	ctx := context.Background()
	srv := testkit.Server(t)
	_, js := testkit.Connect(t, srv)
	cfg := eventlog.DefaultSettings()
	cfg.Duplicates, cfg.MaxAge = 5*time.Minute, time.Hour
	if _, err := js.CreateStream(ctx, eventlog.StreamConfig(cfg)); err != nil {
		t.Fatal(err)
	}
	var logs testkit.Buffer
	for range 2 { // the second open says nothing new
		st, err := eventlog.Open(ctx, js, eventlog.WithReplicas(3), eventlog.WithDuplicates(2*time.Minute),
			eventlog.WithStorage(jetstream.MemoryStorage), eventlog.WithLogger(bufLogger(&logs)))
		if err != nil {
			t.Fatal(err)
		}
		live := eventlog.LiveConfig(st)
		if live.Replicas != 1 || live.Duplicates != 5*time.Minute || live.MaxAge != time.Hour || live.Storage != jetstream.FileStorage {
			t.Fatalf("the store's configuration is not the live stream's: %+v", live)
		}
	}
	s, err := js.Stream(ctx, cfg.Stream)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.CachedInfo().Config; got.Replicas != 1 || got.Duplicates != 5*time.Minute || got.MaxAge != time.Hour {
		t.Fatalf("the stream was changed: replicas %d, duplicates %s, max age %s", got.Replicas, got.Duplicates, got.MaxAge)
	}
	out := logs.String()
	for _, want := range []string{
		"setting=replicas have=1 want=3",
		"setting=duplicate_window have=5m0s want=2m0s",
		"setting=max_age have=1h0m0s want=0s",
		"setting=storage have=File want=Memory",
	} {
		if n := strings.Count(out, want); n != 1 {
			t.Errorf("%q logged %d times, want once:\n%s", want, n, out)
		}
	}
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, `resource="stream WEFT"`) {
		t.Errorf("the warning does not name the stream:\n%s", out)
	}
}

func TestOpenCreatesAMissingStreamWithItsOptions(t *testing.T) {
	ctx := context.Background()
	srv := testkit.Server(t)
	_, js := testkit.Connect(t, srv)
	var logs testkit.Buffer
	if _, err := eventlog.Open(ctx, js, eventlog.WithDuplicates(3*time.Minute), eventlog.WithMaxAge(48*time.Hour), eventlog.WithLogger(bufLogger(&logs))); err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, eventlog.DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.CachedInfo().Config; got.Duplicates != 3*time.Minute || got.MaxAge != 48*time.Hour || got.AllowMsgSchedules || got.AllowRollup || got.AllowMsgTTL {
		t.Fatalf("created with %+v", got)
	}
	if logs.String() != "" {
		t.Fatalf("a stream just created logged differences:\n%s", logs.String())
	}
}

func TestOpenRefusesAnUnsafeStream(t *testing.T) {
	tests := []struct {
		name    string
		change  func(*jetstream.StreamConfig)
		setting string
		fixable bool
	}{
		{"timer subjects", func(c *jetstream.StreamConfig) { c.Subjects = []string{"weft.>"} }, "subjects", true},
		{"no direct gets", func(c *jetstream.StreamConfig) { c.AllowDirect = false }, "allow_direct", true},
		{"no atomic batches", func(c *jetstream.StreamConfig) { c.AllowAtomicPublish = false }, "allow_atomic", true},
		{"subjects", func(c *jetstream.StreamConfig) { c.Subjects = []string{"weft.r.*.>"} }, "subjects", true},
		{"short duplicates window", func(c *jetstream.StreamConfig) { c.Duplicates = 10 * time.Second }, "duplicate_window", true},
		{"interest retention", func(c *jetstream.StreamConfig) { c.Retention = jetstream.InterestPolicy }, "retention", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			srv := testkit.Server(t)
			_, js := testkit.Connect(t, srv)
			sc := eventlog.StreamConfig(eventlog.DefaultSettings())
			tt.change(&sc)
			if _, err := js.CreateStream(ctx, sc); err != nil {
				t.Fatal(err)
			}
			_, err := eventlog.Open(ctx, js)
			var se *eventlog.SettingError
			if !errors.Is(err, eventlog.ErrUnsafeSetting) || !errors.As(err, &se) || se.Setting != tt.setting {
				t.Fatalf("got %v, want an unsafe %s", err, tt.setting)
			}
			if tt.fixable != strings.Contains(err.Error(), "weft admin apply -stream WEFT") {
				t.Fatalf("the error does not say how to fix it: %v", err)
			}
			if !tt.fixable {
				return
			}
			upd := eventlog.Repair(sc)
			if upd.Duplicates < eventlog.MinDuplicates {
				upd.Duplicates = eventlog.MinDuplicates
			}
			if _, err := js.UpdateStream(ctx, upd); err != nil {
				t.Fatal(err)
			}
			if _, err := eventlog.Open(ctx, js); err != nil {
				t.Fatalf("after the fix: %v", err)
			}
		})
	}
}

func TestOpenAcceptsWiderSubjects(t *testing.T) {
	ctx := context.Background()
	srv := testkit.Server(t)
	_, js := testkit.Connect(t, srv)
	sc := eventlog.StreamConfig(eventlog.DefaultSettings())
	sc.Subjects = []string{"weft.r.>", "weft.x.>"}
	if _, err := js.CreateStream(ctx, sc); err != nil {
		t.Fatal(err)
	}
	if _, err := eventlog.Open(ctx, js); err != nil {
		t.Fatal(err)
	}
}
