package cli_test

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/internal/tsbuild"
)

// mixedRun starts the mixed-fleet example's graph; TestDocs passes it over
// (it needs the TypeScript worker), TestMixedFleet runs it.
const mixedRun = "weft run examples/ts-worker/mixed.yaml"

var (
	// setupLine is a documented build step: (cd DIR && npm ci && npm run build).
	setupLine = regexp.MustCompile(`\(cd (\S+) && npm ci && npm run build\)`)
	// workerLine is the documented command of the TypeScript worker.
	workerLine = regexp.MustCompile("node examples/ts-worker/[^`&#\\s]+")
)

// TestMixedFleet runs the mixed-fleet example as the README's tour and
// examples/README.md show it: their build steps (through package
// tsbuild, which runs the same npm ci && npm run build under a lock, so
// that tests of other packages building the SDK at the same moment do not
// trip over each other), weft dev (its Go worker serves the queue
// default), the TypeScript worker's command as documented (the queue ts),
// and each document's weft run of examples/ts-worker/mixed.yaml, which
// must complete with the state the graph computes from both workers'
// outputs. It needs Node and npm, and fails, never skips, without them.
func TestMixedFleet(t *testing.T) {
	t.Chdir("../..")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	setups := map[string]bool{}
	var worker []string
	var runs []docCommand
	for _, doc := range documents {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range setupLine.FindAllStringSubmatch(string(b), -1) {
			setups[m[1]] = true
		}
		if w := workerLine.FindString(string(b)); w != "" && worker == nil {
			worker = strings.Fields(w)
		}
		found := false
		for _, c := range parseDoc(t, doc).commands {
			if strings.HasPrefix(c.text, mixedRun+" ") {
				runs = append(runs, c)
				found = true
			}
		}
		if !found {
			t.Errorf("%s shows no %q", doc, mixedRun)
		}
	}
	if worker == nil {
		t.Fatalf("no document shows the TypeScript worker's command (%s)", workerLine)
	}
	for _, dir := range []string{tsbuild.SDKDir, tsbuild.ExampleDir} {
		if !setups[dir] {
			t.Errorf("the documents do not show (cd %s && npm ci && npm run build)", dir)
		}
		if err := tsbuild.Prepare(ctx, dir, nil); err != nil {
			t.Fatalf("the mixed-fleet example needs %s built: %v", dir, err)
		}
	}
	node, err := tsbuild.Node()
	if err != nil {
		t.Fatal(err)
	}

	url := startDev(t)
	t.Setenv("WEFT_NATS_URL", url)
	var out testkit.Buffer
	cmd := exec.Command(node, worker[1:]...)
	cmd.Env = append(os.Environ(), "WEFT_NATS_URL="+url)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", strings.Join(worker, " "), err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("the TypeScript worker did not stop cleanly on SIGTERM: %v\n%s", err, out.String())
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("the TypeScript worker did not stop within 30s of SIGTERM:\n%s", out.String())
		}
	})

	for _, c := range runs {
		args, err := expand(c.words[1:], "")
		if err != nil {
			t.Fatalf("%s: %v", c.text, err)
		}
		r := weftDoc(t, args)
		if r.code != 0 {
			t.Fatalf("%s: exit %d\n%s%s\nthe TypeScript worker said:\n%s", c.text, r.code, r.stdout, r.stderr, out.String())
		}
		for _, want := range []string{"completed", `"summary": "7 words, the longest fleets, filed as weft-runs-one-graph-on-many-fleets"`} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("%s: the output does not hold %q:\n%s", c.text, want, r.stdout)
			}
		}
	}
}
