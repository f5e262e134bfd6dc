// Package events is Weft's event catalogue and its event store on
// JetStream: what a run's history is made of, and how clients and workers
// read and append it. It is a face: type aliases and thin constructors
// over internal/eventlog, the one room where the log lives (the envelope,
// codec, subjects, streams, store and the engine's appends). Layer: a
// foundation, with internal/eventlog under it; it imports nothing else of
// Weft's.
//
// What it offers:
//
//   - The catalogue: Type and its constants (RunStarted … ChildRunFinished),
//     Types, and one payload struct per type (RunStartedData,
//     NodeInvokedData, …; NewPayload), with the values they share
//     (NodeRef, Failure and the Failure… types, Action, Signal, ParentRef,
//     ForkRef, FilterNote).
//   - Event, the one envelope every event shares: New builds one;
//     Payload, Subject, IsDecision, CloudEvent and the JSON form (what
//     `weft events -o json` and recorded histories hold) read it.
//   - Decoding for readers: Decode, the one decoder of a NATS message, and
//     DecodeStored, which never fails (a message that is not a valid
//     event keeps its place in a history, with Event.Refused set).
//   - The store: Store (Append, Read, ReadThrough, LastSeq, StreamName,
//     MaxEventSize), Open and its options (WithStream, WithReplicas,
//     WithStorage, WithDuplicates, WithMaxAge, WithLogger), AnySeq,
//     DefaultStream, LocalQueue; client.New and worker.New take a Store.
//   - NewRunID, NewNonce, and the errors callers check: ErrRunNotFound,
//     ErrRunExists, ErrConflict, ErrMalformedEvent, ErrUnknownType,
//     ErrMisplaced (and ParentClaimError and TriggerClaimError, which wrap
//     it),
//     ErrDuplicateMismatch, ErrPayloadTooLarge, ErrInvalidID,
//     ErrUnsafeSetting.
//   - Encryption at rest (seal.go): UseKeys, Keys, Key, KeyRing, NewKey,
//     ParseKeyRing, LoadKeys, ContentSealed, ExtKeyID, ErrKeyMissing,
//     ErrBadKey; large bodies beside the log: WithOffloadAt, ContentRef,
//     PayloadsBucket.
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
// decode it; Decode reads it with the CloudEvents SDK's binding machinery
// behind a fast path held to it.
//
// Subjects are per run and name who may write them:
// "weft.r.<slot>.<run>.c.<kind>" for clients (run-started, signals, cancel
// requests), "weft.r.<slot>.<run>.w.<queue>.<kind>" for the workers of a
// task queue (invoking, invoked, failed, cancelled, heartbeat),
// "weft.r.<slot>.<run>.d.<kind>" for coordinator decisions and
// "weft.r.<slot>.<run>.n.<kind>" for coordinator notices (timers fired,
// child runs finished). A child run's run-started is the one run-started
// that is a decision: its parent's coordinator writes it on the child's
// "weft.r.<slot>.<run>.d.started", and only there may a run-started name
// a parent (RunStartedData.Parent). One that names a parent on a client's
// subject is refused (a ParentClaimError: someone passing a run of its
// own off as another run's child), Store.Append refuses to write one, and
// one on the decision subject that names none is refused too. The runs a
// schedule's fire or an event trigger's message starts are the engine's
// too, on the same decision subject, naming the schedule or trigger
// (RunStartedData.Trigger); a start naming one on a client's subject is
// refused (a TriggerClaimError). A run's
// start carries a random nonce (RunStartedData.Nonce, NewNonce; pkg/client
// sets one) from which its child runs' ids are derived, so that they
// cannot be known without reading the start. "weft.r.*.<run>.>" is the
// run's history and the stream sequence is its total order. Node-ready events, the work items,
// are decisions on "weft.r.<slot>.<run>.d.ready.<queue>": the log itself is
// the task queue, and acknowledged work stays in the history. The writer
// class is what NATS permissions grant per role and what Decode checks an
// event's type against (ErrMisplaced), so no writer can pass one type off
// as another. Reading a history never stops at a message that is not a
// valid event, and is done in batches of at most 4 MB, so a history of any
// size is read in bounded memory.
//
// The Store appends with JetStream message-id de-duplication (the
// CloudEvent id is the Nats-Msg-Id) and confirms a duplicate
// acknowledgement against the stored message (ErrDuplicateMismatch
// otherwise, and the event is written under a fresh id), since anyone may
// publish under a predictable id first. Clients and workers append facts;
// coordinator decisions are the engine's, appended under per-run
// optimistic concurrency over the run's decision subjects. Store.Append
// refuses a decision (IsDecision: an event of a type only the coordinator
// decides, or one read back from a decision subject) with ErrMisplaced,
// and writes nothing.
//
// What only the engine uses stays in internal/eventlog: the subject
// layout, tokens, ids and stream settings, decisions, durable timers
// (JetStream message schedules), leader and per-subject reads, and
// encoding.
package events
