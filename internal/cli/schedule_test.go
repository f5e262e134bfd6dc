package cli_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/schedule"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/internal/trigger"
	"github.com/weft-dev/weft/internal/workqueue"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/worker"
	"github.com/weft-dev/weft/pkg/worker/builtin"
)

// scheduleEngine is engine with the schedules' runner beside the
// coordinator, as the daemons run it.
func scheduleEngine(t *testing.T) (string, *client.Client) {
	t.Helper()
	srv, store := testkit.Store(t)
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	w, err := worker.New(store, worker.WithName("test-worker"), worker.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	builtin.Register(w)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = w.Run(ctx) })
	wg.Go(func() { _ = coordinator.New(store, coordinator.WithLogger(log)).Run(ctx) })
	wg.Go(func() { _ = schedule.NewRunner(store, schedule.WithLogger(log)).Run(ctx) })
	wg.Go(func() { _ = trigger.NewRunner(store, trigger.WithLogger(log)).Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	waitConsumers(t, store, coordinator.ConsumerName("coordinator", 0), workqueue.QueueConsumer("default"))
	for deadline := time.Now().Add(30 * time.Second); ; {
		if _, err := schedule.Open(ctx, eventlog.JetStream(store)); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the schedules bucket was not created")
		}
		// Polls: the bucket's creation sends no event to this test.
		time.Sleep(10 * time.Millisecond)
	}
	return srv.ClientURL(), client.New(store)
}

// TestScheduleCommands: create (and its refusals), list, describe with
// next fires and runs, pause with a note, trigger, backfill, update,
// list -schedule, delete.
func TestScheduleCommands(t *testing.T) {
	url, _ := scheduleEngine(t)
	nats := "-nats=" + url
	// Bad input: a clear error naming the flag, and nothing created.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-cron", "61 * * * *"}, "-cron"},
		{[]string{"-cron", "0 2 * * *", "-tz", "Mars/Base"}, "-tz"},
		{[]string{"-every", "1s", "-overlap", "maybe"}, "-overlap"},
		{[]string{"-every", "1s", "-input", "[1]"}, "-input"},
	} {
		r := weft(t, append([]string{"schedule", "create", "bad", nats, "-graph", helloFile}, c.args...)...)
		if r.code == 0 || !strings.Contains(r.stderr, c.want) {
			t.Fatalf("create %v: exit %d, stderr %q; want an error naming %s", c.args, r.code, r.stderr, c.want)
		}
	}
	bad := writeFile(t, "bad.yaml", "name: bad\nnodes:\n  - id: a\n    type: nosuchtype\n")
	if r := weft(t, "schedule", "create", "bad", nats, "-graph", bad, "-every", "1s"); r.code == 0 || !strings.Contains(r.stderr, "bad.yaml") {
		t.Fatalf("a graph that does not validate: %+v", r)
	}
	if r := weft(t, "schedule", "list", nats); r.code != 0 || strings.Contains(r.stdout, "bad") {
		t.Fatalf("list after refused creates: %+v", r)
	}

	r := weft(t, "schedule", "create", "nightly", nats, "-graph", helloFile, "-cron", "0 2 * * *", "-tz", "Europe/Paris", "-input", `{"name":"night"}`, "-overlap", "allow-all", "-note", "the nightly hello")
	if r.code != 0 {
		t.Fatalf("create: %+v", r)
	}
	if r := weft(t, "schedule", "create", "nightly", nats, "-graph", helloFile, "-every", "1h"); r.code == 0 || !strings.Contains(r.stderr, "exists") {
		t.Fatalf("create twice: %+v", r)
	}
	r = weft(t, "schedule", "describe", "nightly", nats, "-o", "json")
	var desc client.ScheduleDescription
	if err := json.Unmarshal([]byte(r.stdout), &desc); err != nil || r.code != 0 {
		t.Fatalf("describe: %v %+v", err, r)
	}
	if len(desc.Next) != 5 {
		t.Fatalf("next fires %v, want 5", desc.Next)
	}
	paris, _ := time.LoadLocation("Europe/Paris")
	for _, n := range desc.Next {
		if h := n.In(paris); h.Hour() != 2 || h.Minute() != 0 {
			t.Fatalf("next fire %s is not 02:00 in Paris", h)
		}
	}
	r = weft(t, "schedule", "trigger", "nightly", nats)
	if r.code != 0 {
		t.Fatalf("trigger: %+v", r)
	}
	manual := strings.TrimSpace(r.stdout)
	// Three days back to the second, not to the hour: truncated, a run
	// of the test between 01:00 and 02:00 UTC took in a fourth fire
	// (02:00 in Paris is 01:00 UTC), the one at the truncated hour.
	from := time.Now().Add(-72 * time.Hour).UTC().Truncate(time.Second)
	r = weft(t, "schedule", "backfill", "nightly", nats, "-from", from.Format(time.RFC3339), "-to", time.Now().UTC().Format(time.RFC3339))
	if r.code != 0 {
		t.Fatalf("backfill: %+v", r)
	}
	backfilled := strings.Fields(r.stdout)
	if len(backfilled) < 2 || len(backfilled) > 3 {
		t.Fatalf("backfill of 3 days started %v", backfilled)
	}
	// Again: the same fire times, the same runs, nothing new.
	r = weft(t, "schedule", "backfill", "nightly", nats, "-from", from.Format(time.RFC3339), "-to", time.Now().UTC().Format(time.RFC3339))
	if strings.Join(strings.Fields(r.stdout), " ") != strings.Join(backfilled, " ") {
		t.Fatalf("a second backfill gave other runs: %v vs %v", r.stdout, backfilled)
	}
	// The runs complete, and are the schedule's in 'weft list -schedule'.
	want := append([]string{manual}, backfilled...)
	deadline := time.Now().Add(30 * time.Second)
	for {
		r = weft(t, "list", nats, "-schedule", "nightly", "-status", "completed", "-o", "json")
		var page []client.RunSummary
		_ = json.Unmarshal([]byte(r.stdout), &page)
		if len(page) == len(want) {
			for _, s := range page {
				if s.Attrs["schedule"] != "nightly" {
					t.Fatalf("run %s attrs %v", s.RunID, s.Attrs)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("list -schedule nightly: %s, want %d runs", r.stdout, len(want))
		}
		// Polls: the read model's list notifies nobody.
		time.Sleep(100 * time.Millisecond)
	}
	r = weft(t, "schedule", "describe", "nightly", nats)
	wantContains(t, "describe", r.stdout, "cron \"0 2 * * *\" Europe/Paris", "allow-all", "the nightly hello", "paused", manual, "completed", "triggered", "backfilled")

	if r := weft(t, "schedule", "pause", "nightly", nats, "-note", "holiday freeze"); r.code != 0 {
		t.Fatalf("pause: %+v", r)
	}
	r = weft(t, "schedule", "describe", "nightly", nats)
	wantContains(t, "describe paused", r.stdout, "yes: holiday freeze")
	r = weft(t, "schedule", "list", nats)
	wantContains(t, "list", r.stdout, "nightly", "hello", "yes")
	if r := weft(t, "schedule", "unpause", "nightly", nats); r.code != 0 {
		t.Fatalf("unpause: %+v", r)
	}
	if r := weft(t, "schedule", "update", "nightly", nats, "-every", "1h", "-note", "hourly now"); r.code != 0 {
		t.Fatalf("update: %+v", r)
	}
	r = weft(t, "schedule", "describe", "nightly", nats)
	wantContains(t, "describe updated", r.stdout, "every 1h0m0s", "hourly now")
	if !regexp.MustCompile(`paused\s+no\n`).MatchString(r.stdout) {
		t.Fatalf("describe after unpause: %s", r.stdout)
	}
	if r := weft(t, "schedule", "update", "nightly", nats, "-cron", "bad"); r.code == 0 || !strings.Contains(r.stderr, "-cron") {
		t.Fatalf("update with a bad cron: %+v", r)
	}
	if r := weft(t, "schedule", "delete", "nightly", nats); r.code != 0 {
		t.Fatalf("delete: %+v", r)
	}
	if r := weft(t, "schedule", "describe", "nightly", nats); r.code == 0 || !strings.Contains(r.stderr, "not found") {
		t.Fatalf("describe after delete: %+v", r)
	}
}

// TestTriggerCommands: create (and its refusals), messages to runs,
// describe with counts and bad messages, list -trigger, pause, delete.
func TestTriggerCommands(t *testing.T) {
	url, _ := scheduleEngine(t)
	nats := "-nats=" + url
	nc, err := natsgo.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-subject", "orders.created", "-filter", "input.x >"}, "-filter"},
		{[]string{"-subject", "orders.created", "-input", "1 +"}, "-input"},
		{[]string{"-subject", "nothing.here"}, "no stream captures"},
		{[]string{"-subject", "orders.created", "-stream", "NOPE"}, "NOPE"},
	} {
		r := weft(t, append([]string{"trigger", "create", "bad", nats, "-graph", helloFile}, c.args...)...)
		if r.code == 0 || !strings.Contains(r.stderr, c.want) {
			t.Fatalf("create %v: %+v, want an error naming %s", c.args, r, c.want)
		}
	}
	if r := weft(t, "trigger", "list", nats, "-o", "json"); strings.TrimSpace(r.stdout) != "[]" {
		t.Fatalf("list after refused creates: %+v", r)
	}
	r := weft(t, "trigger", "create", "greet", nats, "-graph", helloFile, "-subject", "orders.created",
		"-filter", "input.ok", "-input", `{"name": input.who}`, "-id", "input.ref")
	if r.code != 0 {
		t.Fatalf("create: %+v", r)
	}
	for _, body := range []string{`{"ok":true,"who":"Ada","ref":"1"}`, `{"ok":true,"who":"Ada","ref":"1"}`, `{"ok":false,"who":"Bob","ref":"2"}`, `{"ok":true,"ref":"3"}`, `oops`, `{"ok":true,"who":"Cy","ref":"4"}`} {
		if _, err := js.Publish(ctx, "orders.created", []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		r = weft(t, "list", nats, "-trigger", "greet", "-status", "completed", "-o", "json")
		var page []client.RunSummary
		_ = json.Unmarshal([]byte(r.stdout), &page)
		// Ada (once, though sent twice) and Cy; Bob is filtered out,
		// the one with no name and "oops" are bad messages.
		if len(page) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("list -trigger greet: %s", r.stdout)
		}
		// Polls: the read model's list notifies nobody.
		time.Sleep(100 * time.Millisecond)
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		r = weft(t, "trigger", "describe", "greet", nats)
		if strings.Contains(r.stdout, "bad messages  2") || time.Now().After(deadline) {
			break
		}
		// Polls: a trigger's counters are a KV value re-read here.
		time.Sleep(100 * time.Millisecond)
	}
	wantContains(t, "describe", r.stdout, "orders.created (stream ORDERS)", "input.ok", "runs started  2", "duplicates    1", "filtered out  1", "bad messages  2", "ORDERS#5", "-filter", "ORDERS#4", `no key "who"`)
	if r := weft(t, "trigger", "pause", "greet", nats, "-note", "maintenance"); r.code != 0 {
		t.Fatalf("pause: %+v", r)
	}
	wantContains(t, "describe paused", weft(t, "trigger", "describe", "greet", nats).stdout, "yes: maintenance")
	wantContains(t, "list", weft(t, "trigger", "list", nats).stdout, "greet", "orders.created", "ORDERS", "hello", "yes")
	if r := weft(t, "trigger", "delete", "greet", nats); r.code != 0 {
		t.Fatalf("delete: %+v", r)
	}
	if r := weft(t, "trigger", "describe", "greet", nats); r.code == 0 || !strings.Contains(r.stderr, "not found") {
		t.Fatalf("describe after delete: %+v", r)
	}
}
