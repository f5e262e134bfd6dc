package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMain runs main instead of the tests when the test binary is started
// as the weft command by TestExitStatus.
func TestMain(m *testing.M) {
	if os.Getenv("WEFT_TEST_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

func TestExitStatus(t *testing.T) {
	broken := filepath.Join(t.TempDir(), "broken.yaml")
	if err := os.WriteFile(broken, []byte("name: x\nnodes: [{id: a, type: echo, bogus: 1}]\nedges: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"help", []string{"help"}, 0, ""},
		{"valid graph", []string{"validate", "../../examples/hello.yaml"}, 0, ""},
		{"invalid graph", []string{"validate", broken}, 1, "1 of 1 graph files invalid"},
		{"unknown command", []string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{"missing argument", []string{"status"}, 2, "usage: weft status RUN [flags]"},
		{"no server", []string{"status", "r1", "-nats", "nats://127.0.0.1:1"}, 1, "connecting to NATS at nats://127.0.0.1:1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], tt.args...)
			cmd.Env = append(os.Environ(), "WEFT_TEST_MAIN=1")
			var stderr strings.Builder
			cmd.Stderr = &stderr
			err := cmd.Run()
			code := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				code = exit.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tt.wantCode || !strings.Contains(stderr.String(), tt.wantErr) {
				t.Errorf("weft %s: exit %d, stderr %q; want exit %d, stderr with %q", strings.Join(tt.args, " "), code, stderr.String(), tt.wantCode, tt.wantErr)
			}
		})
	}
}
