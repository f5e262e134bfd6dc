// Package schedule starts runs at fire times: a cron spec read on a time
// zone's wall clock, or an interval (Temporal Schedules are the model).
//
// # Where schedules live
//
// A schedule's Definition is stored under "def.<name>" in the KV bucket
// Bucket ("weft-schedules"), written by the trigger role ('weft schedule',
// pkg/client); what the coordinators did with it, its State (the latest
// nominal fire time handled, the latest fires and their outcomes, the
// runs still running, a buffered fire), under "st.<name>", written by the
// coordinators only, by compare-and-set. Requests to start runs now
// ('trigger', 'backfill') are keys "act.<name>.<id>", answered under
// "res.<name>.<id>". The keys run ids are derived with are in KeysBucket
// ("weft-start-keys"), which only the coordinators and the admin may read.
//
// # How they fire
//
// Each coordinator process runs a Runner. It arms each schedule's next
// fire as a one-shot JetStream message schedule ("@at", in the timers
// stream, subject weft.t.sc.<name>, target weft.t.sf.<name>, rolled up so
// one fire waits per schedule), consumed by the coordinators' durable
// consumer "<durable>-schedules". A fire only says "look at this
// schedule": Reconcile computes the nominal fire times due since the
// state's last one, and for each starts its run, or records it as skipped
// (paused; later than the catch-up window, DefaultCatchupWindow unless
// set; or by the overlap policy: skip, buffer-one, allow-all,
// cancel-other), then moves the state on by compare-and-set and arms the
// next fire. No process keeps time in memory: a fire missed while no
// coordinator ran waits in the stream (and any runner re-arms every
// schedule when it starts), and is caught up when one comes back. The
// chain of one-shots breaks when a pending fire is lost (purged, or a
// fire whose proposal was lost, which leaves nats-server holding the
// schedule "in flight", silent): every runner sweeps the schedules' states every few seconds
// and reconciles one whose next fire is overdue (runner.go, sweep), the
// same Reconcile a fire calls, so the safety net starts nothing twice.
//
// Every read of the buckets (opening one, a get, a listing) is a
// JetStream request that a NATS node's restart or a leader election can
// leave unanswered; each try is bounded (readTry, 5 s) and a lost one asked
// again until the caller's context ends (30 s when it set no deadline:
// a read refused by permissions gets no answer either), so a caller with
// a long deadline (a client's describe) never waits it out on one lost
// answer. A delete is asked again the same way (a delete marker twice is
// one delete); the other writes are compare-and-set or keyed, and are not
// retried blindly. At debug level (-log-level debug) a runner logs each
// fire, each reconcile with the latest fire time handled, each arm with
// its time, and each schedule the sweep looked at: enough to tell a silent
// runner from a quiet one.
//
// The runs are the engine's: their run-started is a decision of the run,
// on its decision subject, which only the coordinator role may write, and
// names the schedule (events.TriggerRef); a start naming a schedule
// anywhere else is refused by every reader (deploy/SECURITY.md, gap 13).
//
// # Exactly one run per fire time
//
// A fire time's run id is FireRunID: the name, the nominal time, and an
// HMAC of both under the schedule's key. Every coordinator derives the
// same id, so a fire handled twice (redelivered, two coordinators, a
// handler that crashed before its state update) appends the same start
// twice, and the log keeps one (the start checks the run has no history;
// its event id is de-duplicated). No other writer can derive the id, so
// none can pre-empt it with a run of its own. A backfill starts the same
// ids as the fires would have, so backfilling a period that ran starts
// nothing twice. Jitter is derived too (jitterOf), so every coordinator
// arms the same instant.
//
// # Cron and daylight saving
//
// Specs have 5 fields, 6 with seconds first (as nats-server's own cron),
// or are descriptors (@daily); they are read by robfig/cron on the zone's
// wall clock. A wall-clock time that happens twice fires once, at its
// first occurrence; one that never happens fires at the instant
// time.Date gives it (an hour later). Fires go out as "@at" one-shots,
// so the server's own cron evaluation (which follows the same
// algorithm, and would fire a doubled 02:30 twice) is never relied on.
package schedule
