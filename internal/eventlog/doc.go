// Package eventlog is Weft's event log: one room for everything a run's
// history is made of and how it is kept on JetStream: the catalogue, the
// envelope, the codec, the subjects, the streams and the store, with the
// engine's appends (decisions, timers) beside the clients' and workers'.
// Package events (pkg/events) is its public face: type aliases and thin
// constructors over what users read and append; the engine uses this
// package directly.
//
// Layer: a foundation (see the README's "How it works"). It imports
// nothing of Weft's above internal/setup and internal/logattr, so the fold
// (pkg/projection), the engine and every face can build on it.
//
// What it offers, by file:
//
//   - types.go, payloads.go: the catalogue. Type and its constants
//     (RunStarted … ChildRunFinished), Types, one payload struct per type
//     (NewPayload) and the values they share (NodeRef, Failure, Action…).
//   - envelope.go, codec.go, json.go: Event, the one envelope; New builds
//     one; Decode is the one decoder of a NATS message, DecodeStored its
//     never-failing form for histories; Encode (engine.go) the message an
//     event is appended as, DecodeFired a fired timer as its run's event.
//   - subjects.go: the subject layout, with its table, and every subject
//     string Weft builds ("weft.r.<slot>.<run>.<writer>.<kind>" and
//     "weft.t.…" for timers); placement.go: which writer an event type
//     belongs to (ErrMisplaced; ParentClaimError, a client's start that
//     names a parent; TriggerClaimError, one that names a schedule or
//     trigger). Tokens and ids: ValidToken, ValidQueue,
//     DecisionID, RandomID, NewRunID, NewNonce (ids.go).
//   - admission.go: admission in a namespace: the request subjects
//     AdmitStart, AdmitSignal, the tickets' subjects and streams
//     (TicketStreamConfig), and the stream metadata that turns it on
//     (MetaAdmission, AdmissionOn).
//   - stream.go: the events and timers streams' settings and set-up
//     (Settings, StreamConfig, TimerStreamConfig, SetupStream, CheckStream,
//     Repair, StreamDiffs), and SettingError (ErrUnsafeSetting).
//   - open.go, store.go, lastget.go: Open and the Store clients and
//     workers use (Append, Read, ReadThrough, LastSeq), with JetStream
//     de-duplication and duplicate acknowledgements confirmed.
//   - engine.go: Engine, the store as the engine uses it: AppendDecisions
//     under per-run optimistic concurrency, durable timers (Schedule,
//     CancelSchedules, TimerStream), MarkDecision; Of and Must find it in a
//     store (or a wrapper that unwraps to one, as the simulator's and the
//     fault injector's do); reads only the engine makes (Each, LeaderSeq,
//     LeaderLast, LeaderFirst, LastOn, HasEnd, Replicas, PublishAtomic);
//     EnsureTimers;
//     IdempotencyKey.
//   - seal.go, keys.go: encryption at rest. UseKeys makes the process seal
//     every event's data with AES-256-GCM under a key ring (Keys, KeyRing,
//     ParseKeyRing, LoadKeys from -encrypt-keys or WEFT_ENCRYPT_KEYS),
//     the envelope left plain; encode seals and Decode opens, so every
//     reader and writer gets it (ErrKeyMissing, naming the key id, for
//     data whose key the process lacks); SealValue and OpenValue for what
//     is kept beside the log (snapshots).
//   - offload.go: large bodies beside the log, in the Object Store bucket
//     PayloadsBucket, the event carrying a reference that Decode resolves
//     (WithOffloadAt turns it on).
//   - payloadgc.go: a run's objects as the run goes: found through its
//     log (RunPayloads), deleted (DeletePayloadObjects, DeletePayloads),
//     carried by an archive and put back by a restore.
//   - errors.go: the sentinels callers check.
//
// On the wire: CloudEvents 1.0 in binary content mode (attributes as
// "ce-*" headers, the JSON data as the body), the CloudEvent id as
// Nats-Msg-Id. Subjects are per run and name who may write them:
// "weft.r.<slot>.<run>.c.<kind>" for clients, ".w.<queue>.<kind>" for the
// workers of a queue, ".d.<kind>" for coordinator decisions and
// ".n.<kind>" for coordinator notices. A child run's run-started is a
// decision of the child run, on its ".d.started" (ChildStartedSubject),
// written by its parent's coordinator: the only start that may name a
// parent; one that does on a client's subject is refused
// (ParentClaimError), and Store.Append will not write one. The runs of
// schedules and event triggers are started the same way, on their own
// ".d.started", naming the schedule or trigger; a client's start that
// names one is refused (TriggerClaimError).
// "weft.r.*.<run>.>" is a run's history and the stream sequence its total
// order. The writer class is
// what NATS permissions grant per role and what Decode checks an event's
// type against, so no writer can pass one type off as another. Store.Append
// refuses decisions; only AppendDecisions writes them, under
// Nats-Expected-Last-Subject-Sequence over the run's decision subjects.
package eventlog
