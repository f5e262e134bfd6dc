package telemetry_test

import (
	"context"
	"log"
	"log/slog"
	"os"

	"github.com/weft-dev/weft/internal/telemetry"
)

// A daemon sets telemetry up from the OTEL_* variables at start, logs
// through LogHandler so that records logged with a context carry trace
// ids, and flushes on the way out.
func ExampleSetup() {
	ctx := context.Background()
	shutdown, err := telemetry.Setup(ctx, "weft-coordinator")
	if err != nil {
		log.Fatal(err) // a bad OTEL_* setting
	}
	defer func() { _ = shutdown(context.WithoutCancel(ctx)) }()

	logger := slog.New(telemetry.LogHandler(slog.NewJSONHandler(os.Stderr, nil)))
	logger.InfoContext(ctx, "coordinating")
}
