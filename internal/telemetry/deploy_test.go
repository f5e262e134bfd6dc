package telemetry_test

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/weft-dev/weft/pkg/graph"
)

// TestQuickStartQueuesServed reads deploy/otel/README.md as a reader
// would: each run it starts (weft run FILE) must only put work on queues
// the workers it started before serve (nodeworker -queues, or the
// compose file's workers' WEFT_QUEUES), or the run never finishes.
func TestQuickStartQueuesServed(t *testing.T) {
	const root = "../../"
	compose := composeQueues(t, root+"deploy/docker-compose.yml")
	if len(compose) == 0 {
		t.Fatal("deploy/docker-compose.yml has no nodeworker service with WEFT_QUEUES")
	}
	f, err := os.Open(root + "deploy/otel/README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var served []string // the workers started so far, in reading order
	runs := 0
	queuesFlag := regexp.MustCompile(`-queues[ =]([A-Za-z0-9_,-]+)`)
	runCmd := regexp.MustCompile(`\brun (/?examples/[A-Za-z0-9_./-]+\.ya?ml)`)
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		switch {
		case strings.Contains(text, "cmd/nodeworker") || strings.HasPrefix(strings.TrimSpace(text), "nodeworker "):
			qs := []string{"default"}
			if m := queuesFlag.FindStringSubmatch(text); m != nil {
				qs = strings.Split(m[1], ",")
			}
			served = qs
		case strings.Contains(text, "docker compose") && strings.Contains(text, " up"):
			served = compose
		}
		m := runCmd.FindStringSubmatch(text)
		if m == nil {
			continue
		}
		runs++
		g, err := graph.LoadFile(filepath.Join(root, strings.TrimPrefix(m[1], "/")))
		if err != nil {
			t.Fatalf("README.md:%d: %v", line, err)
		}
		for _, q := range queuesOf(g.Definition()) {
			if !slices.Contains(served, q) {
				t.Errorf("README.md:%d: %s puts work on queue %q, which the workers started before it (%v) do not serve", line, m[1], q, served)
			}
		}
	}
	if runs < 2 {
		t.Errorf("found %d runs started in the README; want the quick start's and the compose one", runs)
	}
}

// queuesOf lists the queues a graph's worker nodes (its subgraphs' too)
// use.
func queuesOf(def *graph.Definition) []string {
	var qs []string
	var walk func(*graph.Definition)
	walk = func(d *graph.Definition) {
		for _, n := range d.Nodes {
			if n.Type == "human" || n.Type == "subgraph" {
				continue // no worker runs them
			}
			q := n.Queue
			if q == "" {
				q = "default"
			}
			if !slices.Contains(qs, q) {
				qs = append(qs, q)
			}
		}
		for _, sub := range d.Graphs {
			walk(sub)
		}
	}
	walk(def)
	return qs
}

// composeQueues returns the queues every nodeworker service of a compose
// file serves.
func composeQueues(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Services map[string]struct {
			Command     []string          `json:"command"`
			Environment map[string]string `json:"environment"`
		} `json:"services"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var all []string
	first := true
	for _, s := range doc.Services {
		if len(s.Command) == 0 || s.Command[0] != "nodeworker" {
			continue
		}
		qs := strings.Split(s.Environment["WEFT_QUEUES"], ",")
		if s.Environment["WEFT_QUEUES"] == "" {
			qs = []string{"default"}
		}
		if first {
			all, first = qs, false
			continue
		}
		// A queue counts as served if every worker serves it: the
		// example must finish with any one of them.
		all = slices.DeleteFunc(all, func(q string) bool { return !slices.Contains(qs, q) })
	}
	return all
}
