package ui

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/weft-dev/weft/internal/schedule"
	"github.com/weft-dev/weft/pkg/client"
)

// The schedules page: every schedule with its spec, its next fire times,
// its latest fires (each with its run's status) and whether it is paused
// and why; actions pause, unpause and trigger it. Reads need what Weft's
// ui and client roles hold (the schedules bucket by direct gets, the
// read model); the actions write the schedules bucket (a definition, a
// request), which only the trigger role (and the admin) may: a server
// connected as another role gets no answer from NATS, and says so.

// scheduleFires is how many of its latest fires a schedule shows.
const scheduleFires = 10

type schedulesView struct {
	Schedules []scheduleView `json:"schedules"`
}

type scheduleView struct {
	Name      string         `json:"name"`
	Graph     string         `json:"graph"`
	Spec      string         `json:"spec"`
	Overlap   string         `json:"overlap"`
	Note      string         `json:"note,omitempty"`
	Paused    bool           `json:"paused"`
	PauseNote string         `json:"pauseNote,omitempty"`
	Next      []time.Time    `json:"next"`
	Fires     []fireView     `json:"fires"`
	Skipped   map[string]int `json:"skipped,omitempty"`
	Running   []string       `json:"running"`
	CreatedAt time.Time      `json:"createdAt"`
	UpdatedAt time.Time      `json:"updatedAt,omitzero"`
}

type fireView struct {
	Nominal time.Time `json:"nominal"`
	Outcome string    `json:"outcome"`
	RunID   string    `json:"runId,omitempty"`
	Status  string    `json:"status,omitempty"`
	Reason  string    `json:"reason,omitempty"`
	At      time.Time `json:"at"`
}

// spec says when a schedule fires: "cron 0 2 * * * (Europe/Paris)",
// "every 1h0m0s".
func spec(d *client.Schedule) string {
	if d.Cron != "" {
		tz := d.TimeZone
		if tz == "" {
			tz = "UTC"
		}
		return "cron " + d.Cron + " (" + tz + ")"
	}
	return "every " + time.Duration(d.Every).String()
}

// describe is a schedule's view: its definition, next fires and latest
// fires with their runs' statuses.
func (s *server) describe(ctx context.Context, name string) (*scheduleView, error) {
	desc, err := s.cl.DescribeSchedule(ctx, name)
	if err != nil {
		return nil, err
	}
	d := desc.Schedule
	v := &scheduleView{
		Name: d.Name, Graph: d.GraphName, Spec: spec(d), Overlap: string(d.Overlap), Note: d.Note,
		Paused: d.Paused, PauseNote: d.PauseNote, Next: desc.Next, Skipped: desc.State.Skipped,
		Running: desc.State.Running, CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt,
		Fires: []fireView{},
	}
	if v.Overlap == "" {
		v.Overlap = string(schedule.OverlapSkip)
	}
	if v.Next == nil {
		v.Next = []time.Time{}
	}
	if v.Running == nil {
		v.Running = []string{}
	}
	status := map[string]string{}
	for _, r := range desc.Runs {
		status[r.RunID] = r.Status
	}
	fires := desc.State.Fires
	for i := len(fires) - 1; i >= 0 && len(v.Fires) < scheduleFires; i-- {
		f := fires[i]
		v.Fires = append(v.Fires, fireView{Nominal: f.Nominal, Outcome: f.Outcome, RunID: f.RunID, Status: status[f.RunID], Reason: f.Reason, At: f.At})
	}
	return v, nil
}

// listSchedules answers GET /api/schedules: every schedule, described.
// A schedule that cannot be described (deleted meanwhile) is left out;
// another failure is the answer's.
func (s *server) listSchedules(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := readCtx(r)
	defer cancel()
	defs, err := s.cl.ListSchedules(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := schedulesView{Schedules: []scheduleView{}}
	for _, d := range defs {
		v, err := s.describe(ctx, d.Name)
		switch {
		case errors.Is(err, client.ErrScheduleNotFound):
			continue
		case err != nil:
			s.fail(w, r, err)
			return
		}
		out.Schedules = append(out.Schedules, *v)
	}
	writeJSON(w, http.StatusOK, out)
}

// getSchedule answers GET /api/schedules/{name}.
func (s *server) getSchedule(w http.ResponseWriter, r *http.Request) {
	name, err := scheduleName(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx, cancel := readCtx(r)
	defer cancel()
	v, err := s.describe(ctx, name)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

type pauseRequest struct {
	Note string `json:"note"`
}

// maxNote bounds a pause's note.
const maxNote = 1024

// pauseSchedule answers POST /api/schedules/{name}/pause and
// /unpause: {"note": "why"} (required to pause).
func (s *server) pauseSchedule(paused bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name, err := scheduleName(r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		var req pauseRequest
		if err := decodeBody(r, &req, !paused); err != nil {
			s.fail(w, r, err)
			return
		}
		switch {
		case paused && req.Note == "":
			s.fail(w, r, badParam("note", "say why the schedule is paused (shown on the page and by 'weft schedule describe')"))
			return
		case len(req.Note) > maxNote:
			s.fail(w, r, badParam("note", "at most %d bytes", maxNote))
			return
		}
		ctx, cancel := readCtx(r)
		defer cancel()
		if paused {
			err = s.cl.PauseSchedule(ctx, name, req.Note)
		} else {
			err = s.cl.UnpauseSchedule(ctx, name, req.Note)
		}
		if err != nil {
			s.fail(w, r, scheduleActionError(err))
			return
		}
		v, err := s.describe(ctx, name)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, v)
	}
}

// triggerSchedule answers POST /api/schedules/{name}/trigger: one run
// now, whatever the overlap policy; the answer is its id.
func (s *server) triggerSchedule(w http.ResponseWriter, r *http.Request) {
	name, err := scheduleName(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := decodeBody(r, &struct{}{}, true); err != nil {
		s.fail(w, r, err)
		return
	}
	ctx, cancel := readCtx(r)
	defer cancel()
	run, err := s.cl.TriggerSchedule(ctx, name)
	if err != nil {
		s.fail(w, r, scheduleActionError(err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"runId": run})
}

// scheduleActionError explains an action NATS did not answer: the
// server's user may not write the schedules bucket.
func scheduleActionError(err error) error {
	if errors.Is(err, client.ErrScheduleNotFound) || !unreachable(err) {
		return err
	}
	return &apiError{Status: http.StatusServiceUnavailable, Message: "no answer from NATS: " + err.Error() + " (changing or triggering a schedule needs the trigger role's rights: a UI connected as Weft's ui or client role may read schedules, not change them)"}
}

// scheduleName reads the {name} of a schedule's path.
func scheduleName(r *http.Request) (string, error) {
	name := r.PathValue("name")
	if !schedule.ValidName(name) {
		return "", badParam("name", "%q: not a schedule's name (letters, digits, '-' and '_', at most 64)", name)
	}
	return name, nil
}
