// Package suggest finds the name a mistyped one was meant to be, for the
// "did you mean ...?" of the CLI's commands and flags and of a graph's node
// types and fields. It is one small foundation so that every face suggests
// the same way.
package suggest

import "strings"

// Closest is the candidate nearest to s (edit distance, transpositions
// counting one), if it is near enough to be a typo: at most 1 edit for
// names of up to four characters, 2 for longer ones. Ties go to the
// earlier candidate.
func Closest(s string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if d := Distance(s, c); d < bestD {
			best, bestD = c, d
		}
	}
	limit := 2
	if len([]rune(s)) <= 4 {
		limit = 1
	}
	if bestD > limit {
		return ""
	}
	return best
}

// ClosestFold is Closest ignoring case, for names where a wrong case is a
// typo like any other ("maxiterations" for "maxIterations").
func ClosestFold(s string, candidates []string) string {
	lower := make([]string, len(candidates))
	for i, c := range candidates {
		lower[i] = strings.ToLower(c)
	}
	best := Closest(strings.ToLower(s), lower)
	for i, l := range lower {
		if best != "" && l == best {
			return candidates[i]
		}
	}
	return ""
}

// Distance is the optimal string alignment distance of a and b:
// insertions, deletions, substitutions and adjacent transpositions.
func Distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
