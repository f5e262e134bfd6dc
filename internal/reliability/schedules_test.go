package reliability

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/natsconn"
	"github.com/weft-dev/weft/internal/schedule"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
)

// TestScheduleFiresOnceThroughKills: an every-second schedule on a
// three-node cluster with two coordinator processes. One coordinator is
// SIGKILLed, then the other, across fire times; one comes back; then a
// NATS node is SIGKILLed and restarted during fires. Every nominal fire
// time from the first to the last has exactly one run (none lost, none
// started twice: the fires missed while no coordinator ran are caught up,
// inside the catch-up window), and every run completes exactly once.
func TestScheduleFiresOnceThroughKills(t *testing.T) {
	c := startCluster(t)
	st, admin := openStores(t, c, leaseTTL)
	cs := c.coordinators(t, 2, leaseTTL)
	c.worker(t, "worker-1", "-name", "w1")
	mgr := client.New(retryOpen(t, c.connect(t, natsconn.UserName(natsconn.RoleTrigger, "")), events.WithReplicas(3)))
	g, err := graph.Parse([]byte(chain), "chain.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if _, err := mgr.CreateSchedule(ctx, "tick", g, client.ScheduleOptions{Every: time.Second, Overlap: client.OverlapAllowAll, CatchupWindow: time.Minute}); err != nil {
		t.Fatal(err)
	}
	fires := func() []client.ScheduleFire {
		d, err := mgr.DescribeSchedule(ctx, "tick")
		if err != nil {
			t.Logf("describe: %v", err)
			return nil
		}
		return d.State.Fires
	}
	waitFires := func(n int) {
		t.Helper()
		for len(fires()) < n {
			if ctx.Err() != nil {
				t.Fatalf("fewer than %d fires: %+v", n, fires())
			}
			// Polls: a fire is a schedule's state in KV, re-read here.
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitFires(3)
	// SIGKILL one coordinator, then the other: no coordinator for a few
	// fire times.
	first := cs.procs[0]
	first.kill(t)
	cs.remove(first)
	// Keeps one coordinator down across a fire time: the fault's duration.
	time.Sleep(1500 * time.Millisecond)
	second := cs.procs[0]
	second.kill(t)
	cs.remove(second)
	before := len(fires())
	// Keeps every coordinator down across three fire times: the fault's duration.
	time.Sleep(3 * time.Second)
	cs.add(t)
	waitFires(before + 4)
	// A NATS node SIGKILLed during fires, and restarted.
	c.servers[2].kill(t)
	// Keeps the NATS node down across fires: the fault's duration.
	time.Sleep(2 * time.Second)
	c.servers[2] = c.start(t, "nats-3-again", "nats-server", "", c.args[2]...)
	n := len(fires())
	waitFires(n + 3)
	if err := mgr.DeleteSchedule(ctx, "tick"); err != nil {
		t.Fatal(err)
	}
	// Read the state as the admin (the schedule is deleted).
	got := lastFires(t, ctx, admin)
	var runs []string
	for i, f := range got {
		if f.Outcome != schedule.Started {
			t.Fatalf("fire %s: %s (%s), want started: %+v", f.Nominal, f.Outcome, f.Reason, got)
		}
		if i > 0 && f.Nominal.Sub(got[i-1].Nominal) != time.Second {
			t.Fatalf("fires %s and %s: a fire time lost or taken twice", got[i-1].Nominal, f.Nominal)
		}
		runs = append(runs, f.RunID)
	}
	// Exactly one start per fire, and no other run of the schedule.
	s, err := eventlog.JetStream(admin).Stream(ctx, admin.StreamName())
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(eventlog.KindFilter(events.RunStarted)))
	if err != nil {
		t.Fatal(err)
	}
	var started []string
	for subj, n := range info.State.Subjects {
		p, _ := eventlog.Parse(subj)
		if strings.HasPrefix(p.Run, "tick-") {
			if n != 1 {
				t.Errorf("run %s: %d starts", p.Run, n)
			}
			started = append(started, p.Run)
		}
	}
	slices.Sort(started)
	want := slices.Sorted(slices.Values(runs))
	if !slices.Equal(started, want) {
		t.Fatalf("runs started %d, fires %d:\n%v\n%v", len(started), len(want), started, want)
	}
	t.Logf("%d fires, one run each, through two coordinator kills and a NATS node restart", len(got))
	checkRuns(t, st, runs, 4, 120*time.Second)
	c.checkNoViolations(t)
}

// lastFires reads the deleted schedule's fires from the state the
// coordinators recorded until the delete: the state key's last value.
func lastFires(t *testing.T, ctx context.Context, admin events.Store) []schedule.Fire {
	t.Helper()
	ss, err := eventlog.JetStream(admin).Stream(ctx, "KV_"+schedule.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ss.GetLastMsgForSubject(ctx, "$KV."+schedule.Bucket+".st.tick")
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Data) == 0 {
		// The delete marker: the value before it.
		for seq := m.Sequence - 1; seq > 0; seq-- {
			prev, err := ss.GetMsg(ctx, seq)
			if err == nil && prev.Subject == m.Subject && len(prev.Data) > 0 {
				m = prev
				break
			}
		}
	}
	var st schedule.State
	if err := jsonUnmarshal(m.Data, &st); err != nil {
		t.Fatal(err)
	}
	return st.Fires
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
