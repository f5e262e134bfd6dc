package bench

import (
	"context"
	"errors"
)

// durable runs a figure in durable mode: on a server of its own (embedded,
// in a temp dir, for the figure's length) started with sync_interval:
// always, so that every write, the engine's and the floor's, is fsynced
// before it is acknowledged (what Jepsen's analysis of JetStream
// recommends for no loss of acknowledged writes), and with file storage
// whatever -storage says. Its rows are the figure's, named "… (durable)".
// The other figures run on the default server, which fsyncs every two
// minutes.
func durable(fig func(context.Context, *env) ([]Result, error)) func(context.Context, *env) ([]Result, error) {
	return func(ctx context.Context, e *env) ([]Result, error) {
		if e.cfg.NATS != "" {
			return nil, errors.New("durable mode needs the embedded server (-nats was given): run the server with sync_interval: always and measure it with -nats instead")
		}
		cfg := e.cfg
		cfg.Storage = "file"
		cfg.syncAlways = true
		de, err := newEnv(ctx, cfg, e.progress)
		if err != nil {
			return nil, err
		}
		defer de.close()
		de.figure = e.figure
		rows, err := fig(ctx, de)
		for i := range rows {
			rows[i].Name += " (durable)"
		}
		return rows, err
	}
}
