package security

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

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

// TestGapScheduleAttributionClaimed (gap 13, open): in the default
// namespace a client writes its runs' starts itself, so a start of its
// own may name a schedule (RunStartedData.Trigger): the run is accepted,
// runs, and is listed among the schedule's runs. That is the open part.
// The limit: its id is the client's, never a schedule's (a fire's run id
// carries a part derived with the schedule's key, which the client cannot
// read), so it cannot take a real fire's place: when schedule "nightly"
// is created and fires, the fire starts its own run, under its keyed id,
// and that run completes.
func TestGapScheduleAttributionClaimed(t *testing.T) {
	s := startServer(t)
	s.setup(t)
	dir := t.TempDir()
	startProcess(t, "coordinator", filepath.Join(dir, "coordinator.log"), s.roleEnv(userCoord), "-nats", s.url)
	startProcess(t, "nodeworker", filepath.Join(dir, "worker.log"), s.roleEnv(userWorker), "-nats", s.url, "-queues", queueA, "-name", "w")
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	g := mustParse(t, nightlyGraph)

	// (1) The claim: the client's own run, whose start names schedule
	// "nightly", before any such schedule exists.
	clStore := openStore(t, s.connect(t, userClient))
	cl := client.New(clStore)
	claim := events.NewRunID()
	e, err := events.New(claim, claim, time.Time{}, &events.RunStartedData{
		GraphName: g.Definition().Name, GraphDigest: g.Digest(), Graph: g.Canonical(),
		StartedBy: "client", Nonce: events.NewNonce(),
		Trigger: &events.TriggerRef{Kind: events.TriggerSchedule, Name: "nightly", FireTime: time.Now().UTC()},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := clStore.Append(ctx, claim, 0, e); err != nil {
		t.Fatalf("the client's claimed start was refused (gap 13 closed? update SECURITY.md): %v", err)
	}
	st, err := cl.Wait(ctx, claim)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != projection.RunCompleted || st.Trigger == nil || st.Trigger.Name != "nightly" {
		t.Fatalf("the claimed run: status %s, trigger %+v", st.Status, st.Trigger)
	}
	listed := func(run string) bool {
		runs, err := cl.List(ctx, client.WithSchedule("nightly"))
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(runs, func(r client.RunSummary) bool { return r.RunID == run })
	}
	for !listed(claim) {
		if ctx.Err() != nil {
			t.Fatalf("the claimed run %s is not listed under schedule nightly (gap 13 closed? update SECURITY.md)", claim)
		}
		// Polls: the read model's list notifies nobody.
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("open: the client's run %s, its start naming schedule nightly, ran and is listed among the schedule's runs", claim)

	// (2) The limit: the real schedule fires a run of its own.
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
			// Polls: a schedule's fires are a KV value re-read here.
			time.Sleep(100 * time.Millisecond)
		}
	}
	if fire.RunID == claim {
		t.Fatalf("the fire's run is the client's %s", claim)
	}
	// Its id is the one only the schedule's key derives (read as the admin).
	admin := s.connect(t, userAdmin)
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
	for !listed(fire.RunID) {
		if ctx.Err() != nil {
			t.Fatalf("the fired run %s is not listed under schedule nightly", fire.RunID)
		}
		// Polls: the read model's list notifies nobody.
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("limit: the fire at %s ran as %s (keyed id, completed), not as the client's %s", fire.Nominal.Format(time.RFC3339), fire.RunID, claim)
}
