package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/readmodel"
	"github.com/weft-dev/weft/internal/schedule"
	"github.com/weft-dev/weft/pkg/graph"
)

// Schedules start runs of a graph at fire times: a cron spec in a time
// zone, or an interval. Their definitions are stored in the KV bucket
// "weft-schedules"; the coordinators fire them (durably, with JetStream
// message schedules) and start exactly one run per nominal fire time. A
// schedule's runs carry it as the search attribute "schedule" (List with
// WithSchedule) and their nominal fire time in their start
// (events.RunStartedData.Trigger).

// Schedule is a schedule's definition.
type Schedule = schedule.Definition

// ScheduleState is what the coordinators recorded of a schedule's fires.
type ScheduleState = schedule.State

// ScheduleFire is one fire time handled.
type ScheduleFire = schedule.Fire

// Overlap is what a fire does while the schedule's earlier runs run.
type Overlap = schedule.Overlap

// The overlap policies.
const (
	OverlapSkip        = schedule.OverlapSkip
	OverlapBufferOne   = schedule.OverlapBufferOne
	OverlapAllowAll    = schedule.OverlapAllowAll
	OverlapCancelOther = schedule.OverlapCancelOther
)

// Errors of schedules.
var (
	ErrScheduleNotFound = schedule.ErrNotFound
	ErrScheduleExists   = schedule.ErrExists
)

// ScheduleOptions are a schedule's settings: Cron (with TimeZone) or
// Every, and the rest optional.
type ScheduleOptions struct {
	Cron     string
	TimeZone string
	Every    time.Duration
	// Input is each run's input: a JSON object (any value that encodes
	// to one).
	Input         any
	Overlap       Overlap
	Jitter        time.Duration
	CatchupWindow time.Duration
	Note          string
}

// WithSchedule lists the runs of a schedule.
func WithSchedule(name string) ListOption { return WithAttr("schedule", name) }

// WithChain lists the links of a chain of continuations (continue-as-new):
// the runs whose chain id is chain, the id of its first run. A chain's
// first run is listed once it has continued.
func WithChain(chain string) ListOption { return WithAttr(readmodel.AttrChain, chain) }

// WithTrigger lists the runs of an event trigger (a webhook's trigger
// included).
func WithTrigger(name string) ListOption { return WithAttr("trigger", name) }

// WithWebhook lists the runs of a webhook of 'weft serve' (through the
// trigger whose definition names it).
func WithWebhook(name string) ListOption { return WithAttr("webhook", name) }

// schedules opens the schedules bucket once (each read of it is bounded
// and a lost answer asked again: internal/schedule, readTry).
func (c *Client) schedules(ctx context.Context) (*schedule.Store, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sched != nil {
		return c.sched, nil
	}
	ss, err := schedule.Open(ctx, eventlog.JetStream(c.store))
	if err != nil {
		return nil, err
	}
	c.sched = ss
	return ss, nil
}

// statusTry bounds the read of one run's status in DescribeSchedule: a
// status not read in time is left blank, and the description does not
// wait on it.
const statusTry = 5 * time.Second

// CreateSchedule creates schedule name over graph g. Nothing is created
// when a setting is wrong; the error names each.
func (c *Client) CreateSchedule(ctx context.Context, name string, g *graph.Graph, o ScheduleOptions) (*Schedule, error) {
	if g == nil {
		return nil, errors.New("creating a schedule: -graph: required")
	}
	input, err := jsonObject("input", o.Input)
	if err != nil {
		return nil, fmt.Errorf("creating schedule %s: %w", name, err)
	}
	now := time.Now().UTC()
	d := &Schedule{
		Name: name, Cron: o.Cron, TimeZone: o.TimeZone, Every: schedule.Duration(o.Every), Input: input,
		Overlap: o.Overlap, Jitter: schedule.Duration(o.Jitter), CatchupWindow: schedule.Duration(o.CatchupWindow),
		Note: o.Note, CreatedAt: now, UpdatedAt: now,
	}
	d.SetGraph(g)
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("creating schedule %s: %w", name, err)
	}
	ss, err := c.schedules(ctx)
	if err != nil {
		return nil, err
	}
	if err := ss.Create(ctx, d); err != nil {
		return nil, err
	}
	return d, nil
}

// ScheduleUpdate changes the settings that are set (non-nil); setting
// Cron drops Every and the other way round.
type ScheduleUpdate struct {
	Graph         *graph.Graph
	Cron          *string
	TimeZone      *string
	Every         *time.Duration
	Input         any
	Overlap       *Overlap
	Jitter        *time.Duration
	CatchupWindow *time.Duration
	Note          *string
}

// UpdateSchedule changes a schedule. Fire times before the change are
// not caught up under the new settings.
func (c *Client) UpdateSchedule(ctx context.Context, name string, u ScheduleUpdate) (*Schedule, error) {
	ss, err := c.schedules(ctx)
	if err != nil {
		return nil, err
	}
	input, err := jsonObject("input", u.Input)
	if err != nil {
		return nil, fmt.Errorf("updating schedule %s: %w", name, err)
	}
	return ss.Update(ctx, name, func(d *Schedule) error {
		if u.Graph != nil {
			d.SetGraph(u.Graph)
		}
		if u.Cron != nil {
			d.Cron, d.Every = *u.Cron, 0
		}
		if u.Every != nil {
			d.Every, d.Cron, d.TimeZone = schedule.Duration(*u.Every), "", ""
		}
		if u.TimeZone != nil {
			d.TimeZone = *u.TimeZone
		}
		if input != nil {
			d.Input = input
		}
		if u.Overlap != nil {
			d.Overlap = *u.Overlap
		}
		if u.Jitter != nil {
			d.Jitter = schedule.Duration(*u.Jitter)
		}
		if u.CatchupWindow != nil {
			d.CatchupWindow = schedule.Duration(*u.CatchupWindow)
		}
		if u.Note != nil {
			d.Note = *u.Note
		}
		d.UpdatedAt = time.Now().UTC()
		return nil
	})
}

// PauseSchedule pauses a schedule: its fires are recorded as skipped,
// with note as the reason.
func (c *Client) PauseSchedule(ctx context.Context, name, note string) error {
	return c.setPaused(ctx, name, true, note)
}

// UnpauseSchedule resumes a schedule with its next fire time.
func (c *Client) UnpauseSchedule(ctx context.Context, name, note string) error {
	return c.setPaused(ctx, name, false, note)
}

func (c *Client) setPaused(ctx context.Context, name string, paused bool, note string) error {
	ss, err := c.schedules(ctx)
	if err != nil {
		return err
	}
	_, err = ss.Update(ctx, name, func(d *Schedule) error {
		d.Paused, d.PauseNote = paused, note
		if !paused {
			// Fires while paused are not caught up.
			d.UpdatedAt = time.Now().UTC()
		}
		return nil
	})
	return err
}

// DeleteSchedule deletes a schedule; its runs stay.
func (c *Client) DeleteSchedule(ctx context.Context, name string) error {
	ss, err := c.schedules(ctx)
	if err != nil {
		return err
	}
	return ss.Delete(ctx, name)
}

// ListSchedules lists the schedules by name.
func (c *Client) ListSchedules(ctx context.Context) ([]*Schedule, error) {
	ss, err := c.schedules(ctx)
	if err != nil {
		return nil, err
	}
	return ss.List(ctx)
}

// ScheduleDescription is a schedule with its next fire times, its state
// and the statuses of its latest runs.
type ScheduleDescription struct {
	Schedule *Schedule     `json:"schedule"`
	Next     []time.Time   `json:"next"`
	State    ScheduleState `json:"state"`
	// Runs are the latest fires that started runs, newest first, with
	// the runs' statuses from the read model ("" when not indexed yet).
	Runs []ScheduleRun `json:"runs"`
}

// ScheduleRun is a run a schedule started.
type ScheduleRun struct {
	ScheduleFire
	Status string `json:"status,omitempty"`
}

// DescribeSchedule returns a schedule with its next five fire times and
// its latest runs (at most 10).
func (c *Client) DescribeSchedule(ctx context.Context, name string) (*ScheduleDescription, error) {
	ss, err := c.schedules(ctx)
	if err != nil {
		return nil, err
	}
	d, _, err := ss.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	st, _, err := ss.State(ctx, name)
	if err != nil {
		return nil, err
	}
	out := &ScheduleDescription{Schedule: d, State: *st}
	if tm, err := d.Timing(); err == nil {
		after := time.Now()
		if st.Last.After(after) {
			after = st.Last
		}
		out.Next = tm.Between(after, after.AddDate(10, 0, 0), 5)
	}
	for i := len(st.Fires) - 1; i >= 0 && len(out.Runs) < 10; i-- {
		f := st.Fires[i]
		if f.RunID == "" {
			continue
		}
		r := ScheduleRun{ScheduleFire: f}
		sctx, cancel := context.WithTimeout(ctx, statusTry)
		if sum, err := c.Summary(sctx, f.RunID); err == nil {
			r.Status = string(sum.Status)
		}
		cancel()
		out.Runs = append(out.Runs, r)
	}
	return out, nil
}

// TriggerSchedule starts one run of the schedule now (whatever its
// overlap policy) and returns its id; it waits for a coordinator until
// ctx ends.
func (c *Client) TriggerSchedule(ctx context.Context, name string) (string, error) {
	runs, err := c.ask(ctx, name, schedule.Request{Kind: "trigger", At: time.Now().UTC()})
	if err != nil {
		return "", err
	}
	if len(runs) != 1 {
		return "", fmt.Errorf("triggering schedule %s: %d runs started", name, len(runs))
	}
	return runs[0], nil
}

// BackfillSchedule starts the runs of the schedule's fire times in
// [from, to], at most schedule.MaxBackfill: the same runs the fires would
// have started, so a fire time that already has its run starts nothing.
func (c *Client) BackfillSchedule(ctx context.Context, name string, from, to time.Time) ([]string, error) {
	if !to.After(from) {
		return nil, fmt.Errorf("backfilling schedule %s: -to %s is not after -from %s", name, to.Format(time.RFC3339), from.Format(time.RFC3339))
	}
	return c.ask(ctx, name, schedule.Request{Kind: "backfill", From: from.UTC(), To: to.UTC(), At: time.Now().UTC()})
}

func (c *Client) ask(ctx context.Context, name string, r schedule.Request) ([]string, error) {
	ss, err := c.schedules(ctx)
	if err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	id, err := ss.Ask(ctx, name, r)
	if err != nil {
		return nil, err
	}
	res, err := ss.Answer(ctx, name, id)
	if err != nil {
		return nil, fmt.Errorf("%s of schedule %s: %w", r.Kind, name, err)
	}
	if res.Error != "" {
		return res.Runs, fmt.Errorf("%s of schedule %s: %s", r.Kind, name, res.Error)
	}
	return res.Runs, nil
}
