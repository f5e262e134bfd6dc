package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/cli"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// curlBlocks are the curl commands of docs/http.md, each with the shell
// lines before it in its block.
func curlBlocks(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../docs/http.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(string(b), -1) {
		if strings.Contains(m[1], "curl ") {
			out = append(out, m[1])
		}
	}
	return out
}

// TestHTTPDocs runs the curl examples of docs/http.md against weft serve
// over a running engine, with an event trigger on the webhook's subject:
// a run started twice with one key is one run, the signal lands once and
// the run completes, and a signed webhook starts one run however often it
// is sent; a wrong signature and an old timestamp are refused.
func TestHTTPDocs(t *testing.T) {
	url, cl := scheduleEngine(t)
	nc, err := natsgo.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}}); err != nil {
		t.Fatal(err)
	}
	if r := weft(t, "trigger", "create", "orders", "-nats="+url, "-graph", helloFile, "-subject", "orders.webhook", "-webhook", "orders", "-input", `{"name": input.order}`); r.code != 0 {
		t.Fatalf("trigger create: %+v", r)
	}
	token, secret := "tok-0123456789abcdef", "whsec-0123456789abcdef"
	t.Setenv("WEFT_GATEWAY_TOKENS", "alice="+token)
	t.Setenv("WEFT_WEBHOOK_SECRET_ORDERS", secret)
	port := testkit.FreePort(t)
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		var out bytes.Buffer
		cli.Main(sctx, []string{"serve", "-nats=" + url, "-addr", fmt.Sprintf("127.0.0.1:%d", port), "-webhook", "orders=orders.webhook"}, strings.NewReader(""), &out, &out)
	}()
	t.Cleanup(func() { stop(); <-done })
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := http.Get(base + "/"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("weft serve did not listen")
		}
		// Polls: the server's port opens without an event to wait for.
		time.Sleep(20 * time.Millisecond)
	}
	blocks := curlBlocks(t)
	if len(blocks) != 3 {
		t.Fatalf("docs/http.md: %d curl examples, want 3", len(blocks))
	}
	sh := func(script string, env ...string) (int, map[string]any) {
		t.Helper()
		cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", strings.Replace(script, "curl -sS", "curl -sS -w '\\n%{http_code}'", 1))
		cmd.Env = append(os.Environ(), append([]string{"WEFT_HTTP=" + base, "WEFT_TOKEN=" + token, "WEFT_SECRET=" + secret}, env...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", script, err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		var code int
		fmt.Sscan(lines[len(lines)-1], &code)
		var body map[string]any
		_ = json.Unmarshal([]byte(strings.Join(lines[:len(lines)-1], "\n")), &body)
		return code, body
	}
	// Start, twice with one key.
	code, body := sh(blocks[0])
	run, _ := body["runId"].(string)
	if code != 201 || !strings.HasPrefix(run, "h-") {
		t.Fatalf("start: %d %v", code, body)
	}
	if code, again := sh(blocks[0]); code != 200 || again["runId"] != run || again["replayed"] != true {
		t.Fatalf("start again: %d %v", code, again)
	}
	// Signal, twice with one key; the run completes, signalled once.
	if code, body := sh(blocks[1], "RUN="+run); code != 202 {
		t.Fatalf("signal: %d %v", code, body)
	}
	st, err := cl.Wait(ctx, run)
	if err != nil || st.Status != projection.RunCompleted {
		t.Fatalf("run %s: %v %+v", run, err, st)
	}
	if code, body := sh(blocks[1], "RUN="+run); code != 200 || body["replayed"] != true {
		t.Fatalf("signal again: %d %v", code, body)
	}
	evs, _ := cl.Events(ctx, run)
	signals := 0
	for _, e := range evs {
		if strings.Contains(string(e.Type), "signal") {
			signals++
		}
	}
	if signals != 1 {
		t.Fatalf("%d signals in the run's log, want 1", signals)
	}
	if code, body := sh(blocks[1], "RUN=nosuchrun"); code != 404 {
		t.Fatalf("signal of a missing run: %d %v", code, body)
	}
	// Without a token.
	if code, _ := sh(strings.Replace(blocks[0], `-H "Authorization: Bearer $WEFT_TOKEN"`, "", 1)); code != 401 {
		t.Fatalf("start without a token: %d", code)
	}
	// The webhook: signed, sent twice as the same delivery: one run.
	fixed := strings.Replace(blocks[2], "T=$(date +%s)", "T=${T_FIXED:-$(date +%s)}", 1)
	now := fmt.Sprint(time.Now().Unix())
	for range 2 {
		if code, body := sh(fixed, "T_FIXED="+now); code != 202 {
			t.Fatalf("webhook: %d %v", code, body)
		}
	}
	// A wrong secret, and a timestamp an hour old: refused.
	if code, _ := sh(strings.Replace(fixed, `-hmac "$WEFT_SECRET"`, `-hmac wrong`, 1), "T_FIXED="+now); code != 401 {
		t.Fatalf("a wrong signature: %d", code)
	}
	if code, body := sh(fixed, fmt.Sprint("T_FIXED=", time.Now().Add(-time.Hour).Unix())); code != 401 || !strings.Contains(fmt.Sprint(body["error"]), "tolerance") {
		t.Fatalf("a replayed old delivery: %d %v", code, body)
	}
	for {
		runs, _ := cl.List(ctx, client.WithTrigger("orders"), client.WithStatus(projection.RunCompleted))
		if len(runs) == 1 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("webhook runs: %+v", runs)
		}
		// Polls: the read model's list notifies nobody.
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // a second run, were there one, would be listed by now
	runs, _ := cl.List(ctx, client.WithTrigger("orders"))
	if len(runs) != 1 {
		t.Fatalf("webhook runs: %+v, want 1", runs)
	}
	// The run says it came from the webhook (through its trigger): in
	// the read model, 'weft list -webhook', and 'weft status'.
	hook := runs[0]
	if hook.Origin != "webhook orders (trigger orders)" || hook.Attrs["webhook"] != "orders" {
		t.Fatalf("the webhook's run %s: origin %q, attrs %v", hook.RunID, hook.Origin, hook.Attrs)
	}
	st, err = cl.Get(ctx, hook.RunID)
	if err != nil || st.Trigger == nil || st.Trigger.Kind != events.TriggerWebhook || st.Trigger.Webhook != "orders" || st.Trigger.Name != "orders" {
		t.Fatalf("the webhook's run %s: %v, trigger %+v", hook.RunID, err, st.Trigger)
	}
	list := weft(t, "list", "-nats="+url, "-webhook", "orders")
	wantContains(t, "list -webhook orders", list.stdout, "ORIGIN", hook.RunID, "webhook orders (trigger orders)")
	if strings.Contains(list.stdout, run) {
		t.Errorf("list -webhook orders lists the run started over HTTP, %s:\n%s", run, list.stdout)
	}
	wantContains(t, "status of the webhook's run", weft(t, "status", hook.RunID, "-nats="+url).stdout, "origin", "webhook orders (trigger orders), message msgid:wh-orders-")
	wantContains(t, "trigger describe", weft(t, "trigger", "describe", "orders", "-nats="+url).stdout, "webhook", "orders")
}
