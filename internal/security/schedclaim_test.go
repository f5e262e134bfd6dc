package security

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/schedule"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// nightlyGraph: one node, on the queue of the one worker the test runs.
const nightlyGraph = `
name: nightly
nodes:
  - {id: a, type: echo}
edges:
  - {from: START, to: a}
  - {from: a, to: END}
`

// TestScheduleAttributionRefused (gap 13, closed): the runs of schedules
// and triggers are started by the coordinators, with a decision of the
// run on its d.started, which NATS lets no other role write; a start
// naming a schedule anywhere else is refused by the engine. With the
// client role only, the attacker tries three ways to have a run of its
// own listed among schedule nightly's runs ('weft list -schedule
// nightly'):
//
//   - through pkg/events (Store.Append): refused before anything is
//     written (events.TriggerClaimError);
//   - raw, on the run's d.started, where the engine's starts stand: the
//     server refuses the publish (permissions violation), nothing stored;
//   - raw, on the run's c.started, which the client may write: stored,
//     and refused by every reader (the decoder's TriggerClaimError): the
//     run does not start, no coordinator decides anything for it, and it
//     is never listed under the schedule.
//
// The schedule's real fire then runs under its keyed id, on d.started,
// completes, and is listed.
func TestScheduleAttributionRefused(t *testing.T) {
	s := startServer(t)
	s.setup(t)
	dir := t.TempDir()
	startProcess(t, "coordinator", filepath.Join(dir, "coordinator.log"), s.roleEnv(userCoord), "-nats", s.url)
	startProcess(t, "nodeworker", filepath.Join(dir, "worker.log"), s.roleEnv(userWorker), "-nats", s.url, "-queues", queueA, "-name", "w")
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	g := mustParse(t, nightlyGraph)
	admin := s.connect(t, userAdmin)
	attacker := s.connect(t, userClient)
	clStore := openStore(t, attacker)
	cl := client.New(clStore)

	claimData := &events.RunStartedData{
		GraphName: g.Definition().Name, GraphDigest: g.Digest(), Graph: g.Canonical(),
		StartedBy: "client", Nonce: events.NewNonce(),
		Trigger: &events.TriggerRef{Kind: events.TriggerSchedule, Name: "nightly", FireTime: time.Now().UTC()},
	}
	// (1) Through the store: refused, nothing written.
	viaStore := events.NewRunID()
	e, err := events.New(viaStore, viaStore, time.Time{}, claimData)
	if err != nil {
		t.Fatal(err)
	}
	var tc *events.TriggerClaimError
	if _, err := clStore.Append(ctx, viaStore, 0, e); !errors.As(err, &tc) {
		t.Fatalf("the client's start naming schedule nightly, appended: %v, want a TriggerClaimError", err)
	}
	if _, err := clStore.LastSeq(ctx, viaStore); !errors.Is(err, events.ErrRunNotFound) {
		t.Fatalf("the refused start of %s was written: %v", viaStore, err)
	}

	// The raw claim: a plain start's message, its data replaced.
	claim := events.NewRunID()
	rawClaim := func(decision bool) {
		t.Helper()
		plain := *claimData
		plain.Trigger = nil
		e, err := events.New(claim, claim, time.Time{}, &plain)
		if err != nil {
			t.Fatal(err)
		}
		m, err := eventlog.Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		if m.Data, err = json.Marshal(claimData); err != nil {
			t.Fatal(err)
		}
		if decision {
			m.Subject = eventlog.ChildStartedSubject(claim)
			attacker.refusedPublish(t, admin, m)
			return
		}
		if _, err := attacker.js.PublishMsg(ctx, m); err != nil {
			t.Fatalf("the client's raw start on %s: %v (the client may write there)", m.Subject, err)
		}
	}
	// (2) On the engine's subject: the server refuses it.
	rawClaim(true)
	// (3) On the client's own subject: stored, and believed by no one.
	rawClaim(false)
	if got := lastSeqOn(t, admin, eventlog.StartedSubject(claim)); got == 0 {
		t.Fatalf("the raw claim on %s was not stored", eventlog.StartedSubject(claim))
	}
	evs, err := cl.History(ctx, claim)
	if err != nil || len(evs) != 1 || !errors.As(evs[0].Refused, &tc) || tc.Trigger.Name != "nightly" {
		t.Fatalf("the claimed run's history, as the client reads it: %v %+v, want its one start refused (TriggerClaimError)", err, evs)
	}
	if st := projection.Fold(evs); st.Trigger != nil || st.Status != projection.RunPending {
		t.Fatalf("the claimed run folds to status %s, trigger %+v: want it never started", st.Status, st.Trigger)
	}

	// The real schedule fires a run of its own.
	mgr := client.New(openStore(t, s.connect(t, userTrigger)))
	if _, err := mgr.CreateSchedule(ctx, "nightly", g, client.ScheduleOptions{Every: time.Second}); err != nil {
		t.Fatalf("the trigger role creates schedule nightly: %v", err)
	}
	var fire schedule.Fire
	for fire.RunID == "" {
		d, err := mgr.DescribeSchedule(ctx, "nightly")
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range d.State.Fires {
			if f.Outcome == schedule.Started && f.RunID != "" {
				fire = f
				break
			}
		}
		if fire.RunID == "" {
			if ctx.Err() != nil {
				t.Fatalf("schedule nightly did not fire: %+v", d.State)
			}
			time.Sleep(100 * time.Millisecond) // polling the schedule's state
		}
	}
	// Its id is the one only the schedule's key derives (read as the admin).
	keys, err := admin.js.KeyValue(ctx, schedule.KeysBucket)
	if err != nil {
		t.Fatal(err)
	}
	k, err := keys.Get(ctx, "schedule.nightly")
	if err != nil {
		t.Fatal(err)
	}
	want := schedule.FireRunID(k.Value(), "nightly", fire.Nominal)
	if fire.RunID != want || !strings.HasSuffix(fire.RunID, "-"+schedule.KeyedID(k.Value(), "fire", "nightly", fire.Nominal.UTC().Format(time.RFC3339Nano))) {
		t.Fatalf("the fired run %s: want %s, with the schedule's keyed part", fire.RunID, want)
	}
	fst, err := cl.Wait(ctx, fire.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if fst.Status != projection.RunCompleted || fst.Trigger == nil || fst.Trigger.Kind != events.TriggerSchedule || fst.Trigger.Name != "nightly" {
		t.Fatalf("the fired run %s: status %s, trigger %+v", fire.RunID, fst.Status, fst.Trigger)
	}
	if lastSeqOn(t, admin, eventlog.ChildStartedSubject(fire.RunID)) == 0 || lastSeqOn(t, admin, eventlog.StartedSubject(fire.RunID)) != 0 {
		t.Fatalf("the fired run %s's start is not (only) on its decision subject", fire.RunID)
	}
	listed := func(run string) bool {
		runs, err := cl.List(ctx, client.WithSchedule("nightly"))
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(runs, func(r client.RunSummary) bool { return r.RunID == run })
	}
	for !listed(fire.RunID) {
		if ctx.Err() != nil {
			t.Fatalf("the fired run %s is not listed under schedule nightly", fire.RunID)
		}
		time.Sleep(100 * time.Millisecond) // the read model follows the log
	}
	// The fire ran and is listed: the claim, written before it, was not
	// decided, and is not listed.
	if listed(claim) || listed(viaStore) {
		t.Fatalf("a client's claimed run is listed under schedule nightly")
	}
	for _, kind := range []string{"d.ready." + queueA, "d.completed", "d.failed"} {
		if seq := lastSeqOn(t, admin, sub(claim, kind)); seq != 0 {
			t.Fatalf("the coordinator decided for the claimed run %s: %s at %d", claim, kind, seq)
		}
	}
	t.Logf("refused: the client's run %s naming schedule nightly never started; the fire at %s ran as %s", claim, fire.Nominal.Format(time.RFC3339), fire.RunID)
}
