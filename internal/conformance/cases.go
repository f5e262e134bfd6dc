package conformance

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
	"github.com/weft-dev/weft/pkg/worker"
)

// The node types every conformance worker registers (docs/conformance.md);
// conf.hooks is optional.
var requiredTypes = []string{"conf.echo", "conf.fail", "conf.fatal", "conf.slow", "conf.block", "conf.effect", "conf.validate", "conf.throw"}

// testCase is one case of the kit.
type testCase struct {
	name    string
	short   bool          // in the quick subset
	timeout time.Duration // the case's deadline
	run     func(ctx context.Context, k *kit) error
}

// skipped is returned by a case that does not apply to the worker.
type skipped struct{ why string }

func (s skipped) Error() string { return s.why }

// cases are run in this order: drain, ended-run and nats-restart stop and
// start workers; queue-drained comes last.
var cases = []testCase{
	{"announce", true, 70 * time.Second, caseAnnounce},
	{"echo", true, 20 * time.Second, caseEcho},
	{"effect", true, 20 * time.Second, caseEffect},
	{"retry-backoff", true, 30 * time.Second, caseRetry},
	{"fatal", true, 20 * time.Second, caseFatal},
	{"throw", true, 20 * time.Second, caseThrow},
	{"validate", true, 20 * time.Second, caseValidate},
	{"hooks", false, 20 * time.Second, caseHooks},
	{"progress", false, 20 * time.Second, caseProgress},
	{"in-progress", false, 30 * time.Second, caseInProgress},
	{"start-to-close", true, 15 * time.Second, caseStartToClose},
	{"heartbeat-timeout", false, 20 * time.Second, caseHeartbeatTimeout},
	{"cancel", true, 20 * time.Second, caseCancel},
	{"sigkill", true, 90 * time.Second, caseSigkill},
	{"squatted-ids", true, 20 * time.Second, caseSquatted},
	{"duplicate-item", false, 30 * time.Second, caseDuplicateItem},
	{"junk", true, 30 * time.Second, caseJunk},
	{"oversized-item", false, 30 * time.Second, caseOversized},
	{"large-payloads", true, 60 * time.Second, caseLargePayloads},
	{"second-start", true, 30 * time.Second, caseSecondStart},
	{"newer-version", false, 30 * time.Second, caseNewerVersion},
	{"unknown-type", false, 30 * time.Second, caseUnknownType},
	{"drain", false, 60 * time.Second, caseDrain},
	{"ended-run", false, 90 * time.Second, caseEndedRun},
	{"nats-restart", false, 120 * time.Second, caseNATSRestart},
	{"queue-drained", false, 40 * time.Second, caseQueueDrained},
}

// CaseNames lists the kit's cases in the order they run; short ones
// only when short is set.
func CaseNames(short bool) []string {
	var out []string
	for _, c := range cases {
		if !short || c.short {
			out = append(out, c.name)
		}
	}
	return out
}

// runCases runs the selected cases in order, printing a line for each.
func (k *kit) runCases(ctx context.Context) []Result {
	var results []Result
	for _, c := range cases {
		if (k.o.Short && !c.short) || (k.o.Match != nil && !k.o.Match.MatchString(c.name)) {
			continue
		}
		r := k.runCase(ctx, c)
		results = append(results, r)
		line := string(r.Status) + " " + r.Name
		if r.Why != "" {
			line += ": " + r.Why
		}
		fmt.Fprintln(k.o.Out, line)
		k.log.Info("case done", logattr.Case, r.Name, logattr.Status, r.Status, logattr.Elapsed, r.Elapsed, logattr.Why, r.Why)
	}
	return results
}

func (k *kit) runCase(ctx context.Context, c testCase) Result {
	began := time.Now()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	k.log.Info("case", logattr.Case, c.name)
	r := Result{Name: c.name, Status: Pass}
	var err error
	if k.startErr != nil {
		// Twice in a row no worker came up: the cases cannot run.
		err = fmt.Errorf("no worker: %w", k.startErr)
	} else if _, err = k.ensureWorker(ctx); err != nil {
		if k.startFailures++; k.startFailures >= 2 {
			k.startErr = err
		}
	} else {
		k.startFailures = 0
		err = c.run(ctx, k)
	}
	if p := k.current(); err == nil && p != nil {
		err = p.unexpectedExit()
	}
	var skip skipped
	switch {
	case errors.As(err, &skip):
		r.Status, r.Why = Skip, skip.why
	case err != nil:
		r.Status, r.Why = Fail, err.Error()
	}
	r.Elapsed = time.Since(began)
	return r
}

func caseAnnounce(ctx context.Context, k *kit) error {
	a, err := k.awaitAnnouncement(ctx, k.current())
	if err != nil {
		return err
	}
	var problems []string
	if a.Protocol != worker.Protocol {
		problems = append(problems, fmt.Sprintf("protocol %q, want %q", a.Protocol, worker.Protocol))
	}
	if !slices.Equal(a.Queues, []string{Queue}) {
		problems = append(problems, fmt.Sprintf("queues %q, want [%s]", a.Queues, Queue))
	}
	for _, t := range requiredTypes {
		if !slices.Contains(a.Types, t) {
			problems = append(problems, "node type "+t+" missing from types")
		}
	}
	if a.Name != k.current().name {
		problems = append(problems, fmt.Sprintf("name %q, want WEFT_WORKER_NAME %q", a.Name, k.current().name))
	}
	if len(problems) > 0 {
		return fmt.Errorf("announcement %+v: %s", *a, strings.Join(problems, "; "))
	}
	return nil
}

// Size: one conformance case, a script of steps and checks against the
// worker under test, read top to bottom.
func caseEcho(ctx context.Context, k *kit) error {
	input := map[string]any{"x": 1, "s": "é <&>"}
	given := map[string]any{"a": []any{1, 2}, "nested": map[string]any{"k": nil}}
	run, err := k.startRun(ctx, chain("conf-echo",
		node("a", "conf.echo", nil, nil),
		node("b", "conf.echo", map[string]any{"output": given}, nil)), input)
	if err != nil {
		return err
	}
	st, evs, err := k.waitEnd(ctx, run)
	if err != nil {
		return err
	}
	if err := wantStatus(st, projection.RunCompleted, evs); err != nil {
		return err
	}
	if got := st.Nodes["a"].Output; !jsonEqual(got, mustJSON(input)) {
		return fmt.Errorf("node a (no config.output): output %s, want the input state %s", got, mustJSON(input))
	}
	if got := st.Nodes["b"].Output; !jsonEqual(got, mustJSON(given)) {
		return fmt.Errorf("node b: output %s, want config.output %s", got, mustJSON(given))
	}
	name := k.current().name
	for _, n := range []string{"a", "b"} {
		key := refKey(n, 1, nil)
		for _, w := range []struct {
			t    events.Type
			kind string
		}{{events.NodeInvoking, "invoking"}, {events.NodeInvoked, "invoked"}} {
			got := ofType(evs, w.t, n)
			if len(got) != 1 {
				return fmt.Errorf("node %s: %d %s events, want 1; run holds: %s", n, len(got), w.kind, summary(evs))
			}
			e := got[0]
			if want := outcomeID(run, w.kind, key, 1, 1); e.ID != want {
				return fmt.Errorf("node %s: %s id %q, want %q", n, w.kind, e.ID, want)
			}
			if err := workerSubject(e, w.kind); err != nil {
				return err
			}
			if e.Attempt != 1 {
				return fmt.Errorf("node %s: %s has ce-attempt %d, want 1", n, w.kind, e.Attempt)
			}
		}
		inv := payload[events.NodeInvokingData](ofType(evs, events.NodeInvoking, n)[0])
		if inv.Delivery != 1 || inv.Worker != name || inv.Attempt != 1 || inv.Iteration != 1 {
			return fmt.Errorf("node %s: invoking %+v, want attempt 1, iteration 1, delivery 1, worker %q", n, *inv, name)
		}
		done := payload[events.NodeInvokedData](ofType(evs, events.NodeInvoked, n)[0])
		if done.Delivery != 1 || done.Worker != name || len(done.Updates) != 0 {
			return fmt.Errorf("node %s: invoked has delivery %d, worker %q, updates %v; want 1, %q, none", n, done.Delivery, done.Worker, done.Updates, name)
		}
	}
	return nil
}

// effectLines counts the lines of the effects file holding key.
func (k *kit) effectLines(key string) (int, error) {
	b, err := os.ReadFile(k.effects)
	if err != nil {
		return 0, err
	}
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if sc.Text() == key {
			n++
		}
	}
	return n, nil
}

func caseEffect(ctx context.Context, k *kit) error {
	run, err := k.startRun(ctx, chain("conf-effect", node("a", "conf.effect", nil, nil)), nil)
	if err != nil {
		return err
	}
	st, evs, err := k.waitEnd(ctx, run)
	if err != nil {
		return err
	}
	if err := wantStatus(st, projection.RunCompleted, evs); err != nil {
		return err
	}
	key := idempotencyKey(run, "a/1", 1)
	if want := mustJSON(map[string]string{"key": key}); !jsonEqual(st.Nodes["a"].Output, want) {
		return fmt.Errorf("output %s, want %s (the idempotency key of run %s, a/1, attempt 1)", st.Nodes["a"].Output, want, run)
	}
	if n, err := k.effectLines(key); err != nil || n != 1 {
		return fmt.Errorf("the effects file holds the key %d times, want once (%v)", n, err)
	}
	return nil
}

func caseRetry(ctx context.Context, k *kit) error {
	run, err := k.startRun(ctx, chain("conf-retry",
		node("a", "conf.fail", map[string]any{"times": 2}, map[string]any{"retry": retry(3, "200ms")})), nil)
	if err != nil {
		return err
	}
	st, evs, err := k.waitEnd(ctx, run)
	if err != nil {
		return err
	}
	if err := wantStatus(st, projection.RunCompleted, evs); err != nil {
		return err
	}
	if want := mustJSON(map[string]int{"attempt": 3}); !jsonEqual(st.Nodes["a"].Output, want) {
		return fmt.Errorf("output %s, want %s", st.Nodes["a"].Output, want)
	}
	failed := ofType(evs, events.NodeFailed, "a")
	if len(failed) != 2 {
		return fmt.Errorf("%d node.failed, want 2; run holds: %s", len(failed), summary(evs))
	}
	readies := ofType(evs, events.NodeReady, "a")
	if len(readies) != 3 {
		return fmt.Errorf("%d node.ready, want 3 (one per attempt); run holds: %s", len(readies), summary(evs))
	}
	for i, f := range failed {
		d := payload[events.NodeFailedData](f)
		if d.Attempt != i+1 || d.Error.Type != "ConfFail" || !d.Error.Retryable {
			return fmt.Errorf("node.failed %d: attempt %d, error %+v; want attempt %d, a retryable ConfFail", i+1, d.Attempt, d.Error, i+1)
		}
		if err := workerSubject(f, "nodefailed"); err != nil {
			return err
		}
		if want := outcomeID(run, "nodefailed", "a/1", i+1, 1); f.ID != want {
			return fmt.Errorf("node.failed id %q, want %q", f.ID, want)
		}
		// Back-off: 200 ms, then 400 ms, from the failure to the next
		// attempt's work item (stream times; a few ms of slack for the
		// server's timer).
		backoff := time.Duration(200<<i) * time.Millisecond
		if gap := readies[i+1].Stored.Sub(f.Stored); gap < backoff-20*time.Millisecond {
			return fmt.Errorf("attempt %d was readied %s after attempt %d failed, before its back-off of %s", i+2, gap, i+1, backoff)
		}
	}
	return nil
}

func caseFatal(ctx context.Context, k *kit) error {
	run, err := k.startRun(ctx, chain("conf-fatal", node("a", "conf.fatal", nil, map[string]any{"retry": retry(3, "100ms")})), nil)
	if err != nil {
		return err
	}
	st, evs, err := k.waitEnd(ctx, run)
	if err != nil {
		return err
	}
	if err := wantStatus(st, projection.RunFailed, evs); err != nil {
		return err
	}
	failed := ofType(evs, events.NodeFailed, "a")
	if len(failed) != 1 || len(ofType(evs, events.NodeInvoking, "a")) != 1 {
		return fmt.Errorf("want one attempt with one node.failed; run holds: %s", summary(evs))
	}
	f := payload[events.NodeFailedData](failed[0]).Error
	if f.Type != "ConfFatal" || f.Message != "fatal" || f.Retryable || !jsonEqual(f.Details, mustJSON(map[string]string{"node": "a"})) {
		return fmt.Errorf("failure %s, want {type ConfFatal, message fatal, retryable false, details {\"node\":\"a\"}}", mustJSON(f))
	}
	return nil
}

func caseThrow(ctx context.Context, k *kit) error {
	run, err := k.startRun(ctx, chain("conf-throw", node("a", "conf.throw", nil, map[string]any{"retry": retry(2, "100ms")})), nil)
	if err != nil {
		return err
	}
	st, evs, err := k.waitEnd(ctx, run)
	if err != nil {
		return err
	}
	if err := wantStatus(st, projection.RunFailed, evs); err != nil {
		return err
	}
	failed := ofType(evs, events.NodeFailed, "a")
	if len(failed) != 2 {
		return fmt.Errorf("%d node.failed, want 2 (a retryable failure, retried once); run holds: %s", len(failed), summary(evs))
	}
	for _, e := range failed {
		if f := payload[events.NodeFailedData](e).Error; f.Type != "Error" || !f.Retryable || f.Message == "" {
			return fmt.Errorf("failure %s, want a retryable failure of type Error with a message", mustJSON(f))
		}
	}
	return nil
}

func caseValidate(ctx context.Context, k *kit) error {
	def := chain("conf-validate", node("a", "conf.validate", nil, map[string]any{"retry": retry(3, "100ms")}))
	good, err := k.startRun(ctx, def, map[string]any{"ok": true})
	if err != nil {
		return err
	}
	bad, err := k.startRun(ctx, def, map[string]any{"ok": false})
	if err != nil {
		return err
	}
	st, evs, err := k.waitEnd(ctx, good)
	if err != nil {
		return err
	}
	if err := wantStatus(st, projection.RunCompleted, evs); err != nil {
		return err
	}
	if want := mustJSON(map[string]bool{"valid": true}); !jsonEqual(st.Nodes["a"].Output, want) {
		return fmt.Errorf("input {\"ok\":true}: output %s, want %s", st.Nodes["a"].Output, want)
	}
	st, evs, err = k.waitEnd(ctx, bad)
	if err != nil {
		return err
	}
	if err := wantStatus(st, projection.RunFailed, evs); err != nil {
		return err
	}
	failed := ofType(evs, events.NodeFailed, "a")
	if len(failed) != 1 {
		return fmt.Errorf("input {\"ok\":false}: %d node.failed, want 1 (not retried); run holds: %s", len(failed), summary(evs))
	}
	f := payload[events.NodeFailedData](failed[0]).Error
	if f.Type != events.FailureValidation || f.Retryable || !strings.Contains(f.Message+string(f.Details), "ok") {
		return fmt.Errorf("input {\"ok\":false}: failure %s, want a non-retryable ValidationError naming the field ok", mustJSON(f))
	}
	return nil
}

func caseHooks(ctx context.Context, k *kit) error {
	a, err := k.awaitAnnouncement(ctx, k.current())
	if err != nil {
		return err
	}
	if !slices.Contains(a.Types, "conf.hooks") {
		return skipped{"the worker does not announce conf.hooks (optional)"}
	}
	run, err := k.startRun(ctx, chain("conf-hooks", node("a", "conf.hooks", nil, nil)), nil)
	if err != nil {
		return err
	}
	st, evs, err := k.waitEnd(ctx, run)
	if err != nil {
		return err
	}
	if err := wantStatus(st, projection.RunCompleted, evs); err != nil {
		return err
	}
	want := mustJSON(map[string]any{"trace": []string{"before", "prep", "exec", "post", "after"}})
	if !jsonEqual(st.Nodes["a"].Output, want) {
		return fmt.Errorf("output %s, want %s", st.Nodes["a"].Output, want)
	}
	return nil
}

func caseProgress(ctx context.Context, k *kit) error {
	// Beats every 200 ms; one event per second at most (the node's
	// heartbeat interval); the coordinator's heartbeat timeout is 3 s, far
	// from any gap a loaded machine makes.
	run, err := k.startRun(ctx, chain("conf-progress",
		node("a", "conf.slow", map[string]any{"ms": 2500, "beatMs": 200}, map[string]any{"heartbeat": "1s"})), nil)
	if err != nil {
		return err
	}
	st, evs, err := k.waitEnd(ctx, run)
	if err != nil {
		return err
	}
	if err := wantStatus(st, projection.RunCompleted, evs); err != nil {
		return err
	}
	if want := mustJSON(map[string]int{"slept": 2500}); !jsonEqual(st.Nodes["a"].Output, want) {
		return fmt.Errorf("output %s, want %s", st.Nodes["a"].Output, want)
	}
	beats := ofType(evs, events.Heartbeat, "a")
	if len(beats) < 2 {
		return fmt.Errorf("%d node.heartbeat events, want at least 2 (beats every 200 ms for 2.5 s, at most one event per second); run holds: %s", len(beats), summary(evs))
	}
	last := -1
	for i, e := range beats {
		if want := fmt.Sprintf("%s:%d", outcomeID(run, "heartbeat", "a/1", 1, 1), i+1); e.ID != want {
			return fmt.Errorf("heartbeat %d: id %q, want %q", i+1, e.ID, want)
		}
		if err := workerSubject(e, "heartbeat"); err != nil {
			return err
		}
		var details struct {
			Step *int `json:"step"`
		}
		d := payload[events.HeartbeatData](e)
		if err := jsonUnmarshal(d.Details, &details); err != nil || details.Step == nil || *details.Step <= last {
			return fmt.Errorf("heartbeat %d: details %s, want {\"step\": i} with i rising (after %d)", i+1, d.Details, last)
		}
		last = *details.Step
	}
	return nil
}

func caseInProgress(ctx context.Context, k *kit) error {
	const ms = 3500 // longer than the queue's ack wait
	run, err := k.startRun(ctx, chain("conf-inprogress", node("a", "conf.slow", map[string]any{"ms": ms, "noBeat": true}, nil)), nil)
	if err != nil {
		return err
	}
	st, evs, err := k.waitEnd(ctx, run)
	if err != nil {
		return err
	}
	if err := wantStatus(st, projection.RunCompleted, evs); err != nil {
		return err
	}
	if n := len(ofType(evs, events.NodeInvoking, "a")); n != 1 {
		return fmt.Errorf("the item was delivered %d times while its node ran %d ms (ack wait %s): the worker must mark it in progress; run holds: %s", n, ms, AckWait, summary(evs))
	}
	if want := mustJSON(map[string]int{"slept": ms}); !jsonEqual(st.Nodes["a"].Output, want) {
		return fmt.Errorf("output %s, want %s", st.Nodes["a"].Output, want)
	}
	return nil
}

func caseStartToClose(ctx context.Context, k *kit) error {
	run, err := k.startRun(ctx, chain("conf-timeout",
		node("a", "conf.slow", map[string]any{"ms": 10000, "beatMs": 200}, map[string]any{"timeout": "500ms", "retry": retry(1, "100ms")})), nil)
	if err != nil {
		return err
	}
	// The worker's own failure: normally the attempt's outcome; on a
	// loaded machine the coordinator's timer (1 s later) may come first,
	// and the worker's is then in the log all the same, passed over.
	byWorker := func(evs []*events.Event) *events.Event {
		for _, e := range ofType(evs, events.NodeFailed, "a") {
			if !e.IsDecision() {
				return e
			}
		}
		return nil
	}
	evs, err := k.waitFor(ctx, run, "the run's end and the worker's own failure of the attempt (the worker must enforce timeoutMs itself)", func(evs []*events.Event) bool {
		return projection.Fold(evs).Status.Ended() && byWorker(evs) != nil
	})
	if err != nil {
		return err
	}
	if err := wantStatus(projection.Fold(evs), projection.RunFailed, evs); err != nil {
		return err
	}
	e := byWorker(evs)
	if d := payload[events.NodeFailedData](e); d.Error.Type != events.FailureTimeout || !d.Error.Retryable {
		return fmt.Errorf("the worker's failure %s, want a retryable Timeout", mustJSON(d.Error))
	}
	return workerSubject(e, "nodefailed")
}

func caseHeartbeatTimeout(ctx context.Context, k *kit) error {
	run, err := k.startRun(ctx, chain("conf-hbtimeout",
		node("a", "conf.slow", map[string]any{"ms": 4000, "beatMs": 1500}, map[string]any{"heartbeat": "200ms", "retry": retry(1, "100ms")})), nil)
	if err != nil {
		return err
	}
	st, evs, err := k.waitEnd(ctx, run)
	if err != nil {
		return err
	}
	if err := wantStatus(st, projection.RunFailed, evs); err != nil {
		return err
	}
	if len(ofType(evs, events.Heartbeat, "a")) == 0 {
		return fmt.Errorf("no node.heartbeat event: conf.slow beats at once; run holds: %s", summary(evs))
	}
	for _, e := range ofType(evs, events.NodeFailed, "a") {
		d := payload[events.NodeFailedData](e)
		if e.IsDecision() && d.Error.Type == events.FailureTimeout && strings.Contains(d.Error.Message, "heartbeat") {
			return nil
		}
	}
	return fmt.Errorf("want the coordinator's heartbeat timeout; run holds: %s", summary(evs))
}

func caseCancel(ctx context.Context, k *kit) error {
	run, err := k.startRun(ctx, chain("conf-cancel", node("a", "conf.block", nil, nil)), nil)
	if err != nil {
		return err
	}
	if _, err := k.waitFor(ctx, run, "node a's node.invoking", func(evs []*events.Event) bool {
		return len(ofType(evs, events.NodeInvoking, "a")) > 0
	}); err != nil {
		return err
	}
	const reason = "conformance cancel"
	if err := k.client.Cancel(ctx, run, reason); err != nil {
		return err
	}
	evs, err := k.waitFor(ctx, run, "the worker's node.cancelled and the run's end", func(evs []*events.Event) bool {
		return len(ofType(evs, events.NodeCanceled, "a")) > 0 && projection.Fold(evs).Status.Ended()
	})
	if err != nil {
		return err
	}
	if err := wantStatus(projection.Fold(evs), projection.RunCancelled, evs); err != nil {
		return err
	}
	e := ofType(evs, events.NodeCanceled, "a")[0]
	if err := workerSubject(e, "nodecancelled"); err != nil {
		return err
	}
	if want := outcomeID(run, "nodecancelled", "a/1", 1, 1); e.ID != want {
		return fmt.Errorf("node.cancelled id %q, want %q", e.ID, want)
	}
	d := payload[events.NodeCancelledData](e)
	if d.By != identity || d.Reason != reason || d.Delivery != 1 || d.Attempt != 1 {
		return fmt.Errorf("node.cancelled %+v, want by %q, reason %q (the request's), attempt 1, delivery 1", *d, identity, reason)
	}
	return nil
}

// Size: one conformance case, a script of steps and checks against the
// worker under test, read top to bottom.
func caseSigkill(ctx context.Context, k *kit) error {
	first := k.current()
	run, err := k.startRun(ctx, chain("conf-sigkill", node("a", "conf.effect", map[string]any{"ms": 3000}, nil)), nil)
	if err != nil {
		return err
	}
	key := idempotencyKey(run, "a/1", 1)
	for {
		if n, _ := k.effectLines(key); n > 0 {
			break
		}
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return errors.New("the effect of node a never showed in the effects file")
		}
	}
	first.kill()
	k.workerMu.Lock()
	k.worker = nil
	k.workerMu.Unlock()
	second, err := k.startWorker(ctx)
	if err != nil {
		return err
	}
	st, evs, err := k.waitEnd(ctx, run)
	if err != nil {
		return err
	}
	if err := wantStatus(st, projection.RunCompleted, evs); err != nil {
		return err
	}
	if want := mustJSON(map[string]string{"key": key}); !jsonEqual(st.Nodes["a"].Output, want) {
		return fmt.Errorf("output %s, want %s: the same idempotency key on redelivery", st.Nodes["a"].Output, want)
	}
	var deliveries []string
	for _, e := range ofType(evs, events.NodeInvoking, "a") {
		d := payload[events.NodeInvokingData](e)
		deliveries = append(deliveries, fmt.Sprintf("%d by %s", d.Delivery, d.Worker))
		if d.Delivery == 2 && d.Worker == second.name {
			if want := outcomeID(run, "invoking", "a/1", 1, 2); e.ID != want {
				return fmt.Errorf("invoking of delivery 2: id %q, want %q", e.ID, want)
			}
		}
	}
	if !slices.Contains(deliveries, "1 by "+first.name) || !slices.Contains(deliveries, "2 by "+second.name) {
		return fmt.Errorf("deliveries %q, want 1 by %s and 2 by %s", deliveries, first.name, second.name)
	}
	invoked := ofType(evs, events.NodeInvoked, "a")
	if len(invoked) != 1 || payload[events.NodeInvokedData](invoked[0]).Delivery != 2 {
		return fmt.Errorf("want one node.invoked, of delivery 2; run holds: %s", summary(evs))
	}
	if n, err := k.effectLines(key); err != nil || n != 2 {
		return fmt.Errorf("the effects file holds the key %d times, want twice: once per delivery (%v)", n, err)
	}
	return nil
}

func caseSquatted(ctx context.Context, k *kit) error {
	run, err := k.startRun(ctx, chain("conf-squat",
		node("a", "conf.slow", map[string]any{"ms": 400}, nil),
		node("b", "conf.slow", map[string]any{"ms": 2000}, nil)), nil)
	if err != nil {
		return err
	}
	base := runBase(run)
	invokingID := outcomeID(run, "invoking", "b/1", 1, 1)
	invokedID := outcomeID(run, "invoked", "b/1", 1, 1)
	// b's invoking id, taken on another subject: the worker reads the
	// last message on its own subject, which is not the one acknowledged.
	if err := k.squat(ctx, base+"w."+Queue+".heartbeat", invokingID); err != nil {
		return err
	}
	// b's invoked id, taken on the very subject once a's outcome is in:
	// the last message there is the squatter's, and it is not the event.
	if _, err := k.waitFor(ctx, run, "node b's node.invoking", func(evs []*events.Event) bool {
		return len(ofType(evs, events.NodeInvoking, "b")) > 0
	}); err != nil {
		return err
	}
	if err := k.squat(ctx, base+"w."+Queue+".invoked", invokedID); err != nil {
		return err
	}
	st, evs, err := k.waitEnd(ctx, run)
	if err != nil {
		return err
	}
	if err := wantStatus(st, projection.RunCompleted, evs); err != nil {
		return err
	}
	for _, w := range []struct {
		t  events.Type
		id string
	}{{events.NodeInvoking, invokingID}, {events.NodeInvoked, invokedID}} {
		got := ofType(evs, w.t, "b")
		if len(got) != 1 || !freshIDRE(w.id).MatchString(got[0].ID) {
			return fmt.Errorf("node b's %s: want one, under %s~<16 base32> (its own id was squatted); run holds: %s", w.t, w.id, summary(evs))
		}
	}
	return nil
}

// squat publishes junk on subject under message id id, as the admin.
func (k *kit) squat(ctx context.Context, subject, id string) error {
	m := natsMsg(subject, []byte("squatted"))
	m.Header.Set("Nats-Msg-Id", id)
	if _, err := k.adminJS.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("squatting %s on %s: %w", id, subject, err)
	}
	return nil
}

// Size: one conformance case, a script of steps and checks against the
// worker under test, read top to bottom.
func caseDuplicateItem(ctx context.Context, k *kit) error {
	run, err := k.startRun(ctx, chain("conf-dup", node("a", "conf.effect", map[string]any{"ms": 1500}, nil)), nil)
	if err != nil {
		return err
	}
	evs, err := k.waitFor(ctx, run, "node a's node.invoking", func(evs []*events.Event) bool {
		return len(ofType(evs, events.NodeInvoking, "a")) > 0
	})
	if err != nil {
		return err
	}
	ready := ofType(evs, events.NodeReady, "a")
	if len(ready) != 1 {
		return fmt.Errorf("want one node.ready; run holds: %s", summary(evs))
	}
	copySeq, err := k.copyItem(ctx, ready[0].Seq)
	if err != nil {
		return err
	}
	st, evs, err := k.waitEnd(ctx, run)
	if err != nil {
		return err
	}
	if err := wantStatus(st, projection.RunCompleted, evs); err != nil {
		return err
	}
	key := idempotencyKey(run, "a/1", 1)
	if want := mustJSON(map[string]string{"key": key}); !jsonEqual(st.Nodes["a"].Output, want) {
		return fmt.Errorf("output %s, want %s", st.Nodes["a"].Output, want)
	}
	if err := k.waitDelivered(ctx, copySeq); err != nil {
		return err
	}
	if k.terminated.has(copySeq) {
		return errors.New("the copy of the work item was terminated: it is a valid work item")
	}
	// Both deliveries (the item and its copy) run the attempt: every
	// effect is under the attempt's key, once or twice.
	if n, err := k.effectLines(key); err != nil || n < 1 || n > 2 {
		return fmt.Errorf("the effects file holds the key %d times, want once or twice (%v)", n, err)
	}
	for _, e := range ofType(evs, events.NodeInvoked, "a") {
		id := outcomeID(run, "invoked", "a/1", 1, 1)
		if e.ID != id && !freshIDRE(id).MatchString(e.ID) {
			return fmt.Errorf("node.invoked id %q, want %q or %q~<16 base32>", e.ID, id, id)
		}
	}
	return nil
}

// copyItem puts a copy of the stored message at seq into the stream, as
// the admin, under another message id: a second work item for the same
// attempt. It returns the copy's sequence.
func (k *kit) copyItem(ctx context.Context, seq uint64) (uint64, error) {
	s, err := k.adminJS.Stream(ctx, k.admin.StreamName())
	if err != nil {
		return 0, err
	}
	raw, err := s.GetMsg(ctx, seq)
	if err != nil {
		return 0, fmt.Errorf("reading the work item at %d: %w", seq, err)
	}
	m := natsMsg(raw.Subject, raw.Data)
	for h, vs := range raw.Header {
		if strings.HasPrefix(h, "Nats-Expected") {
			continue
		}
		m.Header[h] = vs
	}
	m.Header.Set("Nats-Msg-Id", raw.Header.Get("Nats-Msg-Id")+"#copy")
	ack, err := k.adminJS.PublishMsg(ctx, m)
	if err != nil {
		return 0, fmt.Errorf("copying the work item: %w", err)
	}
	return ack.Sequence, nil
}

func caseJunk(ctx context.Context, k *kit) error {
	type junk struct {
		what string
		seq  uint64
		run  string
	}
	var items []junk
	put := func(what string, build func(run string) (subject string, hdr map[string]string, body []byte)) error {
		run := events.NewRunID()
		subject, hdr, body := build(run)
		m := natsMsg(subject, body)
		for h, v := range hdr {
			m.Header.Set(h, v)
		}
		ack, err := k.adminJS.PublishMsg(ctx, m)
		if err != nil {
			return fmt.Errorf("publishing %s: %w", what, err)
		}
		items = append(items, junk{what, ack.Sequence, run})
		return nil
	}
	ready := func(run string) string { return runBase(run) + "d.ready." + Queue }
	if err := put("a message that is no CloudEvent", func(run string) (string, map[string]string, []byte) {
		return ready(run), nil, []byte("not an event")
	}); err != nil {
		return err
	}
	if err := put("a node.invoked event on a work item's subject", func(run string) (string, map[string]string, []byte) {
		return ready(run), ceHeaders(run, "dev.weft.node.invoked.v1", run+":x"), []byte(`{"node":"a","iteration":1,"attempt":1}`)
	}); err != nil {
		return err
	}
	if err := put("a node.ready without a node", func(run string) (string, map[string]string, []byte) {
		return ready(run), ceHeaders(run, "dev.weft.node.ready.v1", run+":y"), []byte(`{"node":"","iteration":1,"attempt":1,"type":"conf.echo","queue":"` + Queue + `","idempotencyKey":"k"}`)
	}); err != nil {
		return err
	}
	if err := put("900 KB of junk with a node.ready's headers", func(run string) (string, map[string]string, []byte) {
		return ready(run), ceHeaders(run, "dev.weft.node.ready.v1", run+":z"), bytes.Repeat([]byte{0xff, '{', '"'}, 300_000)
	}); err != nil {
		return err
	}
	for _, it := range items {
		for !k.terminated.has(it.seq) {
			if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
				return fmt.Errorf("%s (sequence %d) was not terminated (+TERM): a malformed item can never be answered", it.what, it.seq)
			}
		}
		evs, err := k.history(ctx, it.run)
		if err != nil {
			return err
		}
		if len(evs) != 1 {
			return fmt.Errorf("%s: the worker wrote to its run: %s", it.what, summary(evs))
		}
	}
	return nil
}

func caseOversized(ctx context.Context, k *kit) error {
	run := events.NewRunID()
	blob := strings.Repeat("x", 900_000)
	ev, err := events.New(run, outcomeID(run, "ready", "a/1", 1, 0), time.Time{}, &events.NodeReadyData{
		NodeRef: events.NodeRef{Node: "a", Iteration: 1}, Attempt: 1, Type: "conf.echo", Queue: Queue,
		IdempotencyKey: idempotencyKey(run, "a/1", 1), Input: mustJSON(map[string]string{"blob": blob}),
	})
	if err != nil {
		return err
	}
	seq, err := k.publishItem(ctx, ev, "")
	if err != nil {
		return err
	}
	evs, err := k.waitFor(ctx, run, "node a's node.failed", func(evs []*events.Event) bool {
		return len(ofType(evs, events.NodeFailed, "a")) > 0
	})
	if err != nil {
		return err
	}
	d := payload[events.NodeFailedData](ofType(evs, events.NodeFailed, "a")[0])
	if d.Error.Type != worker.FailureRunNotFound || d.Error.Retryable {
		return fmt.Errorf("failure %s, want a non-retryable RunNotFound (the run has no run.started)", mustJSON(d.Error))
	}
	if k.terminated.has(seq) {
		return errors.New("the item was terminated: it is a valid work item, to be answered")
	}
	return nil
}

// caseLargePayloads: a run's input of 600 KB and node b's config of 2 MB,
// over the offload threshold (256 KiB), are kept beside the log by the
// client. Node a (conf.echo) reads its work item back from the payloads
// bucket and echoes it: its 600 KB output is over the threshold, so the
// worker keeps it beside the log too. Node b echoes its config.output,
// read from the run's start (a reference): its 2 MB output fits in no
// event (the kit's max_payload is 1 MiB). The engine reads both back
// equal.
func caseLargePayloads(ctx context.Context, k *kit) error {
	input := map[string]any{"blob": lines(600_000)}
	given := lines(2_000_000)
	run, err := k.startRun(ctx, chain("conf-large-payloads",
		node("a", "conf.echo", nil, nil),
		node("b", "conf.echo", map[string]any{"output": given}, nil)), input)
	if err != nil {
		return err
	}
	st, evs, err := k.waitEnd(ctx, run)
	if err != nil {
		return err
	}
	if err := wantStatus(st, projection.RunCompleted, evs); err != nil {
		return err
	}
	for _, n := range []struct {
		id   string
		want any
	}{{"a", input}, {"b", given}} {
		done := ofType(evs, events.NodeInvoked, n.id)
		if len(done) != 1 {
			return fmt.Errorf("node %s: %d invoked events, want 1; run holds: %s", n.id, len(done), summary(evs))
		}
		if got, want := payload[events.NodeInvokedData](done[0]).Output, mustJSON(n.want); !jsonEqual(got, want) {
			return fmt.Errorf("node %s: an output of %d bytes read back, want the %d bytes it echoes", n.id, len(got), len(want))
		}
		if err := k.keptBeside(ctx, done[0]); err != nil {
			return fmt.Errorf("node %s: %w", n.id, err)
		}
	}
	return nil
}

// lines is n bytes of text in which each line names its place, so that
// chunks read back out of order do not match.
func lines(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "%063d\n", i)
	}
	return b.String()[:n]
}

// keptBeside checks that an event is stored with its body beside the log:
// the message at its sequence carries a reference.
func (k *kit) keptBeside(ctx context.Context, e *events.Event) error {
	s, err := k.adminJS.Stream(ctx, k.admin.StreamName())
	if err != nil {
		return err
	}
	raw, err := s.GetMsg(ctx, e.Seq)
	if err != nil {
		return fmt.Errorf("reading its %s at %d: %w", e.Type, e.Seq, err)
	}
	if ct := raw.Header.Get("content-type"); ct != events.ContentRef {
		return fmt.Errorf("its %s is stored with content-type %q and %d bytes of body: a body over 256 KiB must be kept beside the log (%s)", e.Type, ct, len(raw.Data), events.ContentRef)
	}
	return nil
}

// caseSecondStart: a run waits at a human gate before its worker node;
// meanwhile a second run-started, of another graph whose node a's config
// differs, is written on the run's c.started (as any client may: the
// fold refuses it). The work item names its run's start by sequence
// (startSeq), so the worker, whose last-message read now finds the second,
// never runs that config: the attempt fails, non-retryable,
// RunStartMismatch.
func caseSecondStart(ctx context.Context, k *kit) error {
	def := func(who string) map[string]any {
		return chain("conf-second-start", node("gate", "human", nil, nil), node("a", "conf.echo", map[string]any{"output": who}, nil))
	}
	run, err := k.startRun(ctx, def("victim"), nil)
	if err != nil {
		return err
	}
	if _, err := k.waitFor(ctx, run, "the gate waits", func(evs []*events.Event) bool {
		return len(ofType(evs, events.NodeWaiting, "gate")) > 0
	}); err != nil {
		return err
	}
	g, err := compile(def("attacker"))
	if err != nil {
		return err
	}
	ev, err := events.New(run, run, time.Now(), &events.RunStartedData{GraphName: g.Definition().Name, GraphDigest: g.Digest(), Graph: g.Canonical(), StartedBy: "attacker"})
	if err != nil {
		return err
	}
	m, err := encodeEvent(ev)
	if err != nil {
		return err
	}
	m.Header.Set("Nats-Msg-Id", events.NewRunID())
	if _, err := k.adminJS.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("publishing the second start: %w", err)
	}
	if err := k.client.Signal(ctx, run, "gate", map[string]any{}); err != nil {
		return err
	}
	evs, err := k.waitFor(ctx, run, "node a's node.failed or node.invoked", func(evs []*events.Event) bool {
		return len(ofType(evs, events.NodeFailed, "a"))+len(ofType(evs, events.NodeInvoked, "a")) > 0
	})
	if err != nil {
		return err
	}
	if got := ofType(evs, events.NodeInvoked, "a"); len(got) > 0 {
		return fmt.Errorf("node a ran with output %s: the worker took the second run-started for the run's (its item names startSeq)", payload[events.NodeInvokedData](got[0]).Output)
	}
	d := payload[events.NodeFailedData](ofType(evs, events.NodeFailed, "a")[0])
	if d.Error.Type != worker.FailureRunStartMismatch || d.Error.Retryable {
		return fmt.Errorf("failure %s, want a non-retryable RunStartMismatch", mustJSON(d.Error))
	}
	return nil
}

// publishItem publishes a work item as the admin, with its ce-type
// replaced when typ is set; it returns its sequence.
func (k *kit) publishItem(ctx context.Context, ev *events.Event, typ string) (uint64, error) {
	enc := encodeEvent
	if typ != "" {
		// Plain even in a sealed run of the kit: a sealed body is bound
		// to its type, and this one's type is rewritten below.
		enc = eventlog.EncodePlain
	}
	m, err := enc(ev)
	if err != nil {
		return 0, err
	}
	if typ != "" {
		m.Header.Set("ce-type", typ)
	}
	ack, err := k.adminJS.PublishMsg(ctx, m)
	if err != nil {
		return 0, fmt.Errorf("publishing a work item: %w", err)
	}
	return ack.Sequence, nil
}

func caseNewerVersion(ctx context.Context, k *kit) error {
	run := events.NewRunID()
	ev, err := events.New(run, outcomeID(run, "ready", "a/1", 1, 0), time.Time{}, &events.NodeReadyData{
		NodeRef: events.NodeRef{Node: "a", Iteration: 1}, Attempt: 1, Type: "conf.echo", Queue: Queue,
		IdempotencyKey: idempotencyKey(run, "a/1", 1),
	})
	if err != nil {
		return err
	}
	seq, err := k.publishItem(ctx, ev, "dev.weft.node.ready.v2")
	if err != nil {
		return err
	}
	defer k.deleteMsg(seq)
	if err := k.waitDelivered(ctx, seq); err != nil {
		return err
	}
	if err := sleepCtx(ctx, 3*time.Second); err != nil {
		return err
	}
	if k.terminated.has(seq) {
		return errors.New("the dev.weft.node.ready.v2 item was terminated: an item of a newer version is for a worker that speaks it, not malformed")
	}
	evs, err := k.history(ctx, run)
	if err != nil {
		return err
	}
	if len(evs) != 1 {
		return fmt.Errorf("the worker wrote to the run of a dev.weft.node.ready.v2 item: %s", summary(evs))
	}
	return nil
}

// deleteMsg removes a message from the stream, as the admin: an item no
// worker will ever take.
func (k *kit) deleteMsg(seq uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := k.adminJS.Stream(ctx, k.admin.StreamName())
	if err == nil {
		err = s.DeleteMsg(ctx, seq)
	}
	if err != nil {
		k.log.Warn("removing an item", logattr.Seq, seq, logattr.Error, err)
	}
}

func caseUnknownType(ctx context.Context, k *kit) error {
	run, err := k.startRun(ctx, chain("conf-unknown", node("a", "conf.nope", nil, nil)), nil)
	if err != nil {
		return err
	}
	evs, err := k.waitFor(ctx, run, "node a's node.ready", func(evs []*events.Event) bool {
		return len(ofType(evs, events.NodeReady, "a")) > 0
	})
	if err != nil {
		return err
	}
	seq := ofType(evs, events.NodeReady, "a")[0].Seq
	defer k.deleteMsg(seq) // its run ends; the item would cycle on (docs: not yet guaranteed)
	if err := k.waitDelivered(ctx, seq); err != nil {
		return err
	}
	if err := sleepCtx(ctx, 3*time.Second); err != nil {
		return err
	}
	if k.terminated.has(seq) {
		return errors.New("the item of an unserved node type was terminated: it is for a worker that has the type")
	}
	evs, err = k.history(ctx, run)
	if err != nil {
		return err
	}
	for _, e := range evs {
		if e.Refused == nil && e.Subject() != "" && strings.Contains(e.Subject(), ".w.") {
			return fmt.Errorf("the worker recorded %s for a node type it does not serve; run holds: %s", e.Type, summary(evs))
		}
	}
	if err := k.client.Cancel(ctx, run, "conformance: unknown type"); err != nil {
		return err
	}
	_, _, err = k.waitEnd(ctx, run)
	return err
}

func caseDrain(ctx context.Context, k *kit) error {
	p := k.current()
	run, err := k.startRun(ctx, chain("conf-drain", node("a", "conf.slow", map[string]any{"ms": 1500}, nil)), nil)
	if err != nil {
		return err
	}
	if _, err := k.waitFor(ctx, run, "node a's node.invoking", func(evs []*events.Event) bool {
		return len(ofType(evs, events.NodeInvoking, "a")) > 0
	}); err != nil {
		return err
	}
	if _, err := k.stopWorker(40 * time.Second); err != nil {
		return fmt.Errorf("after SIGTERM: %v; its log: %s", err, p.tail())
	}
	evs, err := k.history(ctx, run)
	if err != nil {
		return err
	}
	invoked := ofType(evs, events.NodeInvoked, "a")
	if len(invoked) != 1 || payload[events.NodeInvokedData](invoked[0]).Worker != p.name {
		return fmt.Errorf("the node running at SIGTERM did not finish before the worker exited; run holds: %s", summary(evs))
	}
	st, evs, err := k.waitEnd(ctx, run)
	if err != nil {
		return err
	}
	return wantStatus(st, projection.RunCompleted, evs)
}

func caseEndedRun(ctx context.Context, k *kit) error {
	run, err := k.startRun(ctx, chain("conf-ended", node("a", "conf.echo", nil, nil)), map[string]any{"x": 1})
	if err != nil {
		return err
	}
	st, evs, err := k.waitEnd(ctx, run)
	if err != nil {
		return err
	}
	if err := wantStatus(st, projection.RunCompleted, evs); err != nil {
		return err
	}
	if p, err := k.stopWorker(40 * time.Second); err != nil {
		return fmt.Errorf("stopping worker %s: %v", p.name, err)
	}
	if _, err := k.copyItem(ctx, ofType(evs, events.NodeReady, "a")[0].Seq); err != nil {
		return err
	}
	// Queued longer than 2 s: the worker must check the run.
	if err := sleepCtx(ctx, 2500*time.Millisecond); err != nil {
		return err
	}
	if _, err := k.startWorker(ctx); err != nil {
		return err
	}
	evs, err = k.waitFor(ctx, run, "the worker's node.cancelled for the ended run's item", func(evs []*events.Event) bool {
		return len(ofType(evs, events.NodeCanceled, "a")) > 0
	})
	if err != nil {
		return err
	}
	e := ofType(evs, events.NodeCanceled, "a")[0]
	if d := payload[events.NodeCancelledData](e); d.By != "worker" {
		return fmt.Errorf("node.cancelled by %q, want \"worker\"", d.By)
	}
	if err := workerSubject(e, "nodecancelled"); err != nil {
		return err
	}
	if n := len(ofType(evs, events.NodeInvoking, "a")); n != 1 {
		return fmt.Errorf("%d node.invoking: the worker started work of an ended run; run holds: %s", n, summary(evs))
	}
	return nil
}

func caseNATSRestart(ctx context.Context, k *kit) error {
	run, err := k.startRun(ctx, chain("conf-restart", node("a", "conf.slow", map[string]any{"ms": 3000, "beatMs": 500}, nil)), nil)
	if err != nil {
		return err
	}
	if _, err := k.waitFor(ctx, run, "node a's node.invoking", func(evs []*events.Event) bool {
		return len(ofType(evs, events.NodeInvoking, "a")) > 0
	}); err != nil {
		return err
	}
	if err := k.restartServer(time.Second); err != nil {
		return err
	}
	st, evs, err := k.waitEnd(ctx, run)
	if err != nil {
		return fmt.Errorf("after the NATS restart: %w", err)
	}
	if err := wantStatus(st, projection.RunCompleted, evs); err != nil {
		return err
	}
	after, err := k.startRun(ctx, chain("conf-restart-after", node("a", "conf.echo", nil, nil)), map[string]any{"after": true})
	if err != nil {
		return err
	}
	st, evs, err = k.waitEnd(ctx, after)
	if err != nil {
		return fmt.Errorf("a run started after the NATS restart: %w", err)
	}
	return wantStatus(st, projection.RunCompleted, evs)
}

func caseQueueDrained(ctx context.Context, k *kit) error {
	for {
		info, err := k.consumer(ctx)
		if err == nil && info.NumPending == 0 && info.NumAckPending == 0 {
			return nil
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			if info != nil {
				return fmt.Errorf("the queue still has %d items pending and %d unacknowledged", info.NumPending, info.NumAckPending)
			}
			return fmt.Errorf("reading the queue: %v", err)
		}
	}
}
