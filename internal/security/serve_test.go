package security

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/gateway"
	"github.com/weft-dev/weft/internal/natsconn"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

var userServe = natsconn.UserName(natsconn.RoleServe, "")

// TestServeUnderTheRoles: 'weft serve' runs as the weft-serve user that
// 'weft roles -webhook-subjects orders.webhook' generates: over HTTP it
// starts a run and signals it, and a signed webhook delivery, published
// on its subject, becomes one run of the trigger the trigger role made,
// labelled as the webhook's; no process reports a refused permission.
// With the same credentials, what the gateway never does is refused: a
// cancel request, an engine's start, a decision, a publish on a subject
// that is not a webhook's, a consumer of the trigger's stream, the
// schedules bucket, the read model.
func TestServeUnderTheRoles(t *testing.T) {
	s := startServerWith(t, natsconn.Deployment{Queues: []string{queueA, queueB}, TriggerStreams: []string{"ORDERS"}, WebhookSubjects: []string{"orders.webhook"}})
	s.setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := s.connect(t, userAdmin)
	if _, err := admin.js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	startProcess(t, "coordinator", filepath.Join(dir, "coordinator.log"), s.roleEnv(userCoord), "-nats", s.url)
	startProcess(t, "nodeworker", filepath.Join(dir, "worker.log"), s.roleEnv(userWorker), "-nats", s.url, "-queues", queueA, "-name", "w")
	g := mustParse(t, nightlyGraph)
	approval := mustParse(t, `
name: approval
nodes:
  - {id: approve, type: human}
edges:
  - {from: START, to: approve}
  - {from: approve, to: END}
`)
	mgr := client.New(openStore(t, s.connect(t, userTrigger)))
	if _, err := mgr.CreateTrigger(ctx, "orders", "orders.webhook", g, client.TriggerOptions{Webhook: "orders"}); err != nil {
		t.Fatalf("the trigger role creates the webhook's trigger: %v", err)
	}

	token, secret := "tok-0123456789abcdef", "whsec-0123456789abcdef"
	port := testkit.FreePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	env := append(s.roleEnv(userServe), "WEFT_GATEWAY_TOKENS=alice="+token, "WEFT_WEBHOOK_SECRET_ORDERS="+secret)
	startProcess(t, "weft", filepath.Join(dir, "serve.log"), env, "serve", "-nats", s.url, "-addr", fmt.Sprintf("127.0.0.1:%d", port), "-webhook", "orders=orders.webhook")
	post := func(path string, body []byte, hdr ...string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	for code, _ := post("/v1/runs", nil); code == 0; code, _ = post("/v1/runs", nil) {
		if ctx.Err() != nil {
			t.Fatal("weft serve did not listen")
		}
		time.Sleep(50 * time.Millisecond) // waiting for the process to listen
	}

	// A run over HTTP, signalled over HTTP.
	body := fmt.Sprintf(`{"graph": %s, "input": {"doc": "q3"}}`, approval.Canonical())
	code, out := post("/v1/runs", []byte(body), "Authorization", "Bearer "+token, "Idempotency-Key", "k-1")
	run := between(out, `"runId":"`, `"`)
	if code != http.StatusCreated || run == "" {
		t.Fatalf("start over HTTP as weft-serve: %d %s", code, out)
	}
	cl := client.New(openStore(t, s.connect(t, userClient)))
	for {
		st, err := cl.Get(ctx, run)
		if err == nil && st.Nodes["approve"] != nil && st.Nodes["approve"].Status == projection.NodeWaiting {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the run %s does not wait for its signal: %v %+v", run, err, st)
		}
		time.Sleep(50 * time.Millisecond) // the coordinator decides
	}
	if code, out := post("/v1/runs/"+run+"/signal", []byte(`{"node": "approve", "data": {"ok": true}}`), "Authorization", "Bearer "+token, "Idempotency-Key", "s-1"); code != http.StatusAccepted {
		t.Fatalf("signal over HTTP as weft-serve: %d %s", code, out)
	}
	if st, err := cl.Wait(ctx, run); err != nil || st.Status != projection.RunCompleted {
		t.Fatalf("the run started over HTTP: %v %+v", err, st)
	}

	// A signed webhook delivery: one run of the trigger, the webhook's.
	delivery := []byte(`{"order": "o-1"}`)
	now := time.Now().Unix()
	sig := fmt.Sprintf("t=%d,v1=%s", now, gateway.Sign([]byte(secret), now, delivery))
	if code, out := post("/v1/webhooks/orders", delivery, "Weft-Signature", sig); code != http.StatusAccepted {
		t.Fatalf("the webhook as weft-serve: %d %s", code, out)
	}
	var hook client.RunSummary
	for {
		runs, err := cl.List(ctx, client.WithWebhook("orders"), client.WithStatus(projection.RunCompleted))
		if err == nil && len(runs) == 1 {
			hook = runs[0]
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the webhook's run: %v %+v", err, runs)
		}
		time.Sleep(100 * time.Millisecond) // the trigger, the run, the read model
	}
	if hook.Origin != "webhook orders (trigger orders)" {
		t.Fatalf("the webhook's run %s: origin %q", hook.RunID, hook.Origin)
	}
	testkit.CheckNoViolations(t, dir)

	// What the gateway never does, with its credentials: refused.
	sc := s.connect(t, userServe)
	victim := run
	for _, f := range []struct {
		subject string
		typ     events.Type
	}{
		{sub(victim, "c.cancelreq"), events.RunCancelRequested},
		{sub(victim, "d.started"), events.RunStarted},
		{sub(victim, "d.completed"), events.RunCompleted},
		{sub(victim, "w."+queueA+".invoked"), events.NodeInvoked},
		{"weft.t." + eventlog.Slot(victim) + "." + victim + ".t1", events.TimerFired},
	} {
		sc.refusedPublish(t, admin, forged(f.subject, f.typ))
	}
	for _, subj := range []string{"orders.other", "payments.created", "$KV.weft-schedules.tdef.evil", "$KV.weft-runs.completed.x"} {
		if err := sc.nc.Publish(subj, []byte("{}")); err != nil {
			t.Fatal(err)
		}
		sc.violation(t, "Publish", subj)
	}
	api := "$JS.API."
	for _, call := range []string{
		api + "CONSUMER.CREATE.ORDERS.mine",
		api + "CONSUMER.MSG.NEXT.ORDERS." + "weft-trigger-orders",
		api + "CONSUMER.CREATE.WEFT.mine",
		api + "STREAM.INFO.KV_weft-runs",
		api + "DIRECT.GET.KV_weft-schedules.$KV.weft-schedules.def.x",
		api + "STREAM.PURGE.WEFT",
	} {
		sc.refusedRequest(t, call, []byte(`{}`))
	}
	if _, err := sc.nc.SubscribeSync("weft.r.*.*.>"); err != nil {
		t.Fatal(err)
	}
	sc.violation(t, "Subscription", "weft.r.*.*.>")
	// The webhook's subject, as the gateway publishes it (a stored
	// message with a reply on its own inbox): allowed.
	m := nats.NewMsg("orders.webhook")
	m.Data = []byte(`{"order": "o-2"}`)
	if _, err := sc.js.PublishMsg(ctx, m); err != nil {
		t.Fatalf("weft-serve publishing on its webhook's subject: %v", err)
	}
}

// between is the text of s between the first before and the after that
// follows it ("" when there is none).
func between(s, before, after string) string {
	_, rest, ok := strings.Cut(s, before)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, after)
	return v
}
