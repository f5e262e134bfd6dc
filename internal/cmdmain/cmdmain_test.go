package cmdmain_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/weft-dev/weft/internal/cmdmain"
)

func TestCode(t *testing.T) {
	usage := errors.New("usage")
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"success", nil, 0},
		{"usage", fmt.Errorf("%w: -x: bad", usage), 2},
		{"other", errors.New("connection refused"), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w bytes.Buffer
			if got := cmdmain.Code(&w, "prog", usage, tt.err); got != tt.want {
				t.Fatalf("code %d, want %d", got, tt.want)
			}
			if tt.err != nil && w.String() != "prog: "+tt.err.Error()+"\n" {
				t.Fatalf("printed %q", w.String())
			}
		})
	}
}
