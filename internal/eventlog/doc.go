// Package eventlog is the layout of Weft's event log on JetStream, below
// pkg/events: what the engine, the roles and the tools need to know of
// subjects and streams, and users never do.
//
// What it offers:
//
//   - The subject layout (subjects.go, with its table): Slot, RunBase,
//     RunFilter, DecisionFilter, StartedSubject, ChildStartedSubject,
//     StartedSubjects, TerminalSubjects,
//     ReadySubject, QueueFilter, WorkerFilter, KindFilter, PartitionFilters,
//     PartitionOf, ScheduleSubject, ScheduleFilter, FiredSubject,
//     FiredFilters, FiredRun, FiredTarget, Parse, RunOf, IsDecision,
//     IsWorkerSubject, Subject, Kind, Class, and the constants AllEvents,
//     AllSchedules, TimerStreamSuffix, Slots, LocalQueue.
//   - Tokens and ids: ValidToken, ValidQueue, MaxTokenLen, DecisionID (the
//     de-duplication key of a decision), RandomID.
//   - The streams (stream.go): Settings, DefaultSettings, StreamConfig,
//     TimerStreamConfig, SetupStream, SetupTimerStream, CheckStream,
//     Repair, StreamDiffs, SubjectsCover, MinDuplicates, DefaultStream,
//     and SettingError, the setting Weft cannot run with (it wraps
//     ErrUnsafeSetting, which pkg/events offers as events.ErrUnsafeSetting).
//   - Headers: HdrCheckpoint, HdrRestored.
//
// What needs the event envelope or the store (decision marking, Encode,
// timers, leader reads) is in internal/eventstore, which builds on this
// package and on pkg/events; Internals is its way in.
package eventlog
