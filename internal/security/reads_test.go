package security

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// What each role may read of the events stream, and with what (gaps 2, 3
// and 4 of deploy/SECURITY.md).

// TestWorkerReadsBySubjectOnly: a worker reads with direct gets of a
// subject's last message, the subject named in the request subject, for
// runs' starts and its own queue's outcomes (pkg/worker, eventlog.LastOn),
// and counts runs' ends with stream information (eventlog.HasEnd). The gets
// that carry what they read in the body (a get on the stream leader, a
// batched direct get) are refused, and so is a direct get of any other
// subject: runs' ends (their outputs), another queue's work items,
// outcomes or signals.
func TestWorkerReadsBySubjectOnly(t *testing.T) {
	s := startServer(t)
	admin := s.connect(t, userAdmin)
	s.setup(t)
	ctx := context.Background()
	secret := events.NewRunID()
	ack, err := admin.js.Publish(ctx, sub(secret, "d.ready."+queueB), []byte(`{"input":"for gpu workers only"}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, rest := range []string{"c.started", "d.completed", "w." + queueA + ".invoked"} {
		if _, err := admin.js.Publish(ctx, sub(secret, rest), []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	w := s.connect(t, userWorker)
	// What the worker reads: each answered.
	for _, rest := range []string{"c.started", "w." + queueA + ".invoked"} {
		if _, err := w.nc.Request("$JS.API.DIRECT.GET.WEFT."+sub(secret, rest), nil, 3*time.Second); err != nil {
			t.Fatalf("the worker's read of %s: %v", rest, err)
		}
	}
	if ended, err := eventlog.HasEnd(ctx, openStore(t, w), secret); err != nil || !ended {
		t.Fatalf("the worker's count of the run's ends: %v, %v", ended, err)
	}
	byBody, _ := json.Marshal(map[string]any{"seq": ack.Sequence})
	batch, _ := json.Marshal(map[string]any{"seq": 1, "next_by_subj": eventlog.RunFilter(secret), "batch": 10})
	for _, c := range []struct {
		subject string
		body    []byte
	}{
		// The leader get Store.Append's duplicate check used to make.
		{"$JS.API.STREAM.MSG.GET.WEFT", byBody},
		// A batched direct get: a whole history.
		{"$JS.API.DIRECT.GET.WEFT", batch},
		// Direct gets of subjects it has no business reading.
		{"$JS.API.DIRECT.GET.WEFT." + sub(secret, "d.completed"), nil},
		{"$JS.API.DIRECT.GET.WEFT." + sub(secret, "d.failed"), nil},
		{"$JS.API.DIRECT.GET.WEFT." + sub(secret, "d.ready."+queueB), nil},
		{"$JS.API.DIRECT.GET.WEFT." + sub(secret, "d.ready."+queueA), nil},
		{"$JS.API.DIRECT.GET.WEFT." + sub(secret, "w."+queueB+".invoked"), nil},
		{"$JS.API.DIRECT.GET.WEFT." + sub(secret, "c.signal"), nil},
		{"$JS.API.DIRECT.GET.WEFT." + sub(secret, "d.invoked"), nil},
		{"$JS.API.DIRECT.GET.WEFT." + eventlog.RunFilter(secret), nil},
	} {
		w.refusedRequest(t, c.subject, c.body)
	}
}

// TestGapWorkerWildcardLastGet: NATS permissions match a "*" token of a
// published subject as they match any token, so the worker's right to
// read the last message on weft.r.<slot>.<run>.c.started (any run's
// start, by its id: by design) is also the right to read the last on
// weft.r.*.*.c.started: the start most recently written, in the stream or
// in one slot, without knowing its id. This is why the worker counts
// runs' ends (eventlog.HasEnd) instead of reading them: the same right on
// d.completed would show any run's output. Open (deploy/SECURITY.md, gap
// 2); this test fails once NATS refuses it.
func TestGapWorkerWildcardLastGet(t *testing.T) {
	s := startServer(t)
	admin := s.connect(t, userAdmin)
	s.setup(t)
	ctx := context.Background()
	run := events.NewRunID()
	if _, err := admin.js.Publish(ctx, sub(run, "c.started"), []byte(`{"input":"any run's"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.js.Publish(ctx, sub(run, "d.completed"), []byte(`{"output":"secret"}`)); err != nil {
		t.Fatal(err)
	}
	w := s.connect(t, userWorker)
	resp, err := w.nc.Request("$JS.API.DIRECT.GET.WEFT.weft.r.*.*.c.started", nil, 3*time.Second)
	if err != nil {
		t.Fatalf("refused (close the gap in SECURITY.md): %v", err)
	}
	if string(resp.Data) != `{"input":"any run's"}` {
		t.Fatalf("got %q %v", resp.Data, resp.Header)
	}
	w.refusedRequest(t, "$JS.API.DIRECT.GET.WEFT.weft.r.*.*.d.completed", nil)
}

// TestReadersCreateNoConsumers: pkg/client's Wait and Follow read with
// gets and a core subscription (a wake-up), so the client and the UI may
// create no consumer on the events stream: not one of a queue added
// after the roles were generated, not a push consumer delivering
// elsewhere, none at all.
func TestReadersCreateNoConsumers(t *testing.T) {
	s := startServer(t)
	admin := s.connect(t, userAdmin)
	s.setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	run := events.NewRunID()
	if _, err := admin.js.Publish(ctx, sub(run, "d.ready.newq"), []byte(`{"work":"of a queue added later"}`)); err != nil {
		t.Fatal(err)
	}
	cfg := func(c map[string]any) []byte {
		if c["ack_policy"] == nil {
			c["ack_policy"] = "explicit"
		}
		b, _ := json.Marshal(map[string]any{"stream_name": "WEFT", "config": c})
		return b
	}
	for _, user := range []string{userClient, userUI} {
		t.Run(user, func(t *testing.T) {
			t.Parallel()
			c := s.connect(t, user)
			for _, k := range []struct {
				subject string
				body    []byte
			}{
				{"$JS.API.CONSUMER.CREATE.WEFT.work-newq." + eventlog.QueueFilter("newq"), cfg(map[string]any{"durable_name": "work-newq", "filter_subject": eventlog.QueueFilter("newq")})},
				{"$JS.API.CONSUMER.CREATE.WEFT.spy", cfg(map[string]any{"name": "spy", "filter_subjects": []string{eventlog.RunFilter(run), eventlog.AllEvents}})},
				{"$JS.API.CONSUMER.CREATE.WEFT.spy." + eventlog.RunFilter(run), cfg(map[string]any{"name": "spy", "filter_subject": eventlog.RunFilter(run)})},
				{"$JS.API.CONSUMER.CREATE.WEFT", cfg(map[string]any{"filter_subject": eventlog.AllEvents})},
				{"$JS.API.CONSUMER.CREATE.WEFT.elsewhere." + eventlog.RunFilter(run), cfg(map[string]any{"name": "elsewhere", "deliver_subject": "_INBOX_weft-coordinator.spoofed", "filter_subject": eventlog.RunFilter(run), "ack_policy": "none"})},
				{"$JS.API.CONSUMER.MSG.NEXT.WEFT.work-newq", []byte(`{"batch":1,"expires":100000000}`)},
			} {
				c.refusedRequest(t, k.subject, k.body)
			}
		})
	}
	// The client creates no consumer on the buckets either: it reads
	// the read model, the workers' announcements and the archive with
	// direct gets (a client that made hundreds of push consumers on the
	// read model stalled the server).
	c := s.connect(t, userClient)
	bucket := func(stream, name, filter string) []byte {
		b, _ := json.Marshal(map[string]any{"stream_name": stream, "config": map[string]any{"name": name, "deliver_subject": "_INBOX_weft-client.x", "filter_subject": filter, "ack_policy": "none"}})
		return b
	}
	for _, k := range []struct{ subject, stream, filter string }{
		{"$JS.API.CONSUMER.CREATE.KV_weft-runs.flood.$KV.weft-runs.>", "KV_weft-runs", "$KV.weft-runs.>"},
		{"$JS.API.CONSUMER.CREATE.KV_weft-runs.flood", "KV_weft-runs", ""},
		{"$JS.API.CONSUMER.CREATE.KV_weft-workers.flood.$KV.weft-workers.>", "KV_weft-workers", "$KV.weft-workers.>"},
		{"$JS.API.CONSUMER.CREATE.OBJ_weft-archive.flood.$O.weft-archive.>", "OBJ_weft-archive", "$O.weft-archive.>"},
	} {
		c.refusedRequest(t, k.subject, bucket(k.stream, "flood", k.filter))
	}
}

// TestGapBucketPushConsumers: the UI still creates a consumer on the
// read model's bucket (its live list of runs is a KV watcher: a pushed,
// ordered consumer), and a consumer's deliver subject is in the request
// body, unchecked: a push consumer of the runs' read model may deliver
// its entries to another role's inbox. (The client creates none:
// TestReadersCreateNoConsumers.) Delivered onto a run's
// decision subject, they are not stored by the events stream (nats-server
// does not store another stream's consumer deliveries: asserted here, so
// that a server that does is noticed). Open (deploy/SECURITY.md, gap 4).
func TestGapBucketPushConsumers(t *testing.T) {
	s := startServer(t)
	admin := s.connect(t, userAdmin)
	s.setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := admin.js.KeyValue(ctx, "weft-runs")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "completed.x", []byte(`{"runId":"x"}`)); err != nil {
		t.Fatal(err)
	}
	ui := s.connect(t, userUI)
	create := func(name, deliver string) map[string]any {
		body, _ := json.Marshal(map[string]any{"stream_name": "KV_weft-runs", "config": map[string]any{
			"name": name, "deliver_subject": deliver, "filter_subject": "$KV.weft-runs.>", "ack_policy": "none",
		}})
		msg, err := ui.nc.Request("$JS.API.CONSUMER.CREATE.KV_weft-runs."+name+".$KV.weft-runs.>", body, 2*time.Second)
		if err != nil {
			t.Fatalf("consumer create: %v", err)
		}
		var resp map[string]any
		_ = json.Unmarshal(msg.Data, &resp)
		return resp
	}
	if resp := create("elsewhere", "_INBOX_weft-coordinator.spoofed"); resp["error"] != nil {
		t.Fatalf("the push consumer was refused (close the gap in SECURITY.md): %v", resp)
	}
	run := events.NewRunID()
	target := sub(run, "d.completed")
	heard, err := ui.nc.SubscribeSync(target) // the UI may hear runs' subjects
	if err != nil {
		t.Fatal(err)
	}
	if err := ui.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if resp := create("inject", target); resp["error"] != nil {
		t.Fatalf("the push consumer onto a run's subject: %v", resp)
	}
	m, err := heard.NextMsgWithContext(ctx)
	if err != nil {
		t.Fatalf("the entry was never delivered onto %s: %v", target, err)
	}
	if string(m.Data) != `{"runId":"x"}` {
		t.Fatalf("delivered %q", m.Data)
	}
	// Had the events stream taken the delivery in, it would have done so
	// before it takes an append made after the delivery was heard.
	if _, err := admin.js.Publish(ctx, sub(run, "c.started"), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if seq := lastSeqOn(t, admin, target); seq != 0 {
		t.Fatalf("the events stream stored a bucket's entry delivered onto %s at %d", target, seq)
	}
}

// TestFollowWithoutTheRightFails: a connection whose role may not
// subscribe to a run's subjects (a worker's, or roles generated by an
// older Weft) gets an error from Follow at once, not a wait for wake-ups
// that never come.
func TestFollowWithoutTheRightFails(t *testing.T) {
	s := startServer(t)
	admin := s.connect(t, userAdmin)
	s.setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	run := events.NewRunID()
	if _, err := admin.js.Publish(ctx, sub(run, "c.started"), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	w := client.New(openStore(t, s.connect(t, userWorker)))
	err := w.Follow(ctx, run, func(client.RunEvent, *projection.State) bool { return true })
	if !errors.Is(err, nats.ErrPermissionViolation) {
		t.Fatalf("Follow without the right to subscribe: %v", err)
	}
}
