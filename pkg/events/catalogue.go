package events

import "github.com/weft-dev/weft/internal/eventlog"

// Type is an event's CloudEvents type: one of the versioned types of the
// "dev.weft." family below.
type Type = eventlog.Type

// The catalogue, one type per fact about a run (internal/eventlog/types.go
// says what each means and who writes it).
const (
	RunStarted         = eventlog.RunStarted
	RunCompleted       = eventlog.RunCompleted
	RunFailed          = eventlog.RunFailed
	RunCancelRequested = eventlog.RunCancelRequested
	RunCancelled       = eventlog.RunCancelled
	NodeReady          = eventlog.NodeReady
	NodeInvoking       = eventlog.NodeInvoking
	NodeInvoked        = eventlog.NodeInvoked
	NodeFailed         = eventlog.NodeFailed
	NodeSkipped        = eventlog.NodeSkipped
	NodeWaiting        = eventlog.NodeWaiting
	NodeRouted         = eventlog.NodeRouted
	NodeCanceled       = eventlog.NodeCanceled
	Heartbeat          = eventlog.Heartbeat
	NodeStep           = eventlog.NodeStep
	RetryScheduled     = eventlog.RetryScheduled
	TimerFired         = eventlog.TimerFired
	SignalReceived     = eventlog.SignalReceived
	ChildRunStarted    = eventlog.ChildRunStarted
	ChildRunFinished   = eventlog.ChildRunFinished
)

// Source is every event's CloudEvents source; the Ext… names are the
// CloudEvents extensions events carry.
const (
	Source         = eventlog.Source
	ExtRunID       = eventlog.ExtRunID
	ExtNodeID      = eventlog.ExtNodeID
	ExtAttempt     = eventlog.ExtAttempt
	ExtTraceParent = eventlog.ExtTraceParent
	ExtTraceState  = eventlog.ExtTraceState
)

// Types returns every type of the catalogue, in catalogue order.
func Types() []Type { return eventlog.Types() }

// Payload is the data of an event: one of the …Data structs below.
type Payload = eventlog.Payload

// NewPayload returns an empty payload of type t, to decode into, and
// false when t is not in the catalogue.
func NewPayload(t Type) (Payload, bool) { return eventlog.NewPayload(t) }

// One payload struct per type, and the values they share.
type (
	RunStartedData         = eventlog.RunStartedData
	RunCompletedData       = eventlog.RunCompletedData
	RunFailedData          = eventlog.RunFailedData
	RunCancelRequestedData = eventlog.RunCancelRequestedData
	RunCancelledData       = eventlog.RunCancelledData
	NodeReadyData          = eventlog.NodeReadyData
	NodeInvokingData       = eventlog.NodeInvokingData
	NodeInvokedData        = eventlog.NodeInvokedData
	NodeFailedData         = eventlog.NodeFailedData
	NodeSkippedData        = eventlog.NodeSkippedData
	NodeWaitingData        = eventlog.NodeWaitingData
	NodeCancelledData      = eventlog.NodeCancelledData
	HeartbeatData          = eventlog.HeartbeatData
	NodeStepData           = eventlog.NodeStepData
	NodeRoutedData         = eventlog.NodeRoutedData
	RetryScheduledData     = eventlog.RetryScheduledData
	TimerFiredData         = eventlog.TimerFiredData
	SignalReceivedData     = eventlog.SignalReceivedData
	ChildRunStartedData    = eventlog.ChildRunStartedData
	ChildRunFinishedData   = eventlog.ChildRunFinishedData

	NodeRef    = eventlog.NodeRef
	Failure    = eventlog.Failure
	ParentRef  = eventlog.ParentRef
	ChainRef   = eventlog.ChainRef
	ForkRef    = eventlog.ForkRef
	TriggerRef = eventlog.TriggerRef
	FilterNote = eventlog.FilterNote
	SlotRef    = eventlog.SlotRef
	RateRef    = eventlog.RateRef
	Action     = eventlog.Action
	Signal     = eventlog.Signal
	StepAwait  = eventlog.StepAwait
)

// What a node step may await (StepAwait.For): a person's approval of a
// tool call, or a tool run as a child run.
const (
	AwaitApproval = eventlog.AwaitApproval
	AwaitTool     = eventlog.AwaitTool
)

// The failure types the engine and the SDK write (Failure.Type); a node
// may name its own.
const (
	FailureTimeout         = eventlog.FailureTimeout
	FailurePayloadTooLarge = eventlog.FailurePayloadTooLarge
	FailureFlowLimit       = eventlog.FailureFlowLimit
	FailureRateLimited     = eventlog.FailureRateLimited
)

// Priorities of runs (RunStartedData.Priority).
const (
	MinPriority         = eventlog.MinPriority
	DefaultPriority     = eventlog.DefaultPriority
	MaxPriority         = eventlog.MaxPriority
	FailureUnknownType  = eventlog.FailureUnknownType
	FailureCancelled    = eventlog.FailureCancelled
	FailureValidation   = eventlog.FailureValidation
	FailureIterationCap = eventlog.FailureIterationCap
	FailureNoPathToEnd  = eventlog.FailureNoPathToEnd
	FailureCondition    = eventlog.FailureCondition
	FailurePanic        = eventlog.FailurePanic
	FailureInvalidGraph = eventlog.FailureInvalidGraph
	// FailureInvalidForkState fails a forked run whose start state does
	// not fit its graph; FailureChildRunPreempted a subgraph node whose
	// child run's id held another writer's events.
	FailureInvalidForkState  = eventlog.FailureInvalidForkState
	FailureChildRunPreempted = eventlog.FailureChildRunPreempted
	// FailureInvalidWait fails a run whose wait node's until gave no time.
	FailureInvalidWait = eventlog.FailureInvalidWait
	// FailureContinueAsNew fails a run whose continuation could not be
	// started (its state over the limit, its id pre-empted).
	FailureContinueAsNew = eventlog.FailureContinueAsNew
)

// The kinds of TriggerRef: what started a run no person started.
const (
	TriggerSchedule = eventlog.TriggerSchedule
	TriggerEvent    = eventlog.TriggerEvent
	TriggerWebhook  = eventlog.TriggerWebhook
)
