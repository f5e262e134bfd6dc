package telemetry

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"

	"github.com/weft-dev/weft/internal/logattr"
)

// LogHandler wraps h so that records logged with a context that holds a
// valid span context get trace_id and span_id attributes.
func LogHandler(h slog.Handler) slog.Handler {
	if _, ok := h.(*logHandler); ok {
		return h
	}
	return &logHandler{h}
}

type logHandler struct{ slog.Handler }

func (h *logHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String(logattr.TraceID, sc.TraceID().String()), slog.String(logattr.SpanID, sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h *logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &logHandler{h.Handler.WithAttrs(as)}
}

func (h *logHandler) WithGroup(name string) slog.Handler {
	return &logHandler{h.Handler.WithGroup(name)}
}

// LogAttrs returns trace_id and span_id of a span context as log
// arguments, or nil when it is invalid: for loggers built without a
// context at hand.
func LogAttrs(sc trace.SpanContext) []any {
	if !sc.IsValid() {
		return nil
	}
	return []any{slog.String(logattr.TraceID, sc.TraceID().String()), slog.String(logattr.SpanID, sc.SpanID().String())}
}
