package expr

import (
	"context"
	"strings"
	"testing"
)

// TestNumberRules holds the package doc's (and pkg/graph's) number rules:
// whole numbers are ints, arithmetic does not mix int and double,
// comparisons do.
func TestNumberRules(t *testing.T) {
	state := map[string]any{"count": float64(2), "price": float64(10), "rate": 1.5}
	cases := []struct {
		src     string
		want    any
		wantErr string
	}{
		{src: "state.count + 1", want: float64(3)},
		{src: "state.rate * 2.0", want: float64(3)},
		{src: "double(state.price) * 1.5", want: float64(15)},
		{src: "state.count > 1.5", want: true},
		{src: "state.count == 2.0", want: true},
		{src: "state.count + 1.0", wantErr: "no such overload"},
		{src: "state.price * 1.5", wantErr: "no such overload"},
	}
	for _, c := range cases {
		p, err := Compile(c.src, Any, 0)
		if err != nil {
			t.Fatalf("%s: compile: %v", c.src, err)
		}
		got, err := p.Eval(context.Background(), Vars{State: state})
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s = %v, %v; want an error with %q", c.src, got, err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s = %v (%T), %v; want %v", c.src, got, got, err, c.want)
		}
	}
}
