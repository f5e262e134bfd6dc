package telemetry_test

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/trace"
	collmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	colltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// collector is a test OTLP receiver: OTLP/HTTP (protobuf) and OTLP/gRPC
// on loopback, keeping the spans and the names of the metrics it gets.
type collector struct {
	HTTPEndpoint string // http://127.0.0.1:port
	GRPCEndpoint string // http://127.0.0.1:port

	mu      sync.Mutex
	spans   []span
	metrics map[string]map[string]bool // service → metric names
}

func startCollector(t *testing.T) *collector {
	t.Helper()
	c := &collector{metrics: map[string]map[string]bool{}}

	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, r *http.Request) {
		var req colltrace.ExportTraceServiceRequest
		if !readProto(w, r, &req) {
			return
		}
		c.addSpans(req.GetResourceSpans())
		writeProto(w, &colltrace.ExportTraceServiceResponse{})
	})
	mux.HandleFunc("POST /v1/metrics", func(w http.ResponseWriter, r *http.Request) {
		var req collmetrics.ExportMetricsServiceRequest
		if !readProto(w, r, &req) {
			return
		}
		c.addMetrics(&req)
		writeProto(w, &collmetrics.ExportMetricsServiceResponse{})
	})
	hs := &http.Server{Handler: mux}
	go func() { _ = hs.Serve(hl) }()
	t.Cleanup(func() { _ = hs.Close() })
	c.HTTPEndpoint = "http://" + hl.Addr().String()

	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	colltrace.RegisterTraceServiceServer(gs, grpcTraces{c: c})
	collmetrics.RegisterMetricsServiceServer(gs, grpcMetrics{c: c})
	go func() { _ = gs.Serve(gl) }()
	t.Cleanup(gs.Stop)
	c.GRPCEndpoint = "http://" + gl.Addr().String()
	return c
}

type grpcTraces struct {
	colltrace.UnimplementedTraceServiceServer
	c *collector
}

func (g grpcTraces) Export(_ context.Context, req *colltrace.ExportTraceServiceRequest) (*colltrace.ExportTraceServiceResponse, error) {
	g.c.addSpans(req.GetResourceSpans())
	return &colltrace.ExportTraceServiceResponse{}, nil
}

type grpcMetrics struct {
	collmetrics.UnimplementedMetricsServiceServer
	c *collector
}

func (g grpcMetrics) Export(_ context.Context, req *collmetrics.ExportMetricsServiceRequest) (*collmetrics.ExportMetricsServiceResponse, error) {
	g.c.addMetrics(req)
	return &collmetrics.ExportMetricsServiceResponse{}, nil
}

func readProto(w http.ResponseWriter, r *http.Request, m proto.Message) bool {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return false
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err == nil {
		err = proto.Unmarshal(b, m)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

func writeProto(w http.ResponseWriter, m proto.Message) {
	b, _ := proto.Marshal(m)
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(b)
}

func serviceOf(r *resourcepb.Resource) string {
	for _, kv := range r.GetAttributes() {
		if kv.GetKey() == "service.name" {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

func (c *collector) addSpans(rss []*tracepb.ResourceSpans) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range rss {
		service := serviceOf(rs.GetResource())
		for _, ss := range rs.GetScopeSpans() {
			for _, p := range ss.GetSpans() {
				s := span{
					Name:    p.GetName(),
					Kind:    trace.SpanKind(p.GetKind()), // the enums share their numbers
					Trace:   trace.TraceID(p.GetTraceId()),
					ID:      trace.SpanID(p.GetSpanId()),
					Attrs:   map[string]string{},
					Error:   p.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR,
					Service: service,
				}
				if len(p.GetParentSpanId()) == 8 {
					s.Parent = trace.SpanID(p.GetParentSpanId())
				}
				for _, l := range p.GetLinks() {
					s.Links = append(s.Links, trace.NewSpanContext(trace.SpanContextConfig{
						TraceID: trace.TraceID(l.GetTraceId()), SpanID: trace.SpanID(l.GetSpanId()),
					}))
				}
				for _, kv := range p.GetAttributes() {
					s.Attrs[kv.GetKey()] = anyString(kv.GetValue())
				}
				c.spans = append(c.spans, s)
			}
		}
	}
}

func anyString(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	case *commonpb.AnyValue_BytesValue:
		return hex.EncodeToString(x.BytesValue)
	}
	return v.String()
}

func (c *collector) addMetrics(req *collmetrics.ExportMetricsServiceRequest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rm := range req.GetResourceMetrics() {
		service := serviceOf(rm.GetResource())
		if c.metrics[service] == nil {
			c.metrics[service] = map[string]bool{}
		}
		for _, sm := range rm.GetScopeMetrics() {
			for _, m := range sm.GetMetrics() {
				c.metrics[service][m.GetName()] = true
			}
		}
	}
}

func (c *collector) Spans() []span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]span(nil), c.spans...)
}

func (c *collector) Metrics(service string) map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]bool{}
	for k := range c.metrics[service] {
		out[k] = true
	}
	return out
}
