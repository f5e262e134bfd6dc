package suggest

import "testing"

func TestClosest(t *testing.T) {
	tests := []struct {
		name       string
		s          string
		candidates []string
		fold       bool
		want       string
	}{
		{"one edit", "ecko", []string{"echo", "sleep", "human"}, false, "echo"},
		{"transposition", "stauts", []string{"status", "list"}, false, "status"},
		{"short name, two edits", "ab", []string{"xy"}, false, ""},
		{"long name, two edits", "duraton", []string{"duration"}, false, "duration"},
		{"too far", "frobnicate", []string{"echo", "sleep"}, false, ""},
		{"case folded", "maxiterations", []string{"maxIterations"}, true, "maxIterations"},
		{"case kept", "ECHO", []string{"echo"}, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := Closest
			if tt.fold {
				f = ClosestFold
			}
			if got := f(tt.s, tt.candidates); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
