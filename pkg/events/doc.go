// Package events is Weft's event catalogue and its event store on JetStream.
//
// Every fact about a run is an Event: a CloudEvents 1.0 event whose type is
// one of the versioned types in the "dev.weft." family (see Type), whose data
// is the JSON of one of the payload structs in payloads.go, and which carries
// the run id, and where they apply the node id and attempt, as the
// extensions "runid", "nodeid" and "attempt", plus the W3C trace context as
// the distributed-tracing extension ("traceparent", "tracestate").
//
// On NATS an event travels in CloudEvents binary content mode: attributes as
// "ce-*" headers, the JSON data as the body, "content-type:
// application/json". A stock CloudEvents client that reads NATS headers can
// decode it; Encode and Decode are the one encoder and the one decoder, both
// built on the CloudEvents SDK's binding machinery.
//
// Subjects are per run: facts (run-started, invoking, invoked, failed,
// signals, timers, cancel requests) are published on "weft.ev.R.<kind>" and
// the coordinator's decisions on "weft.ev.R.d.<kind>" (see Event.Subject),
// so "weft.ev.R.>" is the run's history, the stream sequence is its total
// order, and "weft.ev.R.d.>" is what decisions are checked against.
// Node-ready events, the work items, are decisions published on
// "weft.ev.R.d.ready.<queue>" so that workers of a task queue share one
// durable pull consumer filtered on "weft.ev.*.d.ready.<queue>": the log
// itself is the task queue, and acknowledged work stays in the history.
//
// The Store appends with JetStream message-id de-duplication (the CloudEvent
// id is the Nats-Msg-Id, and ids of decisions are derived from what they
// decide, so two coordinators deciding the same thing write it once) and with
// per-run optimistic concurrency (Nats-Expected-Last-Subject-Sequence over
// "weft.ev.R.d.>": decisions conflict with decisions, while workers' facts
// land at any time without invalidating one, since a fact only ends an
// attempt a decision already started). A coordinator's decisions from one
// step are appended as a chain of checked single appends, or, past eight
// events, as JetStream atomic batches (see Store.Append). Delayed events (retries, deadlines) are JetStream
// message schedules on "weft.sched.R.<id>" that fire onto the run's subjects.
package events
