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

	answer := "weft signal " + human + ` approve -data '{"approved": ...}'`
	r := weft(t, "list", "-nats", url)
	wantContains(t, "list", r.stdout, "WAITING ON", human, "waiting", "approve (signal, until", timer, "waiting", "nap (wait, until "+at.Local().Format(time.DateTime)+")",
		"to answer the human nodes that wait", answer)
	r = weft(t, "list", "-status", "waiting", "-nats", url)
	wantContains(t, "list -status waiting", r.stdout, human, timer)
	r = weft(t, "list", "-status", "running", "-nats", url)
	wantContains(t, "list -status running", r.stdout, human, timer)

	r = weft(t, "status", human, "-nats", url)
	wantContains(t, "status of the human run", r.stdout, "status", "waiting", "waits on", "node approve: a signal (deadline in 2", "answer: "+answer)
	r = weft(t, "status", timer, "-nats", url)
	wantContains(t, "status of the wait run", r.stdout, "status", "waiting", "waits on", "node nap: a wait until", at.Local().Format(time.DateTime), "waiting until in")

	// Answered, the human run goes on (and ends): no longer waiting.
	if r = weft(t, "signal", human, "approve", "-data", `{"approved": true}`, "-nats", url); r.code != 0 {
		t.Fatalf("signal: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	waitListed(t, cl, human, projection.RunCompleted)
}
