package security

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/natsconn"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

var (
	userClient = natsconn.UserName(natsconn.RoleClient, "")
	userCoord  = natsconn.UserName(natsconn.RoleCoordinator, "")
	userUI     = natsconn.UserName(natsconn.RoleUI, "")
	userAdmin  = natsconn.UserName(natsconn.RoleAdmin, "")
	userWorker = natsconn.UserName(natsconn.RoleWorker, queueA)
)

const chain = `
name: chain
nodes:
  - {id: a, type: echo}
  - {id: b, type: echo, queue: gpu}
edges:
  - {from: START, to: a}
  - {from: a, to: b}
  - {from: b, to: END}
`

// forged is a message that claims to be an event of type t on subject.
func forged(subject string, t events.Type) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Header.Set("ce-specversion", "1.0")
	m.Header.Set("ce-type", string(t))
	m.Header.Set("ce-id", eventlog.RandomID())
	m.Header.Set("ce-source", "attacker")
	m.Header.Set(nats.MsgIdHdr, eventlog.RandomID())
	m.Data = []byte(`{"output":"forged"}`)
	return m
}

// sub is a subject of run's: weft.r.<slot>.<run>.<rest>.
func sub(run, rest string) string { return "weft.r." + eventlog.Slot(run) + "." + run + "." + rest }

// TestRolesWork runs a real run under the roles: the client role starts
// it, a coordinator process and one worker process per queue, each with
// its role's credentials from the generated .env values, complete it; the
// client waits for it, signals, cancels and lists; the UI role reads it
// and the workers' announcements.
func TestRolesWork(t *testing.T) {
	s := startServer(t)
	s.setup(t) // the admin sets the stream and buckets up, as in production
	dir := t.TempDir()
	startProcess(t, "coordinator", filepath.Join(dir, "coordinator.log"), s.roleEnv(userCoord), "-nats", s.url)
	for _, q := range []string{queueA, queueB} {
		u := natsconn.UserName(natsconn.RoleWorker, q)
		startProcess(t, "nodeworker", filepath.Join(dir, u+".log"), s.roleEnv(u), "-nats", s.url, "-queues", q, "-name", u)
	}

	cl := client.New(openStore(t, s.connect(t, userClient)))
	g, err := graph.Parse([]byte(chain), "chain.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	run, err := cl.Start(ctx, g, client.WithInput(map[string]any{"x": 1}))
	if err != nil {
		t.Fatalf("client starts a run: %v", err)
	}
	st, err := cl.Wait(ctx, run)
	if err != nil {
		t.Fatalf("client waits for the run: %v", err)
	}
	if st.Status != projection.RunCompleted {
		t.Fatalf("run %s: %s %v", run, st.Status, st.Error)
	}
	// The coordinator keeps the read model of runs; the client lists it.
	for listed := false; !listed; {
		runs, err := cl.List(ctx, client.WithStatus(projection.RunCompleted))
		if err != nil {
			t.Fatalf("client lists runs: %v", err)
		}
		listed = len(runs) == 1 && runs[0].RunID == run
		if !listed && ctx.Err() != nil {
			t.Fatalf("the completed run was never listed: %+v", runs)
		}
		if !listed {
			// Polls: the read model's list notifies nobody.
			time.Sleep(20 * time.Millisecond)
		}
	}

	// A local node: the coordinator runs it and writes its outcome on the
	// reserved queue, which its role may.
	local, err := graph.Parse([]byte(`
name: local
nodes:
  - {id: t, type: transform, config: {set: {doubled: 'state.x * 2'}}}
edges:
  - {from: START, to: t}
  - {from: t, to: END}
`), "local.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lrun, err := cl.Start(ctx, local, client.WithInput(map[string]any{"x": 2}))
	if err != nil {
		t.Fatal(err)
	}
	if st, err := cl.Wait(ctx, lrun); err != nil || st.Status != projection.RunCompleted || st.Nodes["t"].Worker != "coordinator" || string(st.Vars["doubled"]) != "4" {
		t.Fatalf("local run: %v %+v", err, st)
	}

	approval, err := graph.Parse([]byte(`
name: approval
nodes:
  - {id: ask, type: human}
edges:
  - {from: START, to: ask}
  - {from: ask, to: END}
`), "approval.yaml")
	if err != nil {
		t.Fatal(err)
	}
	waiting, err := cl.Start(ctx, approval)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := cl.Get(ctx, waiting)
		if err == nil && st.Nodes["ask"] != nil && st.Nodes["ask"].Status == projection.NodeWaiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the human node never waited: %+v %v", st, err)
		}
		// Polls: the run's status is a read of its log, which notifies nobody.
		time.Sleep(50 * time.Millisecond)
	}
	// The UI follows the waiting run live (a core subscription on its
	// subjects and gets, no consumer) while the client signals it.
	ui := client.New(openStore(t, s.connect(t, userUI)))
	followed := make(chan error, 1)
	var sawEnd bool
	go func() {
		followed <- ui.Follow(ctx, waiting, func(_ client.RunEvent, st *projection.State) bool {
			sawEnd = st.Status == projection.RunCompleted
			return true
		})
	}()
	if err := cl.Signal(ctx, waiting, "ask", map[string]any{"approved": true}); err != nil {
		t.Fatalf("client signals: %v", err)
	}
	if err := <-followed; err != nil || !sawEnd {
		t.Fatalf("ui follows the run to its end: %v (end seen: %v)", err, sawEnd)
	}
	if st, err := cl.Wait(ctx, waiting); err != nil || st.Status != projection.RunCompleted {
		t.Fatalf("signalled run: %v %v", st, err)
	}
	third, err := cl.Start(ctx, approval)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Cancel(ctx, third, "test"); err != nil {
		t.Fatalf("client cancels: %v", err)
	}
	if st, err := cl.Wait(ctx, third); err != nil || st.Status != projection.RunCancelled {
		t.Fatalf("cancelled run: %v %v", st, err)
	}

	if st, err := ui.Get(ctx, run); err != nil || st.Status != projection.RunCompleted {
		t.Fatalf("ui reads the run: %v %v", st, err)
	}
	if evs, err := ui.History(ctx, run); err != nil || len(evs) == 0 {
		t.Fatalf("ui reads the history: %d events, %v", len(evs), err)
	}
	ws, err := ui.LiveWorkers(ctx)
	if err != nil || len(ws) != 2 {
		t.Fatalf("ui lists the workers: %+v %v", ws, err)
	}
	if _, err := ui.Wait(ctx, run); err != nil {
		t.Fatalf("ui waits: %v", err)
	}

	// The CLI under the client and UI roles: start and wait, read.
	graphFile := filepath.Join(dir, "chain.yaml")
	if err := os.WriteFile(graphFile, []byte(chain), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		user string
		args []string
	}{
		{userClient, []string{"run", graphFile, "-wait"}},
		{userClient, []string{"list"}},
		{userUI, []string{"status", run}},
		{userUI, []string{"events", run}},
		{userUI, []string{"events", run, "-follow"}},
		{userUI, []string{"state", run}},
		{userUI, []string{"list"}},
		{userUI, []string{"list", "-status", "completed", "-graph", "chain"}},
	} {
		cmd := exec.Command(filepath.Join(binaries(t), "weft"), append(c.args, "-nats", s.url)...)
		cmd.Env = append(cleanEnv(), s.roleEnv(c.user)...)
		out, err := cmd.CombinedOutput()
		if err != nil || bytes.Contains(bytes.ToLower(out), []byte("permissions violation")) {
			t.Errorf("%s: weft %s: %v\n%s", c.user, strings.Join(c.args, " "), err, out)
		}
	}

	// The roles have every right their daemons use: none was refused one.
	testkit.CheckNoViolations(t, dir)
}

// TestRolesRefused tries, for each role, what the role must not do.
func TestRolesRefused(t *testing.T) {
	s := startServer(t)
	admin := s.connect(t, userAdmin)
	s.setup(t)
	run := events.NewRunID()
	other := events.NewRunID()
	for _, r := range []string{run, other} {
		// Something on each subject class, so "nothing stored" is a
		// real comparison.
		if _, err := admin.js.Publish(context.Background(), sub(r, "c.started"), []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	consumerCfg, _ := json.Marshal(map[string]any{"stream_name": "WEFT", "config": map[string]any{"durable_name": "work-" + queueA, "filter_subject": "weft.r.>", "ack_policy": "explicit"}})
	cfgFor := func(name, filter string) []byte {
		b, _ := json.Marshal(map[string]any{"stream_name": "WEFT", "config": map[string]any{"name": name, "durable_name": name, "filter_subject": filter, "ack_policy": "explicit"}})
		return b
	}
	purge := []byte(`{}`)

	// Forged events by role: the subject classes NATS keeps each role out of.
	forgeries := map[string][]struct {
		subject string
		typ     events.Type
	}{
		userClient: {
			// A child run's start: the coordinator's alone.
			{sub(run, "d.started"), events.RunStarted},
			{sub(run, "d.completed"), events.RunCompleted},
			{sub(run, "d.ready."+queueA), events.NodeReady},
			{sub(run, "d.invoked"), events.NodeInvoked},
			{sub(run, "w."+queueA+".invoked"), events.NodeInvoked},
			{sub(run, "w."+events.LocalQueue+".invoked"), events.NodeInvoked},
			{sub(run, "n.timer"), events.TimerFired},
			{"weft.t." + eventlog.Slot(run) + "." + run + ".t1", events.TimerFired},
		},
		userWorker: {
			{sub(run, "c.started"), events.RunStarted},
			{sub(run, "d.started"), events.RunStarted},
			{sub(run, "c.signal"), events.SignalReceived},
			{sub(run, "c.cancelreq"), events.RunCancelRequested},
			{sub(run, "d.completed"), events.RunCompleted},
			{sub(run, "d.ready."+queueA), events.NodeReady},
			{sub(run, "d.invoked"), events.NodeInvoked},
			{sub(run, "n.childfinished"), events.ChildRunFinished},
			{sub(run, "w."+queueB+".invoked"), events.NodeInvoked},
			// A local node's outcome: the coordinator's alone.
			{sub(run, "w."+events.LocalQueue+".invoked"), events.NodeInvoked},
			{sub(run, "w."+events.LocalQueue+".nodefailed"), events.NodeFailed},
			{"weft.t." + eventlog.Slot(run) + "." + run + ".t1", events.TimerFired},
		},
		userUI: {
			{sub(run, "c.started"), events.RunStarted},
			{sub(run, "d.started"), events.RunStarted},
			{sub(run, "c.signal"), events.SignalReceived},
			{sub(run, "c.cancelreq"), events.RunCancelRequested},
			{sub(run, "d.completed"), events.RunCompleted},
			{sub(run, "w."+queueA+".invoked"), events.NodeInvoked},
			{sub(run, "w."+events.LocalQueue+".invoked"), events.NodeInvoked},
		},
		userCoord: {
			// It starts child runs and the runs of schedules and
			// triggers on their decision subject; outside a namespace
			// it writes no client's start (deploy/SECURITY.md, gaps 6
			// and 13).
			{sub(run, "c.started"), events.RunStarted},
			{sub(run, "w."+queueA+".invoked"), events.NodeInvoked},
			{sub(run, "w."+queueA+".invoking"), events.NodeInvoking},
			{sub(run, "c.signal"), events.SignalReceived},
		},
	}
	// Every role's attacks in parallel: most of the time goes to waiting
	// for answers that never come.
	t.Run("attacks", func(t *testing.T) {
		for user, fs := range forgeries {
			t.Run(user+"/forged events", func(t *testing.T) {
				t.Parallel()
				c := s.connect(t, user)
				for _, f := range fs {
					c.refusedPublish(t, admin, forged(f.subject, f.typ))
				}
			})
		}

		// API calls by role.
		type call struct {
			subject string
			body    []byte
		}
		api := "$JS.API."
		destroy := []call{
			{api + "STREAM.PURGE.WEFT", purge},
			{api + "STREAM.DELETE.WEFT", nil},
			{api + "STREAM.UPDATE.WEFT", []byte(`{"name":"WEFT","subjects":["weft.>"]}`)},
			{api + "STREAM.CREATE.EVIL", []byte(`{"name":"EVIL","subjects":["_INBOX_weft-coordinator.>"]}`)},
			{api + "CONSUMER.DELETE.WEFT.coordinator", nil},
			{api + "CONSUMER.DELETE.WEFT.work-" + queueA, nil},
			{api + "STREAM.MSG.DELETE.WEFT", []byte(`{"seq":1}`)},
			{api + "STREAM.DELETE.KV_weft-snapshots", nil},
		}
		work := func(q string) []call {
			return []call{
				{api + "CONSUMER.MSG.NEXT.WEFT.work-" + q, []byte(`{"batch":1,"expires":100000000}`)},
				{api + "CONSUMER.CREATE.WEFT.work-" + q + "." + eventlog.QueueFilter(q), cfgFor("work-"+q, eventlog.QueueFilter(q))},
				{"$JS.ACK.WEFT.work-" + q + ".1.1.1.1.1.1.1", nil},
			}
		}
		coordinatorConsumer := []call{
			{api + "CONSUMER.MSG.NEXT.WEFT.coordinator", []byte(`{"batch":1,"expires":100000000}`)},
			{api + "CONSUMER.CREATE.WEFT.coordinator", cfgFor("coordinator", "")},
			{api + "CONSUMER.CREATE.WEFT.coordinator.weft.r.00.>", cfgFor("coordinator", "weft.r.00.>")},
			{"$JS.ACK.WEFT.coordinator.1.1.1.1.1.1.1", nil},
			// A partition's consumer (internal/coordinator's ConsumerName).
			{api + "CONSUMER.MSG.NEXT.WEFT.coordinator-0", []byte(`{"batch":1,"expires":100000000}`)},
			{api + "CONSUMER.CREATE.WEFT.coordinator-0", cfgFor("coordinator-0", "")},
			{api + "CONSUMER.CREATE.WEFT.coordinator-63.weft.r.3f.>", cfgFor("coordinator-63", "weft.r.3f.>")},
			{"$JS.ACK.WEFT.coordinator-0.1.1.1.1.1.1.1", nil},
			// The leases: taking a partition over.
			{"$KV.weft-coordinators.lease.0", []byte("attacker")},
		}
		snapshots := []call{
			{"$KV.weft-snapshots." + run, []byte(`{"forged":true}`)},
			// The read model of runs: only the coordinator writes it.
			{"$KV.weft-runs.completed." + run, []byte(`{"forged":true}`)},
			{api + "STREAM.PURGE.KV_weft-runs", []byte(`{"filter":"$KV.weft-runs.>"}`)},
			{api + "STREAM.CREATE.KV_weft-snapshots", []byte(`{"name":"KV_weft-snapshots","subjects":["$KV.weft-snapshots.>"]}`)},
		}
		// Workers create no consumer but their own (and read by subject
		// only: TestWorkerReadsBySubjectOnly).
		reads := []call{
			{api + "CONSUMER.CREATE.WEFT.spy", cfgFor("spy", "")},
			{api + "CONSUMER.CREATE.WEFT.spy." + sub(other, ">"), cfgFor("spy", sub(other, ">"))},
		}
		calls := map[string][]call{
			userClient: concat(destroy, work(queueA), work(queueB), coordinatorConsumer, snapshots,
				[]call{{api + "CONSUMER.CREATE.WEFT.work-" + queueA + ".weft.r.>", consumerCfg}}),
			userUI: concat(destroy, work(queueA), coordinatorConsumer, snapshots),
			userWorker: concat(destroy, work(queueB), coordinatorConsumer, snapshots, reads,
				// Its own consumer, but with another filter: every event.
				[]call{{api + "CONSUMER.CREATE.WEFT.work-" + queueA + ".weft.r.>", consumerCfg}},
				[]call{{api + "CONSUMER.CREATE.WEFT.work-" + queueA, cfgFor("work-"+queueA, "")}},
				// Announcing as a worker is allowed; the snapshots are not.
			),
			userCoord: concat(
				[]call{destroy[1], destroy[3], destroy[4], destroy[5], destroy[6], destroy[7]},
				work(queueA)[0:1], []call{{"$JS.ACK.WEFT.work-" + queueA + ".1.1.1.1.1.1.1", nil}}),
		}
		for user, cs := range calls {
			t.Run(user+"/api", func(t *testing.T) {
				t.Parallel()
				c := s.connect(t, user)
				for _, k := range cs {
					c.refusedRequest(t, k.subject, k.body)
				}
			})
		}

		// Subscriptions: nobody but the admin listens in on the events, on
		// another role's replies or on the shared inbox.
		subs := map[string][]string{
			// Runs' subjects (weft.r.*.*.>) the client and the UI may hear
			// (they follow runs); nothing shorter, nor the timers.
			userClient: {"weft.r.>", "weft.t.>", "_INBOX.>", natsconn.InboxPrefixFor(userCoord) + ".>", "$JS.ACK.>", ">"},
			userUI:     {"weft.r.>", "weft.t.>", "_INBOX.>", natsconn.InboxPrefixFor(userClient) + ".>"},
			userWorker: {"weft.r.>", sub(run, "d.ready."+queueB), "_INBOX.>", natsconn.InboxPrefixFor(natsconn.UserName(natsconn.RoleWorker, queueB)) + ".>"},
			userCoord:  {"_INBOX.>", natsconn.InboxPrefixFor(userClient) + ".>", "weft.r.>"},
		}
		for user, ss := range subs {
			t.Run(user+"/subscribe", func(t *testing.T) {
				t.Parallel()
				c := s.connect(t, user)
				for _, subject := range ss {
					c.refusedSubscribe(t, subject)
				}
			})
		}

	})

	// The stream is intact after all of it.
	info, err := mustStream(t, admin).Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 2 {
		t.Fatalf("stream holds %d messages, want the 2 the admin wrote", info.State.Msgs)
	}
}

// TestOnlyAdminPurges: the admin can purge and delete the stream (and is
// the only role with the right: see TestRolesRefused and, for the
// coordinator's purge, TestGapCoordinatorPurgesAnyRun).
func TestOnlyAdminPurges(t *testing.T) {
	s := startServer(t)
	admin := s.connect(t, userAdmin)
	s.setup(t)
	ctx := context.Background()
	if _, err := admin.js.Publish(ctx, sub(events.NewRunID(), "c.started"), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if err := mustStream(t, admin).Purge(ctx); err != nil {
		t.Fatalf("admin purges: %v", err)
	}
	if err := admin.js.DeleteStream(ctx, "WEFT"); err != nil {
		t.Fatalf("admin deletes: %v", err)
	}
}

func mustStream(t *testing.T, c *conn) jetstream.Stream {
	t.Helper()
	s, err := c.js.Stream(context.Background(), "WEFT")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func concat[T any](xs ...[]T) []T {
	var out []T
	for _, x := range xs {
		out = append(out, x...)
	}
	return out
}

func userWorkerB() string { return natsconn.UserName(natsconn.RoleWorker, queueB) }
