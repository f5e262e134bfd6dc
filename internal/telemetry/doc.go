// Package telemetry is Weft's OpenTelemetry wiring: exporters configured
// by the standard OTEL_* environment variables, the W3C trace context that
// every event carries, the spans of a run, its metrics, and trace ids in
// the logs.
//
// # Off by default, free when off
//
// Setup installs SDK providers only when an exporter is configured
// (OTEL_TRACES_EXPORTER / OTEL_METRICS_EXPORTER set to "otlp", or an
// OTEL_EXPORTER_OTLP_*ENDPOINT set). Otherwise the global providers stay
// OpenTelemetry's defaults, Enabled and MetricsEnabled report false, and
// every helper here returns at once: no span is started, no instrument is
// touched, and no trace header is written on an event. Libraries (pkg/client,
// pkg/worker) use the global providers, so an application that installs
// its own TracerProvider gets Weft's spans in its traces without Setup.
//
// # A run is one trace
//
// Events carry the W3C trace context in Event.TraceParent and TraceState
// (the CloudEvents distributed-tracing extension); Inject and Extract move
// it between a context and an event. The parent of every span is the trace
// context found in the event being handled, and what a span appends carries
// that span's context, so the trace id of run-started holds for the whole
// run: its retries (timer events are encoded when scheduled) and its child
// runs (their run-started carries the deciding span's context).
//
// The spans (kinds and attributes follow the messaging conventions, with
// messaging.system "nats"):
//
//	run <graph>            Producer  client: Start appends run-started; a
//	                                 child of the caller's span, if any
//	process <event>        Consumer  coordinator: handling one event that is
//	                                 not a decision; parent: the event's context
//	send decisions         Producer  coordinator: appending the decisions
//	                                 of one step; child of the process span;
//	                                 links to the causes of a join
//	node <id>              Consumer  worker: one delivery of a node attempt;
//	                                 parent: the node-ready event's context
//	wait <queue>           Internal  worker: the work item's time in its
//	                                 queue, node-ready to pick-up; a sibling
//	                                 of the node span
//	signal <node>, cancel  Producer  client: a signal or cancel request sent
//	                                 to a running run; parent: the run's
//	                                 context, read from its run-started
//	                                 (the caller's span is linked)
//	run lifetime <graph>   Internal  coordinator: recorded when the run
//	                                 ends, from run-started's stored time
//	                                 to the end; parent: the run's root
//
// "send decisions" spans carry weft.decision.types and weft.decision.nodes:
// what was decided. Flush exports ended spans at once, for short-lived
// processes (the CLI flushes after each command).
//
// Node-ready work therefore hangs under the decision that made it, the
// coordinator's handling of an outcome hangs under the node's span, and a
// node that joins several branches has its decision linked to the node
// spans of every branch that reached it.
//
// # Metrics
//
// Names are in metrics.go, and their table (with the Prometheus names) in
// deploy/otel/README.md. Workers record node duration, queue wait
// (node-ready to invoking), failures, redeliveries, and the depth and
// oldest waiting work of their queues; coordinators record runs started
// and ended by status, runs in flight, decisions by type, conflicts,
// redeliveries, retries scheduled and their lag behind the log.
//
// # Metrics and health over HTTP
//
// Setup with WithPrometheus adds a Prometheus reader to the MeterProvider,
// so that the same instruments feed OTLP and a scrape; Serve answers
// /metrics, /healthz and /readyz (the daemons' -http flag, off by default,
// loopback unless told otherwise).
//
// # Logs
//
// LogHandler wraps a slog.Handler so that records logged with a context
// carry trace_id and span_id (see internal/logattr); callers add run_id
// and node_id as attributes, under the keys of internal/logattr.
package telemetry
