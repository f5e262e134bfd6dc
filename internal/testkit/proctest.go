package testkit

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

var (
	mu     sync.Mutex
	builds = map[string]*build{}
	dirs   []string
)

type build struct {
	once sync.Once
	dir  string
	err  error
}

// Build builds the main packages (import paths, e.g.
// "github.com/weft-dev/weft/cmd/coordinator") into a temporary directory,
// once per test binary for the same list, and returns the directory. Call
// Cleanup from TestMain to remove it.
func Build(t testing.TB, pkgs ...string) string {
	t.Helper()
	key := strings.Join(pkgs, " ")
	mu.Lock()
	b := builds[key]
	if b == nil {
		b = &build{}
		builds[key] = b
	}
	mu.Unlock()
	b.once.Do(func() {
		b.dir, b.err = os.MkdirTemp("", "weft-bin-")
		if b.err != nil {
			return
		}
		mu.Lock()
		dirs = append(dirs, b.dir)
		mu.Unlock()
		gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
		if _, err := os.Stat(gobin); err != nil {
			gobin = "go"
		}
		args := append([]string{"build", "-o", b.dir + string(filepath.Separator)}, pkgs...)
		if out, err := exec.Command(gobin, args...).CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", key, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.dir
}

// Cleanup removes every directory Build made.
func Cleanup() {
	mu.Lock()
	defer mu.Unlock()
	for _, d := range dirs {
		_ = os.RemoveAll(d)
	}
	dirs = nil
}
