package natsconn

import "github.com/weft-dev/weft/internal/eventlog"

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
//     writes definitions (def.>) and trigger/backfill requests (act.>),
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

// startsRead reads the schedules bucket: gets, stream info, watchers
// (listing keys, waiting for a request's result).
func startsRead(api string) []string {
	return []string{
		api + "STREAM.INFO.KV_" + schedulesBucket,
		api + "DIRECT.GET.KV_" + schedulesBucket + ".>",
		api + "STREAM.MSG.GET.KV_" + schedulesBucket,
		api + "CONSUMER.CREATE.KV_" + schedulesBucket + ".>",
		api + "CONSUMER.DELETE.KV_" + schedulesBucket + ".*",
		"$JS.FC.KV_" + schedulesBucket + ".>",
	}
}

// startsManage writes definitions and requests.
func startsManage() []string {
	return []string{
		"$KV." + schedulesBucket + ".def.>",
		"$KV." + schedulesBucket + ".act.>",
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
	}, startsRead(api)...), coordinatorGrants(api, timers, []string{durable + "-schedules"})...)
}

// triggerUser is RoleTrigger's grants, added to u.
func triggerUser(u User, api string, reads, runsRead []string, inbox string) User {
	u.PublishAllow = append(append(append(append([]string{}, startsManage()...), startsRead(api)...), reads...), runsRead...)
	u.SubscribeAllow = []string{inbox}
	return u
}
