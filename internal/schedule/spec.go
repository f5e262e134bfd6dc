package schedule

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/graph"
)

// Overlap is what a fire does while runs of the schedule it started
// before are still running.
type Overlap string

// The overlap policies (Temporal's, by the same names).
const (
	// OverlapSkip records the fire as skipped (the default).
	OverlapSkip Overlap = "skip"
	// OverlapBufferOne keeps one fire, started when the running runs
	// end; further fires meanwhile are skipped.
	OverlapBufferOne Overlap = "buffer-one"
	// OverlapAllowAll starts the run anyway.
	OverlapAllowAll Overlap = "allow-all"
	// OverlapCancelOther asks the running runs to cancel and starts.
	OverlapCancelOther Overlap = "cancel-other"
)

// Overlaps lists the policies.
var Overlaps = []Overlap{OverlapSkip, OverlapBufferOne, OverlapAllowAll, OverlapCancelOther}

// DefaultCatchupWindow is how late a fire may still start its run when a
// definition sets no window: fires missed for longer (the engine was
// down) are recorded as skipped.
const DefaultCatchupWindow = 10 * time.Minute

// MinEvery is the shortest -every.
const MinEvery = time.Second

// Definition is a schedule as its owner wrote it. It is stored, as JSON,
// under "def.<name>" in Bucket.
type Definition struct {
	Name string `json:"name"`
	// GraphName, GraphDigest and Graph are the graph its runs run, as
	// validated when the schedule was written (canonical JSON).
	GraphName   string          `json:"graphName"`
	GraphDigest string          `json:"graphDigest"`
	Graph       json.RawMessage `json:"graph"`
	// Cron is a cron spec (5 fields, or 6 with seconds first, or a
	// descriptor: @daily, @hourly…) read in TimeZone (default UTC); Every
	// an interval, counted from CreatedAt. Exactly one is set.
	Cron     string   `json:"cron,omitempty"`
	TimeZone string   `json:"timeZone,omitempty"`
	Every    Duration `json:"every,omitempty"`
	// Input is the JSON object each run starts with.
	Input         json.RawMessage `json:"input,omitempty"`
	Overlap       Overlap         `json:"overlap,omitempty"`
	Jitter        Duration        `json:"jitter,omitempty"`
	CatchupWindow Duration        `json:"catchupWindow,omitempty"`
	Note          string          `json:"note,omitempty"`
	// Paused schedules record their fires as skipped; PauseNote says why.
	Paused    bool      `json:"paused,omitempty"`
	PauseNote string    `json:"pauseNote,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	// UpdatedAt is when the spec last changed: fires before it are not
	// caught up under the new spec.
	UpdatedAt time.Time `json:"updatedAt"`
}

// Duration is a time.Duration written as Go writes it ("90s").
type Duration time.Duration

// MarshalJSON writes "1m30s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads "1m30s".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	*d = Duration(v)
	return err
}

// ValidName reports whether s can name a schedule or trigger: one
// subject token, at most 64 characters (run ids are derived from it).
func ValidName(s string) bool { return eventlog.ValidToken(s) && len(s) <= 64 }

// parser reads 5-field specs, 6-field ones with seconds first, and the
// descriptors; the zone comes from TimeZone, never from a CRON_TZ prefix.
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Timing is what a definition's fire times are computed from.
type Timing struct {
	spec   cron.Schedule // read on a wall clock without daylight saving
	loc    *time.Location
	every  time.Duration
	anchor time.Time
}

// ParseTiming checks and reads the cron spec (with its zone) or the
// interval: the errors name the flag.
func ParseTiming(cronSpec, zone string, every time.Duration, anchor time.Time) (Timing, error) {
	switch {
	case cronSpec != "" && every != 0:
		return Timing{}, errors.New("-cron and -every: give one, not both")
	case cronSpec == "" && every == 0:
		return Timing{}, errors.New("-cron or -every: give one")
	case every != 0:
		if zone != "" {
			return Timing{}, errors.New("-tz: a time zone goes with -cron, not -every")
		}
		if every < MinEvery {
			return Timing{}, fmt.Errorf("-every %s: at least %s", every, MinEvery)
		}
		return Timing{every: every, anchor: anchor.UTC()}, nil
	}
	if strings.Contains(cronSpec, "TZ=") {
		return Timing{}, fmt.Errorf("-cron %q: give the time zone with -tz, not in the spec", cronSpec)
	}
	if strings.HasPrefix(strings.TrimSpace(cronSpec), "@every") {
		return Timing{}, fmt.Errorf("-cron %q: use -every for an interval", cronSpec)
	}
	loc := time.UTC
	if zone != "" {
		l, err := time.LoadLocation(zone)
		if err != nil || zone == "Local" {
			return Timing{}, fmt.Errorf("-tz %q: unknown time zone (want an IANA name such as Europe/Paris)", zone)
		}
		loc = l
	}
	s, err := parser.Parse(cronSpec)
	if err != nil {
		return Timing{}, fmt.Errorf("-cron %q: %v", cronSpec, err)
	}
	if ss, ok := s.(*cron.SpecSchedule); ok {
		ss.Location = time.UTC
	}
	return Timing{spec: s, loc: loc}, nil
}

// Next is the first nominal fire time strictly after t (zero: none within
// five years, a spec such as Feb 30).
func (tm Timing) Next(t time.Time) time.Time {
	if tm.every > 0 {
		if t.Before(tm.anchor) {
			return tm.anchor.Add(tm.every)
		}
		n := t.Sub(tm.anchor)/tm.every + 1
		return tm.anchor.Add(n * tm.every)
	}
	// The spec picks wall-clock times in the zone, each once: w is the
	// wall clock of t, written as a UTC time, and each wall-clock time
	// the spec picks after it is placed in the zone. Across daylight
	// saving, a wall-clock time that happens twice (the clock falls back)
	// fires once, at its first occurrence, and one that never happens
	// (the clock springs forward) fires at the instant time.Date gives
	// it, on the offset before the change (02:30 in a skipped hour
	// fires at 03:30 summer time). An instant two wall-clock times map
	// to fires once. So "30 2 * * *" fires once every day, and an hourly
	// spec fires once per wall-clock hour (23 or 25 real hours a day).
	w := wall(t.In(tm.loc))
	for range 1000 {
		n := tm.spec.Next(w)
		if n.IsZero() {
			return n
		}
		at := time.Date(n.Year(), n.Month(), n.Day(), n.Hour(), n.Minute(), n.Second(), 0, tm.loc)
		for _, d := range []time.Duration{time.Hour, 30 * time.Minute} {
			// The first of two occurrences, whichever time.Date chose.
			if e := at.Add(-d); wall(e.In(tm.loc)).Equal(n) && e.After(t) {
				at = e
				break
			}
		}
		if at.After(t) {
			return at.UTC()
		}
		w = n
	}
	return time.Time{}
}

// wall is t's wall clock as a UTC time.
func wall(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}

// Between lists the nominal fire times in (after, through], at most max.
func (tm Timing) Between(after, through time.Time, max int) []time.Time {
	var out []time.Time
	for t := tm.Next(after); !t.IsZero() && !t.After(through) && len(out) < max; t = tm.Next(t) {
		out = append(out, t)
	}
	return out
}

// Timing reads the definition's timing.
func (d *Definition) Timing() (Timing, error) {
	return ParseTiming(d.Cron, d.TimeZone, time.Duration(d.Every), d.CreatedAt)
}

// CatchUp is the definition's catch-up window.
func (d *Definition) CatchUp() time.Duration {
	if d.CatchupWindow > 0 {
		return time.Duration(d.CatchupWindow)
	}
	return DefaultCatchupWindow
}

// Policy is the definition's overlap policy.
func (d *Definition) Policy() Overlap {
	if d.Overlap == "" {
		return OverlapSkip
	}
	return d.Overlap
}

// Validate reports every problem with the definition, each naming its
// flag.
func (d *Definition) Validate() error {
	var errs []error
	if !ValidName(d.Name) {
		errs = append(errs, fmt.Errorf("name %q: letters, digits, '-' and '_', at most 64, starting with a letter or digit", d.Name))
	}
	if len(d.Graph) == 0 || d.GraphName == "" || d.GraphDigest == "" {
		errs = append(errs, errors.New("-graph: required"))
	}
	if _, err := d.Timing(); err != nil {
		errs = append(errs, err)
	}
	if len(d.Input) > 0 {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(d.Input, &m); err != nil || m == nil {
			errs = append(errs, fmt.Errorf("-input: want a JSON object, got %.40s", d.Input))
		}
	}
	if d.Overlap != "" && !validOverlap(d.Overlap) {
		errs = append(errs, fmt.Errorf("-overlap %q: want skip, buffer-one, allow-all or cancel-other", d.Overlap))
	}
	if d.Jitter < 0 {
		errs = append(errs, fmt.Errorf("-jitter %s: must not be negative", time.Duration(d.Jitter)))
	}
	if d.CatchupWindow < 0 {
		errs = append(errs, fmt.Errorf("-catchup-window %s: must not be negative", time.Duration(d.CatchupWindow)))
	}
	if len(d.Note) > 1024 || len(d.PauseNote) > 1024 {
		errs = append(errs, errors.New("-note: at most 1024 bytes"))
	}
	return errors.Join(errs...)
}

func validOverlap(o Overlap) bool {
	for _, v := range Overlaps {
		if v == o {
			return true
		}
	}
	return false
}

// SetGraph sets the graph the definition's runs run.
func (d *Definition) SetGraph(g *graph.Graph) {
	d.GraphName, d.GraphDigest, d.Graph = g.Definition().Name, g.Digest(), json.RawMessage(g.Canonical())
}
