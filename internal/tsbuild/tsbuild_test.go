package tsbuild

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// A package with no dependencies whose build appends a line to
// builds.log and makes dist/.
const (
	testManifest = `{"name":"tsbuild-test","version":"1.0.0","private":true,"scripts":{"build":"node build.mjs"}}`
	testLock     = `{"name":"tsbuild-test","version":"1.0.0","lockfileVersion":3,"requires":true,"packages":{"":{"name":"tsbuild-test","version":"1.0.0"}}}`
	testBuild    = `import { appendFileSync, mkdirSync } from 'node:fs'
mkdirSync('dist', { recursive: true })
appendFileSync('builds.log', 'built\n')
`
)

func testPackage(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{"package.json": testManifest, "package-lock.json": testLock, "build.mjs": testBuild, "src/main.ts": "export const x = 1\n"} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func builds(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "builds.log"))
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "built")
}

// TestPrepare: the first Prepare installs and builds, the next does
// nothing, a changed source builds again, and two at once build once.
func TestPrepare(t *testing.T) {
	if _, err := Node(); err != nil {
		t.Fatal(err) // the repository's tests need Node: fail, do not skip
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := testPackage(t)

	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = Prepare(ctx, dir, nil)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := builds(t, dir); n != 1 {
		t.Fatalf("two Prepares at once built %d times, want 1", n)
	}
	if _, err := os.Stat(filepath.Join(dir, ".cache", "install.stamp")); err != nil {
		t.Errorf("npm ci did not run: %v", err)
	}

	installed, err := mtime(filepath.Join(dir, ".cache", "install.stamp"))
	if err != nil {
		t.Fatal(err)
	}
	if err := Prepare(ctx, dir, nil); err != nil {
		t.Fatal(err)
	}
	if n := builds(t, dir); n != 1 {
		t.Fatalf("Prepare of a built package built again (%d builds)", n)
	}
	if again, _ := mtime(filepath.Join(dir, ".cache", "install.stamp")); !again.Equal(installed) {
		t.Errorf("Prepare of an installed package ran npm ci again")
	}

	later := time.Now().Add(2 * time.Second)
	if err := os.Chtimes(filepath.Join(dir, "src", "main.ts"), later, later); err != nil {
		t.Fatal(err)
	}
	if err := Prepare(ctx, dir, nil); err != nil {
		t.Fatal(err)
	}
	if n := builds(t, dir); n != 2 {
		t.Fatalf("a changed source: %d builds, want 2", n)
	}
}

func TestPrepareFailsSayingWhy(t *testing.T) {
	dir := t.TempDir()
	err := Prepare(context.Background(), dir, nil)
	if err == nil || !strings.Contains(err.Error(), "package.json") {
		t.Fatalf("Prepare of a directory without package.json: %v", err)
	}
}

func TestRoot(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, SDKDir, "package.json")); err != nil {
		t.Errorf("root %s has no %s: %v", root, SDKDir, err)
	}
}
