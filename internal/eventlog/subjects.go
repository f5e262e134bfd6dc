package eventlog

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
)

// The subject layout. One layout serves three purposes at once, and each
// token is there for one of them:
//
//		weft.r.<slot>.<run>.c.<kind>          written by clients: started, signal, cancelreq
//		weft.r.<slot>.<run>.d.started         a child run's start, written by its parent's
//		                                      coordinator (a decision of the child run)
//		weft.r.<slot>.<run>.w.<queue>.<kind>  written by workers of <queue>: invoking,
//		                                      invoked, nodefailed, nodecancelled, heartbeat
//		weft.r.<slot>.<run>.w.<queue>.step.<node>
//		                                      a step of a running node (an agent's model
//		                                      answer or tool result), on a subject of its
//		                                      own per node activation (<node> is
//		                                      StepToken of the node's key), so that the
//		                                      worker that runs the node again reads its
//		                                      last step with one direct get
//		weft.r.<slot>.<run>.w._local.<kind>   outcomes of local nodes (LocalQueue), which
//		                                      the coordinator runs itself: written by the
//		                                      coordinator only
//		weft.r.<slot>.<run>.d.<kind>          coordinator decisions (optimistic concurrency
//		                                      over weft.r.<slot>.<run>.d.>)
//		weft.r.<slot>.<run>.d.ready.<queue>   the work item of <queue>: a decision
//		weft.r.<slot>.<run>.n.<kind>          coordinator notices, outside the concurrency
//		                                      check: timer (fired), childfinished
//		weft.t.s.<slot>.<run>.<timer>         a pending durable timer: a message schedule in
//		                                      the timers stream, which only the coordinator
//		                                      may write or read
//		weft.t.f.<slot>.<run>                 a timer that fired, in the timers stream; the
//		                                      coordinator appends it to the run as n.timer
//
//	  - <run> makes a run's history one filter ("weft.r.*.<run>.>") and the
//	    stream sequence its total order.
//	  - <slot> partitions runs for coordinators: Slot(run) is a pure function
//	    of the run id (FNV-1a, 64 slots), so every writer computes it alone,
//	    and a coordinator partition is a set of slots (PartitionFilters). The
//	    number of partitions can change on a live system by re-filtering the
//	    partition consumers; a run never changes slot.
//	  - The writer class ("c", "w.<queue>", "d", "n") binds an event's type to
//	    who may write it. NATS permissions grant each role its class only (a
//	    worker of queue Q publishes on "weft.r.*.*.w.Q.>"), and Decode
//	    refuses an event whose type is not accepted on its subject
//	    (ErrMisplaced), so a writer cannot pass one type off as another.
//	  - LocalQueue ("_local") is the queue token of local nodes: their work
//	    item is a decision on "d.ready._local", which no worker consumes,
//	    and their outcomes are worker-class events on "w._local.<kind>".
//	    No queue name may be "_local" (ValidToken refuses a leading "_",
//	    and so do graph validation and 'weft roles'), so no worker holds
//	    the right to write there; the coordinator's role does. The fold
//	    takes a local attempt's outcome from "w._local" only, and a
//	    "w._local" outcome for a local attempt only (pkg/projection).
const (
	runPrefix      = "weft.r."
	schedulePrefix = "weft.t."
	// AllEvents is the filter of every run's events.
	AllEvents = "weft.r.>"
	// RunSubjects matches every run's subjects, weft.r.<slot>.<run>.…,
	// and nothing shorter (a role's subscription to weft.r.> is refused).
	RunSubjects = runPrefix + "*.*.>"
	// ClientSubjects, DecisionSubjects and NoticeSubjects match every
	// run's events of one writer class: what 'weft roles' grants.
	ClientSubjects   = runPrefix + "*.*." + ClassClient + ".*"
	DecisionSubjects = runPrefix + "*.*." + ClassCoordinator + ".>"
	NoticeSubjects   = runPrefix + "*.*." + ClassNotice + ".*"
	// SignalSubjects matches every run's signals (a client's event): what
	// a coordinator that admits a namespace's signals appends.
	SignalSubjects = runPrefix + "*.*." + ClassClient + ".signal"
	// ClientStarts matches every run's start by a client (not a child
	// run's, which is a decision): what a coordinator that admits a
	// namespace's starts appends.
	ClientStarts = runPrefix + "*.*." + ClassClient + ".started"
	// PendingTimers is the filter of every pending durable timer (message
	// schedules) in the timers stream.
	PendingTimers = schedulePrefix + "s.>"
	// AllSchedules is the filter of the timers stream: pending durable
	// timers, and timers fired and not yet appended to their runs.
	AllSchedules = "weft.t.>"
	// TimerStreamSuffix names the timers stream after the events stream
	// ("WEFT_TIMERS"). Timers live apart because a stream with message
	// schedules has roll-up headers forced on: in the events stream, any
	// writer could purge it with one header that permissions do not see.
	TimerStreamSuffix = "_TIMERS"
	// Slots is the number of slots runs are spread over; coordinator
	// partitions are sets of slots, so there are at most Slots partitions.
	Slots = 64
)

// LocalQueue is the queue token of the nodes the coordinator runs itself
// (local nodes): the queue of their work items and outcomes. It is no
// valid queue name (ValidToken refuses it), so no worker can be given it.
const LocalQueue = "_local"

// validQueue reports whether q can be the queue token of an event: a
// queue name, or LocalQueue.
func validQueue(q string) bool { return q == LocalQueue || ValidToken(q) }

// Writer classes: the subject token after the run id.
const (
	ClassClient      = "c"
	ClassWorker      = "w"
	ClassCoordinator = "d"
	ClassNotice      = "n"
	classClient      = ClassClient
	classWorker      = ClassWorker
	classCoordinator = ClassCoordinator
	classNotice      = ClassNotice
)

// Slot returns the slot token of a run: two hex digits, 00 to 3f, of the
// run id's 32-bit FNV-1a hash modulo Slots. It is computed for every
// subject of a run's (Parse checks it on every event decoded): inline,
// with no allocation (hash/fnv and fmt took 4% of a burst's CPU).
func Slot(runID string) string {
	h := uint32(fnvOffset32)
	for i := 0; i < len(runID); i++ {
		h ^= uint32(runID[i])
		h *= fnvPrime32
	}
	return slotTokens[h%Slots]
}

// The 32-bit FNV-1a parameters (hash/fnv's).
const (
	fnvOffset32 = 2166136261
	fnvPrime32  = 16777619
)

// slotTokens are the slots' tokens, "00" to "3f".
var slotTokens = func() (t [Slots]string) {
	for i := range t {
		t[i] = fmt.Sprintf("%02x", i)
	}
	return t
}()

// runBase is "weft.r.<slot>.<run>.".
func runBase(runID string) string { return runPrefix + Slot(runID) + "." + runID + "." }

// RunFilter is the subject filter of one run's history.
func RunFilter(runID string) string { return runBase(runID) + ">" }

// DecisionFilter is the subject filter of a run's coordinator decisions,
// the subjects optimistic concurrency is checked over.
func DecisionFilter(runID string) string { return runBase(runID) + classCoordinator + ".>" }

// ReadySubject is the subject of node-ready work for a queue.
func ReadySubject(runID, queue string) string {
	return runBase(runID) + classCoordinator + ".ready." + queue
}

// QueueFilter is the subject filter of a task queue's work across runs.
func QueueFilter(queue string) string { return runPrefix + "*.*.d.ready." + queue }

// WorkerFilter is the filter of the subjects a worker of queue may write:
// its NATS publish permission.
func WorkerFilter(queue string) string { return runPrefix + "*.*.w." + queue + ".>" }

// TerminalSubjects are the subjects of a run's ending decisions.
func TerminalSubjects(runID string) []string {
	base := runBase(runID) + classCoordinator + "."
	return []string{base + kind(typeRunCompleted), base + kind(typeRunFailed), base + kind(typeRunCancelled)}
}

// StartedSubject is the subject of a run's run-started event when a
// client started it.
func StartedSubject(runID string) string {
	return runBase(runID) + classClient + "." + kind(typeRunStarted)
}

// ChildStartedSubject is the subject of a child run's run-started event:
// a decision subject, which only the coordinator may write. A child run is
// started by its parent's coordinator, never by a client, so that no other
// writer can pass a run of its own off as the child (a run-started that
// names a parent is refused anywhere else; see pkg/events).
func ChildStartedSubject(runID string) string {
	return runBase(runID) + classCoordinator + "." + kind(typeRunStarted)
}

// StartedSubjects are the subjects a run's start may stand on: the
// client's, and the coordinator's for a child run.
func StartedSubjects(runID string) []string {
	return []string{StartedSubject(runID), ChildStartedSubject(runID)}
}

// PartitionFilters returns the subject filters of partition p of n: the
// runs whose slot is p modulo n. With one partition it is every event.
// (The coordinators consume a partition in two parts, StartFilters and
// ProgressFilters; this is the whole, as partition consumers were made
// before they were split.)
func PartitionFilters(p, n int) []string {
	return slotFilters(p, n, []string{">"})
}

// StartFilters are the subject filters of partition p's runs' starts by
// clients: the coordinators' intake, consumed apart from the runs'
// progress so that a burst of starts never stands in the stream before
// the outcomes of runs already going.
func StartFilters(p, n int) []string {
	return slotFilters(p, n, []string{classClient + "." + kind(typeRunStarted)})
}

// ProgressFilters are the subject filters of the other events of
// partition p's runs that their coordinator must see: the other client
// events (cancel requests, signals), the workers', the notices, and of
// the decisions only those a coordinator must see come back: a run's
// start by its parent's coordinator (a child run, a continuation), and a
// local node's work item, which its coordinator holds until the node's
// outcome is in. A coordinator's other decisions are not delivered back
// to it: it applied them as it appended them. With StartFilters they
// cover every subject a coordinator consumes, and no subject is in both
// (TestPartitionLanes).
func ProgressFilters(p, n int) []string {
	return slotFilters(p, n, progressTails)
}

// progressTails are the subjects' tails after "<slot>.<run>." that
// ProgressFilters match.
var progressTails = func() []string {
	var client []string
	for _, e := range table {
		if e.class == classClient && e.kind != kind(typeRunStarted) {
			client = append(client, classClient+"."+e.kind)
		}
	}
	slices.Sort(client)
	return append(client, classWorker+".>", classNotice+".>",
		classCoordinator+"."+kind(typeRunStarted), classCoordinator+"."+kind(typeNodeReady)+"."+LocalQueue)
}()

// Consumed reports whether the coordinators consume the event on subj
// (StartFilters or ProgressFilters): every event but a coordinator's
// decisions other than a run's start and a local node's work item.
func Consumed(subj string) bool {
	p, ok := Parse(subj)
	if !ok || p.Class != classCoordinator {
		return ok
	}
	return p.Kind == kind(typeRunStarted) || p.Kind == kind(typeNodeReady) && p.Queue == LocalQueue
}

// slotFilters are the filters of partition p of n's slots (every slot
// with one partition), one per tail.
func slotFilters(p, n int, tails []string) []string {
	slots := []string{"*"}
	if n > 1 {
		slots = nil
		for s := p; s < Slots; s += n {
			slots = append(slots, slotTokens[s])
		}
	}
	if n <= 1 && len(tails) == 1 && tails[0] == ">" {
		return []string{AllEvents}
	}
	var out []string
	for _, s := range slots {
		for _, t := range tails {
			if t == ">" {
				out = append(out, runPrefix+s+".>")
				continue
			}
			out = append(out, runPrefix+s+".*."+t)
		}
	}
	return out
}

// PartitionOf returns the partition (of n) that decides a run.
func PartitionOf(runID string, n int) int {
	if n <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(runID))
	return int(h.Sum32()%Slots) % n
}

// Types of the catalogue (pkg/events) the layout places: the CloudEvents
// type, the subject's kind token and the writer class. NodeInvoked and
// NodeFailed are also coordinator decisions: a router's or a fallback's
// outcome, an attempt that timed out or could not be handed out; and
// RunStarted is one when it starts a child run (ChildStartedSubject).
// pkg/events' tests hold this table to its catalogue.
var table = map[string]struct{ kind, class string }{
	"dev.weft.run.started.v1":          {"started", classClient},           // RunStarted
	"dev.weft.run.completed.v1":        {"completed", classCoordinator},    // RunCompleted
	"dev.weft.run.failed.v1":           {"failed", classCoordinator},       // RunFailed
	"dev.weft.run.cancel_requested.v1": {"cancelreq", classClient},         // RunCancelRequested
	"dev.weft.run.cancelled.v1":        {"cancelled", classCoordinator},    // RunCancelled
	"dev.weft.node.ready.v1":           {"ready", classCoordinator},        // NodeReady
	"dev.weft.node.invoking.v1":        {"invoking", classWorker},          // NodeInvoking
	"dev.weft.node.invoked.v1":         {"invoked", classWorker},           // NodeInvoked
	"dev.weft.node.failed.v1":          {"nodefailed", classWorker},        // NodeFailed
	"dev.weft.node.skipped.v1":         {"skipped", classCoordinator},      // NodeSkipped
	"dev.weft.node.waiting.v1":         {"waiting", classCoordinator},      // NodeWaiting
	"dev.weft.node.routed.v1":          {"routed", classCoordinator},       // NodeRouted
	"dev.weft.node.cancelled.v1":       {"nodecancelled", classWorker},     // NodeCanceled
	"dev.weft.node.heartbeat.v1":       {"heartbeat", classWorker},         // Heartbeat
	"dev.weft.node.step.v1":            {"step", classWorker},              // NodeStep
	"dev.weft.retry.scheduled.v1":      {"retry", classCoordinator},        // RetryScheduled
	"dev.weft.timer.fired.v1":          {"timer", classNotice},             // TimerFired
	"dev.weft.signal.received.v1":      {"signal", classClient},            // SignalReceived
	"dev.weft.child.started.v1":        {"childstarted", classCoordinator}, // ChildRunStarted
	"dev.weft.child.finished.v1":       {"childfinished", classNotice},     // ChildRunFinished
}

// Kind is the kind token of an event type: the last token of its subject
// ("ready" for a node-ready, before its queue). ok is false for a type
// outside the catalogue.
func Kind[T ~string](t T) (kind string, ok bool) {
	e, ok := table[string(t)]
	return e.kind, ok
}

// Class is the writer class of an event type ("" outside the catalogue).
func Class[T ~string](t T) string { return table[string(t)].class }

// kind is the kind token of a type of the catalogue.
func kind(t string) string { return table[t].kind }

// Type strings the layout itself names.
const (
	typeRunStarted   = "dev.weft.run.started.v1"
	typeRunCompleted = "dev.weft.run.completed.v1"
	typeRunFailed    = "dev.weft.run.failed.v1"
	typeRunCancelled = "dev.weft.run.cancelled.v1"
	typeNodeReady    = "dev.weft.node.ready.v1"
	typeTimerFired   = "dev.weft.timer.fired.v1"
)

// KindFilter is the filter of one type of event across all runs, for
// example KindFilter(RunStarted) lists every run: "weft.r.*.*.*.started",
// the starts of clients (c) and of child runs (d). For NodeInvoked it
// matches workers' reports and local nodes' outcomes (queue LocalQueue),
// not the outcomes the coordinator records as decisions for routers and
// fallbacks.
func KindFilter[T ~string](t T) string {
	class, k := Class(t), kind(string(t))
	if string(t) == typeRunStarted {
		return runPrefix + "*.*.*." + k
	}
	switch class {
	case classWorker:
		if k == stepKind {
			return runPrefix + "*.*.w.*." + k + ".*"
		}
		return runPrefix + "*.*.w.*." + k
	case classCoordinator:
		if string(t) == typeNodeReady {
			return runPrefix + "*.*.d.ready.*"
		}
	}
	return runPrefix + "*.*." + class + "." + k
}

// ScheduleSubject is where a pending durable timer waits.
func ScheduleSubject(runID, timerID string) string {
	return schedulePrefix + "s." + Slot(runID) + "." + runID + "." + timerID
}

// ScheduleFilter is the filter of a run's pending timers.
func ScheduleFilter(runID string) string {
	return schedulePrefix + "s." + Slot(runID) + "." + runID + ".>"
}

// FiredSubject is where a run's timers fire, in the timers stream.
func FiredSubject(runID string) string {
	return schedulePrefix + "f." + Slot(runID) + "." + runID
}

// FiredFilters are the filters of the timers fired for the runs of
// partition p of n.
func FiredFilters(p, n int) []string {
	if n <= 1 {
		return []string{schedulePrefix + "f.>"}
	}
	var out []string
	for s := p; s < Slots; s += n {
		out = append(out, fmt.Sprintf("%sf.%02x.*", schedulePrefix, s))
	}
	return out
}

// ScheduledRun returns the run of a pending timer's subject
// (ScheduleSubject).
func ScheduledRun(subject string) (string, bool) {
	rest, ok := strings.CutPrefix(subject, schedulePrefix+"s.")
	if !ok {
		return "", false
	}
	slot, rest, ok := strings.Cut(rest, ".")
	run, timer, ok2 := strings.Cut(rest, ".")
	return run, ok && ok2 && run != "" && timer != "" && slot == Slot(run)
}

// FiredRun returns the run of a fired-timer subject.
func FiredRun(subject string) (string, bool) {
	rest, ok := strings.CutPrefix(subject, schedulePrefix+"f.")
	if !ok {
		return "", false
	}
	slot, run, ok := strings.Cut(rest, ".")
	return run, ok && run != "" && slot == Slot(run) && !strings.Contains(run, ".")
}

// Place is where a subject puts an event: its run, writer class, queue and
// kind.
type Place struct {
	Run, Class, Queue, Kind string
	// Node is the node token of a step subject (StepSubject), else empty.
	Node string
}

// Parse splits an event subject; ok is false for anything that is not a
// run event subject of this layout.
//
// Size: one case per subject shape of the layout (the subjects table of
// docs/worker-protocol.md), each a line; split, the layout would be in
// pieces.
func Parse(subject string) (Place, bool) {
	rest, ok := strings.CutPrefix(subject, runPrefix)
	if !ok {
		return Place{}, false
	}
	var arr [7]string // a place has at most 6 tokens: 7 says more
	tok := splitTokens(rest, arr[:0])
	if len(tok) < 4 || tok[0] != Slot(tok[1]) {
		return Place{}, false
	}
	p := Place{Run: tok[1], Class: tok[2]}
	switch {
	case p.Class == classWorker && len(tok) == 5:
		p.Queue, p.Kind = tok[3], tok[4]
	case p.Class == classWorker && len(tok) == 6 && tok[4] == stepKind && tok[5] != "":
		p.Queue, p.Kind, p.Node = tok[3], tok[4], tok[5]
	case p.Class == classCoordinator && len(tok) == 5 && tok[3] == kind(typeNodeReady):
		p.Kind, p.Queue = tok[3], tok[4]
	case len(tok) == 4 && (p.Class == classClient || p.Class == classCoordinator || p.Class == classNotice):
		p.Kind = tok[3]
	default:
		return Place{}, false
	}
	return p, p.Run != ""
}

// splitTokens is strings.Split(s, ".") into buf, up to its capacity: a
// subject with more tokens ends with the rest in the last one.
func splitTokens(s string, buf []string) []string {
	for len(buf) < cap(buf)-1 {
		tok, rest, more := strings.Cut(s, ".")
		buf = append(buf, tok)
		if !more {
			return buf
		}
		s = rest
	}
	return append(buf, s)
}

// IsDecision reports whether an event subject is a coordinator decision's.
func IsDecision(subject string) bool {
	p, ok := Parse(subject)
	return ok && p.Class == classCoordinator
}

// IsWorkerSubject reports whether subject is a worker-class event subject
// ("weft.r.<slot>.<run>.w.<queue>.<kind>").
func IsWorkerSubject(subject string) bool {
	p, ok := Parse(subject)
	return ok && p.Class == classWorker
}

// RunOf returns the run id of an event subject: any subject under
// "weft.r.<slot>.<run>.", well-formed or not, so that junk on a run's
// subjects is still known to be the run's.
func RunOf(subject string) (string, bool) {
	rest, ok := strings.CutPrefix(subject, runPrefix)
	if !ok {
		return "", false
	}
	tok := strings.SplitN(rest, ".", 3)
	if len(tok) < 3 || tok[1] == "" || tok[0] != Slot(tok[1]) {
		return "", false
	}
	return tok[1], true
}

// RunBase is "weft.r.<slot>.<run>.", the prefix of every subject of a
// run's history.
func RunBase(runID string) string { return runBase(runID) }

// Subject is the subject of an event of the given writer class and kind
// token; queue is the queue token of work items and workers' outcomes.
func Subject(runID, class, kindToken, queue string) string {
	base := runBase(runID)
	switch {
	case class == classCoordinator && kindToken == kind(typeNodeReady):
		return base + classCoordinator + "." + kindToken + "." + queue
	case class == classWorker:
		return base + classWorker + "." + queue + "." + kindToken
	}
	return base + class + "." + kindToken
}

// stepKind is the kind token of NodeStep.
const stepKind = "step"

// StepToken is the subject token of a node activation's steps: the first
// 16 hex digits of the SHA-256 of its key (NodeRef.Key), since a key may
// hold characters a token may not.
func StepToken(nodeKey string) string {
	h := sha256.Sum256([]byte(nodeKey))
	return hex.EncodeToString(h[:8])
}

// StepSubject is the subject of the steps of one node activation, run by
// workers of queue: weft.r.<slot>.<run>.w.<queue>.step.<StepToken(key)>.
func StepSubject(runID, queue, nodeKey string) string {
	return runBase(runID) + classWorker + "." + queue + "." + stepKind + "." + StepToken(nodeKey)
}

// Streamed tokens. The text of a model call is published, as it arrives,
// with core NATS on a subject of its run and node outside the events
// stream (so nothing of it is stored: the step event holds the final
// message):
//
//	weft.tok.<slot>.<run>.<queue>.<step>   <step> is StepToken of the node's key
//
// A worker of <queue> may publish on its queue's token subjects only;
// clients and the UI subscribe (TokenFilter).
const (
	tokenPrefix = "weft.tok."
	// AllTokens matches every run's token subjects.
	AllTokens = tokenPrefix + ">"
)

// Headers of a streamed-token message: which step of the node the text
// belongs to, and the node's ref key (the subject holds its hash only).
const (
	HeaderTokenStep = "Weft-Step"
	HeaderTokenNode = "Weft-Node"
)

// TokenSubject is the subject the streamed tokens of one node activation,
// run by a worker of queue, are published on.
func TokenSubject(runID, queue, nodeKey string) string {
	return tokenPrefix + Slot(runID) + "." + runID + "." + queue + "." + StepToken(nodeKey)
}

// TokenFilter matches the streamed tokens of every node of a run.
func TokenFilter(runID string) string { return tokenPrefix + Slot(runID) + "." + runID + ".>" }

// TokenWrites matches the token subjects a worker of queue may publish
// on: its queue's, in any run.
func TokenWrites(queue string) string { return tokenPrefix + "*.*." + queue + ".*" }

// FiredTarget is the subject a fired timer of a run is appended on: the
// run's timer notice.
func FiredTarget(runID string) string {
	return runBase(runID) + classNotice + "." + kind(typeTimerFired)
}

// ValidQueue reports whether q can be the queue token of an event: a
// queue name, or LocalQueue.
func ValidQueue(q string) bool { return validQueue(q) }

// MaxTokenLen is the longest run id, node id, queue name or timer id.
const MaxTokenLen = 128

// ValidToken reports whether s can be a run id, node id or queue name: it
// becomes one token of a NATS subject, so no dots, spaces or wildcards, and
// at most MaxTokenLen characters.
// It is ^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$, checked by hand
// (TestValidTokenIsTheRegexp): it runs on every event's ids, and the
// regexp was a hot spot of the hop.
func ValidToken(s string) bool {
	if len(s) == 0 || len(s) > MaxTokenLen || !alnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !alnum(c) && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

func alnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// Ended notices. When a coordinator has appended a run's end (completed,
// failed or cancelled) it publishes a notice with core NATS, outside the
// events stream (nothing of it is stored), with no body:
//
//	weft.ended.<slot>.<run>
//
// It says only that the run ended, which a worker's role may know of any
// run (HasEnd), not how: so workers subscribe to every notice and spare
// the read of the ended-run check (docs/worker-protocol.md, step 4). Only
// the coordinator's role may publish them. Core NATS delivers at most
// once, so a notice is a hint: a worker that missed one may run work of an
// ended run, whose outcome the fold passes over.
const (
	endedPrefix = "weft.ended."
	// AllEndedNotices matches every run's ended notice.
	AllEndedNotices = endedPrefix + ">"
)

// EndedNotice is the subject of a run's ended notice.
func EndedNotice(runID string) string { return endedPrefix + Slot(runID) + "." + runID }

// RunOfEndedNotice is the run an ended notice's subject names.
func RunOfEndedNotice(subject string) (string, bool) {
	rest, ok := strings.CutPrefix(subject, endedPrefix)
	if !ok {
		return "", false
	}
	_, run, ok := strings.Cut(rest, ".")
	return run, ok && ValidToken(run)
}
