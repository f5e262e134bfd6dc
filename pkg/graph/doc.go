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
// reserved. A node's type names its executor ("echo", "noop", "sleep",
// "fail", "http", "transform", "llm", or one added with WithTypes) or one of
// the types the coordinator runs itself: router, human and subgraph.
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
// that is static fan-out.
//
// Conditions (an edge's when), a node's when and a map's over are CEL
// expressions over four variables, all of type dyn:
//
//	state       the run's shared state (an object)
//	output      the output of the node whose edges are evaluated; for a
//	            node's when and map.over, the output of the predecessor
//	invocation  the run's invocation state, given at start, read-only
//	local       branch-local data: an action's forking data, a map's item
//
// Values are JSON values, so every number is a double; comparisons across
// int and double are enabled, so state.count > 2 and invocation.n == 2 work
// as a reader expects; arithmetic does not mix them, so write
// state.count + 1.0. A missing key is an evaluation error; write
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
// else DefaultMaxIterations); a run that would pass it fails.
//
// # Maps, state and subgraphs
//
// A node with map runs once per item of the list map.over gives, with the
// item as local, at most map.concurrency at a time. The shared state is an
// object whose keys are merged by reducers (replace, the default; append;
// merge; sum) in log order, so parallel writes resolve deterministically. A
// subgraph node (config {"graph": NAME}) starts a child run of one of the
// graph's graphs (or an enclosing graph's) and waits for it. A human node
// waits for a signal; its edges marked timeout: true are taken when its
// deadline passes, and only those.
//
// # Compiled graphs
//
// LoadFile, Parse, Compile and Builder.Build all give a *Graph: the
// normalised Definition (defaults filled in: queue "default", join "all",
// effect by type, checkpoint "none", the full retry policy, edge actions,
// the iteration cap), indexes over nodes and edges, and compiled
// expressions. Canonical gives the normalised Definition's JSON, the form a
// run-started event records, and Digest its SHA-256, so a file, its JSON
// twin and the equivalent Builder code have the same digest.
package graph
