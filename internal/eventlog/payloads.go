package eventlog

import (
	"encoding/json"
	"time"
)

// Payload is the data of one event type. Every payload names its type, and
// the node and attempt it concerns where it concerns one.
type Payload interface {
	EventType() Type
}

// NodeRef names one execution of a node within a run: the node, its
// activation (Iteration, 1-based; loops activate a node again), and for a
// mapped node the item index.
type NodeRef struct {
	Node      string `json:"node"`
	Iteration int    `json:"iteration"`
	Item      *int   `json:"item,omitempty"`
}

// Key identifies the activation (and item) as "node/iteration[/item]".
func (r NodeRef) Key() string {
	k := r.Node + "/" + itoa(r.Iteration)
	if r.Item != nil {
		k += "/" + itoa(*r.Item)
	}
	return k
}

// Failure is a structured error, stored in the log as data.
type Failure struct {
	Type      string          `json:"type"`
	Message   string          `json:"message"`
	Retryable bool            `json:"retryable"`
	Details   json.RawMessage `json:"details,omitempty"`
	Cause     *Failure        `json:"cause,omitempty"`
}

// Error is the failure's type and message followed by its causes', each
// cause's type only where it differs from the one before.
func (f *Failure) Error() string {
	if f == nil {
		return "<nil failure>"
	}
	s := f.Type + ": " + f.Message
	for c := f.Cause; c != nil; c = c.Cause {
		// A cause of the same type says only its message.
		if c.Type != "" && c.Type != f.Type {
			s += ": " + c.Type
		}
		s += ": " + c.Message
		f = c
	}
	return s
}

// Failure types the engine itself writes.
const (
	FailureTimeout         = "Timeout"
	FailurePayloadTooLarge = "PayloadTooLarge"
	FailureUnknownType     = "UnknownNodeType"
	FailureCancelled       = "Cancelled"
	FailureValidation      = "ValidationError"
	FailureIterationCap    = "IterationCapReached"
	FailureNoPathToEnd     = "NoPathToEnd"
	FailureCondition       = "ConditionError"
	FailurePanic           = "Panic"
	FailureInvalidGraph    = "InvalidGraph"
	// FailureFlowLimit: a concurrency limit's bound was passed (too many
	// attempts wait for one key, or too many keys are in use), or its key
	// could not be evaluated (internal/flow).
	FailureFlowLimit = "FlowLimit"
	// FailureRateLimited: the outside world said no for now (an HTTP 429,
	// an SDK's RateLimited error); Details {"retryAfterMs": n} says for how
	// long. Retryable; a node with a rate limit backs its whole key off.
	FailureRateLimited = "RateLimited"
	// FailureInvalidForkState fails a forked run whose start state does
	// not fit its graph (projection.CheckForkState); the details list the
	// problems.
	FailureInvalidForkState = "InvalidForkState"
	// FailureChildRunPreempted fails a subgraph node whose child run the
	// coordinator could not start as its own: another writer wrote on the
	// child run's subjects first, and a run the engine did not start is
	// never taken for the child.
	FailureChildRunPreempted = "ChildRunPreempted"
	// FailureInvalidWait fails a run whose wait node's until gave no
	// time (a value that is not a timestamp or an RFC 3339 string, or an
	// evaluation error); the message names the node and the value.
	FailureInvalidWait = "InvalidWaitTime"
	// FailureContinueAsNew fails a run whose continuation could not be
	// started: the state it would carry is over the graph's limit
	// (continueAsNew.maxStateBytes), or the continuation's id holds
	// another writer's events.
	FailureContinueAsNew = "ContinueAsNewFailed"
)

// RateRef names a rate limit's key and the units an attempt takes of it
// (internal/flow).
type RateRef struct {
	Limit string `json:"limit"`
	Key   string `json:"key"`
	Units int    `json:"units"`
	// Turn is, on a map item's node-ready, the turn the item was given
	// when it came before the ready (its run was decided again only
	// then): the log's record of the rate, as a node's wait's deadline is.
	Turn *time.Time `json:"turn,omitempty"`
}

// SlotRef names a concurrency slot: the limit, the key the attempt's
// expression gave, and the limit's max (internal/flow).
type SlotRef struct {
	Limit string `json:"limit"`
	Key   string `json:"key"`
	Max   int    `json:"max"`
}

// ParentRef links a child run to the node of the parent run that started it.
type ParentRef struct {
	RunID string  `json:"runId"`
	Ref   NodeRef `json:"ref"`
	// Attempt is set for a tool's child run: the attempt of the agent
	// node's activation that awaits it (StepAwait, AwaitTool).
	Attempt int `json:"attempt,omitempty"`
}

// RunStartedData starts a run. It carries everything replay needs: the graph
// definition (canonical JSON) and its digest, the input that seeds the
// shared state, and the invocation state (runtime context, read-only).
type RunStartedData struct {
	GraphName   string          `json:"graphName"`
	GraphDigest string          `json:"graphDigest"`
	Graph       json.RawMessage `json:"graph"`
	Input       json.RawMessage `json:"input,omitempty"`
	Invocation  json.RawMessage `json:"invocation,omitempty"`
	Parent      *ParentRef      `json:"parent,omitempty"`
	StartedBy   string          `json:"startedBy,omitempty"`
	// Retention overrides, for this run, how long it is kept once ended
	// (a Go duration; see package runs).
	Retention string `json:"retention,omitempty"`
	// Fork is set when the run was forked from another run (weft fork,
	// weft reset): the run and the point it was forked from.
	Fork *ForkRef `json:"fork,omitempty"`
	// State is a forked run's start state: the parent's folded state at
	// the fork point (projection.State JSON), with the fork's edits, so
	// that the forked run's log needs no other. Input is empty then: the
	// shared state is in State.
	State json.RawMessage `json:"state,omitempty"`
	// Nonce is random (NewNonce), written by whoever starts the run: the
	// ids of the run's child runs are derived from it (with the run id and
	// the subgraph node's activation), so that they are the same whichever
	// coordinator decides, yet cannot be guessed by anyone who cannot read
	// this event. A child run's nonce is derived from its parent's. Runs
	// started without one (by a Weft before it, or a client that sets
	// none) get child ids without that part.
	Nonce string `json:"nonce,omitempty"`
	// Priority (1, lowest, to 5, highest; absent: 3) and FairnessKey rank
	// the run's attempts where they wait for a concurrency slot: higher
	// priorities first; within a priority, fairness keys take turns, so a
	// key with few waiting is not queued behind one with many. A child
	// run inherits both (internal/flow).
	Priority    int    `json:"priority,omitempty"`
	FairnessKey string `json:"fairnessKey,omitempty"`
	// Trigger is set when the engine started the run on its own: a
	// schedule's fire, an event trigger's message or a webhook call.
	Trigger *TriggerRef `json:"trigger,omitempty"`
	// Chain is set on a continuation (continue-as-new): the chain it
	// belongs to and the run it continues. Only the engine starts a
	// continuation (on the run's decision subject, as a child run's).
	Chain *ChainRef `json:"chain,omitempty"`
}

// ChainRef places a run in a chain of continue-as-new runs.
type ChainRef struct {
	// ID is the chain's id: the id of its first run.
	ID string `json:"id"`
	// Link is the run's place in the chain: the first run is 1, its
	// continuation 2, and so on.
	Link int `json:"link"`
	// Previous is the run this one continues.
	Previous string `json:"previous"`
}

// Kinds of TriggerRef.
const (
	TriggerSchedule = "schedule"
	TriggerEvent    = "trigger"
	TriggerWebhook  = "webhook"
)

// TriggerRef says what started a run that no person started: the
// schedule or trigger, by name, and what fired it.
type TriggerRef struct {
	// Kind is TriggerSchedule, TriggerEvent or TriggerWebhook.
	Kind string `json:"kind"`
	Name string `json:"name"`
	// FireTime is a schedule's nominal fire time (for a run started by
	// 'weft schedule trigger', the time of the request).
	FireTime time.Time `json:"fireTime,omitzero"`
	// Key is what the run id was derived from: a message id, the value
	// of an -id expression, an Idempotency-Key, "manual:<request>".
	Key string `json:"key,omitempty"`
	// Webhook is, for Kind TriggerWebhook, the webhook of 'weft serve'
	// whose deliveries the trigger Name maps to runs (the trigger's
	// definition says so: 'weft trigger create -webhook').
	Webhook string `json:"webhook,omitempty"`
}

// Origin says in a few words where the run came from: "schedule
// nightly", "trigger orders", "webhook github (trigger gh-push)".
func (t *TriggerRef) Origin() string {
	if t == nil {
		return ""
	}
	if t.Kind == TriggerWebhook && t.Webhook != "" {
		return "webhook " + t.Webhook + " (trigger " + t.Name + ")"
	}
	return t.Kind + " " + t.Name
}

// Priorities of runs.
const (
	MinPriority     = 1
	DefaultPriority = 3
	MaxPriority     = 5
)

// ForkRef links a forked run to the run and point it was forked from.
type ForkRef struct {
	RunID string `json:"runId"`
	// Position is the parent's event (1-based, in the parent's log) the
	// fork starts after; Seq is that event's stream sequence.
	Position int    `json:"position"`
	Seq      uint64 `json:"seq,omitempty"`
	// Reason says why, e.g. "reset to node b".
	Reason string `json:"reason,omitempty"`
}

// RunCompletedData ends a run successfully with its output (the final state
// unless the graph says otherwise).
type RunCompletedData struct {
	Output json.RawMessage `json:"output,omitempty"`
	// ContinuedAs is set when the run continued as new: the id of its
	// continuation, started (by the coordinator, before this event) with
	// the run's state.
	ContinuedAs string `json:"continuedAs,omitempty"`
}

// RunFailedData ends a run with a failure.
type RunFailedData struct {
	Error Failure `json:"error"`
	Node  string  `json:"node,omitempty"`
}

// RunCancelRequestedData asks for a run to be cancelled; who and why.
type RunCancelRequestedData struct {
	By     string `json:"by"`
	Reason string `json:"reason,omitempty"`
	// Terminate ends the run at once ('weft terminate'): its
	// run-cancelled is marked terminated.
	Terminate bool `json:"terminate,omitempty"`
}

// RunCancelledData ends a run as cancelled.
type RunCancelledData struct {
	By     string `json:"by"`
	Reason string `json:"reason,omitempty"`
	// Terminated says the run was terminated, not cancelled.
	Terminated bool `json:"terminated,omitempty"`
}

// NodeReadyData is the coordinator's decision to run a node: the work item a
// worker pulls. It is self-contained, so a worker needs no other read.
type NodeReadyData struct {
	NodeRef
	Attempt int             `json:"attempt"`
	Type    string          `json:"type"`
	Queue   string          `json:"queue"`
	Config  json.RawMessage `json:"config,omitempty"`
	// Input is the node's view of the shared state (the keys it declares as
	// inputs, or all of it).
	Input json.RawMessage `json:"input,omitempty"`
	// Local is branch-local data: forking data of the actions that led here,
	// or the item of a map.
	Local      json.RawMessage `json:"local,omitempty"`
	Invocation json.RawMessage `json:"invocation,omitempty"`
	// IdempotencyKey is stable across redeliveries of this attempt.
	IdempotencyKey string `json:"idempotencyKey"`
	// StartSeq is the stream sequence of the run's start the coordinator
	// folded (0: not said, by an older coordinator). A worker that reads
	// the start for the node's config takes it only from the message
	// stored at this sequence: a second run-started written later on the
	// run's start subject (which any client may write, and the fold
	// refuses) is never taken for the run's (deploy/SECURITY.md, gap 12).
	StartSeq    uint64 `json:"startSeq,omitempty"`
	TimeoutMs   int64  `json:"timeoutMs,omitempty"`
	HeartbeatMs int64  `json:"heartbeatMs,omitempty"`
	// MaxAttempts is the node's effective retry limit, so that the worker
	// knows an attempt is the last (and runs the node's fallback); 0 means
	// unknown.
	MaxAttempts int `json:"maxAttempts,omitempty"`
	// Effect is the node's effect class (pure, read, write, external,
	// human), for the worker's hooks and filters.
	Effect string `json:"effect,omitempty"`
	// Outputs lists the state keys the node may update; empty means any.
	Outputs []string `json:"outputs,omitempty"`
	// InputSchema and OutputSchema are the node's JSON Schemas, checked by
	// the worker before and after execution.
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	// Consumed lists the incoming edge signals this activation used up.
	Consumed []int `json:"consumed,omitempty"`
	// Owed lists incoming edges whose next signal belongs to this
	// activation's join round (an any or n-of join fired before they
	// signalled): it is absorbed when it arrives.
	Owed []int `json:"owed,omitempty"`
	// Routed holds routings decided in the same step as this activation,
	// recorded with it (and applied before it) so that the common step,
	// a node finished and its successor starts, is one event.
	Routed []NodeRoutedData `json:"routed,omitempty"`
	// Slot is the concurrency slot the attempt holds, when its node has a
	// limit: the coordinator gives it back when the attempt ends.
	Slot *SlotRef `json:"slot,omitempty"`
	// Rate is the rate limit the attempt took its units of.
	Rate *RateRef `json:"rate,omitempty"`
	// Resume is, for an attempt that follows one that ended awaiting
	// something (a node step with Await), what came: the data of the
	// signal that answered an approval ({"approved": true|false,
	// "reason": "..."}). The node goes on from its last step with it.
	Resume json.RawMessage `json:"resume,omitempty"`
}

// NodeInvokingData says a worker took the work and is running the node.
type NodeInvokingData struct {
	NodeRef
	Attempt  int    `json:"attempt"`
	Delivery int    `json:"delivery"`
	Worker   string `json:"worker"`
	// Filters lists what invoking filters did, in order.
	Filters []FilterNote `json:"filters,omitempty"`
}

// FilterNote records what one invocation filter did.
type FilterNote struct {
	Filter string `json:"filter"`
	Action string `json:"action"` // "modified", "cancelled", "replaced", "passed", "skipped"
	Note   string `json:"note,omitempty"`
}

// Action is one action a node's result triggers, optionally with
// branch-local forking data for the successors on that branch.
type Action struct {
	Name string          `json:"name"`
	Data json.RawMessage `json:"data,omitempty"`
}

// NodeInvokedData is a node's success.
type NodeInvokedData struct {
	NodeRef
	Attempt int `json:"attempt"`
	// Delivery is the delivery of the work item that produced the
	// outcome (see NodeInvokingData.Delivery); zero for the coordinator's.
	Delivery int             `json:"delivery,omitempty"`
	Output   json.RawMessage `json:"output,omitempty"`
	// Updates are state updates, merged by the state's reducers in log order.
	Updates    map[string]json.RawMessage `json:"updates,omitempty"`
	Actions    []Action                   `json:"actions,omitempty"`
	Filters    []FilterNote               `json:"filters,omitempty"`
	DurationMs int64                      `json:"durationMs,omitempty"`
	Worker     string                     `json:"worker,omitempty"`
	// Fallback is set when the output is the node's fallback after its last
	// attempt failed.
	Fallback bool `json:"fallback,omitempty"`
}

// NodeFailedData is a node's failed attempt.
type NodeFailedData struct {
	NodeRef
	Attempt    int     `json:"attempt"`
	Delivery   int     `json:"delivery,omitempty"`
	Error      Failure `json:"error"`
	DurationMs int64   `json:"durationMs,omitempty"`
	Worker     string  `json:"worker,omitempty"`
}

// NodeSkippedData says a node activation was skipped (its should-execute
// condition was false, or no incoming edge was taken).
type NodeSkippedData struct {
	NodeRef
	Reason   string `json:"reason"`
	Consumed []int  `json:"consumed,omitempty"`
	Owed     []int  `json:"owed,omitempty"`
	// Routed: see NodeReadyData.Routed.
	Routed []NodeRoutedData `json:"routed,omitempty"`
}

// NodeWaitingData says a coordinator-run node (human, subgraph) is waiting.
type NodeWaitingData struct {
	NodeRef
	Consumed []int `json:"consumed,omitempty"`
	Owed     []int `json:"owed,omitempty"`
	// Routed: see NodeReadyData.Routed.
	Routed   []NodeRoutedData `json:"routed,omitempty"`
	For      string           `json:"for"` // "signal", "child", "map", "router", "slot", "rate" or "timer" (a wait node, until Deadline)
	Deadline *time.Time       `json:"deadline,omitempty"`
	Local    json.RawMessage  `json:"local,omitempty"`
	// Items is, for a map node, the list it maps over, fixed when the node
	// is activated; each item then gets its own ready event.
	Items json.RawMessage `json:"items,omitempty"`
	// Input is the state view a coordinator-run node saw when it started.
	Input json.RawMessage `json:"input,omitempty"`
	// Slot and Attempt are, for "slot", the concurrency slot the node
	// waits for and the attempt that will take it: the node's first, or
	// the retry that came due (the node's iteration began already). Node
	// START (iteration 1, attempt 1) is the run waiting for a slot of its
	// graph's run limit before its first node; routing START ends it.
	Slot    *SlotRef `json:"slot,omitempty"`
	Attempt int      `json:"attempt,omitempty"`
	// Rate is, for "rate", the rate limit whose turn the attempt waits
	// for, until Deadline (a durable timer).
	Rate *RateRef `json:"rate,omitempty"`
}

// NodeCancelledData says a node execution ended because its run was cancelled
// or an invoking filter cancelled it.
type NodeCancelledData struct {
	NodeRef
	Attempt  int    `json:"attempt"`
	Delivery int    `json:"delivery,omitempty"`
	By       string `json:"by"`
	Reason   string `json:"reason,omitempty"`
}

// HeartbeatData is a sign of life from a long node (optional; the work
// item's in-progress acknowledgements are the real heartbeat).
type HeartbeatData struct {
	NodeRef
	Attempt int             `json:"attempt"`
	Details json.RawMessage `json:"details,omitempty"`
}

// NodeStepData is one step of a running node, recorded before the node
// goes on (an agent's model answer or tool result): what the node needs
// to resume there when it runs again. Data is the node's own (the agent
// executor's AgentStep); the fold checks it against the live attempt and
// changes nothing. It stands on the
// node activation's step subject (StepSubject).
type NodeStepData struct {
	NodeRef
	Attempt int `json:"attempt"`
	// Step counts the activation's steps (1-based); Kind says what the
	// step was ("model", "tool").
	Step int             `json:"step"`
	Kind string          `json:"kind,omitempty"`
	Data json.RawMessage `json:"data,omitempty"`
	// Await, when set, ends the attempt: the node goes on only once what
	// it awaits has come (the worker writes no outcome for the attempt).
	// The fold makes the activation wait; the coordinator decides the
	// wait (a person's approval: a signal, with the tool's deadline) and,
	// once it is over, readies the next attempt with what came
	// (NodeReadyData.Resume).
	Await *StepAwait `json:"await,omitempty"`
}

// StepAwait is what a node step that ends its attempt awaits.
type StepAwait struct {
	// For is AwaitApproval (a person approves or rejects the tool call)
	// or AwaitTool (the tool runs as a child run the coordinator starts).
	For string `json:"for"`
	// Tool is the tool's name in the node's config.tools, Call the
	// model's id of the call.
	Tool string `json:"tool"`
	Call string `json:"call,omitempty"`
	// Args are, for AwaitTool, the call's arguments: the child run's
	// input.
	Args json.RawMessage `json:"args,omitempty"`
}

// What a node step may await (StepAwait.For).
const (
	AwaitApproval = "approval"
	AwaitTool     = "tool"
)

// Signal is one edge signal sent by routing: taken or not, with the forking
// data of the action that took it.
type Signal struct {
	Edge  int    `json:"edge"`
	To    string `json:"to"`
	Taken bool   `json:"taken"`
	// Back marks an edge that closes a cycle; a back edge not taken sends
	// nothing (the loop is left), a taken one re-activates its target.
	Back bool            `json:"back,omitempty"`
	Data json.RawMessage `json:"data,omitempty"`
}

// NodeRoutedData records which outgoing edges of a finished (or skipped) node
// activation were taken. Conditions are evaluated once, by the coordinator,
// and the result is a fact in the log, so replay never re-evaluates them.
type NodeRoutedData struct {
	NodeRef
	Signals []Signal `json:"signals"`
}

// RetryScheduledData records the decision to retry a node after a delay.
// The retry is a durable delayed TimerFired event.
type RetryScheduledData struct {
	NodeRef
	Attempt     int       `json:"attempt"` // the attempt that will run
	At          time.Time `json:"at"`
	TimerID     string    `json:"timerId"`
	LastFailure Failure   `json:"lastFailure"`
}

// TimerFiredData is a durable timer firing (a JetStream message schedule).
//
// Purpose "slot" is not a timer but a wake: a coordinator appends it to a
// run whose attempt waits for a concurrency slot (internal/flow), and it
// changes nothing in the run's state. Granted says the slot was handed to
// that attempt already (written to the flow bucket before the wake was
// appended): the run's owner readies it without asking the bucket again.
type TimerFiredData struct {
	TimerID string  `json:"timerId"`
	Purpose string  `json:"purpose"` // "retry", "deadline", "timeout", "heartbeat", "rate", "wait", "slot"
	Ref     NodeRef `json:"ref"`
	Attempt int     `json:"attempt,omitempty"`
	Granted bool    `json:"granted,omitempty"`
}

// SignalReceivedData is outside input for a waiting node (human input).
//
// Iteration, when set, is the activation of the node the signal answers:
// the fold takes it only while that activation waits for a signal, and
// refuses it otherwise (a signal to a node that is not waiting never moves
// the run). A signal without it (written by older clients) is kept for
// the node's next wait when the node does not wait now. Either way the
// fold refuses a signal for a node that is not a human node, and data the
// node does not accept (its outputSchema and config.checks).
//
// Update, when set, makes the signal an update (client.Update): input
// whose sender waits for the verdict. Its event id is derived from the
// run and the update id, so an update is written once; the fold takes it
// only for the activation that waits now (Iteration set; an update is
// never buffered) of a human node that declares what it accepts (an
// outputSchema or config.checks), and an update id it has seen before,
// taken in or refused, is stale: the first verdict stands.
type SignalReceivedData struct {
	Node      string          `json:"node"`
	Iteration int             `json:"iteration,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
	By        string          `json:"by,omitempty"`
	Update    string          `json:"update,omitempty"`
}

// ChildRunStartedData links a parent run's node to the child run it started.
type ChildRunStartedData struct {
	NodeRef
	ChildRunID string `json:"childRunId"`
	Graph      string `json:"graph"`
	// Attempt is set for a tool's child run (ParentRef.Attempt).
	Attempt int `json:"attempt,omitempty"`
}

// ChildRunFinishedData brings a child run's outcome back to the parent.
type ChildRunFinishedData struct {
	NodeRef
	// Attempt is set for a tool's child run (ParentRef.Attempt).
	Attempt    int             `json:"attempt,omitempty"`
	ChildRunID string          `json:"childRunId"`
	Status     string          `json:"status"` // completed, failed, cancelled
	Output     json.RawMessage `json:"output,omitempty"`
	Error      *Failure        `json:"error,omitempty"`
}

func (RunStartedData) EventType() Type         { return RunStarted }
func (RunCompletedData) EventType() Type       { return RunCompleted }
func (RunFailedData) EventType() Type          { return RunFailed }
func (RunCancelRequestedData) EventType() Type { return RunCancelRequested }
func (RunCancelledData) EventType() Type       { return RunCancelled }
func (NodeReadyData) EventType() Type          { return NodeReady }
func (NodeInvokingData) EventType() Type       { return NodeInvoking }
func (NodeInvokedData) EventType() Type        { return NodeInvoked }
func (NodeFailedData) EventType() Type         { return NodeFailed }
func (NodeSkippedData) EventType() Type        { return NodeSkipped }
func (NodeWaitingData) EventType() Type        { return NodeWaiting }
func (NodeCancelledData) EventType() Type      { return NodeCanceled }
func (HeartbeatData) EventType() Type          { return Heartbeat }
func (NodeStepData) EventType() Type           { return NodeStep }
func (NodeRoutedData) EventType() Type         { return NodeRouted }
func (RetryScheduledData) EventType() Type     { return RetryScheduled }
func (TimerFiredData) EventType() Type         { return TimerFired }
func (SignalReceivedData) EventType() Type     { return SignalReceived }
func (ChildRunStartedData) EventType() Type    { return ChildRunStarted }
func (ChildRunFinishedData) EventType() Type   { return ChildRunFinished }

// NewPayload returns a pointer to a zero payload of type t, for decoding.
//
// Size: the catalogue, one case per event type.
func NewPayload(t Type) (Payload, bool) {
	switch t {
	case RunStarted:
		return &RunStartedData{}, true
	case RunCompleted:
		return &RunCompletedData{}, true
	case RunFailed:
		return &RunFailedData{}, true
	case RunCancelRequested:
		return &RunCancelRequestedData{}, true
	case RunCancelled:
		return &RunCancelledData{}, true
	case NodeReady:
		return &NodeReadyData{}, true
	case NodeInvoking:
		return &NodeInvokingData{}, true
	case NodeInvoked:
		return &NodeInvokedData{}, true
	case NodeFailed:
		return &NodeFailedData{}, true
	case NodeSkipped:
		return &NodeSkippedData{}, true
	case NodeWaiting:
		return &NodeWaitingData{}, true
	case NodeCanceled:
		return &NodeCancelledData{}, true
	case Heartbeat:
		return &HeartbeatData{}, true
	case NodeStep:
		return &NodeStepData{}, true
	case NodeRouted:
		return &NodeRoutedData{}, true
	case RetryScheduled:
		return &RetryScheduledData{}, true
	case TimerFired:
		return &TimerFiredData{}, true
	case SignalReceived:
		return &SignalReceivedData{}, true
	case ChildRunStarted:
		return &ChildRunStartedData{}, true
	case ChildRunFinished:
		return &ChildRunFinishedData{}, true
	}
	return nil, false
}

func (d NodeReadyData) nodeAttempt() (string, int)        { return d.Node, d.Attempt }
func (d NodeInvokingData) nodeAttempt() (string, int)     { return d.Node, d.Attempt }
func (d NodeInvokedData) nodeAttempt() (string, int)      { return d.Node, d.Attempt }
func (d NodeFailedData) nodeAttempt() (string, int)       { return d.Node, d.Attempt }
func (d NodeSkippedData) nodeAttempt() (string, int)      { return d.Node, 0 }
func (d NodeWaitingData) nodeAttempt() (string, int)      { return d.Node, 0 }
func (d NodeCancelledData) nodeAttempt() (string, int)    { return d.Node, d.Attempt }
func (d HeartbeatData) nodeAttempt() (string, int)        { return d.Node, d.Attempt }
func (d NodeStepData) nodeAttempt() (string, int)         { return d.Node, d.Attempt }
func (d NodeRoutedData) nodeAttempt() (string, int)       { return d.Node, 0 }
func (d RetryScheduledData) nodeAttempt() (string, int)   { return d.Node, d.Attempt }
func (d TimerFiredData) nodeAttempt() (string, int)       { return d.Ref.Node, d.Attempt }
func (d SignalReceivedData) nodeAttempt() (string, int)   { return d.Node, 0 }
func (d ChildRunStartedData) nodeAttempt() (string, int)  { return d.Node, 0 }
func (d ChildRunFinishedData) nodeAttempt() (string, int) { return d.Node, 0 }
func (d RunFailedData) nodeAttempt() (string, int)        { return d.Node, 0 }
