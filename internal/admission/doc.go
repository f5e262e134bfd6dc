// Package admission is the gate between a namespace's clients and its
// runs: the limits on how many runs they start, and how many signals and
// cancel requests they send, per second, which a client cannot get round.
//
// # Why a gate, and where
//
// NATS enforces who may publish where, and how much a namespace may
// store (its account's JetStream limits), but not how fast: a client with
// the right to append run-started events appends as many as the server
// takes (a red team's client started 111,724 runs in 30 s; the
// coordinators' backlog reached 129,000 and a run started meanwhile had
// not ended a minute later). A limit the engine checks after the event is
// in the log comes too late: the run exists, and must be failed, indexed
// and kept, so a flood still costs the engine a decision per run. So in a
// namespace (natsconn's namespaces, one NATS account each) the client
// role may not publish on any run's subject at all. It asks instead, with
// a core NATS request on eventlog.AdmitStart (a start or a fork) or
// eventlog.AdmitSignal (a signal or a cancel request) carrying the event
// as it would have appended it; the coordinators answer (a queue group,
// so any of them; their role may reply to requests it receives, and
// write clients' events). The answer is the event's sequence in the log,
// or an error that says which limit refused it. There is no other way in:
// a client that publishes on a run's subject is refused by the server.
//
// # The limits are the server's
//
// A request is admitted with a ticket: a message on eventlog.TicketStarts
// (or TicketSignals) in a stream of its own that keeps tickets for one
// second (max_age) and at most the namespace's limit of them (max_msgs),
// discarding new ones (eventlog.TicketStreamConfig). The server refuses a
// ticket over the limit, atomically, whichever coordinator asks: the
// limit holds across every coordinator of the namespace, and no counter
// lives in any process's memory (DESIGN.md, principle 13). A ticket's
// message id is the event's id, so a request retried after a lost answer
// takes no second ticket. Once the server has refused a ticket, a
// coordinator refuses that kind of request without asking again for the
// next 1/limit of a second, the time a ticket takes to free up at the
// limit's pace: a flood of requests costs the server one refused ticket
// per slot, not one per request, and costs the coordinator a check of a
// clock. The admin sets the limits ('weft roles -setup': the tickets
// streams' max_msgs), and may change them by setting up again.
//
// The limits are per namespace, over every client of it. A start also
// needs room in the events stream: above 90% of its max_bytes or
// max_msgs, starts are refused (ErrQuota), so that runs in flight have
// the rest to end in. Appends past 100% are refused by the server
// (the stream discards new messages, never old ones): a run is never cut,
// it waits for room, which retention makes.
//
// Whether a namespace has admission is in its events stream's metadata
// (eventlog.MetaAdmission), which only the admin may set: pkg/client reads
// it and routes its writes through Request (a Gate), and a coordinator
// reads it when it starts (turning admission on or off takes effect as
// clients and coordinators start). A deployment without namespaces has no
// admission: clients append directly, as before.
//
// Child runs, which a parent run's coordinator starts, are not admitted
// again: their parent was, and the graph's limits bound them.
package admission
