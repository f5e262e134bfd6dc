package cli_test

import (
	"strings"
	"testing"
)

// TestHintsNameTheCommandLine: a graph error tells a user of the CLI what
// to do there (a flag, CEL), not which Go option a program would use, and
// says each problem once, on one stream.
func TestHintsNameTheCommandLine(t *testing.T) {
	goCond := writeFile(t, "gocond.yaml", "name: g\nnodes: [{id: a, type: echo}]\nedges: [{from: START, to: a}, {from: a, to: END, when: 'func:vip'}]\n")
	custom := writeFile(t, "custom.yaml", "name: c\nnodes: [{id: a, type: wordcount}]\nedges: [{from: START, to: a}, {from: a, to: END}]\n")
	tests := []struct {
		args     []string
		problem  string
		want     string
		notWants []string
	}{
		{[]string{"validate", goCond}, `no Go condition registered as "vip"`, "write the condition in CEL", []string{"IfFunc", "graph.WithConditions"}},
		{[]string{"run", goCond, "-nats", "nats://127.0.0.1:1"}, `no Go condition registered as "vip"`, "write the condition in CEL", []string{"IfFunc", "graph.WithConditions"}},
		{[]string{"validate", custom}, `unknown type "wordcount"`, "with -types", []string{"WithTypes"}},
		{[]string{"replay", "-graph", custom, "RUN"}, `unknown type "wordcount"`, "with -types", []string{"WithTypes"}},
	}
	for _, tt := range tests {
		r := weft(t, tt.args...)
		out := r.stdout + r.stderr
		if r.code != 1 {
			t.Errorf("weft %s: exit %d, want 1\n%s", strings.Join(tt.args, " "), r.code, out)
		}
		if n := strings.Count(out, tt.problem); n != 1 {
			t.Errorf("weft %s: %q said %d times, want once:\n%s", strings.Join(tt.args, " "), tt.problem, n, out)
		}
		if !strings.Contains(out, tt.want) {
			t.Errorf("weft %s: no hint %q:\n%s", strings.Join(tt.args, " "), tt.want, out)
		}
		for _, nw := range tt.notWants {
			if strings.Contains(out, nw) {
				t.Errorf("weft %s: names the Go API %q on the command line:\n%s", strings.Join(tt.args, " "), nw, out)
			}
		}
	}
}
