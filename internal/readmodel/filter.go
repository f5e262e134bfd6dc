package readmodel

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"

	"github.com/weft-dev/weft/pkg/projection"
)

// FilterHelp is the query language, as the CLI's help and the docs give it.
const FilterHelp = `A query is a CEL expression over one run's summary that is true for the
runs to keep. Its names:

  id          the run id (string)
  status      running, waiting (a running run that only waits: on a
              human node's signal or a wait node's time), cancelling,
              completed, failed, cancelled, and for a run 'weft terminate'
              ended, terminating or terminated (string)
  terminated  whether 'weft terminate' ended the run (bool)
  graph       the graph's name; digest, its digest (string)
  started     when the run started; ended, when it ended (timestamp; a run
              that has not ended has ended == timestamp(0))
  attrs       the run's search attributes (map of string to string:
              attrs.customer == "acme"; a run without the attribute does not
              match; "customer" in attrs tests for it)
  parent      the run that started this one as a child ("" if none)
  forkedFrom  the run this one was forked from ("" if none)
  schedule    the schedule that started the run; trigger, the event
              trigger or webhook ("" if none)
  now         the time of the query (timestamp)

Besides CEL's own && || ! == (and in, startsWith, matches, size...), it
takes AND, OR and NOT (any case) and a single = for ==; a timestamp
compares with a string holding an RFC 3339 time or a date ("2026-11-01",
midnight UTC); a duration before now is now - duration("24h"). Examples:

  status = "failed" AND graph = "billing" AND started > "2026-11-01"
  status in ["running", "waiting"] && started < now - duration("1h")
  attrs.customer == "acme" || id.startsWith("order-")`

// Filter is a compiled query over summaries (FilterHelp).
type Filter struct {
	src  string
	prg  cel.Program
	norm rewrite
}

// String is the query as written.
func (f *Filter) String() string { return f.src }

// FilterError is a query that does not compile: where, and why.
type FilterError struct {
	Query  string
	Line   int // 1-based
	Column int // 1-based, in runes
	Msg    string
}

func (e *FilterError) Error() string {
	s := fmt.Sprintf("query: line %d, column %d: %s", e.Line, e.Column, e.Msg)
	lines := strings.Split(e.Query, "\n")
	if e.Line >= 1 && e.Line <= len(lines) {
		s += "\n  " + lines[e.Line-1] + "\n  " + strings.Repeat(" ", max(0, e.Column-1)) + "^"
	}
	return s
}

var filterEnv = func() *cel.Env {
	env, err := cel.NewEnv(
		cel.Variable("id", cel.StringType),
		cel.Variable("status", cel.StringType),
		cel.Variable("terminated", cel.BoolType),
		cel.Variable("graph", cel.StringType),
		cel.Variable("digest", cel.StringType),
		cel.Variable("started", cel.TimestampType),
		cel.Variable("ended", cel.TimestampType),
		cel.Variable("attrs", cel.MapType(cel.StringType, cel.StringType)),
		cel.Variable("parent", cel.StringType),
		cel.Variable("forkedFrom", cel.StringType),
		cel.Variable("schedule", cel.StringType),
		cel.Variable("trigger", cel.StringType),
		cel.Variable("now", cel.TimestampType),
	)
	if err != nil {
		panic(err) // a programming error: the declarations are fixed
	}
	return env
}()

// queryTime reads a time a query compares with: RFC 3339, a date and
// time without a zone (UTC), or a date (midnight UTC).
func queryTime(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02 15:04:05", time.DateOnly} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time (want RFC 3339, such as 2026-11-01T09:00:00Z, or a date, 2026-11-01)", s)
}

// filterCostLimit bounds one evaluation, so that a query cannot hold up
// a listing.
const filterCostLimit = 100_000

// ParseFilter compiles a query (FilterHelp). An error is a *FilterError
// that says where.
func ParseFilter(src string) (*Filter, error) {
	if strings.TrimSpace(src) == "" {
		return nil, &FilterError{Query: src, Line: 1, Column: 1, Msg: "empty query"}
	}
	norm, err := normalize(src)
	if err != nil {
		fe := err.(*FilterError)
		fe.Line, fe.Column = position(src, fe.Column)
		return nil, fe
	}
	ast, iss := filterEnv.Compile(norm.out)
	if iss != nil && iss.Err() != nil {
		e := iss.Errors()[0]
		line, col := norm.origin(e.Location.Line(), e.Location.Column())
		return nil, &FilterError{Query: src, Line: line, Column: col, Msg: strings.TrimSuffix(e.Message, " (in container '')")}
	}
	if !ast.OutputType().IsExactType(cel.BoolType) {
		return nil, &FilterError{Query: src, Line: 1, Column: 1, Msg: fmt.Sprintf("the query is a %s, want a condition (true or false)", ast.OutputType())}
	}
	prg, err := filterEnv.Program(ast, cel.CostLimit(filterCostLimit))
	if err != nil {
		return nil, &FilterError{Query: src, Line: 1, Column: 1, Msg: err.Error()}
	}
	return &Filter{src: src, prg: prg, norm: norm}, nil
}

// Match says whether the filter keeps s, as of now. A run the query
// cannot be evaluated on (an attribute it lacks) does not match.
func (f *Filter) Match(s *Summary, now time.Time) bool {
	vars := map[string]any{
		"id": s.RunID, "status": ShownStatus(s.Status, s.Terminated), "terminated": s.Terminated,
		"graph": s.Graph, "digest": s.GraphDigest, "started": orEpoch(s.StartedAt), "ended": orEpoch(s.EndedAt),
		"attrs": attrsOf(s), "parent": s.Parent, "forkedFrom": "", "schedule": s.Attrs["schedule"],
		"trigger": s.Attrs["trigger"], "now": now,
	}
	if s.ForkedFrom != nil {
		vars["forkedFrom"] = s.ForkedFrom.RunID
	}
	out, _, err := f.prg.Eval(vars)
	if err != nil {
		return false // a run the query cannot be evaluated on
	}
	b, ok := out.(types.Bool)
	return ok && bool(b)
}

// orEpoch is t, or timestamp(0) for no time.
func orEpoch(t time.Time) time.Time {
	if t.IsZero() {
		return time.Unix(0, 0).UTC()
	}
	return t
}

func attrsOf(s *Summary) map[string]string {
	if s.Attrs == nil {
		return map[string]string{}
	}
	return s.Attrs
}

// ShownStatus is a status as people read it: a terminated run's is
// "terminated" ("terminating" while it ends), not "cancelled".
func ShownStatus(st projection.RunStatus, terminated bool) string {
	switch {
	case terminated && st == projection.RunCancelled:
		return "terminated"
	case terminated && st == projection.RunCancelling:
		return "terminating"
	}
	return string(st)
}

// rewrite is a query spelt as CEL spells it, and where each of its runes
// came from.
type rewrite struct {
	in  string
	out string
	// from holds, for each rune of out, the offset (in runes) in the
	// query as written of the token it came from.
	from []int
}

// token is a lexical piece of a query.
type token struct {
	kind  byte // 's' string literal, 'w' word, 'o' operator, ' ' space, '.' anything else
	text  string
	start int
}

// lex cuts a query into tokens; a string literal is kept whole, escapes
// and all.
func lex(rs []rune) []token {
	var toks []token
	for i := 0; i < len(rs); {
		c, j := rs[i], i+1
		kind := byte('.')
		switch {
		case c == '"' || c == '\'':
			kind, j = 's', stringEnd(rs, i)
		case unicode.IsLetter(c) || c == '_':
			kind, j = 'w', scanWhile(rs, j, isWordRune)
		case unicode.IsSpace(c):
			kind, j = ' ', scanWhile(rs, j, unicode.IsSpace)
		case strings.ContainsRune("=!<>&|", c):
			kind = 'o'
			if j < len(rs) && slices.Contains([]string{"==", "!=", "<=", ">=", "&&", "||"}, string(rs[i:j+1])) {
				j++
			}
		}
		toks = append(toks, token{kind: kind, text: string(rs[i:j]), start: i})
		i = j
	}
	return toks
}

// stringEnd is the end of the string literal that begins at rs[i], past
// its closing quote (or the end of rs, when it is not closed).
func stringEnd(rs []rune, i int) int {
	j := i + 1
	for j < len(rs) && rs[j] != rs[i] {
		if rs[j] == '\\' {
			j++
		}
		j++
	}
	return min(j+1, len(rs))
}

// scanWhile is the index of the first rune from j on that is not in.
func scanWhile(rs []rune, j int, in func(rune) bool) int {
	for j < len(rs) && in(rs[j]) {
		j++
	}
	return j
}

// isWordRune says whether r may go on a word.
func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' }

// timeNames are the timestamps a string may be compared with.
var timeNames = map[string]bool{"started": true, "ended": true, "now": true}

// normalize spells AND, OR, NOT (whole words, any case) as &&, ||, !, a
// lone = as ==, and a string compared with started, ended or now as the
// timestamp it holds. A string there that holds no time is a FilterError.
func normalize(src string) (rewrite, error) {
	ts := tokens(lex([]rune(src)))
	r := rewrite{in: src}
	for i, t := range ts {
		out, err := ts.spelled(src, i)
		if err != nil {
			return r, err
		}
		for range []rune(out) {
			r.from = append(r.from, t.start)
		}
		r.out += out
	}
	return r, nil
}

// tokens are a query's tokens, as normalize reads them.
type tokens []token

// spelled is how normalize writes token i of src.
func (ts tokens) spelled(src string, i int) (string, error) {
	t := ts[i]
	switch t.kind {
	case 'w':
		return ts.keyword(i), nil
	case 'o':
		if t.text == "=" {
			return "==", nil
		}
	case 's':
		return ts.timeLiteral(src, i)
	}
	return t.text, nil
}

// keyword spells word i: AND, OR and NOT (any case, and not a field after
// a ".") as &&, || and !; any other as it is.
func (ts tokens) keyword(i int) string {
	if p := ts.sig(i, -1); p >= 0 && ts[p].text == "." {
		return ts[i].text
	}
	switch strings.ToUpper(ts[i].text) {
	case "AND":
		return "&&"
	case "OR":
		return "||"
	case "NOT":
		return "!"
	}
	return ts[i].text
}

// timeLiteral spells string literal i of src: as the timestamp it holds
// when it is compared with a time name (a FilterError when it holds no
// time), else as it is.
func (ts tokens) timeLiteral(src string, i int) (string, error) {
	t := ts[i]
	p, n := ts.sig(i, -1), ts.sig(i, 1)
	closed := len(t.text) >= 2 && t.text[len(t.text)-1] == t.text[0]
	if !closed || !(ts.isCmp(p) && ts.isTime(ts.sig(p, -1)) || ts.isCmp(n) && ts.isTime(ts.sig(n, 1))) {
		return t.text, nil
	}
	v, err := strconv.Unquote(`"` + strings.ReplaceAll(t.text[1:len(t.text)-1], `"`, `\"`) + `"`)
	if err != nil {
		return t.text, nil // CEL says what is wrong with the literal
	}
	at, err := queryTime(v)
	if err != nil {
		return "", &FilterError{Query: src, Msg: err.Error(), Line: 0, Column: t.start}
	}
	return `timestamp("` + at.UTC().Format(time.RFC3339Nano) + `")`, nil
}

// sig is the index of the significant token before (d -1) or after (d 1)
// i, or -1.
func (ts tokens) sig(i, d int) int {
	for i += d; i >= 0 && i < len(ts); i += d {
		if ts[i].kind != ' ' {
			return i
		}
	}
	return -1
}

// isCmp says whether token i is a comparison.
func (ts tokens) isCmp(i int) bool {
	return i >= 0 && ts[i].kind == 'o' && slices.Contains([]string{"==", "!=", "<", "<=", ">", ">=", "="}, ts[i].text)
}

// isTime says whether token i is a time name, and not a field (after a ".").
func (ts tokens) isTime(i int) bool {
	if i < 0 || ts[i].kind != 'w' || !timeNames[ts[i].text] {
		return false
	}
	p := ts.sig(i, -1)
	return p < 0 || ts[p].text != "."
}

// origin maps a 1-based line and 0-based column of the rewritten query
// to a 1-based line and column of the query as written.
func (r rewrite) origin(line, col int) (int, int) {
	out := []rune(r.out)
	off := 0
	for l := 1; l < line && off < len(out); off++ {
		if out[off] == '\n' {
			l++
		}
	}
	off += col
	in := len([]rune(r.in))
	if off < len(r.from) {
		in = r.from[off]
	}
	return position(r.in, in)
}

// position is the 1-based line and column of the rune at off.
func position(s string, off int) (int, int) {
	line, col := 1, 1
	for i, c := range []rune(s) {
		if i >= off {
			break
		}
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}
