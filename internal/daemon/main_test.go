package daemon_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/daemon"
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
			if got := daemon.Code(&w, "prog", usage, tt.err); got != tt.want {
				t.Fatalf("code %d, want %d", got, tt.want)
			}
			if tt.err != nil && w.String() != "prog: "+tt.err.Error()+"\n" {
				t.Fatalf("printed %q", w.String())
			}
		})
	}
}

// A mistake on the command line is said once, naming -h; -h prints the
// flags.
func TestParseFlags(t *testing.T) {
	newFlags := func() *flag.FlagSet {
		fs := flag.NewFlagSet("prog", flag.ContinueOnError)
		fs.Duration("ttl", time.Second, "how long")
		return fs
	}
	var out bytes.Buffer
	err := daemon.ParseFlags(newFlags(), []string{"-ttl", "banana"}, &out)
	if err == nil || strings.Count(err.Error(), "banana") != 1 || !strings.Contains(err.Error(), "run 'prog -h' for the flags") {
		t.Errorf("error %v, want the mistake once and a pointer to -h", err)
	}
	var buf bytes.Buffer
	_ = daemon.Code(&buf, "prog", errors.New("usage"), err)
	if out.Len() != 0 || strings.Count(buf.String(), "banana") != 1 {
		t.Errorf("printed %q then %q, want the mistake once", out.String(), buf.String())
	}
	out.Reset()
	if err := daemon.ParseFlags(newFlags(), []string{"-h"}, &out); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v", err)
	}
	if !strings.Contains(out.String(), "Usage of prog:") || !strings.Contains(out.String(), "-ttl duration") {
		t.Errorf("-h printed %q", out.String())
	}
}
