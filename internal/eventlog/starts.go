package eventlog

// Subjects of schedules in the timers stream (internal/schedule), beside
// the runs' durable timers and written by coordinators only:
//
//	weft.t.sc.<schedule>   the schedule's next fire: a one-shot message
//	                       schedule ("@at"), re-armed after every fire
//	weft.t.sb.<schedule>   a buffered fire's re-check (overlap buffer-one)
//	weft.t.sf.<schedule>   where both fire; rolled up, so one per schedule
//
// A fire says only "look at this schedule now": which nominal fire times
// are due is computed from the schedule's definition and its state, so a
// fire delivered twice, late or early changes nothing by itself.
const (
	scheduleArm    = schedulePrefix + "sc."
	scheduleBuffer = schedulePrefix + "sb."
	scheduleFire   = schedulePrefix + "sf."
	// ScheduleFires is the filter of every schedule's fires.
	ScheduleFires = scheduleFire + "*"
	// ScheduleArms is the filter of the schedules' pending fires.
	ScheduleArms = scheduleArm + "*"
	// ScheduleBuffers is the filter of the schedules' buffered re-checks.
	ScheduleBuffers = scheduleBuffer + "*"
)

// ScheduleArmSubject is where schedule name's next fire waits.
func ScheduleArmSubject(name string) string { return scheduleArm + name }

// ScheduleBufferSubject is where schedule name's buffered re-check waits.
func ScheduleBufferSubject(name string) string { return scheduleBuffer + name }

// ScheduleFireSubject is where schedule name fires.
func ScheduleFireSubject(name string) string { return scheduleFire + name }

// ScheduleOfFire returns the schedule of a fire subject.
func ScheduleOfFire(subject string) (string, bool) {
	if len(subject) <= len(scheduleFire) || subject[:len(scheduleFire)] != scheduleFire {
		return "", false
	}
	name := subject[len(scheduleFire):]
	return name, ValidToken(name)
}
