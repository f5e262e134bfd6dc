package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/pkg/projection"
)

func TestStalled(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) *time.Time { at := now.Add(-d); return &at }
	running := func(nodes map[string]*projection.NodeState, timers map[string]projection.Timer) *projection.State {
		return &projection.State{RunID: "r1", Status: projection.RunRunning, UpdatedAt: ago(10 * time.Minute), Nodes: nodes, Timers: timers}
	}
	tests := []struct {
		name string
		st   *projection.State
		want string // "" for no warning
	}{
		{"recent", &projection.State{RunID: "r1", Status: projection.RunRunning, UpdatedAt: ago(time.Minute)}, ""},
		{"idle", running(nil, nil), "run r1 has not advanced for"},
		{"ended", &projection.State{RunID: "r1", Status: projection.RunCompleted, UpdatedAt: ago(time.Hour)}, ""},
		{"waiting for a signal", running(map[string]*projection.NodeState{"ask": {Status: projection.NodeWaiting, WaitingFor: "signal"}}, nil), ""},
		{"a wait to come", running(map[string]*projection.NodeState{"nap": {Status: projection.NodeWaiting, WaitingFor: projection.WaitingForTimer, Deadline: ago(-time.Hour)}},
			map[string]projection.Timer{"wait-nap-1": {Purpose: projection.PurposeWait, At: now.Add(time.Hour)}}), ""},
		{"a wait overdue", running(map[string]*projection.NodeState{"nap": {Status: projection.NodeWaiting, WaitingFor: projection.WaitingForTimer, Deadline: ago(7 * time.Minute)}},
			map[string]projection.Timer{"wait-nap-1": {Purpose: projection.PurposeWait, At: now.Add(-7 * time.Minute)}}), "has not advanced"},
		{"timer due later", running(nil, map[string]projection.Timer{"t": {Purpose: "retry", At: now.Add(time.Minute)}}), ""},
		{"timer overdue", running(nil, map[string]projection.Timer{"t": {Purpose: "retry", At: now.Add(-time.Minute)}}), "has not advanced"},
		{"recent heartbeat", running(map[string]*projection.NodeState{"n": {Status: projection.NodeRunning, HeartbeatAt: ago(time.Second)}}, nil), ""},
		{"within its timeout", running(map[string]*projection.NodeState{"n": {Status: projection.NodeRunning, StartedAt: ago(10 * time.Minute), TimeoutMs: int64(time.Hour / time.Millisecond)}}, nil), ""},
		{"running with no timeout", running(map[string]*projection.NodeState{"n": {Status: projection.NodeRunning, StartedAt: ago(10 * time.Minute)}}, nil), "while n ran"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := stalled(tt.st, now, 5*time.Minute)
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("stalled = %q, want %q", got, tt.want)
			}
		})
	}
}
