package readmodel_test

import (
	"errors"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/readmodel"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// TestFilterMatches: the query language over summaries, in CEL's own
// spelling and in the AND/OR/NOT/= one, with times compared to strings.
func TestFilterMatches(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	billing := readmodel.Summary{RunID: "order-1", Graph: "billing", Status: projection.RunFailed,
		StartedAt: time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC), EndedAt: time.Date(2026, 11, 2, 9, 1, 0, 0, time.UTC),
		Attrs: map[string]string{"customer": "acme", "schedule": "nightly"}}
	stuck := readmodel.Summary{RunID: "06h1abc", Graph: "etl", Status: projection.RunCancelled, Terminated: true,
		StartedAt: now.Add(-2 * time.Hour), Parent: "p1", ForkedFrom: &events.ForkRef{RunID: "f1", Position: 3}}
	running := readmodel.Summary{RunID: "06h1def", Graph: "etl", Status: projection.RunRunning, StartedAt: now.Add(-3 * time.Hour)}
	tests := []struct {
		name  string
		query string
		want  []string
	}{
		{"the issue's example", `status = "failed" AND graph = "billing" AND started > "2026-11-01"`, []string{"order-1"}},
		{"CEL spelling", `status == "failed" && graph == "billing" && started > timestamp("2026-11-01T00:00:00Z")`, []string{"order-1"}},
		{"terminated is terminated", `status = "terminated"`, []string{"06h1abc"}},
		{"cancelled is not terminated", `status == "cancelled"`, nil},
		{"terminated flag", `terminated`, []string{"06h1abc"}},
		{"or and not", `graph = "billing" or NOT (status = "running")`, []string{"order-1", "06h1abc"}},
		{"relative time", `started < now - duration("150m")`, []string{"order-1", "06h1def"}},
		{"ended unset", `ended == timestamp(0) || ended > "2026-11-02 09:00:30"`, []string{"order-1", "06h1abc", "06h1def"}},
		{"attribute", `attrs.customer == "acme"`, []string{"order-1"}},
		{"attribute present", `"customer" in attrs`, []string{"order-1"}},
		{"schedule", `schedule = "nightly"`, []string{"order-1"}},
		{"lineage", `parent == "p1" && forkedFrom == "f1"`, []string{"06h1abc"}},
		{"id prefix", `id.startsWith("06h1")`, []string{"06h1abc", "06h1def"}},
		{"string holding AND", `graph != "A AND B = C"`, []string{"order-1", "06h1abc", "06h1def"}},
		{"date on the left", `"2026-11-03" > started`, []string{"order-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := readmodel.ParseFilter(tt.query)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range []readmodel.Summary{billing, stuck, running} {
				if f.Match(&s, now) {
					got = append(got, s.RunID)
				}
			}
			if len(got) != len(tt.want) || len(got) > 0 && !equal(got, tt.want) {
				t.Errorf("%s: kept %v, want %v", tt.query, got, tt.want)
			}
		})
	}

}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestFilterErrorsSayWhere: a query that does not compile gets its line
// and column, in the query as written (= and AND rewritten or not).
func TestFilterErrorsSayWhere(t *testing.T) {
	tests := []struct {
		query     string
		line, col int
		msg       string
	}{
		{`status = "failed" AND staus = "x"`, 1, 23, "undeclared reference to 'staus'"},
		{`status == "failed" && grph == "x"`, 1, 23, "undeclared reference to 'grph'"},
		{"status = \"failed\"\n  AND graph = 3", 2, 13, "no matching overload"},
		{`graph`, 1, 1, "want a condition"},
		{``, 1, 1, "empty query"},
		{`status = "failed" AND (`, 1, 24, "Syntax error"},
		{`status = "failed" AND started > "yesterday"`, 1, 33, `"yesterday" is not a time`},
	}
	for _, tt := range tests {
		_, err := readmodel.ParseFilter(tt.query)
		var fe *readmodel.FilterError
		if !errors.As(err, &fe) {
			t.Errorf("%q: %v, want a FilterError", tt.query, err)
			continue
		}
		if fe.Line != tt.line || fe.Column != tt.col || !contains(fe.Msg, tt.msg) {
			t.Errorf("%q: line %d column %d %q, want line %d column %d %q\n%v", tt.query, fe.Line, fe.Column, fe.Msg, tt.line, tt.col, tt.msg, err)
		}
	}
}

func contains(s, sub string) bool { return len(sub) == 0 || indexOf(s, sub) >= 0 }

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

// FuzzParseFilter: any query compiles or gets a located error, and a
// compiled one evaluates, without a panic.
func FuzzParseFilter(f *testing.F) {
	for _, q := range []string{`status = "failed" AND graph = "billing" AND started > "2026-11-01"`, `attrs.x == "y"`,
		`NOT terminated`, `"2026-11-01" < started`, `started > "x`, `id.matches("^a")`, "a\n=\n'"} {
		f.Add(q)
	}
	s := readmodel.Summary{RunID: "r", Graph: "g", Status: projection.RunRunning, Attrs: map[string]string{"x": "y"}}
	f.Fuzz(func(t *testing.T, q string) {
		flt, err := readmodel.ParseFilter(q)
		if err != nil {
			var fe *readmodel.FilterError
			if !errors.As(err, &fe) || fe.Line < 1 || fe.Column < 1 {
				t.Fatalf("%q: %v, want a located FilterError", q, err)
			}
			return
		}
		flt.Match(&s, time.Now())
	})
}
