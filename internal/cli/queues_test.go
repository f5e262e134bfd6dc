package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Three runs of a node limited to one at a time: 'weft queues' shows the
// slot held and two waiting, 'weft status' says what a waiting node waits
// for, and once the runs end nothing is in use.
func TestQueuesShowsLimits(t *testing.T) {
	url, _ := engine(t)
	file := filepath.Join(t.TempDir(), "limited.yaml")
	if err := os.WriteFile(file, []byte(`name: limited
nodes:
  - {id: work, type: sleep, config: {duration: 1s}, concurrency: {max: 1, key: "invocation.tenant"}}
edges: [{from: START, to: work}, {from: work, to: END}]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := weft(t, "queues", "-nats", url); r.code != 0 || !strings.Contains(r.stdout, "no concurrency limit is in use") {
		t.Fatalf("weft queues before any run: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	var runs []string
	for range 3 {
		r := weft(t, "run", file, "-nats", url, "-invocation", `{"tenant":"acme"}`)
		if r.code != 0 {
			t.Fatalf("weft run: exit %d: %s", r.code, r.stderr)
		}
		runs = append(runs, strings.Fields(r.stdout)[0])
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := weft(t, "queues", "-nats", url)
		if strings.Contains(r.stdout, "limited/work") && strings.Contains(r.stdout, "acme") &&
			strings.Contains(r.stdout, "1/1") && strings.Contains(r.stdout, "  2  ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("weft queues never showed 1/1 held and 2 waiting:\n%s%s", r.stdout, r.stderr)
		}
		// Polls: weft queues is a read of the limits, which notifies nobody.
		time.Sleep(50 * time.Millisecond)
	}
	waiting := 0
	for _, run := range runs {
		if s := weft(t, "status", run, "-nats", url); strings.Contains(s.stdout, `waiting for a slot of limited/work, key "acme" (max 1)`) {
			waiting++
		}
	}
	if waiting != 2 {
		t.Errorf("%d runs' status says they wait for a slot, want 2", waiting)
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		r := weft(t, "queues", "-nats", url, "-o", "json")
		if strings.Contains(r.stdout, `"limits":[]`) || strings.Contains(r.stdout, `"limits": []`) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("limits still in use after the runs:\n%s%s", r.stdout, r.stderr)
		}
		// Polls: weft queues is a read of the limits, which notifies nobody.
		time.Sleep(100 * time.Millisecond)
	}
}

// TestQueuesAndWorkers: 'weft queues' lists each task queue with its
// workers, their types, and the work in flight and waiting (a queue no
// worker serves shows its waiting work); 'weft workers' lists the workers
// and says a coordinator is alive.
func TestQueuesAndWorkers(t *testing.T) {
	url, cl := engine(t)
	stranded := `
name: stranded
nodes:
  - {id: render, type: echo, queue: gpu}
edges: [{from: START, to: render}, {from: render, to: END}]
`
	startRun(t, cl, stranded, nil)
	startRun(t, cl, stranded, nil)
	waitFor(t, func() bool {
		r := weft(t, "queues", "-nats", url)
		return regexp.MustCompile(`(?m)^gpu +0 +\(no live worker\) +0 +2$`).MatchString(r.stdout)
	})
	r := weft(t, "queues", "-nats", url)
	wantMatch(t, "weft queues", r.stdout, `(?m)^QUEUE +WORKERS +TYPES +IN FLIGHT +WAITING$`, `(?m)^default +1 +.*echo.* +0 +0$`)
	if strings.Index(r.stdout, "default") > strings.Index(r.stdout, "gpu") {
		t.Errorf("the default queue is not first:\n%s", r.stdout)
	}
	r = weft(t, "queues", "-nats", url, "-o", "json")
	var js struct {
		Queues []struct {
			Name              string
			Waiting, InFlight *uint64
			Types             []string
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &js); err != nil || len(js.Queues) != 2 || js.Queues[1].Waiting == nil || *js.Queues[1].Waiting != 2 {
		t.Errorf("queues -o json: %v\n%s", err, r.stdout)
	}
	r = weft(t, "workers", "-nats", url)
	wantMatch(t, "weft workers", r.stdout, `(?m)^WORKER +QUEUES +TYPES +STARTED +LAST SEEN$`, `(?m)^test-worker +default +.*echo.* ago +\S+ ago$`, `(?m)^coordinators: alive`)
}

// A rate limit of 2 a minute taken three times: 'weft queues' shows its
// key with no token left and one unit waiting for its turn, in half a
// minute.
func TestQueuesShowsRateTokens(t *testing.T) {
	url, _ := engine(t)
	file := filepath.Join(t.TempDir(), "rated.yaml")
	if err := os.WriteFile(file, []byte(`name: rated
nodes:
  - {id: call, type: echo, rate: {limit: 2, per: 1m, key: "invocation.tenant"}}
edges: [{from: START, to: call}, {from: call, to: END}]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if r := weft(t, "run", file, "-nats", url, "-invocation", `{"tenant":"acme"}`); r.code != 0 {
			t.Fatalf("weft run: exit %d: %s", r.code, r.stderr)
		}
	}
	row := regexp.MustCompile(`rated/call\s+acme\s+2/1m0s\s+0\s+1\s+in \d\d\.\d+s\s+-`)
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := weft(t, "queues", "-nats", url)
		if strings.Contains(r.stdout, "TOKENS") && row.MatchString(r.stdout) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("weft queues never showed the key with 0 tokens and 1 waiting:\n%s%s", r.stdout, r.stderr)
		}
		// Polls: weft queues is a read of the limits, which notifies nobody.
		time.Sleep(100 * time.Millisecond)
	}
	r := weft(t, "queues", "-nats", url, "-o", "json")
	var v struct {
		Rates []struct {
			Limit  string
			Tokens int
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || len(v.Rates) != 1 || v.Rates[0].Limit != "rated/call" || v.Rates[0].Tokens != 0 {
		t.Fatalf("weft queues -o json: %v %+v\n%s", err, v, r.stdout)
	}
}
