// Package tsbuild makes the repository's TypeScript programs ready to run
// for the Go programs and tests that start them as processes (the
// TypeScript variant of the chaos test, the mixed-fleet example's test,
// weftbench's TypeScript figure): it finds the repository, checks that
// Node and npm are there, and runs `npm ci` and `npm run build` in a
// package directory (sdk/typescript, examples/ts-worker) when its
// node_modules or its build is older than what they are made from, as
// `make ts-test` would. Tests must not skip themselves when Node or the
// build is missing: they call Prepare, which builds, or fails saying why.
//
// Two test binaries may prepare one directory at once (go test runs
// packages in parallel), and `npm ci` deletes node_modules first, so
// Prepare holds an exclusive lock (flock) on a file in the directory's
// .cache while it looks and builds.
package tsbuild

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The directories, from the repository's root.
const (
	SDKDir     = "sdk/typescript"
	ExampleDir = "examples/ts-worker"
)

// Scripts of the SDK's build, from the repository's root.
const (
	// LedgerWorker is the chaos test's ledger worker (src/chaos/ledgerworker.ts).
	LedgerWorker = SDKDir + "/dist/chaos/ledgerworker.js"
	// BenchWorker is weftbench's worker of noop nodes (src/bench/worker.ts).
	BenchWorker = SDKDir + "/dist/bench/worker.js"
	// NodeFloor is weftbench's Node floor: the least a worker in Node does
	// per item on nats.js (src/bench/floor.ts).
	NodeFloor = SDKDir + "/dist/bench/floor.js"
)

// ErrNoNode says Node or npm is not installed.
var ErrNoNode = errors.New("node and npm are needed (Node 20.19 or later, with npm)")

// stampFile records a build, in the package's .cache.
const stampFile = "build.stamp"

// Root returns the repository's root: the nearest directory at or above
// the working directory whose go.mod is Weft's module.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(b), "module github.com/weft-dev/weft\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the weft repository (no go.mod of github.com/weft-dev/weft above the working directory)")
		}
		dir = parent
	}
}

// Node returns the path of the node program.
func Node() (string, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoNode, err)
	}
	if _, err := exec.LookPath("npm"); err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoNode, err)
	}
	return node, nil
}

// SDK prepares sdk/typescript and returns the repository's root and the
// node program.
func SDK(ctx context.Context, log io.Writer) (root, node string, err error) {
	if root, err = Root(); err != nil {
		return "", "", err
	}
	if node, err = Node(); err != nil {
		return "", "", err
	}
	if err := Prepare(ctx, filepath.Join(root, SDKDir), log); err != nil {
		return "", "", err
	}
	return root, node, nil
}

// Prepare runs `npm ci` in dir when node_modules is missing or older than
// package.json or package-lock.json, then `npm run build` when the last
// build is older than any of the package's sources (src/, *.ts, *.mjs,
// tsconfig.json, package.json, the lockfile) or it has not been built by
// Prepare. npm's output goes to log.
func Prepare(ctx context.Context, dir string, log io.Writer) error {
	if _, err := Node(); err != nil {
		return err
	}
	cache := filepath.Join(dir, ".cache")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return err
	}
	unlock, err := lock(ctx, filepath.Join(cache, "build.lock"))
	if err != nil {
		return err
	}
	defer unlock()

	if err := install(ctx, dir, cache, log); err != nil {
		return err
	}
	sources, err := sourcesTime(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	stamp := filepath.Join(cache, stampFile)
	if built, err := mtime(stamp); err == nil && !built.Before(sources) {
		if _, err := os.Stat(filepath.Join(dir, "dist")); err == nil {
			return nil
		}
	}
	if err := npm(ctx, dir, log, "run", "build"); err != nil {
		return err
	}
	return os.WriteFile(stamp, []byte(time.Now().UTC().Format(time.RFC3339Nano)+"\n"), 0o644)
}

// install runs `npm ci` in dir when node_modules is missing or older than
// package.json or package-lock.json.
func install(ctx context.Context, dir, cache string, log io.Writer) error {
	manifest, err := newest(filepath.Join(dir, "package.json"), filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	// npm ci leaves node_modules/.package-lock.json, unless there is
	// nothing to install: then a stamp of Prepare's own says it ran.
	installMark := filepath.Join(dir, "node_modules", ".package-lock.json")
	if deps, err := hasDependencies(filepath.Join(dir, "package-lock.json")); err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	} else if !deps {
		installMark = filepath.Join(cache, "install.stamp")
	}
	if installed, err := mtime(installMark); err != nil || installed.Before(manifest) {
		if err := npm(ctx, dir, log, "ci", "--no-audit", "--no-fund"); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(cache, "install.stamp"), []byte(time.Now().UTC().Format(time.RFC3339Nano)+"\n"), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// hasDependencies reports whether a lockfile (version 2 or 3) lists any
// package besides the root.
func hasDependencies(lockfile string) (bool, error) {
	b, err := os.ReadFile(lockfile)
	if err != nil {
		return false, err
	}
	var lock struct {
		Packages map[string]json.RawMessage `json:"packages"`
	}
	if err := json.Unmarshal(b, &lock); err != nil {
		return false, fmt.Errorf("%s: %w", lockfile, err)
	}
	for k := range lock.Packages {
		if k != "" {
			return true, nil
		}
	}
	return false, nil
}

func npm(ctx context.Context, dir string, log io.Writer, args ...string) error {
	cmd := exec.CommandContext(ctx, "npm", args...)
	cmd.Dir = dir
	var out strings.Builder
	w := io.Writer(&out)
	if log != nil {
		w = io.MultiWriter(&out, log)
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("npm %s in %s: %v\n%s", strings.Join(args, " "), dir, err, tailLines(out.String(), 30))
	}
	return nil
}

// lock takes an exclusive flock on path, waiting for it until ctx ends.
func lock(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				_ = f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("waiting for %s (another build of the same directory): %w", path, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func mtime(path string) (time.Time, error) {
	info, err := os.Stat(path)
	if err != nil {
		return time.Time{}, err
	}
	return info.ModTime(), nil
}

func newest(paths ...string) (time.Time, error) {
	var t time.Time
	for _, p := range paths {
		m, err := mtime(p)
		if err != nil {
			return t, err
		}
		if m.After(t) {
			t = m
		}
	}
	return t, nil
}

// sourcesTime is the newest modification time of what a build is made
// from: the manifest, the lockfile, tsconfig.json and every file under
// src/ and of the top directory's *.ts and *.mjs.
func sourcesTime(dir string) (time.Time, error) {
	t, err := newest(filepath.Join(dir, "package.json"), filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return t, err
	}
	top, _ := filepath.Glob(filepath.Join(dir, "*.[tm][sj]*"))
	top = append(top, filepath.Join(dir, "tsconfig.json"))
	for _, p := range top {
		if m, err := mtime(p); err == nil && m.After(t) {
			t = m
		}
	}
	err = filepath.WalkDir(filepath.Join(dir, "src"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.ModTime().After(t) {
			t = info.ModTime()
		}
		return nil
	})
	return t, err
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
