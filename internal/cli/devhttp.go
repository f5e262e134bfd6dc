package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/telemetry"
	"github.com/weft-dev/weft/pkg/worker"
)

// devMetrics installs a Prometheus reader beside whatever the OTEL_*
// variables configured, for 'weft dev -http': it must come before the
// engine starts, so that the engine's instruments feed it.
func devMetrics(ctx context.Context) (*prometheus.Registry, func(), error) {
	reg := prometheus.NewRegistry()
	shutdown, err := telemetry.Setup(ctx, "weft-dev", telemetry.WithPrometheus(reg))
	if err != nil {
		return nil, nil, err
	}
	telemetry.Announce(ctx, telemetry.ComponentCoordinator)
	telemetry.Announce(ctx, telemetry.ComponentWorker)
	return reg, func() { _ = shutdown(context.WithoutCancel(ctx)) }, nil
}

// serveDev serves /metrics, /healthz and /readyz for 'weft dev -http'.
// It is ready while its connection to the embedded server is up and the
// coordinator's and the worker's consumers exist.
func serveDev(ctx context.Context, addr string, reg *prometheus.Registry, le *localEngine, log *slog.Logger) (*telemetry.Server, error) {
	ready := func(ctx context.Context) error {
		if !le.nc.IsConnected() {
			return errors.New("not connected to the embedded server")
		}
		names := []string{coordinator.ConsumerName("coordinator", 0)}
		for _, q := range le.cfg.queues {
			names = append(names, worker.QueueConsumer(q))
		}
		for _, n := range names {
			if _, err := le.store.JetStream().Consumer(ctx, le.store.StreamName(), n); err != nil {
				return fmt.Errorf("consumer %s: %w", n, err)
			}
		}
		return nil
	}
	return telemetry.Serve(ctx, addr, reg, ready, log)
}
