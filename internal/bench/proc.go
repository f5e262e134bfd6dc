package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/pkg/events"
)

// childEnv, when set, makes Run act as a child process of the harness
// instead: "coordinator" runs only a coordinator and answers memory
// queries on stdin/stdout (see runChild).
const childEnv = "WEFTBENCH_CHILD"

// childStats is a child coordinator's answer to "mem".
type childStats struct {
	HeapInuse uint64 `json:"heapInuse"` // after two GCs
	HeapAlloc uint64 `json:"heapAlloc"`
	RSS       uint64 `json:"rss"` // VmRSS, after returning freed memory to the OS
	Processed int64  `json:"processed"`
	Reloads   int64  `json:"reloads"`
	Errors    int64  `json:"errors"`
}

// runChild is the child coordinator: flags -nats, -stream and -cache; each
// "mem" line on stdin is answered with a childStats line on stdout, after
// collecting garbage ("stats": without); "quit" or the end of stdin stops
// it.
//
// Size: one child process's whole life (start, wait for ready, stop,
// collect), in the order it happens.
func runChild(ctx context.Context, kind string, args []string, stdin io.Reader, stdout io.Writer) error {
	if kind != "coordinator" {
		return fmt.Errorf("%w: unknown child kind %q", ErrUsage, kind)
	}
	fs := flag.NewFlagSet("weftbench-child", flag.ContinueOnError)
	url := fs.String("nats", "", "server")
	stream := fs.String("stream", "", "events stream")
	cache := fs.Int("cache", 10000, "coordinator cache size")
	memory := fs.Bool("memory", false, "the stream is on memory storage")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile to this file")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	// The parent's key ring, when it seals (-encrypt).
	if ring, err := events.LoadKeys(""); err != nil {
		return err
	} else if ring != nil {
		if err := events.UseKeys(ring); err != nil {
			return err
		}
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	nc, err := nats.Connect(*url, nats.Name("weftbench-child"))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	storage := jetstream.FileStorage
	if *memory {
		storage = jetstream.MemoryStorage
	}
	st, err := openStore(ctx, js, *stream, storage)
	if err != nil {
		return err
	}
	c := coordinator.New(st, coordinator.WithCacheSize(*cache),
		coordinator.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	sc := bufio.NewScanner(stdin)
	enc := json.NewEncoder(stdout)
	for sc.Scan() {
		switch cmd := strings.TrimSpace(sc.Text()); cmd {
		case "mem", "stats":
			if cmd == "mem" {
				runtime.GC()
				runtime.GC()
				debug.FreeOSMemory()
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			s := c.Stats()
			if err := enc.Encode(childStats{HeapInuse: ms.HeapInuse, HeapAlloc: ms.HeapAlloc, RSS: vmRSS(os.Getpid()),
				Processed: s.Processed, Reloads: s.Reloads, Errors: s.Errors}); err != nil {
				return err
			}
		case "quit":
			cancel()
			return <-done
		}
	}
	cancel()
	return <-done
}

// vmRSS reads a process's resident set size from /proc (0 where there is
// no /proc).
func vmRSS(pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				kb, _ := strconv.ParseUint(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

// child is a running child coordinator.
type child struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

// startChild starts this program again as a child coordinator.
func (e *env) startChild(stream string, cache int, memory bool) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	args := []string{"-nats", e.url, "-stream", stream, "-cache", strconv.Itoa(cache), "-memory=" + strconv.FormatBool(memory)}
	if e.cfg.CPUProfile != "" {
		args = append(args, "-cpuprofile", filepath.Join(e.cfg.CPUProfile, fmt.Sprintf("%s-child-cache%d.cpu.pprof", e.figure, cache)))
	}
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), childEnv+"=coordinator")
	cmd.Stderr = e.progress
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the child coordinator: %w", err)
	}
	return &child{cmd: cmd, in: in, out: bufio.NewScanner(out)}, nil
}

// mem asks the child for its memory (after GC) and counters.
func (c *child) mem() (childStats, error) { return c.ask("mem") }

// stats asks the child for its counters, without a GC.
func (c *child) stats() (childStats, error) { return c.ask("stats") }

func (c *child) ask(cmd string) (childStats, error) {
	var s childStats
	if _, err := io.WriteString(c.in, cmd+"\n"); err != nil {
		return s, err
	}
	if !c.out.Scan() {
		return s, fmt.Errorf("child coordinator gave no answer: %v", c.out.Err())
	}
	err := json.Unmarshal(c.out.Bytes(), &s)
	return s, err
}

func (c *child) stop() {
	_, _ = io.WriteString(c.in, "quit\n")
	_ = c.in.Close()
	waited := make(chan error, 1)
	go func() { waited <- c.cmd.Wait() }()
	select {
	case <-waited:
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		<-waited
	}
}

// binary builds a command of the module (for example "cmd/nodeworker")
// once, into the harness's temp directory.
func (e *env) binary(ctx context.Context, pkg string) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p, ok := e.bins[pkg]; ok {
		return p, nil
	}
	out := filepath.Join(e.tmp, "bin", filepath.Base(pkg))
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "github.com/weft-dev/weft/"+pkg)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s (run weftbench inside the module): %v\n%s", pkg, err, b)
	}
	e.bins[pkg] = out
	return out, nil
}

// proc is a spawned daemon, stopped with SIGTERM.
type proc struct {
	cmd *exec.Cmd
}

func (e *env) spawn(bin string, args ...string) (*proc, error) {
	return e.spawnEnv(nil, bin, args...)
}

// spawnEnv is spawn with variables added to the environment.
func (e *env) spawnEnv(vars []string, bin string, args ...string) (*proc, error) {
	cmd := exec.Command(bin, args...)
	if len(vars) > 0 {
		cmd.Env = append(os.Environ(), vars...)
	}
	cmd.Stdout = io.Discard
	cmd.Stderr = e.progress
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &proc{cmd: cmd}, nil
}

func (p *proc) stop() error {
	if p == nil || p.cmd.Process == nil {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	waited := make(chan error, 1)
	go func() { waited <- p.cmd.Wait() }()
	select {
	case err := <-waited:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return nil // stopped by the signal
		}
		return err
	case <-time.After(40 * time.Second):
		_ = p.cmd.Process.Kill()
		return <-waited
	}
}
