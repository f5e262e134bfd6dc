package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/natsconn"
	"github.com/weft-dev/weft/internal/readmodel"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
)

// natsFlags registers the connection flags on fs: where and as whom to
// connect. A command that never creates the events stream takes no more,
// so that its help lists no stream settings it would ignore.
func natsFlags(fs *flag.FlagSet) *natsconn.Config {
	cfg := &natsconn.Config{}
	cfg.RegisterConnFlags(fs)
	return cfg
}

// natsStreamFlags is natsFlags with the events stream's settings (-storage,
// -replicas, -duplicates, -max-age), for the commands that create or
// change the stream.
func natsStreamFlags(fs *flag.FlagSet) *natsconn.Config {
	cfg := &natsconn.Config{}
	cfg.RegisterFlags(fs)
	return cfg
}

// connect connects to NATS and returns a client over the events stream,
// and a function that closes the connection. With create, a missing
// stream is created (with the flags' storage and replicas); without, it is
// an error, since there is nothing to read.
func (e *env) connect(c *command, cfg *natsconn.Config, create bool) (*client.Client, func(), error) {
	store, opts, closeConn, err := e.connectStore(c, cfg, create)
	if err != nil {
		return nil, nil, err
	}
	return client.New(store, opts...), closeConn, nil
}

// connectStore is connect's first half: the events store, and the client
// options the environment asks for (WEFT_ARCHIVE).
func (e *env) connectStore(c *command, cfg *natsconn.Config, create bool) (events.Store, []client.Option, func(), error) {
	return e.connectStoreAs(c, cfg, create, natsconn.RoleClient)
}

// connectStoreAs is connectStore with role's credentials when they come
// from -roles-dir.
func (e *env) connectStoreAs(c *command, cfg *natsconn.Config, create bool, role natsconn.Role) (events.Store, []client.Option, func(), error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, nil, &usageError{cmd: c, msg: err.Error()}
	}
	nc, err := e.dialAs(c, cfg, role)
	if err != nil {
		return nil, nil, nil, err
	}
	store, err := openStore(e.ctx, cfg, nc, create)
	if err != nil {
		nc.Close()
		return nil, nil, nil, err
	}
	var opts []client.Option
	if cfg.Namespace != "" {
		opts = append(opts, client.WithNamespace(cfg.Namespace))
	}
	if v := os.Getenv("WEFT_ARCHIVE"); v != "" {
		// Runs removed from the log are read from this archive (package
		// runs); by default, from the Object Store bucket weft-archive.
		a, err := readmodel.ParseArchive(e.ctx, eventlog.JetStream(store), store.StreamName(), v, false)
		if err != nil {
			nc.Close()
			return nil, nil, nil, fmt.Errorf("WEFT_ARCHIVE: %w", err)
		}
		opts = append(opts, client.WithArchive(a))
	}
	return store, opts, nc.Close, nil
}

// openStore opens the events store. An existing stream is opened with its
// own settings, so that the CLI's defaults never reconfigure it.
func openStore(ctx context.Context, cfg *natsconn.Config, nc *nats.Conn, create bool) (events.Store, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	s, err := js.Stream(ctx, cfg.Stream)
	switch {
	case err == nil:
		sc := s.CachedInfo().Config
		return events.Open(ctx, js, events.WithStream(cfg.Stream), events.WithStorage(sc.Storage),
			events.WithReplicas(sc.Replicas), events.WithDuplicates(sc.Duplicates), events.WithMaxAge(sc.MaxAge))
	case errors.Is(err, jetstream.ErrStreamNotFound) && create:
		return cfg.OpenStore(ctx, nc, nil)
	case errors.Is(err, jetstream.ErrStreamNotFound) && cfg.Namespace != "":
		return nil, fmt.Errorf("no stream %q in namespace %s on the NATS server at %s: the admin has not set the namespace up yet ('weft roles -setup -out DIR'), or -stream (WEFT_STREAM) names another stream", cfg.Stream, cfg.Namespace, nc.ConnectedUrlRedacted())
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return nil, fmt.Errorf("no stream %q on the NATS server at %s: nothing has run there yet, or -stream (WEFT_STREAM) names another stream", cfg.Stream, nc.ConnectedUrlRedacted())
	default:
		return nil, fmt.Errorf("looking up stream %q: %w", cfg.Stream, err)
	}
}

// dialAs connects a command to its namespace, with the key ring of
// -encrypt-keys or WEFT_ENCRYPT_KEYS in use: one namespace (a command
// serves one), with the credentials given or role's from -roles-dir,
// checked against the account the server puts the connection in. cfg
// becomes the namespace's configuration.
func (e *env) dialAs(c *command, cfg *natsconn.Config, role natsconn.Role) (*nats.Conn, error) {
	targets, err := cfg.Targets(role, "")
	if err != nil {
		return nil, &usageError{cmd: c, msg: err.Error()}
	}
	// The key ring events' data is sealed with, if any: the process's.
	if err := cfg.UseKeys(nil); err != nil {
		return nil, &usageError{cmd: c, msg: err.Error()}
	}
	if len(targets) > 1 {
		return nil, &usageError{cmd: c, msg: fmt.Sprintf("-namespace %s: a command serves one namespace (the coordinator and nodeworker daemons serve several)", cfg.Namespace)}
	}
	*cfg = targets[0]
	cfg.Name = "weft " + c.name
	nc, err := cfg.Connect("")
	if err != nil {
		if cfg.URL == "" {
			err = fmt.Errorf("%w (is a server running? 'weft dev' starts one)", err)
		}
		if cfg.Namespace != "" && errors.Is(err, nats.ErrAuthorization) {
			err = fmt.Errorf("namespace %s: %w (are these credentials of one of the namespaces 'weft roles -namespaces' generated?)", cfg.Namespace, err)
		}
		return nil, err
	}
	if err := natsconn.VerifyNamespace(e.ctx, nc, cfg.Namespace); err != nil {
		nc.Close()
		return nil, err
	}
	return nc, nil
}
