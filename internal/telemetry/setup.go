package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/weft-dev/weft/internal/logattr"
)

// ErrConfig is wrapped by errors about the OTEL_* configuration.
var ErrConfig = errors.New("telemetry configuration")

// Protocols of OTEL_EXPORTER_OTLP_PROTOCOL.
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"
)

// Setup installs the global TracerProvider, MeterProvider and propagator
// from the standard OTEL_* environment variables, for a service named
// service (OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win over it).
// The returned function flushes and stops what was installed; call it on
// the way out (it waits at most 5 seconds when its context has no deadline).
//
// A signal is exported when its OTEL_{TRACES,METRICS}_EXPORTER is "otlp",
// or when it is unset and an OTLP endpoint is (OTEL_EXPORTER_OTLP_ENDPOINT
// or the signal's own). "none", or nothing set, leaves the signal off: its
// global provider stays the no-op default. OTEL_SDK_DISABLED=true turns
// everything off. The protocol is OTEL_EXPORTER_OTLP_{TRACES_,METRICS_,}PROTOCOL:
// "http/protobuf" (the default) or "grpc". Endpoints, headers, timeouts,
// compression and TLS are read by the OTLP exporters themselves, sampling
// (OTEL_TRACES_SAMPLER) and batching (OTEL_BSP_*, OTEL_METRIC_EXPORT_INTERVAL)
// by the SDK.
//
// WithPrometheus adds a Prometheus reader to the MeterProvider (installing
// one even when no OTLP exporter is configured), so that the same
// instruments feed OTLP and a /metrics endpoint (see Serve).
func Setup(ctx context.Context, service string, opts ...Option) (shutdown func(context.Context) error, err error) {
	var o setupOptions
	for _, opt := range opts {
		opt(&o)
	}
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	noop := func(context.Context) error { return nil }
	disabled := strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true")
	var traces, metrics bool
	if !disabled {
		if traces, err = exporterOf("TRACES"); err != nil {
			return noop, err
		}
		if metrics, err = exporterOf("METRICS"); err != nil {
			return noop, err
		}
	}
	if !traces && !metrics && o.prometheus == nil {
		return noop, nil
	}

	res, err := resource.New(ctx,
		resource.WithSchemaURL(semconv.SchemaURL),
		resource.WithAttributes(semconv.ServiceName(service)),
		resource.WithFromEnv(),
		resource.WithTelemetrySDK(),
		resource.WithHost(),
		resource.WithProcessPID(),
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return noop, fmt.Errorf("telemetry resource: %w", err)
	}

	var shutdowns []func(context.Context) error
	shutdown = shutdownAll(&shutdowns)
	if traces {
		exp, err := traceExporter(ctx)
		if err != nil {
			return noop, err
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		otel.SetTracerProvider(tp)
		shutdowns = append(shutdowns, tp.Shutdown)
	}
	if metrics || o.prometheus != nil {
		mp, err := meterProvider(ctx, res, metrics, o.prometheus)
		if err != nil {
			_ = shutdown(ctx)
			return noop, err
		}
		otel.SetMeterProvider(mp)
		shutdowns = append(shutdowns, mp.Shutdown)
	}
	return shutdown, nil
}

// shutdownAll is a shutdown that calls each of *fs, within 5 seconds
// unless its context has a deadline.
func shutdownAll(fs *[]func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
		}
		var errs []error
		for _, f := range *fs {
			errs = append(errs, f(ctx))
		}
		return errors.Join(errs...)
	}
}

// meterProvider is a MeterProvider reading into the OTLP metrics exporter
// the environment configures (if otlp) and into registry (if not nil).
func meterProvider(ctx context.Context, res *resource.Resource, otlp bool, registry *prometheus.Registry) (*sdkmetric.MeterProvider, error) {
	mopts := []sdkmetric.Option{sdkmetric.WithResource(res)}
	if otlp {
		exp, err := metricExporter(ctx)
		if err != nil {
			return nil, err
		}
		mopts = append(mopts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)))
	}
	if registry != nil {
		exp, err := otelprom.New(otelprom.WithRegisterer(registry))
		if err != nil {
			return nil, fmt.Errorf("Prometheus exporter: %w", err)
		}
		mopts = append(mopts, sdkmetric.WithReader(exp))
	}
	return sdkmetric.NewMeterProvider(mopts...), nil
}

// Option configures Setup.
type Option func(*setupOptions)

type setupOptions struct {
	prometheus *prometheus.Registry
}

// WithPrometheus makes Setup record metrics for reg too, whatever the
// OTEL_* variables say (OTEL_SDK_DISABLED included: the endpoint was asked
// for on the command line).
func WithPrometheus(reg *prometheus.Registry) Option {
	return func(o *setupOptions) { o.prometheus = reg }
}

// exporterOf reports whether a signal ("TRACES", "METRICS") is exported.
func exporterOf(signal string) (bool, error) {
	name := "OTEL_" + signal + "_EXPORTER"
	v := strings.ToLower(strings.TrimSpace(os.Getenv(name)))
	switch v {
	case "":
		return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_"+signal+"_ENDPOINT") != "", nil
	case "none":
		return false, nil
	case "otlp":
		return true, nil
	}
	return false, fmt.Errorf("%w: %s=%q: want otlp or none", ErrConfig, name, v)
}

// protocolOf is the OTLP protocol of a signal.
func protocolOf(signal string) (string, error) {
	name := "OTEL_EXPORTER_OTLP_" + signal + "_PROTOCOL"
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		name = "OTEL_EXPORTER_OTLP_PROTOCOL"
		v = strings.TrimSpace(os.Getenv(name))
	}
	switch v {
	case "", ProtocolHTTP:
		return ProtocolHTTP, nil
	case ProtocolGRPC:
		return ProtocolGRPC, nil
	}
	return "", fmt.Errorf("%w: %s=%q: want %s or %s", ErrConfig, name, v, ProtocolHTTP, ProtocolGRPC)
}

func traceExporter(ctx context.Context) (sdktrace.SpanExporter, error) {
	proto, err := protocolOf("TRACES")
	if err != nil {
		return nil, err
	}
	var exp sdktrace.SpanExporter
	if proto == ProtocolGRPC {
		exp, err = otlptracegrpc.New(ctx)
	} else {
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter (%s): %w", proto, err)
	}
	return exp, nil
}

func metricExporter(ctx context.Context) (sdkmetric.Exporter, error) {
	proto, err := protocolOf("METRICS")
	if err != nil {
		return nil, err
	}
	var exp sdkmetric.Exporter
	if proto == ProtocolGRPC {
		exp, err = otlpmetricgrpc.New(ctx)
	} else {
		exp, err = otlpmetrichttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP metric exporter (%s): %w", proto, err)
	}
	return exp, nil
}

// LogErrors sends OpenTelemetry's own errors (an exporter that cannot
// reach its collector, say) to log instead of the standard logger.
func LogErrors(log *slog.Logger) {
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("telemetry", logattr.Error, err)
	}))
}
