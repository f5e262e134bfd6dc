package projection

import (
	"encoding/json"
	"time"

	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
)

// RunStatus is a run's status.
type RunStatus string

// The run statuses.
const (
	RunPending    RunStatus = ""           // no run-started yet
	RunRunning    RunStatus = "running"    // started, not ended
	RunCancelling RunStatus = "cancelling" // cancellation requested, not yet ended
	RunCompleted  RunStatus = "completed"
	RunFailed     RunStatus = "failed"
	RunCancelled  RunStatus = "cancelled"
)

// Ended reports whether the status is final.
func (s RunStatus) Ended() bool {
	return s == RunCompleted || s == RunFailed || s == RunCancelled
}

// NodeStatus is the status of a node's current activation.
type NodeStatus string

// The node statuses.
const (
	NodeIdle      NodeStatus = ""          // never activated
	NodeReady     NodeStatus = "ready"     // work published, no worker took it yet
	NodeRunning   NodeStatus = "running"   // a worker is running it
	NodeWaiting   NodeStatus = "waiting"   // waiting for a signal, a child run or map items
	NodeRetrying  NodeStatus = "retrying"  // failed; a retry timer is pending
	NodeRetryDue  NodeStatus = "retry_due" // the retry timer fired; the next attempt is due
	NodeSucceeded NodeStatus = "succeeded"
	NodeFailed    NodeStatus = "failed"
	NodeSkipped   NodeStatus = "skipped"
	NodeCancelled NodeStatus = "cancelled"
)

// Active reports whether the activation is under way (not finished).
func (s NodeStatus) Active() bool {
	switch s {
	case NodeReady, NodeRunning, NodeWaiting, NodeRetrying, NodeRetryDue:
		return true
	}
	return false
}

// State is a run's state: the fold of its events. It is plain data; its JSON
// form is deterministic (map keys sorted, times from event times only), so
// folding the same events always gives byte-identical JSON.
type State struct {
	RunID       string            `json:"runId"`
	GraphName   string            `json:"graphName,omitempty"`
	GraphDigest string            `json:"graphDigest,omitempty"`
	Graph       json.RawMessage   `json:"graph,omitempty"`
	Parent      *events.ParentRef `json:"parent,omitempty"`
	// Fork is set for a run forked from another (weft fork, weft reset).
	Fork       *events.ForkRef `json:"fork,omitempty"`
	Status     RunStatus       `json:"status"`
	Input      json.RawMessage `json:"input,omitempty"`
	Invocation json.RawMessage `json:"invocation,omitempty"`
	// Retention is the run's own retention, if it was started with one.
	Retention string `json:"retention,omitempty"`
	// Nonce is the run-started's (events.RunStartedData.Nonce): the
	// unguessable part of the ids of the run's child runs.
	Nonce string `json:"nonce,omitempty"`
	// Priority and FairnessKey are the run's, from its start (see
	// events.RunStartedData).
	Priority    int    `json:"priority,omitempty"`
	FairnessKey string `json:"fairnessKey,omitempty"`
	// StartSeq is the stream sequence of the run's run-started event (0
	// when the events were not read from a stream): work items name it
	// (events.NodeReadyData.StartSeq), so that a worker reads no other
	// start for the run.
	StartSeq uint64 `json:"startSeq,omitempty"`
	// ForkRefused is set when the run's run-started carried a fork's
	// start state that does not fit the run's graph (CheckForkState): the
	// state was not taken, and the engine fails the run with this failure
	// (type events.FailureInvalidForkState, the problems in its details).
	ForkRefused *events.Failure `json:"forkRefused,omitempty"`
	// Trigger is the schedule, event trigger or webhook that started the
	// run, if one did.
	Trigger *events.TriggerRef `json:"trigger,omitempty"`
	// Chain is set on a continuation (continue-as-new): its chain and the
	// run it continues. A chain's first run has none (its chain id is its
	// own id: ChainID).
	Chain *events.ChainRef `json:"chain,omitempty"`
	// ContinuedAs is the run's continuation, once it completed by
	// continuing as new.
	ContinuedAs string `json:"continuedAs,omitempty"`

	// Vars is the shared state, key by key.
	Vars map[string]json.RawMessage `json:"state,omitempty"`
	// Artifacts holds node outputs promoted by outputAs.
	Artifacts map[string]json.RawMessage `json:"artifacts,omitempty"`
	Nodes     map[string]*NodeState      `json:"nodes,omitempty"`
	// Pending holds, per target node, the edge signals routed to it and not
	// yet used up by an activation, in log order.
	Pending map[string][]events.Signal `json:"pending,omitempty"`
	// EntryRouted is set once START's edges were routed.
	EntryRouted bool `json:"entryRouted,omitempty"`
	// EndReached is set once an edge to END was taken.
	EndReached bool `json:"endReached,omitempty"`
	// ContinueFrom is set once an edge to CONTINUE was taken: the node
	// activation that took it and the edge (its index), so that a
	// continuation that cannot be made names where it was asked for.
	ContinueFrom *ContinueFrom `json:"continueFrom,omitempty"`
	// Timers are pending durable timers by id.
	Timers map[string]Timer `json:"timers,omitempty"`
	// Signals buffers signals that arrived for nodes not yet waiting
	// (at most MaxBufferedSignals per node, MaxBufferedSignalsPerRun in
	// all).
	Signals map[string][]json.RawMessage `json:"signals,omitempty"`
	// SignalIDs holds the event ids of the signals applied or buffered,
	// so that a signal sent twice is applied once. It is bounded: every id
	// in it either ended a signal wait (at most one per activation of a
	// human node, and activations are capped by the graph's iteration
	// caps) or is buffered (bounded by MaxBufferedSignalsPerRun), or is an
	// update's, taken in or refused (bounded by the run's history budget:
	// each is an event of the run).
	SignalIDs map[string]bool `json:"signalIds,omitempty"`
	// EarlyChildEnds holds, by node, the end of a subgraph node's child
	// run that came before the activation that starts it was in the log
	// (children.go): at most one per node, for its next activation.
	EarlyChildEnds map[string]*events.ChildRunFinishedData `json:"earlyChildEnds,omitempty"`

	Output json.RawMessage `json:"output,omitempty"`
	Error  *events.Failure `json:"error,omitempty"`
	Cancel *CancelRequest  `json:"cancel,omitempty"`
	Stats  Stats           `json:"stats"`
	Config runConfig       `json:"config,omitempty"`

	StartedAt *time.Time `json:"startedAt,omitempty"`
	UpdatedAt *time.Time `json:"updatedAt,omitempty"`
	EndedAt   *time.Time `json:"endedAt,omitempty"`
	// LastSeq is the stream sequence of the last event applied.
	LastSeq uint64 `json:"lastSeq"`

	// defs are the graph's top-level nodes, decoded from Graph when a
	// signal needs them (defsOf is the digest they were decoded for).
	defs   map[string]*graph.Node
	defsOf string
}

// runConfig is what the fold itself needs from the graph: how to merge
// state updates and which outputs become artifacts.
type runConfig struct {
	Reducers map[string]string `json:"reducers,omitempty"`
	OutputAs map[string]string `json:"outputAs,omitempty"`
}

// Stats counts what happened in the run.
type Stats struct {
	Events     int `json:"events"`
	Executions int `json:"executions"`
	Failures   int `json:"failures"`
	Retries    int `json:"retries"`
	// Rejected counts events that could not be applied (malformed data,
	// another run's event); they are passed over.
	Rejected int `json:"rejected,omitempty"`
	// Stale counts events that came too late to count (ErrStale): a
	// superseded or late outcome, a decision about an ended activation, a
	// signal sent twice, anything after the run ended.
	Stale int `json:"stale,omitempty"`
	// Refused counts events the fold did not take in (ErrRefused): refused
	// by the store, of an unknown type, or signals over the buffer limits.
	// They are not counted in Events.
	Refused int `json:"refused,omitempty"`
	// Bytes is the size of the payloads of the events written by clients,
	// workers and timers (everything but the coordinator's decisions,
	// which the engine and the graph's limits bound), refused or not: what
	// writers made the run's history weigh, for its budget (the
	// coordinator fails a run whose history outgrows it).
	Bytes int64 `json:"bytes,omitempty"`
}

// CancelRequest says who asked for cancellation, why and when.
type CancelRequest struct {
	By        string    `json:"by"`
	Reason    string    `json:"reason,omitempty"`
	At        time.Time `json:"at"`
	Terminate bool      `json:"terminate,omitempty"`
}

// Timer is a pending durable timer.
type Timer struct {
	Purpose string         `json:"purpose"`
	Ref     events.NodeRef `json:"ref"`
	Attempt int            `json:"attempt,omitempty"`
	At      time.Time      `json:"at"`
}

// NodeState is the state of one node: its current activation, and counters
// over the run.
type NodeState struct {
	Status NodeStatus `json:"status"`
	// Iteration is the current activation (1-based); loops raise it.
	Iteration int `json:"iteration"`
	// Attempt is the current attempt of the activation (1-based).
	Attempt int `json:"attempt,omitempty"`
	// Delivery is the live delivery of the current attempt: the highest
	// delivery of its work item a worker reported taking (NodeInvoking);
	// 0 before any, or in histories older than delivery numbers.
	Delivery int `json:"delivery,omitempty"`
	// Executions counts the node's invoking events over the run, across
	// attempts, redeliveries and activations.
	Executions int             `json:"executions,omitempty"`
	Output     json.RawMessage `json:"output,omitempty"`
	Error      *events.Failure `json:"error,omitempty"`
	Worker     string          `json:"worker,omitempty"`
	// Actions are the actions the activation's result triggered.
	Actions []events.Action `json:"actions,omitempty"`
	// Routed is the last activation whose outgoing edges were routed.
	Routed int `json:"routed,omitempty"`
	// Owed lists incoming edges whose next signal is absorbed (see
	// events.NodeReadyData.Owed).
	Owed []int `json:"owed,omitempty"`
	// Local is the branch-local data the activation runs with.
	Local json.RawMessage `json:"local,omitempty"`
	// WaitingFor is set while the node waits: "signal", "child", "map" or
	// "slot" (a concurrency slot: Slot; the attempt that waits is
	// Attempt+1).
	WaitingFor string     `json:"waitingFor,omitempty"`
	Deadline   *time.Time `json:"deadline,omitempty"`
	Child      string     `json:"child,omitempty"`
	// Items holds the items of a map activation.
	Items    []*ItemState `json:"items,omitempty"`
	Fallback bool         `json:"fallback,omitempty"`
	// TimeoutMs and HeartbeatMs are the live attempt's limits, from its
	// work item (see timeouts.go).
	TimeoutMs   int64 `json:"timeoutMs,omitempty"`
	HeartbeatMs int64 `json:"heartbeatMs,omitempty"`
	// TimedOut says which durable timeout of the live attempt fired
	// ("timeout" or "heartbeat"): the coordinator fails the attempt.
	TimedOut string `json:"timedOut,omitempty"`
	// LocalAttempt says the live attempt is a local node's: its work item
	// went to events.LocalQueue, and the coordinator runs it.
	LocalAttempt bool `json:"localAttempt,omitempty"`
	// Slot is the concurrency slot the current attempt holds (from its
	// node-ready) or waits for (internal/flow).
	Slot *events.SlotRef `json:"slot,omitempty"`
	// Rate is the rate limit the current attempt took its units of, or
	// waits for its turn of ("rate", until Deadline).
	Rate *events.RateRef `json:"rate,omitempty"`
	// Await is what the activation's last attempt ended awaiting (its
	// node step's, await.go), while it waits for it; Awaits counts the
	// attempts that ended so (they are not failures: the retry policy
	// counts attempts without them); Resume is what came, for the next
	// attempt's work item.
	Await  *events.StepAwait `json:"await,omitempty"`
	Awaits int               `json:"awaits,omitempty"`
	Resume json.RawMessage   `json:"resume,omitempty"`

	ReadyAt   *time.Time `json:"readyAt,omitempty"`
	StartedAt *time.Time `json:"startedAt,omitempty"`
	// HeartbeatAt is the time of the live attempt's last Heartbeat event.
	HeartbeatAt *time.Time `json:"heartbeatAt,omitempty"`
	EndedAt     *time.Time `json:"endedAt,omitempty"`
}

// ItemState is the state of one item of a map activation.
type ItemState struct {
	// Data is the item's value, from the list the map was activated with.
	Data    json.RawMessage `json:"data,omitempty"`
	Status  NodeStatus      `json:"status"`
	Attempt int             `json:"attempt,omitempty"`
	// Delivery and HeartbeatAt: see NodeState.
	Delivery    int             `json:"delivery,omitempty"`
	Output      json.RawMessage `json:"output,omitempty"`
	Error       *events.Failure `json:"error,omitempty"`
	HeartbeatAt *time.Time      `json:"heartbeatAt,omitempty"`
	TimedOut    string          `json:"timedOut,omitempty"`
	// LocalAttempt: see NodeState.
	LocalAttempt bool `json:"localAttempt,omitempty"`
	// Slot is the concurrency slot the item's attempt holds, when its
	// map node has a concurrency limit (from its node-ready).
	Slot *events.SlotRef `json:"slot,omitempty"`
	// Rate is the rate limit's key the item's attempt took a turn of,
	// when its map node has a rate limit (from its node-ready).
	Rate *events.RateRef `json:"rate,omitempty"`
}

// Node returns the state of a node, creating it if absent.
func (s *State) node(id string) *NodeState {
	if s.Nodes == nil {
		s.Nodes = map[string]*NodeState{}
	}
	n := s.Nodes[id]
	if n == nil {
		n = &NodeState{}
		s.Nodes[id] = n
	}
	return n
}

// Node returns a node's state, or nil if it was never activated.
func (s *State) Node(id string) *NodeState { return s.Nodes[id] }

// VarsMap decodes the shared state into plain Go values.
func (s *State) VarsMap() map[string]any {
	out := make(map[string]any, len(s.Vars))
	for k, v := range s.Vars {
		var x any
		if json.Unmarshal(v, &x) == nil {
			out[k] = x
		}
	}
	return out
}

// InvocationMap decodes the invocation state into plain Go values.
func (s *State) InvocationMap() map[string]any {
	out := map[string]any{}
	if len(s.Invocation) > 0 {
		_ = json.Unmarshal(s.Invocation, &out)
	}
	return out
}

// Marshal returns the state's deterministic JSON.
func (s *State) Marshal() []byte {
	b, err := json.Marshal(s)
	if err != nil {
		// State holds only JSON-encodable values; this is a bug.
		panic("projection: state does not encode: " + err.Error())
	}
	return b
}

// ContinueFrom is where a run was asked to continue as new: the edge to
// CONTINUE (its 0-based index in the graph) taken by a node's activation.
type ContinueFrom struct {
	Node string `json:"node"`
	Edge int    `json:"edge"`
}

// ChainID is the id of the run's chain of continuations: its first run's
// id (the run's own when it continues none).
func (s *State) ChainID() string {
	if s.Chain != nil {
		return s.Chain.ID
	}
	return s.RunID
}

// ChainLink is the run's place in its chain, from 1.
func (s *State) ChainLink() int {
	if s.Chain != nil {
		return s.Chain.Link
	}
	return 1
}

// Clone returns a deep copy of the state.
func (s *State) Clone() *State {
	c, err := Unmarshal(s.Marshal())
	if err != nil {
		panic("projection: state does not round-trip: " + err.Error())
	}
	return c
}

// Unmarshal reads a state written by Marshal (a snapshot).
func Unmarshal(b []byte) (*State, error) {
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// ended reports whether an activation (or item) with this status is over:
// it succeeded, failed for good, was skipped or cancelled.
func (s NodeStatus) ended() bool {
	return s != NodeIdle && !s.Active()
}

// orIdle names a status for messages.
func orIdle(s NodeStatus) string {
	if s == NodeIdle {
		return "idle"
	}
	return string(s)
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("projection: " + err.Error())
	}
	return b
}
