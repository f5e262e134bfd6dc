package natsconn_test

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/natsconn"
	"github.com/weft-dev/weft/internal/setup"
)

func TestValidateReportsEveryProblem(t *testing.T) {
	c := natsconn.Config{Storage: "tape", Replicas: 7, TLSCert: "x.pem", Stream: ""}
	err := c.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"-storage", "-replicas", "-tls-cert and -tls-key", "-stream"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}

func TestApplyEnv(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	n := fs.Int("n", 1, "")
	s := fs.String("s", "a", "")
	if err := fs.Parse([]string{"-s", "flag"}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("X_N", "5")
	t.Setenv("X_S", "env")
	if err := natsconn.ApplyEnv(fs, map[string]string{"n": "X_N", "s": "X_S"}); err != nil {
		t.Fatal(err)
	}
	if *n != 5 || *s != "flag" {
		t.Fatalf("n=%d s=%q: the environment fills unset flags only", *n, *s)
	}
	t.Setenv("X_N", "five")
	fs2 := flag.NewFlagSet("y", flag.ContinueOnError)
	fs2.Int("n", 1, "")
	if err := natsconn.ApplyEnv(fs2, map[string]string{"n": "X_N"}); err == nil || !strings.Contains(err.Error(), `X_N="five"`) {
		t.Fatalf("bad value: %v", err)
	}
}

func TestApplyEnvConnectionFlags(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	var c natsconn.Config
	c.RegisterFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	t.Setenv("WEFT_NATS_URL", "nats://127.0.0.1:1")
	t.Setenv("WEFT_REPLICAS", "3")
	t.Setenv("X_UNDEFINED", "y")
	if err := natsconn.ApplyEnv(fs, map[string]string{"undefined": "X_UNDEFINED"}); err != nil {
		t.Fatal(err)
	}
	if c.URL != "nats://127.0.0.1:1" || c.Replicas != 3 {
		t.Fatalf("config %+v", c)
	}
	t.Setenv("WEFT_REPLICAS", "three")
	fs2 := flag.NewFlagSet("y", flag.ContinueOnError)
	var c2 natsconn.Config
	c2.RegisterFlags(fs2)
	if err := natsconn.ApplyEnv(fs2); err == nil || !strings.Contains(err.Error(), `WEFT_REPLICAS="three"`) {
		t.Fatalf("bad replicas: %v", err)
	}
}

func TestStreamSettingFlags(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	var c natsconn.Config
	c.RegisterFlags(fs)
	if err := fs.Parse([]string{"-duplicates", "5m"}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("WEFT_MAX_AGE", "24h")
	t.Setenv("WEFT_DUPLICATES", "10m")
	if err := natsconn.ApplyEnv(fs); err != nil {
		t.Fatal(err)
	}
	if c.Duplicates != 5*time.Minute || c.MaxAge != 24*time.Hour {
		t.Fatalf("duplicates %s, max age %s", c.Duplicates, c.MaxAge)
	}
	c.Duplicates, c.MaxAge = 10*time.Second, -time.Second
	err := c.Validate()
	for _, want := range []string{"-duplicates: want at least 1m0s", "-max-age"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}

func TestFatal(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"timeout", fmt.Errorf("setting up stream: %w", context.DeadlineExceeded), false},
		{"no responders", nats.ErrNoResponders, false},
		{"not connected", setup.ErrNotConnected, false},
		{"temporarily unavailable", &jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}, false},
		{"unsafe stream", fmt.Errorf("setting up stream: %w", &eventlog.SettingError{Resource: "stream WEFT", Setting: "allow_direct"}), true},
		{"permissions", fmt.Errorf("x: %w", nats.ErrPermissionViolation), true},
		{"replicas without a cluster", &jetstream.APIError{Code: 500, ErrorCode: 10074}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := natsconn.Fatal(tt.err); got != tt.want {
				t.Fatalf("Fatal(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}
