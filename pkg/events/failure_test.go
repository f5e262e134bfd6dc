package events_test

import (
	"testing"

	"github.com/weft-dev/weft/pkg/events"
)

// TestFailureSaysItOnce: a run's failure and the node failure it wraps are
// printed with each message once, and a cause's type only where it differs.
func TestFailureSaysItOnce(t *testing.T) {
	cases := []struct {
		f    *events.Failure
		want string
	}{
		{&events.Failure{Type: "Boom", Message: "it broke"}, "Boom: it broke"},
		{&events.Failure{Type: "EvaluationError", Message: `node "t" failed after 1 attempt(s)`,
			Cause: &events.Failure{Type: "EvaluationError", Message: "no such key: nope"}},
			`EvaluationError: node "t" failed after 1 attempt(s): no such key: nope`},
		{&events.Failure{Type: "Timeout", Message: `node "a" failed after 3 attempt(s)`,
			Cause: &events.Failure{Type: "HTTPError", Message: "503",
				Cause: &events.Failure{Type: "HTTPError", Message: "upstream down"}}},
			`Timeout: node "a" failed after 3 attempt(s): HTTPError: 503: upstream down`},
	}
	for _, c := range cases {
		if got := c.f.Error(); got != c.want {
			t.Errorf("Error() = %q, want %q", got, c.want)
		}
	}
}
