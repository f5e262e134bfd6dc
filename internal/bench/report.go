package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"text/tabwriter"
)

// Result is one row of the results: a figure, its floor measured on the
// same server in the same run, their ratio, and the target.
type Result struct {
	Name  string   `json:"name"`
	Value float64  `json:"value"`
	Unit  string   `json:"unit"`
	Floor *float64 `json:"floor"` // nil: the figure has no floor
	// Ratio is Value / Floor.
	Ratio *float64 `json:"ratio"`
	// Target says what passes, for example "ratio ≤ 2".
	Target string `json:"target,omitempty"`
	Pass   *bool  `json:"pass,omitempty"`
	Notes  string `json:"notes,omitempty"`
}

// target is a pass condition on a row.
type target struct {
	onRatio bool // on Ratio, else on Value
	atMost  bool // ≤ limit, else ≥ limit
	limit   float64
	within  bool // |ratio − 1| ≤ limit
}

func ratioAtMost(x float64) *target  { return &target{onRatio: true, atMost: true, limit: x} }
func ratioAtLeast(x float64) *target { return &target{onRatio: true, limit: x} }
func valueAtMost(x float64) *target  { return &target{atMost: true, limit: x} }

// ratioWithin passes a ratio within x of 1 (0.05: within 5%).
func ratioWithin(x float64) *target { return &target{onRatio: true, within: true, limit: x} }

// row builds a result; floor ≤ 0 means none.
func row(name string, value float64, unit string, floor float64, t *target, notes string) Result {
	r := Result{Name: name, Value: round(value), Unit: unit, Notes: notes}
	if floor > 0 {
		f, q := round(floor), round(value/floor)
		r.Floor, r.Ratio = &f, &q
	}
	if t != nil {
		op := "≥"
		if t.atMost {
			op = "≤"
		}
		what, got := "value", r.Value
		if t.onRatio {
			what = "ratio"
			if r.Ratio != nil {
				got = *r.Ratio
			} else {
				got = math.NaN()
			}
		}
		r.Target = fmt.Sprintf("%s %s %s", what, op, strconv.FormatFloat(t.limit, 'g', -1, 64))
		pass := !math.IsNaN(got) && (t.atMost && got <= t.limit || !t.atMost && got >= t.limit)
		if t.within {
			r.Target = fmt.Sprintf("ratio within 1 ± %s", strconv.FormatFloat(t.limit, 'g', -1, 64))
			pass = !math.IsNaN(got) && math.Abs(got-1) <= t.limit
		}
		r.Pass = &pass
	}
	return r
}

func round(x float64) float64 {
	if x == 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return x
	}
	// Four significant digits.
	d := math.Pow(10, 3-math.Floor(math.Log10(math.Abs(x))))
	return math.Round(x*d) / d
}

// WriteTable prints the results for people.
func WriteTable(w io.Writer, results []Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tvalue\tunit\tfloor\tratio\ttarget\tresult")
	for _, r := range results {
		floor, ratio, verdict := "-", "-", ""
		if r.Floor != nil {
			floor = strconv.FormatFloat(*r.Floor, 'g', -1, 64)
		}
		if r.Ratio != nil {
			ratio = strconv.FormatFloat(*r.Ratio, 'g', -1, 64)
		}
		if r.Pass != nil {
			verdict = "FAIL"
			if *r.Pass {
				verdict = "pass"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, strconv.FormatFloat(r.Value, 'g', -1, 64), r.Unit, floor, ratio, r.Target, verdict)
	}
	_ = tw.Flush()
	for _, r := range results {
		if r.Notes != "" {
			fmt.Fprintf(w, "  %s: %s\n", r.Name, r.Notes)
		}
	}
}

// WriteJSON writes the results as a JSON array.
func WriteJSON(path string, results []Result) error {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	b, err := json.MarshalIndent(results, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
