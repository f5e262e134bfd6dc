package security

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/natsconn"
	"github.com/weft-dev/weft/internal/schedule"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/graph"
)

var userTrigger = natsconn.UserName(natsconn.RoleTrigger, "")

// TestSchedulesUnderTheRoles: the trigger role creates a schedule and
// asks for a run, the coordinator process fires it; a client and a worker
// cannot write a definition, a request or a fire, nor read the keys run
// ids are derived from; the trigger role cannot forge the state, start a
// run itself or read the keys.
func TestSchedulesUnderTheRoles(t *testing.T) {
	s := startServer(t)
	s.setup(t)
	startProcess(t, "coordinator", filepath.Join(t.TempDir(), "coordinator.log"), s.roleEnv(userCoord), "-nats", s.url)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	mgr := client.New(openStore(t, s.connect(t, userTrigger)))
	g, err := graph.Parse([]byte(chain), "chain.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mgr.CreateSchedule(ctx, "tick", g, client.ScheduleOptions{Every: time.Second, Overlap: client.OverlapAllowAll}); err != nil {
		t.Fatalf("the trigger role creates a schedule: %v", err)
	}
	run, err := mgr.TriggerSchedule(ctx, "tick")
	if err != nil {
		t.Fatalf("the trigger role triggers it: %v", err)
	}
	// The coordinator fires it, under its own role.
	for {
		d, err := mgr.DescribeSchedule(ctx, "tick")
		if err != nil {
			t.Fatal(err)
		}
		started := 0
		for _, f := range d.State.Fires {
			if f.Outcome == schedule.Started {
				started++
			}
		}
		if started >= 2 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the coordinator did not fire the schedule: %+v", d.State)
		}
		// Polls: a schedule's fires are a KV value re-read here.
		time.Sleep(100 * time.Millisecond)
	}
	admin := s.connect(t, userAdmin)
	// The engine's start, on the run's decision subject (gap 13).
	if seq := lastSeqOn(t, admin, eventlog.ChildStartedSubject(run)); seq == 0 {
		t.Fatalf("the triggered run %s has no start", run)
	}

	def, _ := json.Marshal(map[string]any{"name": "evil", "graphName": "chain", "graphDigest": "sha256:00", "graph": json.RawMessage(`{}`), "every": "1s"})
	for _, user := range []string{userClient, natsconn.UserName(natsconn.RoleWorker, queueA)} {
		c := s.connect(t, user)
		// A forged definition, a forged request, a forged fire.
		for _, subj := range []string{"$KV.weft-schedules.def.evil", "$KV.weft-schedules.act.tick.x", "$KV.weft-schedules.st.tick"} {
			if err := c.nc.Publish(subj, def); err != nil {
				t.Fatal(err)
			}
			c.violation(t, "Publish", subj)
		}
		for _, subj := range []string{eventlog.ScheduleFireSubject("tick"), eventlog.ScheduleArmSubject("tick")} {
			m := nats.NewMsg(subj)
			m.Header.Set("Nats-Schedule", "@at "+time.Now().Format(time.RFC3339))
			m.Header.Set("Nats-Schedule-Target", eventlog.ScheduleFireSubject("tick"))
			if err := c.nc.PublishMsg(m); err != nil {
				t.Fatal(err)
			}
			c.violation(t, "Publish", subj)
		}
		keyGet := "$JS.API.DIRECT.GET.KV_weft-start-keys.$KV.weft-start-keys.schedule.tick"
		if _, err := c.nc.Request(keyGet, nil, time.Second); err == nil {
			t.Fatalf("%s read the schedule's key", user)
		}
		c.violation(t, "Publish", keyGet)
	}
	// The forged definition is not there; the real one is unchanged.
	kv, err := admin.js.KeyValue(ctx, schedule.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, "def.evil"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("a forged definition landed: %v", err)
	}
	// The trigger role: no state, no results, no run starts, no keys.
	tr := s.connect(t, userTrigger)
	for _, subj := range []string{"$KV.weft-schedules.st.tick", "$KV.weft-schedules.res.tick.x", eventlog.StartedSubject("mine"), eventlog.ChildStartedSubject("mine"), eventlog.ScheduleFireSubject("tick")} {
		if err := tr.nc.Publish(subj, []byte("{}")); err != nil {
			t.Fatal(err)
		}
		tr.violation(t, "Publish", subj)
	}
	// A client reads schedules (describe), but cannot change one.
	cl := client.New(openStore(t, s.connect(t, userClient)))
	if _, err := cl.DescribeSchedule(ctx, "tick"); err != nil {
		t.Fatalf("a client describes a schedule: %v", err)
	}
	short, cancelShort := context.WithTimeout(ctx, 3*time.Second)
	defer cancelShort()
	if err := cl.PauseSchedule(short, "tick", "mine now"); err == nil {
		t.Fatal("a client paused a schedule")
	}
	if d, err := mgr.DescribeSchedule(ctx, "tick"); err != nil || d.Schedule.Paused {
		t.Fatalf("after the client's pause: %v %+v", err, d)
	}
}

// TestTriggersUnderTheRoles: with ORDERS granted to triggers, the trigger
// role creates a trigger and the coordinator process consumes the user's
// stream and starts one run per message, a forged (undecodable) message
// included in the stream is recorded and does not stall it; a client and
// a worker can neither write a trigger's definition or state, nor pull
// the trigger's messages, nor start runs on its behalf.
func TestTriggersUnderTheRoles(t *testing.T) {
	s := startServerWith(t, natsconn.Deployment{Queues: []string{queueA, queueB}, TriggerStreams: []string{"ORDERS"}})
	s.setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := s.connect(t, userAdmin)
	if _, err := admin.js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}}); err != nil {
		t.Fatal(err)
	}
	startProcess(t, "coordinator", filepath.Join(t.TempDir(), "coordinator.log"), s.roleEnv(userCoord), "-nats", s.url)
	mc := s.connect(t, userTrigger)
	mgr := client.New(openStore(t, mc))
	g, err := graph.Parse([]byte(chain), "chain.yaml")
	if err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(ctx, 5*time.Second)
	defer cancelShort()
	if _, err := mgr.CreateTrigger(short, "orders", "orders.created", g, client.TriggerOptions{ID: "input.id"}); err != nil {
		mc.mu.Lock()
		defer mc.mu.Unlock()
		t.Fatalf("the trigger role creates a trigger: %v (%q)", err, mc.errs)
	}
	// The user's application publishes (here as the admin).
	for _, body := range []string{`{"id":"o1"}`, "\x00\xffnot json", `{"id":"o1"}`, `{"id":"o2"}`} {
		if _, err := admin.js.Publish(ctx, "orders.created", []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	var d *client.TriggerDescription
	for {
		if d, err = mgr.DescribeTrigger(ctx, "orders"); err != nil {
			t.Fatal(err)
		}
		if d.State.Started+d.State.Duplicates+d.State.Bad == 4 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the coordinator did not consume the trigger's stream: %+v", d.State)
		}
		// Polls: a trigger's state is a KV value re-read here.
		time.Sleep(100 * time.Millisecond)
	}
	if d.State.Started != 2 || d.State.Duplicates != 1 || d.State.Bad != 1 {
		t.Fatalf("trigger state %+v: want 2 runs, 1 duplicate, 1 bad message", d.State)
	}
	def, _ := json.Marshal(map[string]any{"name": "evil", "subject": "orders.>", "stream": "ORDERS"})
	for _, user := range []string{userClient, natsconn.UserName(natsconn.RoleWorker, queueA)} {
		c := s.connect(t, user)
		for _, subj := range []string{"$KV.weft-schedules.tdef.evil", "$KV.weft-schedules.tst.orders", "$JS.API.CONSUMER.MSG.NEXT.ORDERS.weft-trigger-orders", "$JS.API.CONSUMER.CREATE.ORDERS.mine"} {
			if err := c.nc.Publish(subj, def); err != nil {
				t.Fatal(err)
			}
			c.violation(t, "Publish", subj)
		}
	}
	// The trigger role cannot start runs itself, nor consume the stream.
	tr := s.connect(t, userTrigger)
	for _, subj := range []string{eventlog.StartedSubject("mine"), eventlog.ChildStartedSubject("mine"), "$JS.API.CONSUMER.MSG.NEXT.ORDERS.weft-trigger-orders", "$JS.ACK.ORDERS.weft-trigger-orders.1.1.1.1.1"} {
		if err := tr.nc.Publish(subj, []byte("{}")); err != nil {
			t.Fatal(err)
		}
		tr.violation(t, "Publish", subj)
	}
	kv, err := admin.js.KeyValue(ctx, schedule.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, "tdef.evil"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("a forged trigger landed: %v", err)
	}
}
