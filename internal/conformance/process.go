package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/natsconn"
	"github.com/weft-dev/weft/internal/workqueue"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/worker"
)

// announceWait bounds how long a worker process may take to announce
// itself after it starts (an SDK that builds or loads a runtime first).
const announceWait = 60 * time.Second

// proc is one process of the worker under test.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string // its output's file
	out  *os.File
	done chan struct{}

	mu       sync.Mutex
	err      error // how it exited, once done is closed
	expected bool  // it was told to stop (SIGTERM, SIGKILL)
}

// startWorker starts a process of the worker under test under the worker
// role's credentials and waits until it has announced itself.
func (k *kit) startWorker(ctx context.Context) (*proc, error) {
	k.workerMu.Lock()
	k.started++
	n := k.started
	k.workerMu.Unlock()
	p := &proc{name: "conf-" + strconv.Itoa(n), log: filepath.Join(k.dir, fmt.Sprintf("worker-%d.log", n)), done: make(chan struct{})}
	out, err := os.Create(p.log)
	if err != nil {
		return nil, err
	}
	p.out = out
	var w io.Writer = out
	if k.o.Log != nil {
		w = io.MultiWriter(out, prefixWriter{prefix: "[" + p.name + "] ", w: k.o.Log})
	}
	p.cmd = exec.Command(k.o.Worker[0], k.o.Worker[1:]...)
	p.cmd.Stdout, p.cmd.Stderr = w, w
	p.cmd.Env = k.workerEnv(p.name)
	setGroup(p.cmd)
	if err := p.cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("starting the worker %q: %w", strings.Join(k.o.Worker, " "), err)
	}
	go func() {
		err := p.cmd.Wait()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		_ = out.Close()
		close(p.done)
	}()
	k.workerMu.Lock()
	k.worker = p
	k.workerMu.Unlock()
	if _, err := k.awaitAnnouncement(ctx, p); err != nil {
		// A worker that does not announce itself is not serving: stop
		// it, so that the next case starts one afresh.
		p.kill()
		k.workerMu.Lock()
		if k.worker == p {
			k.worker = nil
		}
		k.workerMu.Unlock()
		return nil, err
	}
	return p, nil
}

// workerEnv is the environment of the worker process name: this one's
// without Weft's variables, and the kit's connection, role, stream, queue
// and effects file (and key ring, in a sealed run of the kit).
func (k *kit) workerEnv(name string) []string {
	c := k.creds[natsconn.UserName(natsconn.RoleWorker, Queue)]
	env := append(withoutWeft(os.Environ()),
		"WEFT_NATS_URL="+k.url,
		"WEFT_NATS_USER="+c.User.Name,
		"WEFT_NATS_PASSWORD="+c.Password,
		"WEFT_NATS_INBOX_PREFIX="+natsconn.InboxPrefixFor(c.User.Name),
		"WEFT_STREAM="+k.admin.StreamName(),
		"WEFT_QUEUE="+Queue,
		"WEFT_WORKER_NAME="+name,
		"WEFT_CONF_EFFECTS="+k.effects,
	)
	if v, ok := os.LookupEnv(events.EnvEncryptKeys); ok {
		// A sealed run of the kit (weft conformance with a key ring):
		// the worker holds the same ring.
		env = append(env, events.EnvEncryptKeys+"="+v)
	}
	return env
}

// awaitAnnouncement waits until p's entry is in the announcements bucket.
func (k *kit) awaitAnnouncement(ctx context.Context, p *proc) (*worker.Announcement, error) {
	ctx, cancel := context.WithTimeout(ctx, announceWait)
	defer cancel()
	var kv jetstream.KeyValue
	for {
		if kv == nil {
			kv, _ = k.adminJS.KeyValue(ctx, workqueue.WorkersBucket)
		}
		if kv != nil {
			if e, err := kv.Get(ctx, p.name); err == nil {
				var a worker.Announcement
				if err := json.Unmarshal(e.Value(), &a); err != nil {
					return nil, fmt.Errorf("worker %s announced itself with %q: %v", p.name, e.Value(), err)
				}
				return &a, nil
			}
		}
		if exited, err := p.exited(); exited {
			return nil, fmt.Errorf("worker %s exited before it announced itself (%v); its log: %s", p.name, err, p.tail())
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("worker %s did not announce itself in %s (key %q of bucket %s); its log: %s", p.name, announceWait, p.name, workqueue.WorkersBucket, p.tail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// current is the worker process serving now, if it runs.
func (k *kit) current() *proc {
	k.workerMu.Lock()
	defer k.workerMu.Unlock()
	return k.worker
}

// ensureWorker starts a worker process when none runs.
func (k *kit) ensureWorker(ctx context.Context) (*proc, error) {
	if p := k.current(); p != nil {
		if exited, _ := p.exited(); !exited {
			return p, nil
		}
	}
	return k.startWorker(ctx)
}

// stopWorker stops the current worker process with SIGTERM, waits for it
// (at most wait) and returns how it exited.
func (k *kit) stopWorker(wait time.Duration) (*proc, error) {
	p := k.current()
	if p == nil {
		return nil, nil
	}
	k.workerMu.Lock()
	k.worker = nil
	k.workerMu.Unlock()
	return p, p.term(wait)
}

// exited reports whether the process has exited, and how.
func (p *proc) exited() (bool, error) {
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return true, p.err
	default:
		return false, nil
	}
}

// unexpectedExit says how the process exited when it was not told to.
func (p *proc) unexpectedExit() error {
	exited, err := p.exited()
	p.mu.Lock()
	expected := p.expected
	p.mu.Unlock()
	if !exited || expected {
		return nil
	}
	if err == nil {
		err = errors.New("exit status 0")
	}
	return fmt.Errorf("the worker process %s exited on its own (%v); its log: %s", p.name, err, p.tail())
}

// term sends SIGTERM and waits at most wait for the process to exit; the
// error is its exit error, or a timeout (it is then killed).
func (p *proc) term(wait time.Duration) error {
	p.mu.Lock()
	p.expected = true
	p.mu.Unlock()
	signalGroup(p.cmd, syscall.SIGTERM)
	select {
	case <-p.done:
		_, err := p.exited()
		return err
	case <-time.After(wait):
		p.kill()
		return fmt.Errorf("the worker did not exit within %s of SIGTERM", wait)
	}
}

// kill sends SIGKILL and waits for the process to go.
func (p *proc) kill() {
	p.mu.Lock()
	p.expected = true
	p.mu.Unlock()
	signalGroup(p.cmd, syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
	}
}

// tail is the end of the process's output, for a failure's message.
func (p *proc) tail() string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return p.log
	}
	const max = 1500
	if len(b) > max {
		b = append([]byte("…"), b[len(b)-max:]...)
	}
	return fmt.Sprintf("%s\n%s", p.log, strings.TrimSpace(string(b)))
}

// withoutWeft is env without Weft's variables: the worker gets the
// kit's only.
func withoutWeft(env []string) []string {
	var out []string
	for _, e := range env {
		if !strings.HasPrefix(e, "WEFT_") {
			out = append(out, e)
		}
	}
	return out
}

// prefixWriter prefixes each write (a process's output) with its name.
type prefixWriter struct {
	prefix string
	w      io.Writer
}

func (p prefixWriter) Write(b []byte) (int, error) {
	if _, err := io.WriteString(p.w, p.prefix+string(b)); err != nil {
		return 0, err
	}
	return len(b), nil
}

// SplitCommand splits a command line into a program and its arguments on
// spaces, keeping what is quoted with '…' or "…" together (no escapes, no
// variables: the command is run directly, not by a shell).
func SplitCommand(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated %c quote in %q", quote, s)
	}
	if inWord {
		out = append(out, cur.String())
	}
	if len(out) == 0 {
		return nil, errors.New("empty command")
	}
	return out, nil
}
