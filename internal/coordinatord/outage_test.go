package coordinatord_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/weft-dev/weft/internal/coordinatord"
	"github.com/weft-dev/weft/internal/embedded"
	"github.com/weft-dev/weft/internal/natstest"
	"github.com/weft-dev/weft/internal/setup"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
)

const oneNode = `
name: one
nodes:
  - id: a
    type: echo
edges:
  - from: START
    to: a
  - from: a
    to: END
`

// The daemon started before its server waits for it, rides out the
// server's restart and the loss of its consumer, and decides runs before
// and after each.
func TestRunRidesOutAnOutage(t *testing.T) {
	port, dir := freePort(t), t.TempDir()
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	logs := newLogWatch()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- coordinatord.Run(ctx, []string{"-nats", url}, &bytes.Buffer{}, logs)
	}()
	logs.wait(t, `"msg":"waiting for NATS"`, 30*time.Second)

	srv := startServer(t, port, dir)
	logs.wait(t, `"msg":"coordinating"`, 30*time.Second)
	st := openStore(t, srv)
	decides(t, st)

	embedded.Stop(srv)
	srv = startServer(t, port, dir)
	st = openStore(t, srv)
	decides(t, st)

	// Its consumers deleted under it: they are set up again.
	stream, err := st.JetStream().Stream(context.Background(), st.StreamName())
	if err != nil {
		t.Fatal(err)
	}
	lister := stream.ConsumerNames(context.Background())
	var names []string
	for name := range lister.Name() {
		names = append(names, name)
	}
	for _, name := range names {
		if strings.HasPrefix(name, "coordinator") {
			if err := st.JetStream().DeleteConsumer(context.Background(), st.StreamName(), name); err != nil {
				t.Fatal(err)
			}
		}
	}
	decides(t, st)

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v\n%s", err, logs)
	}
}

// decides starts a run and waits for the coordinator's first decision.
func decides(t *testing.T, st events.Store) {
	t.Helper()
	g, err := graph.Parse([]byte(oneNode), "one.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run, err := client.New(st).Start(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	for {
		evs, err := st.Read(ctx, run, 0, 0)
		if err == nil && len(evs) > 0 && evs[len(evs)-1].Type == events.NodeReady {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("no decision for run %s: %v", run, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func openStore(t *testing.T, srv *server.Server) events.Store {
	t.Helper()
	_, js := natstest.Connect(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var st events.Store
	err := setup.Retry(ctx, nil, "the stream", nil, func(ctx context.Context) (err error) {
		st, err = events.Open(ctx, js)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func startServer(t *testing.T, port int, dir string) *server.Server {
	t.Helper()
	s, err := embedded.Start(embedded.Config{StoreDir: dir, Port: port})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { embedded.Stop(s) })
	return s
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// logWatch is a log destination that tells when a line holding a string
// was written.
type logWatch struct {
	mu      sync.Mutex
	b       bytes.Buffer
	waiters map[string]chan struct{}
}

func newLogWatch() *logWatch { return &logWatch{waiters: map[string]chan struct{}{}} }

func (l *logWatch) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Write(p)
	for s, ch := range l.waiters {
		if bytes.Contains(p, []byte(s)) {
			close(ch)
			delete(l.waiters, s)
		}
	}
	return len(p), nil
}

func (l *logWatch) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// wait waits for a line holding s, written before or after the call.
func (l *logWatch) wait(t *testing.T, s string, d time.Duration) {
	t.Helper()
	l.mu.Lock()
	if strings.Contains(l.b.String(), s) {
		l.mu.Unlock()
		return
	}
	ch := make(chan struct{})
	l.waiters[s] = ch
	l.mu.Unlock()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("no log line with %s after %s:\n%s", s, d, l)
	}
}
