package cli

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/weft-dev/weft/internal/telemetry"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/projection"
)

// defaultStallAfter is how long a run may go without a new event before
// 'weft status' and 'weft list' say it has not advanced.
const defaultStallAfter = 5 * time.Minute

// stallFlag registers -stall on a command's flags.
func stallFlag(fs *flag.FlagSet) *time.Duration {
	return fs.Duration("stall", defaultStallAfter, "warn about a running run with no event for this long that waits for nothing expected (a signal, a child run, a timer)")
}

// warnNoCoordinator prints a warning on stderr when no coordinator has
// been alive recently: runs do not advance. A failed look-up says nothing.
func (e *env) warnNoCoordinator(cl *client.Client) {
	co, err := cl.Coordinators(e.ctx)
	if err != nil {
		return
	}
	switch {
	case co.LastSeen.IsZero():
		fmt.Fprintln(e.stderr, "warning: no coordinator has ever run against this server: nothing decides, runs do not advance (start one: weft-coordinator, or 'weft dev')")
	case !co.AliveAt(time.Now()):
		fmt.Fprintf(e.stderr, "warning: no coordinator alive: the last one was seen %s ago (announcements last %s); runs do not advance until one runs\n",
			duration(time.Since(co.LastSeen)), co.Window)
	}
}

// stalled says why a run that has not ended looks stuck: no event for
// longer than after, while none of its nodes waits for something that
// may take long (a signal, a child run, map items, a wait node's time to
// come) and no timer of it is due later. "" when it does not.
func stalled(st *projection.State, now time.Time, after time.Duration) string {
	if st.Status.Ended() || st.Status == projection.RunPending || st.UpdatedAt == nil || mayWait(st, now) {
		return ""
	}
	last := lastActivity(st)
	idle := now.Sub(last)
	if idle <= after {
		return ""
	}
	var running []string
	for id, n := range st.Nodes {
		if n.Status == projection.NodeRunning {
			running = append(running, id)
		}
	}
	if len(running) > 0 {
		slices.Sort(running)
		return fmt.Sprintf("run %s has not advanced for %s (no event since %s, longer than -stall %s) while %s ran with no timeout and no heartbeat event: is its worker alive?",
			st.RunID, duration(idle), last.Local().Format(time.DateTime), after, strings.Join(running, ", "))
	}
	return fmt.Sprintf("run %s has not advanced for %s (no event since %s, longer than -stall %s): is a coordinator running, and a worker for its ready nodes?",
		st.RunID, duration(idle), last.Local().Format(time.DateTime), after)
}

// mayWait says whether a run may rightly be quiet at now: a node of it
// waits for something that may take long, a running node is within its
// own timeout, or a timer of it is due later.
func mayWait(st *projection.State, now time.Time) bool {
	for _, n := range st.Nodes {
		if n.Status == projection.NodeWaiting && (n.WaitingFor != projection.WaitingForTimer || n.Deadline == nil || n.Deadline.After(now)) {
			return true // a wait node whose time passed is not waiting any more
		}
		if n.Status == projection.NodeRunning && n.TimeoutMs > 0 && n.StartedAt != nil && now.Before(n.StartedAt.Add(time.Duration(n.TimeoutMs)*time.Millisecond)) {
			return true // within its own timeout
		}
	}
	for _, t := range st.Timers {
		if t.At.After(now) {
			return true
		}
	}
	return false
}

// lastActivity is when a run last showed life: its last event, or a later
// heartbeat of one of its nodes.
func lastActivity(st *projection.State) time.Time {
	last := *st.UpdatedAt
	for _, n := range st.Nodes {
		if n.HeartbeatAt != nil && n.HeartbeatAt.After(last) {
			last = *n.HeartbeatAt
		}
	}
	return last
}

// warnStalled prints stalled's warning on stderr.
func (e *env) warnStalled(st *projection.State, after time.Duration) {
	if w := stalled(st, time.Now(), after); w != "" {
		fmt.Fprintln(e.stderr, "warning: "+w)
	}
}

// commandSpan starts the span of a CLI command when tracing is on, so
// that what the command sends hangs under it and its trace id is known.
func commandSpan(ctx context.Context, name string) (context.Context, trace.Span) {
	if !telemetry.Enabled() {
		return ctx, trace.SpanFromContext(context.Background())
	}
	return otel.Tracer(telemetry.ScopeName).Start(ctx, "weft "+name, trace.WithSpanKind(trace.SpanKindClient))
}

// stallChecks bounds how many running runs 'weft list' reads to tell
// whether they advance.
const stallChecks = 20

// warnList prints list's warnings: no coordinator alive (when a run
// listed has not ended), and runs that have not advanced.
func (e *env) warnList(cl *client.Client, runs []client.RunSummary, after time.Duration) {
	checked := 0
	for _, r := range runs {
		if r.Status.Ended() {
			continue
		}
		if checked == 0 {
			e.warnNoCoordinator(cl)
		}
		if checked++; checked > stallChecks {
			return
		}
		if st, err := cl.Get(e.ctx, r.RunID); err == nil {
			e.warnStalled(st, after)
		}
	}
}
