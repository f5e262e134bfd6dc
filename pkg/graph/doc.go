// Package graph defines Weft's workflow graphs: how they are written (YAML,
// JSON or the Go Builder), how they are validated, and what they mean. It is
// pure: no I/O beyond LoadFile, no clock, no randomness.
//
// # The format
//
// A graph has a name, nodes and edges:
//
//	name: hello
//	nodes:
//	  - id: greet
//	    type: echo
//	  - id: shout
//	    type: transform
//	    config: {set: {greeting: 'state.name.upperAscii()'}}
//	edges:
//	  - {from: START, to: greet}
//	  - {from: greet, to: shout}
//	  - {from: shout, to: END}
//
// START and END are virtual nodes: edges from START are the entry points,
// edges to END are where the run may finish. Node ids (and queue and
// subgraph names) must match ^[A-Za-z][A-Za-z0-9_-]*$ because they become
// NATS subject tokens and CloudEvents extension values; START and END are
// reserved. A node id holds at most MaxNodeIDLen (62) characters, so that
// the timer ids derived from it stay within a subject token's 128, and a
// queue name at most MaxQueueLen (128). A node's type names its executor ("echo", "noop", "sleep",
// "fail", "http", "transform", "llm", "agent", or one added with WithTypes) or one of
// the types the coordinator runs itself: router, human, subgraph and wait.
// Unknown fields are errors, and every problem is reported at once, each
// with the file, node, edge and field it is in (see Error).
//
// # Actions and conditions
//
// A node's result names the actions it triggers (PocketFlow style); a
// result that names none triggers DefaultAction ("default"). An edge is
// taken when its source triggered the edge's action (an edge without an
// action label has the default action) and its condition holds. Edges from
// START take the default action only. Several edges may be taken at once:
// that is static fan-out. An action's forking data is branch-local: the
// first node of each branch the action takes gets it as local (merged, key
// by key, when several taken edges bring data), it is never written to the
// shared state, and it does not flow further down the branch.
//
// A condition that reads a key its value lacks (output.approved when the
// output has no "approved") fails the run with an error that names the
// edge (numbered from 1), the field and the fix: guard it with has(...),
// or set the edge's onMissing: "false" to take a missing key as the
// condition being false ("fail", the default, keeps the failure).
// CheckConditionReads (run by 'weft validate') reports conditions that
// read a field the edge's source cannot provide, where its outputSchema
// lists what it provides.
//
// A router node (type router) is run by the coordinator, not a worker, and
// has no side effects. Its config {"routes": [{"when": CEL, "action":
// NAME}, ...], "default": NAME} is compiled at load: the routes are tried in
// order and the first that holds names the action the router triggers,
// else the default; a router without routes triggers the default action
// and its edges' conditions choose. Every action a router names must label
// one of its edges. A router passes its predecessor's output on as its own.
//
// # Local nodes
//
// A node whose type the coordinator has a local executor for (the
// built-in transform, or a type registered with the coordinator's
// WithLocalNode; WithLocalTypes names them when a graph is compiled) is
// local: the coordinator that owns the run runs it, with no queue hop, as
// Temporal runs local activities. It is still made ready and invoked (or
// failed) in the log like any node, its work item on the reserved queue
// token "_local", with the same retries, timeout and replay; a router is
// always the coordinator's. Two things force a node onto a worker queue:
//
//	nodes:
//	  - id: enrich
//	    type: transform
//	    local: false        # a worker of queue "default" runs it
//	  - id: heavy
//	    type: transform
//	    queue: cpu          # any queue but "default": workers of "cpu"
//
// local can only be false (local: true is an error: a node is local by its
// type), and is an error on router, human and subgraph nodes. A local node
// may run again when its coordinator dies between its ready and its
// outcome, so it must be deterministic and idempotent.
//
// Conditions (an edge's when), a node's when and a map's over are CEL
// expressions over four variables, all of type dyn:
//
//	state       the run's shared state (an object)
//	output      the output of the node whose edges are evaluated; for a
//	            node's when and map.over and a router's routes, the output
//	            of the predecessor whose taken edge activated the node
//	invocation  the run's invocation state, given at start, read-only
//	local       branch-local data: an action's forking data (on an
//	            edge, the data of the action that would take it), a
//	            map's item
//
// Values are JSON values. A whole number (1, 3.0) reads as a CEL int and
// any other number as a double, so state.count + 1 counts. Arithmetic
// does not mix int and double: state.count + 1.0 is an evaluation error,
// and so is state.price * 1.2 when the price happens to be whole; write
// double(state.price) * 1.2 where a value may be either. Comparisons
// across int and double are enabled, so state.count > 2.5 works as a
// reader expects. Results go back into the state as JSON numbers. A
// missing key is an evaluation error; write
// has(state.x) or state.?x.orValue(0) when a key may be absent. The CEL
// string, math, list, set and encoder extensions and optional types are
// available. Each evaluation is bounded by a cost limit, so no expression
// can keep a coordinator busy. Conditions and whens must give a bool,
// map.over a list; when the type is only known at run time (dyn), a value
// of the wrong type is an evaluation error.
//
// A condition written "func:NAME" is the Go function registered under NAME:
// a StateCondition or an InvocationCondition, registered by the Builder's
// IfFunc or passed to Compile and Parse with WithConditions. An unresolved
// name is a load error.
//
// # Joins and cycles
//
// A node with several incoming edges joins them: "all" (the default) runs
// it once every incoming forward edge has been taken or skipped with at
// least one taken, "any" runs it on the first taken edge, and a number n
// runs it once n edges have been taken. Joins count forward edges only. A
// back edge, one that closes a cycle (found by a depth-first walk from
// START in definition order), re-activates its target on its own, without
// waiting for the target's other inputs. Every activation counts against
// the node's iteration cap (maxIterations on the node, else on the graph,
// else DefaultMaxIterations); a run that would pass it fails with an
// IterationCapReached error naming the node and the cap.
//
// A branch whose edge is not taken still signals its targets ("not
// taken"); a node all of whose inputs were not taken is skipped and passes
// the skip on, so joins downstream never wait for a branch that will not
// come. A node whose own when is false is skipped the same way. Signals that
// arrive for an any or n-of join after it fired belong to the round it
// fired for and are absorbed. When nothing is running and no timer is
// pending, a join that still waits can never fire (an all-join in a loop
// whose other input ran only once, say): the run then completes if it
// reached END and fails naming the join if not.
//
// # Maps, state and subgraphs
//
// A node with map runs once per item of the list map.over gives, with the
// item ({"item": value, "index": i}) as local, at most map.concurrency at a
// time; a failed item is retried by the node's policy on its own. The
// node's output gathers the items' outputs in item order, whatever order
// they finished in.
//
// The shared state is an object whose keys are merged by reducers, declared
// per key under state.reducers:
//
//	replace  (the default) the update is the new value
//	append   the value is a list; a list update is appended element by
//	         element, any other update as one element
//	merge    the value is an object; an object update is merged in key by
//	         key (shallow), the update's keys winning
//	sum      the value is a number; a numeric update is added
//
// Updates apply in log order (the order the nodes' results reached the
// events stream), so parallel writes resolve the same way on every fold
// and replay. An update of the wrong shape for its reducer replaces the
// value rather than failing the run.
//
// A subgraph node (config {"graph": NAME}) starts a child run of one of the
// graph's graphs (or an enclosing graph's) with the node's view of the
// state as input and the run's invocation state, and waits for it. The
// child is a run of its own, with its own log; its run-started names the
// parent run and node, and the parent's log names the child. The child's
// output (its final state) becomes the node's output; a child that fails
// fails the node. Cancelling or failing the parent cancels the child. A
// subgraph node cannot have map yet (its items would be work items, not
// child runs): validation says so.
//
// A human node waits for a signal and occupies no worker; the signal's data
// is its output. With config {"timeout": DURATION} its deadline is a
// durable timer (a JetStream message schedule): when it passes, the edges
// marked timeout: true are taken, and only those, or, without such edges,
// the node fails with a Timeout error. A human node may declare what it
// accepts: its outputSchema (the signal's data is its output) and config
// {"checks": [{"expr": CEL, "message": TEXT}]}, conditions over output
// (the data), state and invocation. A signal that does not fit, that is
// for a node that is not a human node, or that comes when the node does
// not wait, is refused (CheckSignal; the client says why, and the fold
// keeps it in the log as refused): the node keeps waiting.
//
// # Waiting: wait and sleep
//
// A wait node (type wait) waits, and does nothing else, on a durable timer
// of the coordinator (a JetStream message schedule): no worker runs it or
// holds a slot for it, every process may restart while it waits, and it
// ends once. Its config is {"duration": DURATION} (a Go duration, "72h")
// or {"until": CEL}, an expression over state, output (the
// predecessor's), invocation and local that gives a timestamp or an RFC
// 3339 string ("state.deadline", "timestamp(invocation.due) +
// duration('1h')"), evaluated when the node is activated. It writes no
// state; its output is {"until": TIME}. A time that is already past (or
// a duration of 0) ends the wait at once, recorded in the log as a wait
// that was over when it began (output {"until": TIME, "past": true}). An
// until that reads no variable is evaluated at load, so a constant that
// is not a time is a load error; one that gives no time at run time (a
// string that is not RFC 3339, a number, a missing key) fails the run
// with an InvalidWaitTime error naming the node, the expression and the
// value, never a run that waits for ever.
//
// The built-in sleep type is what it always was: an executor that waits
// inside a worker's process for config.duration, holding one of the
// worker's slots, and starting its wait again when its attempt is
// redelivered (a worker died). Use it to simulate work; use wait for
// anything a run waits on (a reply in three days, a poll every hour, a
// deadline in the input). A graph that says sleep keeps meaning sleep.
//
// # Flow control: concurrency and rate limits
//
// A node's concurrency: {max, key, name} caps the attempts of the node
// that run at once, per key (a CEL string over state, invocation and
// local; none: one key), across every run and coordinator; its rate:
// {limit, per, key, units, name} spaces their starts. The limit is named
// "<graph>/<node>" unless name gives one, and nodes of any graph that
// give the same name share it. An attempt over the limit waits, recorded
// in the log as node.waiting for "slot" or "rate". A map node's items
// each take a slot of their node's concurrency limit (the key sees the
// item as local), beside map.concurrency; an item over the limit is not
// readied until a slot frees (it waits in the limit's line, not in the
// log). Likewise each item takes a turn of its node's rate limit (the key
// and units see the item as local): an item whose turn is later is not
// readied until it comes (the limit remembers the turn, not the log).
//
// A graph's limits put the same limits on every node of a type, or on a
// queue, shared by name across graphs:
//
//	limits:
//	  types:  {http: {rate: {limit: 500, per: 1m, key: "invocation.apiKey"}}}
//	  queues: {gpu: {concurrency: {max: 1}}}
//
// Each entry is a concurrency or a rate limit (one of the two, yet),
// named "type/<type>" or "queue/<queue>" unless it gives a name, checked
// where it is written, and given at load to each node of this graph (not
// of its subgraphs) of the type or on the queue as its own: the canonical
// form records it on the node. A node's own concurrency or rate replaces
// its type's and queue's; a node under both a type's and a queue's entry
// is refused, as is an entry for a type or queue no node of the graph
// has (a typo, with the nearest name suggested), and a map node under a
// rate limit (its items take a concurrency limit each, not a rate yet). Graphs that share a
// limit and give it different maxima each admit their attempts against
// their own max, as nodes sharing a named limit do: the limit's entry
// records the max it was last asked with, so keep one max per name.
//
// A graph's concurrency (at its top level) caps its runs in progress at
// once, per key:
//
//	name: report
//	concurrency: {max: 2, key: "invocation.tenant", strategy: queue}
//
// max is 1 to MaxConcurrency; key is a CEL string over the run's input
// (as state, or input) and invocation, evaluated once at the run's start
// (none: one key for the graph); name names the limit (default: the
// graph's name; graphs that give the same name share its slots, each run
// with its own graph's max); strategy says what a run that finds its key
// full does:
//
//	queue          (the default) it waits before its first node, in
//	               order (priority, then fairness key, then arrival), in
//	               the log as node.waiting of START for "slot"; 'weft
//	               list' and 'weft status' show it as waiting
//	cancel-newest  it is cancelled at once, by "flow", the reason naming
//	               the limit, the key and the max
//	cancel-oldest  the oldest run holding a slot of the key (that no
//	               earlier run is evicting) is cancelled, the reason
//	               naming the run that takes its place, and the new run
//	               waits first in line for the slot it frees, so no more
//	               than max runs of the key are ever in progress
//
// A run holds its slot from before its first node until it ends, however
// it ends (completed, failed, cancelled, terminated, continued as new). A
// continuation queues whatever the strategy: its start is written before
// its predecessor ends, so it waits for the slot that run gives back,
// neither refused nor evicting another run. A fork ('weft fork', 'weft reset') from before a run's entry asks
// for a slot of its own; one from after it takes none (the limit counts
// runs from their start). A key that is not a string, or longer than 256
// bytes, fails the run (FlowLimit). internal/flow has the design: where slots live, and
// why they hold across crashes and coordinators.
//
// # Limits
//
// A graph comes from outside: its size, nesting, node counts, the nodes a
// run can reach through its subgraphs and the length of its expressions
// are bounded (limits.go: MaxGraphBytes, MaxDocumentDepth,
// MaxSubgraphDepth, MaxNodes, MaxTotalNodes, MaxExpandedNodes,
// MaxExpressionLength), checked before it is compiled, in time linear in
// its size, each with a located error.
//
// # Validation
//
// LoadFile, Parse, Compile and Builder.Build check everything a run would
// otherwise find wrong only when it reaches the place, and report every
// problem in one pass (a value that does not decode does not hide the
// problems found after it, and is not blamed twice), each an *Error naming
// the file, the nested graph, the node or edge, and the field. Checked:
//
//	the document   size, depth and counts (see Limits); JSON or YAML syntax;
//	               unknown fields (with a suggestion) and values of the
//	               wrong type, at every level
//	the graph      name; maxIterations ≥ 0; retention a duration ≥ 0;
//	               concurrency (max 1..1000, key a CEL string, strategy
//	               queue, cancel-newest or cancel-oldest); limits by
//	               type and queue (each a concurrency or a rate, for a
//	               type or queue a node has);
//	               search attributes (at most 8, ids, no repeats); reducers;
//	               nested graphs' names; at least one node; an edge leaving
//	               START and one entering END; every node reachable from
//	               START and able to reach END
//	a node         id (pattern, length, reserved, unique); type known;
//	               queue a subject token; local only false, not on router,
//	               human, subgraph or wait; maxIterations, timeout, heartbeat ≥ 0;
//	               inputs and outputs non-empty; effect, checkpoint, join
//	               (n-of within the node's forward edges); retry (attempts
//	               ≥ 0, backoffCoefficient ≥ 1, jitter in 0..1, intervals
//	               ≥ 0 and in order); when (a bool CEL expression) and
//	               map.over (a list) compile; Go conditions are registered
//	an edge        ends known, none into START or out of END; START's edges
//	               take the default action; timeout edges leave a human
//	               node; when compiles to a bool; no duplicates
//
// and the config of every built-in type, as its executor (package
// builtin) or the coordinator reads it: an object whose fields are all
// known and of their types, and
//
//	echo       actions: names or {"name", "data"} objects with a name
//	noop       no fields
//	sleep      duration: a Go duration or milliseconds, ≥ 0
//	fail       failAttempts ≥ 0
//	http       url: required, absolute http(s), no user:password@, no
//	           secret reference; method: an HTTP token; headers: names are
//	           tokens, values hold no line breaks, Authorization, Cookie and
//	           Proxy-Authorization only ${secret:NAME} references, every
//	           reference well formed; timeout a duration ≥ 0; expectStatus
//	           within 100-599
//	transform  set or output required; every expression compiles (CEL)
//	llm        model and prompt required; prompt and system parse as
//	           templates (Go text/template, no {{define}}, {{block}} or
//	           {{template}}, known functions only); max_tokens ≥ 0; timeout
//	           a duration ≥ 0; no baseURL, url, apiKey or apiKeyEnv (the
//	           worker's endpoints hold them)
//	router     routes (when compiles to a bool, action labels an edge
//	           leaving the router) and default
//	human      timeout: a duration string ≥ 0; outputSchema compiles;
//	           checks[].expr compiles to a bool
//	wait       duration (a duration string ≥ 0) or until (CEL giving a
//	           timestamp or a string; a constant one parses as RFC 3339),
//	           exactly one; no map
//	subgraph   graph: names a graph in scope that does not contain the node
//
// A type registered with WithTypes is its executor's to check.
//
// # Compiled graphs
//
// LoadFile, Parse, Compile and Builder.Build all give a *Graph: the
// normalised Definition (defaults filled in: queue "default", join "all",
// effect by type, checkpoint "none", the full retry policy, edge actions,
// the iteration cap), indexes over nodes and edges, and compiled
// expressions. Canonical gives the normalised Definition's JSON, the form a
// run-started event records, and Digest its SHA-256, so a file, its JSON
// twin and the equivalent Builder code have the same digest. A *Graph is
// read with Definition, Node, Nodes, Edge and Subgraph; how the engine
// walks it and evaluates its expressions (edges taken, whens, routers, map
// items) is the engine's own and not part of this package's API.
//
// # What it offers
//
//	writing    Definition, Node, Edge, MapSpec, StateSpec, Join, RetryPolicy
//	           (DefaultRetryPolicy, JitterOf), Duration, Effect, Checkpoint,
//	           Reducer; the type, action and queue constants
//	building   New and the Builder, with NodeOption and EdgeOption values
//	           (Queue, Retry, When, Map, If, IfFunc, OnAction, ...)
//	loading    LoadFile, Parse, Compile, with Option values (WithTypes,
//	           AllowAnyType, WithConditions, WithLocalTypes, WithCostLimit,
//	           WithTypeHint, WithConditionHint)
//	Go conditions  StateCondition, InvocationCondition, ConditionFunc
//	reading    Graph: Definition, Node, Nodes, Edge, Subgraph, Canonical,
//	           Digest
//	errors     Error (located), ErrInvalidGraph, ErrUnknownNode,
//	           ErrEvaluation
//	limits     MaxGraphBytes ... MaxExpressionLength, MaxNodeIDLen,
//	           MaxQueueLen, MaxSearchAttributes, DefaultMaxIterations,
//	           DefaultCostLimit
package graph
