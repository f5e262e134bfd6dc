package weft_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestExternalModule runs examples/embedded, a module of its own that
// imports this one as a user's program would, and checks what it prints:
// its Go conditions (both styles) and its node type steered each run.
func TestExternalModule(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the example module: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "run", ".")
	cmd.Dir = filepath.Join("..", "..", "examples", "embedded")
	// Its go.sum follows this module's dependencies as they change.
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go run examples/embedded: %v\n%s\n%s", err, out, stderr)
	}
	want := []string{
		"amount 3, tier regular: completed, reviewed false, shipped true",
		"amount 40, tier regular: completed, reviewed true, shipped false",
		"amount 40, tier vip: completed, reviewed true, shipped true",
	}
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("examples/embedded printed\n%s\nwant\n%s", out, strings.Join(want, "\n"))
	}
}
