package coordinatord_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/weft-dev/weft/internal/coordinatord"
)

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"unknown flag", []string{"-nope"}, nil, "flag provided but not defined: -nope"},
		{"argument", []string{"extra"}, nil, `unexpected argument "extra"`},
		{"bad shards", []string{"-shards", "0"}, nil, "-shards: want 1 to 4096, got 0"},
		{"bad storage", []string{"-storage", "disk"}, nil, `-storage: want file or memory, got "disk"`},
		{"bad env", nil, map[string]string{"WEFT_COORDINATOR_SHARDS": "many"}, `env WEFT_COORDINATOR_SHARDS="many": not a valid -shards`},
		{"bad durable", []string{"-durable", "a.b"}, nil, `-durable: "a.b" is not a valid consumer name`},
		{"creds missing", []string{"-creds", "/nonexistent/x.creds"}, nil, "-creds:"},
		{"too many partitions", []string{"-partitions", "65"}, nil, "-partitions: want 1 to 64, got 65"},
		{"no partitions", nil, map[string]string{"WEFT_COORDINATOR_PARTITIONS": "0"}, "-partitions: want 1 to 64, got 0"},
		{"short lease", []string{"-lease-ttl", "10ms"}, nil, "-lease-ttl: want at least 1s, got 10ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var stderr bytes.Buffer
			err := coordinatord.Run(context.Background(), tt.args, &bytes.Buffer{}, &stderr)
			if !errors.Is(err, coordinatord.ErrUsage) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want a usage error containing %q", err, tt.want)
			}
		})
	}
}

// A bad flag value is said once: not by the flag package, then again.
func TestUsageSaidOnce(t *testing.T) {
	var stderr bytes.Buffer
	err := coordinatord.Run(context.Background(), []string{"-lease-ttl", "banana"}, &bytes.Buffer{}, &stderr)
	if !errors.Is(err, coordinatord.ErrUsage) || !strings.Contains(err.Error(), `invalid value "banana" for flag -lease-ttl`) || !strings.Contains(err.Error(), "coordinator -h") {
		t.Errorf("Run = %v", err)
	}
	if stderr.Len() != 0 {
		t.Errorf("stderr holds %q besides the returned error", stderr.String())
	}
}

func TestHelpIsNotAnError(t *testing.T) {
	var stderr bytes.Buffer
	if err := coordinatord.Run(context.Background(), []string{"-h"}, &bytes.Buffer{}, &stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr.String(), "WEFT_NATS_URL") {
		t.Fatalf("help does not mention the environment: %s", stderr.String())
	}
}
