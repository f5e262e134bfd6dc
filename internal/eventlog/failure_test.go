package eventlog_test

import (
	"github.com/weft-dev/weft/internal/eventlog"

	"testing"
)

// TestFailureSaysItOnce: a run's failure and the node failure it wraps are
// printed with each message once, and a cause's type only where it differs.
func TestFailureSaysItOnce(t *testing.T) {
	cases := []struct {
		f    *eventlog.Failure
		want string
	}{
		{&eventlog.Failure{Type: "Boom", Message: "it broke"}, "Boom: it broke"},
		{&eventlog.Failure{Type: "EvaluationError", Message: `node "t" failed after 1 attempt(s)`,
			Cause: &eventlog.Failure{Type: "EvaluationError", Message: "no such key: nope"}},
			`EvaluationError: node "t" failed after 1 attempt(s): no such key: nope`},
		{&eventlog.Failure{Type: "Timeout", Message: `node "a" failed after 3 attempt(s)`,
			Cause: &eventlog.Failure{Type: "HTTPError", Message: "503",
				Cause: &eventlog.Failure{Type: "HTTPError", Message: "upstream down"}}},
			`Timeout: node "a" failed after 3 attempt(s): HTTPError: 503: upstream down`},
	}
	for _, c := range cases {
		if got := c.f.Error(); got != c.want {
			t.Errorf("Error() = %q, want %q", got, c.want)
		}
	}
}
