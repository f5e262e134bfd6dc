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
// Subjects are per run and name who may write them (see subjects.go for the
// table): "weft.r.<slot>.<run>.c.<kind>" for clients (run-started, signals,
// cancel requests), "weft.r.<slot>.<run>.w.<queue>.<kind>" for the workers
// of a task queue (invoking, invoked, failed, cancelled, heartbeat),
// "weft.r.<slot>.<run>.d.<kind>" for coordinator decisions and
// "weft.r.<slot>.<run>.n.<kind>" for coordinator notices (timers fired,
// child runs finished). "weft.r.*.<run>.>" is the run's history, the stream
// sequence is its total order, and "weft.r.<slot>.<run>.d.>" is what
// decisions are checked against. Node-ready events, the work items, are
// decisions on "weft.r.<slot>.<run>.d.ready.<queue>", so that the workers of
// a queue share one durable pull consumer filtered on
// "weft.r.*.*.d.ready.<queue>": the log itself is the task queue, and
// acknowledged work stays in the history.
//
// The slot (Slot, two hex digits from the run id) is how coordinators
// partition runs; the writer class is what NATS permissions grant per role
// and what Decode checks an event's type against (ErrMisplaced), so no
// writer can pass one type off as another. Reading a history never stops at
// a message that is not a valid event: Store.Read returns it in its place
// with Event.Refused set, and the fold passes over it. A history is read
// in batched direct gets of at most 4 MB each (the server would otherwise
// send up to its max_pending, 64 MB, at once and cut the reader off), and
// Each walks one event at a time, so a history of any size is read in
// bounded memory.
//
// The Store appends with JetStream message-id de-duplication (the CloudEvent
// id is the Nats-Msg-Id, and ids of decisions are derived from what they
// decide, so two coordinators deciding the same thing write it once) and with
// per-run optimistic concurrency (Nats-Expected-Last-Subject-Sequence over
// the run's decision subjects: decisions conflict with decisions, while
// workers' facts land at any time without invalidating one, since a fact
// only ends an attempt a decision already started). A duplicate
// acknowledgement is never taken on trust: the stored message is read back
// from the stream leader and must be the appended event
// (ErrDuplicateMismatch otherwise), since anyone may publish under a
// predictable id first; a worker's outcome is read back as the last
// message on its own subject instead (LastOn), the one read of it a
// worker's role may make (see lastget.go). A coordinator's decisions from one step are
// appended as a chain of checked single appends, or, past eight events, as
// JetStream atomic batches (see Store.Append). Delayed events (retries,
// deadlines, timeouts) are JetStream message schedules on
// "weft.t.<slot>.<run>.<timer>" that fire onto the run's notice subjects.
package events
