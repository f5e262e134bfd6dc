package natsconn

import (
	"fmt"
	"slices"
	"strings"

	"github.com/weft-dev/weft/internal/eventlog"
)

// Schedules and event triggers (internal/schedule, internal/trigger): the
// grants they add to the roles, kept here, apart from the others.
//
//   - The coordinator fires them: it arms fires in the timers stream
//     (weft.t.sc.>, weft.t.sb.>), consumes them with its own consumer,
//     keeps their state in the schedules bucket and reads and makes the
//     keys run ids are derived from (weft-start-keys), which no other
//     role but the admin may read: no one else can compute the id of a
//     run the engine is about to start and start a run of its own under it.
//   - RoleTrigger manages them ('weft schedule', 'weft trigger'): it
//     writes definitions (def.>, tdef.>) and trigger/backfill requests
//     (act.>),
//     and reads the bucket; it cannot write the state (st.>) or results
//     (res.>), start, signal or cancel a run, or reach the keys.
//   - The client and the UI read the bucket, and write nothing there: a
//     client cannot create, change or fire a schedule.

// RoleTrigger manages schedules and event triggers.
const RoleTrigger Role = "trigger"

const (
	schedulesBucket = "weft-schedules"
	startKeysBucket = "weft-start-keys"
)

// startsRead reads the schedules bucket with gets and stream info only:
// lists are batched direct gets (schedule.ListKeys), so a reader holds no
// consumer (deploy/SECURITY.md, gap 3). The client and the UI get this.
func startsRead(api string) []string {
	return []string{
		api + "STREAM.INFO.KV_" + schedulesBucket,
		api + "DIRECT.GET.KV_" + schedulesBucket,
		api + "DIRECT.GET.KV_" + schedulesBucket + ".>",
		api + "STREAM.MSG.GET.KV_" + schedulesBucket,
	}
}

// startsWatch watches the schedules bucket: the coordinators' runners
// (definitions and requests) and the trigger role (waiting for a
// request's result). Watchers are consumers; the readers get none.
func startsWatch(api string) []string {
	return kvWatch(api, schedulesBucket)
}

// kvWatch is what a KV watcher of bucket needs: its ordered consumer
// created and deleted, and flow control answered. A watcher that nats.go
// starts again (its ordered consumer reset after a NATS node went, with
// no name) asks on the legacy subject, the filter in the body: no right
// beyond the named form's, whose filter token already takes ">". Without
// it the watch stops for good after a node restart (TestChaos saw a
// coordinator's schedules watch refused).
func kvWatch(api, bucket string) []string {
	return []string{
		api + "CONSUMER.CREATE.KV_" + bucket,
		api + "CONSUMER.CREATE.KV_" + bucket + ".>",
		api + "CONSUMER.DELETE.KV_" + bucket + ".*",
		"$JS.FC.KV_" + bucket + ".>",
	}
}

// startsManage writes definitions and requests.
func startsManage() []string {
	return []string{
		"$KV." + schedulesBucket + ".def.>",
		"$KV." + schedulesBucket + ".act.>",
		"$KV." + schedulesBucket + ".tdef.>",
	}
}

// startsCoordinator is what the coordinator needs to fire schedules.
func startsCoordinator(api, stream, durable string) []string {
	timers := stream + eventlog.TimerStreamSuffix
	return append(append([]string{
		eventlog.ScheduleArms, eventlog.ScheduleBuffers,
		"$KV." + schedulesBucket + ".>",
		api + "STREAM.PURGE.KV_" + schedulesBucket,
		"$KV." + startKeysBucket + ".>",
		api + "STREAM.INFO.KV_" + startKeysBucket,
		api + "DIRECT.GET.KV_" + startKeysBucket + ".>",
		api + "STREAM.MSG.GET.KV_" + startKeysBucket,
	}, slices.Concat(startsRead(api), startsWatch(api))...), coordinatorGrants(api, timers, []string{durable + "-schedules"})...)
}

// triggerUser is RoleTrigger's grants, added to u.
func triggerUser(u User, api string, reads, runsRead []string, inbox string) User {
	u.PublishAllow = slices.Concat(startsManage(), startsRead(api), startsWatch(api), reads, runsRead)
	u.SubscribeAllow = []string{inbox}
	return u
}

// triggerStreamsCoordinator lets the coordinator consume the users'
// streams triggers read (Deployment.TriggerStreams): consumers of those
// streams only (trigger consumers are "weft-trigger-<name>"; NATS cannot
// grant a name prefix), never of the events stream or the buckets.
func triggerStreamsCoordinator(api string, streams []string) []string {
	var out []string
	for _, s := range streams {
		out = append(out,
			api+"STREAM.INFO."+s,
			api+"CONSUMER.CREATE."+s+".*",
			api+"CONSUMER.CREATE."+s+".*.>",
			api+"CONSUMER.INFO."+s+".*",
			api+"CONSUMER.DELETE."+s+".*",
			api+"CONSUMER.MSG.NEXT."+s+".*",
			"$JS.ACK."+s+".>",
		)
	}
	return out
}

// triggerStreamsManage lets the trigger role check a trigger's stream
// when it creates one (its subjects; which stream captures a subject).
func triggerStreamsManage(api string, streams []string) []string {
	if len(streams) == 0 {
		return nil
	}
	out := []string{api + "STREAM.NAMES"}
	for _, s := range streams {
		out = append(out, api+"STREAM.INFO."+s, api+"CONSUMER.INFO."+s+".*")
	}
	return out
}

// triggerStreamErrors checks TriggerStreams: users' streams, never Weft's.
func (d Deployment) triggerStreamErrors() []error {
	var errs []error
	for _, s := range d.TriggerStreams {
		switch {
		case !eventlog.ValidToken(s):
			errs = append(errs, fmt.Errorf("trigger stream %q: not a valid stream name", s))
		case s == d.Stream || strings.HasPrefix(s, d.Stream+"_") || strings.HasPrefix(s, "KV_") || strings.HasPrefix(s, "OBJ_"):
			errs = append(errs, fmt.Errorf("trigger stream %q: Weft's own streams and buckets cannot be read by triggers", s))
		}
	}
	return errs
}
