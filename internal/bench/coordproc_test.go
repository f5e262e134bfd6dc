package bench

import (
	"bytes"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestCoordProcReadsItsLog feeds a coordinator daemon's log lines through
// the reader: the holder id comes from "took a partition", the counters of
// every "stopped" line are summed, warnings are passed on.
func TestCoordProcReadsItsLog(t *testing.T) {
	self, err := os.FindProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	p := &coordProc{cmd: &exec.Cmd{Process: self}, done: make(chan struct{})}
	log := strings.Join([]string{
		`{"time":"t","level":"INFO","msg":"coordinating","stream":"S"}`,
		`{"time":"t","level":"INFO","msg":"took a partition","partition":3,"share":4,"members":2,"holder":"abc123"}`,
		`{"time":"t","level":"WARN","msg":"consuming a partition","error":"boom"}`,
		`not json at all`,
		`{"time":"t","level":"INFO","msg":"stopped","processed":10,"decisions":7,"malformed":0,"conflicts":1,"reloads":2,"reorders":0,"handed_back":5,"errors":0}`,
		`{"time":"t","level":"INFO","msg":"stopped","processed":4,"decisions":3,"malformed":0,"conflicts":0,"reloads":1,"reorders":1,"handed_back":0,"errors":2}`,
	}, "\n")
	var progress bytes.Buffer
	p.read(strings.NewReader(log), &progress)
	if got := p.holderID(); got != "abc123" {
		t.Errorf("holder = %q, want abc123", got)
	}
	s := p.stopped
	if s.Processed != 14 || s.Decisions != 10 || s.Conflicts != 1 || s.Reloads != 3 || s.Reorders != 1 || s.HandedBack != 5 || s.Errors != 2 || p.nStop != 2 {
		t.Errorf("stopped counters = %+v (%d lines)", s, p.nStop)
	}
	out := progress.String()
	if !strings.Contains(out, "boom") || !strings.Contains(out, "not json at all") || strings.Contains(out, "took a partition") {
		t.Errorf("progress got %q: want the warning and the unparsed line, not the info lines", out)
	}
}

func TestCoordProcCPU(t *testing.T) {
	self, err := os.FindProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	p := &coordProc{cmd: &exec.Cmd{Process: self}}
	before, err := p.cpu()
	if err != nil {
		t.Fatal(err)
	}
	// Burn CPU until the clock-tick counter moves (10ms ticks).
	deadline := time.Now().Add(10 * time.Second)
	x := 0
	for {
		for i := range 1_000_000 {
			x += i
		}
		after, err := p.cpu()
		if err != nil {
			t.Fatal(err)
		}
		if after > before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("CPU time stayed at %s over 10s of spinning (%d)", before, x)
		}
	}
}

func TestDecisionFilters(t *testing.T) {
	if got := decisionFilters(0, 1); !slices.Equal(got, []string{"weft.r.*.*.d.>"}) {
		t.Errorf("one partition: %v", got)
	}
	got := decisionFilters(1, 32)
	if !slices.Equal(got, []string{"weft.r.01.*.d.>", "weft.r.21.*.d.>"}) {
		t.Errorf("partition 1 of 32: %v", got)
	}
}
