package expr

import (
	"context"
	"fmt"
	"testing"
)

func TestPathsAndMissingKeys(t *testing.T) {
	for _, tc := range []struct {
		src   string
		paths string
		miss  string // the path a failing evaluation names
	}{
		{"output.approved", "[output.approved]", "output.approved"},
		{"has(output.ok) && output.ok && state.user.email == 'x'", "[output.ok(has) state.user.email]", "state.user.email"},
		{"invocation['tier'] == 'gold'", "[invocation.tier]", "invocation.tier"},
		{"size(state.items) > 0", "[state.items]", "state.items"},
	} {
		p, err := Compile(tc.src, Bool, 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, x := range p.Paths() {
			s := x.String()
			if x.Guarded {
				s += "(has)"
			}
			got = append(got, s)
		}
		if fmt.Sprint(got) != tc.paths {
			t.Errorf("%s: paths %v, want %s", tc.src, got, tc.paths)
		}
		_, err = p.EvalBool(context.Background(), Vars{State: map[string]any{"user": map[string]any{}}, Output: map[string]any{"ok": true}})
		m, ok := IsMissingKey(err)
		if !ok || m.Path != tc.miss {
			t.Errorf("%s: error %v, want a missing %s", tc.src, err, tc.miss)
			continue
		}
		t.Logf("%s: %v; %s", tc.src, m, m.Fix())
	}
}
