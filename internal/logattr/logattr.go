// Package logattr names the attribute keys Weft's structured logs use, in
// one place, so logs from every process line up: a run's lines, from the
// client, the coordinators and the workers, are found by run_id, a node's
// by run_id and node_id, a trace's by trace_id.
package logattr

// Log attribute keys.
const (
	RunID     = "run_id"
	NodeID    = "node_id"
	NodeType  = "node_type"
	Ref       = "ref" // a node activation: node, iteration and attempt in one
	Graph     = "graph"
	Iteration = "iteration"
	Attempt   = "attempt"
	Delivery  = "delivery"
	Seq       = "seq"
	Subject   = "subject"
	EventType = "event_type"
	Queue     = "queue"
	Worker    = "worker"
	Error     = "error"
	Failure   = "failure"
	Retryable = "retryable"
	Count     = "count"
	TraceID   = "trace_id"
	SpanID    = "span_id"
	Component = "component"
	// Schedule and Trigger name a schedule or an event trigger.
	Schedule  = "schedule"
	Trigger   = "trigger"
	Partition = "partition"
	// Lane is which of a partition's consumers: "starts" or "progress".
	Lane = "lane"
	// Due is when something was due (a schedule's overdue fire, its
	// next fire armed); Last the latest fire time a schedule handled.
	Due  = "due"
	Last = "last"
	// Timer is a durable timer's id (a run's retry, timeout, deadline).
	Timer = "timer"
	// Coordinator is a coordinator's id, as it announces itself in the
	// leases bucket: which coordinator decided.
	Coordinator = "coordinator"
	Status      = "status"
	// Parent is the run a run was forked from (or a child's parent);
	// Child a child run of a run; Position an event's place in its run
	// (1, 2, …).
	Parent = "parent"
	Child  = "child"
	// Continuation is a run's continuation (continue-as-new).
	Continuation = "continuation"
	Position     = "position"
	// Job is a batch job's id (internal/batch).
	Job = "job"

	// Decision is the type of an event a coordinator decided; Cause and
	// CauseSeq name the event it decided on and its stream sequence.
	Decision = "decision"
	Cause    = "cause"
	CauseSeq = "cause_seq"
	// Step is a worker's step with a work item: took, ran, reported,
	// acked, handed back.
	Step = "step"
	// NATSUser is the NATS user a connection authenticated as (a role's
	// user name; never its password).
	NATSUser = "nats_user"
	// NATS is the URL of the NATS server a process is connected to.
	NATS = "nats"
	// Try is which try of a step this is (1, 2, …); Tries how many it
	// took.
	Try   = "try"
	Tries = "tries"
	// For is what a process waits for (setup.Retry); Retry how it retries.
	For   = "for"
	Retry = "retry"
	// Key is a key of a key-value bucket (the read model, a ledger).
	Key = "key"
)

// Keys of the JetStream resources a process sets up or finds, and of
// settings that differ from what it wants.
const (
	Stream   = "stream"
	Consumer = "consumer"
	Durable  = "durable"
	// Resource and Setting name a live setting; Have and Want its live
	// value and this process's.
	Resource = "resource"
	Setting  = "setting"
	Have     = "have"
	Want     = "want"
	// FromSeq is the stream sequence a consumer starts at; EventsFromSeq
	// and TimersFromSeq those of a repartition's new consumers, on the
	// events and the timers streams.
	FromSeq       = "from_seq"
	EventsFromSeq = "events_from_seq"
	TimersFromSeq = "timers_from_seq"
	// From and To are the partition counts a repartition goes between.
	From = "from"
	To   = "to"
	// AllowRollupHdrs, AllowMsgSchedules and AllowMsgTTL are the events
	// stream's header permissions (an older Weft's stream allows them).
	AllowRollupHdrs   = "allow_rollup_hdrs"
	AllowMsgSchedules = "allow_msg_schedules"
	AllowMsgTTL       = "allow_msg_ttl"
	// Heartbeat and AckWait are a queue's heartbeat interval and its
	// consumer's ack wait.
	Heartbeat = "heartbeat"
	AckWait   = "ack_wait"
)

// Keys of namespaces and their admission limits (internal/admission).
const (
	Namespace        = "namespace"
	StartsPerSecond  = "starts_per_second"
	SignalsPerSecond = "signals_per_second"
	Admitted         = "admitted"
	Refused          = "refused"
)

// Keys of a coordinator's partition leases. Holder is the id of the
// coordinator that took a partition (as Coordinator; weftbench reads it
// under this key).
const (
	Share   = "share"
	Members = "members"
	Holder  = "holder"
)

// Keys of a worker's start and stop lines.
const (
	Queues      = "queues"
	Concurrency = "concurrency"
	Types       = "types"
	Stats       = "stats"
)

// Keys of a coordinator's counters, logged once when it stops (weftbench's
// coordinator figures read them from that line).
const (
	Processed  = "processed"
	Decisions  = "decisions"
	Malformed  = "malformed"
	Conflicts  = "conflicts"
	Reloads    = "reloads"
	Reorders   = "reorders"
	HandedBack = "handed_back"
	Errors     = "errors"
)

// Keys of HTTP servers: the address served, its paths, and a request's
// method and path.
const (
	Addr   = "addr"
	Paths  = "paths"
	Method = "method"
	Path   = "path"
	// Remote is a request's peer address (host:port); Client the client
	// it counts as (the peer's address, or the one a trusted proxy
	// names; an IPv6 client by its /64).
	Remote = "remote"
	Client = "client"
	// User is the user a login gave, when it is the server's (never a
	// password); Failures a client's failed logins in the window;
	// Lockout how long it is locked out.
	User     = "user"
	Failures = "failures"
	Lockout  = "lockout"
)

// Keys of the conformance kit: a case, how long it took, why it failed,
// and which of the kit's parts logged.
const (
	Case    = "case"
	Elapsed = "elapsed"
	Why     = "why"
	Part    = "part"
)

// Keys of the HTTP gateway (weft serve): the API token's caller and the
// webhook a request came to.
const (
	Caller  = "caller"
	Webhook = "webhook"
)

// Keys of sealed events (internal/eventlog/seal.go): the id of a key,
// never the key, and how many keys a ring holds.
const (
	KeyID = "key_id"
	Keys  = "keys"
)
