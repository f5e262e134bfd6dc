package cli

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weft-dev/weft/internal/telemetry"
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
	return telemetry.Serve(ctx, addr, reg, le.Ready, log)
}
