package telemetry

import (
	"context"
	"sync/atomic"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Providers are the TracerProvider and MeterProvider a library component
// was configured with (pkg/worker's and pkg/client's WithTracerProvider and
// WithMeterProvider). The component puts them in the context of its calls
// (WithProviders) and the span and metric helpers use them in place of the
// OpenTelemetry globals; a provider left nil is the global one, read at
// each use so that one installed later is seen. The spans and metrics are
// the same whichever provider records them.
type Providers struct {
	tp trace.TracerProvider
	mp metric.MeterProvider

	tracer      atomic.Pointer[cachedTracer]
	instruments atomic.Pointer[instruments]
}

// NewProviders returns the providers to use in place of the globals, or
// nil when both are nil (the globals, nothing to carry).
func NewProviders(tp trace.TracerProvider, mp metric.MeterProvider) *Providers {
	if tp == nil && mp == nil {
		return nil
	}
	return &Providers{tp: tp, mp: mp}
}

type providersKey struct{}

// WithProviders returns ctx carrying p; with p nil it returns ctx.
func WithProviders(ctx context.Context, p *Providers) context.Context {
	if p == nil {
		return ctx
	}
	return context.WithValue(ctx, providersKey{}, p)
}

// providersOf returns the providers ctx carries, or nil.
func providersOf(ctx context.Context) *Providers {
	p, _ := ctx.Value(providersKey{}).(*Providers)
	return p
}

// MetricsEnabledIn reports whether the MeterProvider of ctx (its
// Providers', else the global one) records anything.
func MetricsEnabledIn(ctx context.Context) bool { return metrics(ctx) != nil }
