package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/embedded"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
)

// env is what the figures share: the server, the harness's own connection,
// built binaries and the profiling settings.
type env struct {
	cfg      Config
	sizes    Sizes
	url      string
	srv      *server.Server // nil with an external server
	tmp      string
	nc       *nats.Conn
	js       jetstream.JetStream
	progress io.Writer
	figure   string
	quiet    *slog.Logger

	mu     sync.Mutex
	seq    int
	bins   map[string]string
	conns  []*nats.Conn
	closed bool
}

func newEnv(ctx context.Context, cfg Config, progress io.Writer) (*env, error) {
	tmp, err := os.MkdirTemp("", "weftbench-")
	if err != nil {
		return nil, err
	}
	e := &env{
		cfg: cfg, sizes: cfg.Sizes, tmp: tmp, progress: progress, bins: map[string]string{},
		quiet: slog.New(slog.NewTextHandler(progress, &slog.HandlerOptions{Level: slog.LevelError})),
	}
	e.url = cfg.NATS
	if e.url == "" {
		s, err := embedded.Start(embedded.Config{StoreDir: tmp + "/nats", Port: -1, ServerName: "weftbench", SyncAlways: cfg.syncAlways})
		if err != nil {
			_ = os.RemoveAll(tmp)
			return nil, err
		}
		e.srv, e.url = s, s.ClientURL()
	}
	if e.nc, e.js, err = e.connect("weftbench"); err != nil {
		e.close()
		return nil, err
	}
	return e, nil
}

func (e *env) close() {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	e.closed = true
	conns := e.conns
	e.mu.Unlock()
	for _, nc := range conns {
		nc.Close()
	}
	embedded.Stop(e.srv)
	_ = os.RemoveAll(e.tmp)
}

func (e *env) logf(format string, args ...any) {
	fmt.Fprintf(e.progress, "%s [%s] %s\n", time.Now().Format("15:04:05.000"), e.figure, fmt.Sprintf(format, args...))
}

// connect opens a connection of its own: each component of a figure
// (coordinator, worker, floor roles) gets one, as separate processes would.
func (e *env) connect(name string) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(e.url, nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		return nil, nil, fmt.Errorf("connecting to %s: %w", e.url, err)
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	e.mu.Lock()
	e.conns = append(e.conns, nc)
	e.mu.Unlock()
	return nc, js, nil
}

// name returns a fresh stream name for a figure's phase, so that figures
// never see each other's messages.
func (e *env) name(prefix string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seq++
	return fmt.Sprintf("%s_%d", prefix, e.seq)
}

// storage is the configured stream storage.
func (e *env) storage() jetstream.StorageType {
	if e.cfg.Storage == "memory" {
		return jetstream.MemoryStorage
	}
	return jetstream.FileStorage
}

// openStore opens the events store on stream over js.
func (e *env) openStore(ctx context.Context, js jetstream.JetStream, stream string) (events.Store, error) {
	return openStore(ctx, js, stream, e.storage())
}

func openStore(ctx context.Context, js jetstream.JetStream, stream string, storage jetstream.StorageType) (events.Store, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return events.Open(ctx, js, events.WithStream(stream), events.WithStorage(storage))
}

// dropStream deletes a stream after its figure, so a long run does not
// fill the server.
func (e *env) dropStream(stream string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// An engine's stream has its timers stream beside it (events.Store
	// TimerStream), on subjects the next engine's needs.
	for _, name := range []string{stream, stream + eventlog.TimerStreamSuffix} {
		if err := e.js.DeleteStream(ctx, name); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			e.logf("deleting stream %s: %v", name, err)
		}
	}
}

// streamBytes returns the stream's message count and bytes.
func (e *env) streamBytes(ctx context.Context, stream string) (uint64, uint64, error) {
	s, err := e.js.Stream(ctx, stream)
	if err != nil {
		return 0, 0, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, 0, err
	}
	return info.State.Msgs, info.State.Bytes, nil
}
