package cli_test

import (
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/pkg/projection"
)

// A run that only waits shows as waiting in weft list and weft status,
// with the node it waits on, the deadline and, for a human node, the
// command that answers it; -status running still finds it.
func TestWaitingRunsShowAsWaiting(t *testing.T) {
	url, cl := engine(t)
	human := strings.TrimSpace(weft(t, "run", approvalFile, "-nats", url).stdout)
	waiter := writeFile(t, "wait.yaml", `
name: later
nodes:
  - {id: nap, type: wait, config: {until: "state.at"}}
edges: [{from: START, to: nap}, {from: nap, to: END}]
`)
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	timer := strings.TrimSpace(weft(t, "run", waiter, "-input", `{"at":"`+at.Format(time.RFC3339)+`"}`, "-nats", url).stdout)
	waitListed(t, cl, human, projection.RunWaiting)
	waitListed(t, cl, timer, projection.RunWaiting)

	answer := "weft signal " + human + ` approve -data '{"approved":...}'`
	r := weft(t, "list", "-nats", url)
	wantContains(t, "list", r.stdout, "WAITING ON", human, "waiting", "approve (signal, until", timer, "waiting", "nap (wait, until "+at.Local().Format(time.DateTime)+")",
		"to answer the human nodes that wait", answer)
	r = weft(t, "list", "-status", "waiting", "-nats", url)
	wantContains(t, "list -status waiting", r.stdout, human, timer)
	r = weft(t, "list", "-status", "running", "-nats", url)
	wantContains(t, "list -status running", r.stdout, human, timer)

	r = weft(t, "status", human, "-nats", url)
	wantContains(t, "status of the human run", r.stdout, "status", "waiting", "waits on", "node approve: a signal (deadline in 2", "answer: "+answer,
		"pending:", "approve: waiting for a signal (a person)")
	r = weft(t, "status", timer, "-nats", url)
	wantContains(t, "status of the wait run", r.stdout, "status", "waiting", "waits on", "node nap: a wait, ends in", at.Local().Format(time.DateTime),
		"a wait, ends in", "pending:", "nap: waiting for its time (a wait node, on a durable timer)", "ends in")

	// Answered, the human run goes on (and ends): no longer waiting.
	if r = weft(t, "signal", human, "approve", "-data", `{"approved": true}`, "-nats", url); r.code != 0 {
		t.Fatalf("signal: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	waitListed(t, cl, human, projection.RunCompleted)
}

// A run over its graph's run limit shows as waiting, for a slot of the
// limit and key, in weft list and weft status (and in weft queues, as the
// limit's waiter).
func TestRunWaitingForItsSlotShows(t *testing.T) {
	url, cl := engine(t)
	file := writeFile(t, "limited.yaml", `
name: onebyone
concurrency: {max: 1, key: "invocation.tenant"}
nodes:
  - {id: nap, type: sleep, config: {duration: 60s}, timeout: 120s}
edges: [{from: START, to: nap}, {from: nap, to: END}]
`)
	first := strings.TrimSpace(weft(t, "run", file, "-invocation", `{"tenant":"acme"}`, "-nats", url).stdout)
	waitListed(t, cl, first, projection.RunRunning)
	second := strings.TrimSpace(weft(t, "run", file, "-invocation", `{"tenant":"acme"}`, "-nats", url).stdout)
	waitListed(t, cl, second, projection.RunWaiting)

	r := weft(t, "list", "-status", "waiting", "-nats", url)
	wantContains(t, "list", r.stdout, second, "waiting", `START (slot of "onebyone" key "acme" (max 1))`)
	if strings.Contains(r.stdout, first) {
		t.Errorf("the run holding the slot is listed as waiting:\n%s", r.stdout)
	}
	r = weft(t, "status", second, "-nats", url)
	wantContains(t, "status", r.stdout, "waiting", `waits on`, `a slot of its run limit "onebyone" key "acme" (max 1) (before its first node)`)
	r = weft(t, "queues", "-nats", url)
	wantContains(t, "queues", r.stdout, "onebyone", "acme")

	// Cancelled, the first gives its slot to the second, which starts.
	weft(t, "cancel", first, "-nats", url)
	waitListed(t, cl, second, projection.RunRunning)
	weft(t, "cancel", second, "-nats", url)
	waitListed(t, cl, second, projection.RunCancelled)
}
