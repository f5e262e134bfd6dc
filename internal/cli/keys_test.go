package cli_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weft-dev/weft/internal/cli"
	"github.com/weft-dev/weft/pkg/events"
)

// weft keys new writes a ring of one key, mode 0600, and refuses to
// overwrite; weft keys rotate puts a new key first and keeps the old; no
// output shows a key.
func TestKeysNewAndRotate(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "keys")
	var out, errb bytes.Buffer
	if err := cli.Run(ctx, []string{"keys", "new", "-out", path}, nil, &out, &errb); err != nil {
		t.Fatal(err, errb.String())
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, mode %v; want 0600", err, st.Mode())
	}
	if err := cli.Run(ctx, []string{"keys", "new", "-out", path}, nil, &out, &errb); err == nil {
		t.Fatal("keys new overwrote a key file")
	}
	if err := cli.Run(ctx, []string{"keys", "rotate", path}, nil, &out, &errb); err != nil {
		t.Fatal(err, errb.String())
	}
	ring, err := events.LoadKeys(path)
	if err != nil || len(ring) != 2 || ring[0].ID != "k2" || ring[1].ID != "k1" {
		t.Fatalf("rotated ring %v: %v", ring, err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Fatalf("rotated key file mode %v", st.Mode())
	}
	b, _ := os.ReadFile(path)
	for _, line := range strings.Split(string(b), "\n") {
		if _, secret, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, "#") && strings.Contains(out.String()+errb.String(), strings.TrimSpace(secret)) {
			t.Fatal("a command printed a key")
		}
	}
	var usage error = cli.ErrUsage
	if err := cli.Run(ctx, []string{"keys", "rotate"}, nil, &out, &errb); !errors.Is(err, usage) {
		t.Fatalf("keys rotate without a file: %v, want a usage error", err)
	}
	// A command given a bad key file says so before it connects.
	bad := filepath.Join(t.TempDir(), "bad")
	if err := os.WriteFile(bad, []byte("k1:AAAA\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err = cli.Run(ctx, []string{"status", "-encrypt-keys", bad, "-nats", "nats://127.0.0.1:1", "run1"}, nil, &out, &errb)
	if !errors.Is(err, usage) || !strings.Contains(err.Error(), "-encrypt-keys") || !strings.Contains(err.Error(), "3 bytes") {
		t.Fatalf("a bad key file: %v, want a usage error naming -encrypt-keys and the key's size", err)
	}
}
