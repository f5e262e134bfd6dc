package cli_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/cli"
	"github.com/weft-dev/weft/internal/testkit"
)

// The documents whose commands TestDocs runs, from the repository's root.
var documents = []string{"README.md", "examples/README.md"}

// TestDocs runs every weft command the documents show, in order, against
// a real weft dev (an embedded JetStream server, a coordinator and a
// worker), and checks the outputs they document. A command is a line of a
// fenced block that starts with "weft " or "go run ./cmd/weft ", or a code
// span in a table row that starts with "weft ". RUN in a command is the
// run the document's last "weft run" started. HTML comments in the
// document steer the test:
//
//	<!-- doctest: skip "PREFIX" REASON -->   commands starting with PREFIX
//	                                        cannot run in a test, because REASON
//	<!-- doctest: want "PREFIX" "TEXT"... --> their output holds the TEXTs in
//	                                        order (runs of blanks count as one)
//	<!-- doctest: output "COMMAND" -->       the next fenced block is what
//	                                        COMMAND prints (events and state)
//
// A command that fails and is not marked fails the test, and so does a
// marker that matches no command: a new command in the docs is tested
// without a change here.
func TestDocs(t *testing.T) {
	t.Chdir("../..")
	url := startDev(t)
	t.Setenv("WEFT_NATS_URL", url)
	for _, doc := range documents {
		t.Run(doc, func(t *testing.T) {
			d := parseDoc(t, doc)
			if len(d.commands) == 0 {
				t.Fatalf("%s shows no weft command", doc)
			}
			d.run(t)
		})
	}
}

// startDev starts weft dev on a free port and returns its NATS URL.
func startDev(t *testing.T) string {
	t.Helper()
	dir := t.TempDir() // before the cleanup below, so removed after dev stopped
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr testkit.Buffer
	done := make(chan int)
	go func() {
		done <- cli.Main(ctx, []string{"dev", "-port", "-1", "-data", dir, "-queues", "default,cpu", "-ui", "127.0.0.1:0"}, nil, &stdout, &stderr)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("weft dev did not stop")
		}
	})
	started := regexp.MustCompile(`at (nats://127\.0\.0\.1:\d+)[\s\S]*coordinator and worker running`)
	for deadline := time.Now().Add(30 * time.Second); ; {
		if m := started.FindStringSubmatch(stdout.String()); m != nil {
			return m[1]
		}
		select {
		case code := <-done:
			t.Fatalf("weft dev exited %d:\n%s%s", code, stdout.String(), stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("weft dev did not start:\n%s%s", stdout.String(), stderr.String())
		}
	}
}

// docCommand is one command a document shows.
type docCommand struct {
	line  int
	text  string // as written, from "weft", without a trailing comment
	words []word
	err   error // why the line cannot be run as it is
}

// docMarker is one doctest comment.
type docMarker struct {
	line   int
	kind   string // skip, want, output
	prefix string
	args   []string // want: the texts; skip: the reason; output: the block's lines
	used   bool
}

type document struct {
	name     string
	commands []docCommand
	markers  []*docMarker
}

var (
	fence      = regexp.MustCompile("^\\s*(```|~~~)")
	codeSpan   = regexp.MustCompile("`([^`]+)`")
	markerLine = regexp.MustCompile(`^\s*<!--\s*doctest:\s*(.*?)\s*-->\s*$`)
	runID      = regexp.MustCompile(`(?m)^([0-9a-v]{26})$`)
)

// parseDoc reads the commands and markers of a document.
func parseDoc(t *testing.T, name string) *document {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := &document{name: name}
	var inFence bool
	var output *docMarker // an output marker waiting for, or reading, its block
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if fence.MatchString(line) {
			inFence = !inFence
			if !inFence && output != nil && output.args != nil {
				output = nil
			} else if inFence && output != nil {
				output.args = []string{}
			}
			continue
		}
		switch {
		case inFence && output != nil:
			output.args = append(output.args, line)
		case inFence:
			text := strings.TrimSpace(line)
			if rest, ok := strings.CutPrefix(text, "go run ./cmd/weft "); ok {
				text = "weft " + rest
			}
			if strings.HasPrefix(text, "weft ") {
				d.add(n, text)
			}
		case strings.HasPrefix(strings.TrimSpace(line), "|"):
			for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
				if m[1] == "weft" || strings.HasPrefix(m[1], "weft ") {
					d.add(n, m[1])
				}
			}
		case markerLine.MatchString(line):
			m := parseMarker(t, name, n, markerLine.FindStringSubmatch(line)[1])
			d.markers = append(d.markers, m)
			if m.kind == "output" {
				output = m
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return d
}

func (d *document) add(line int, text string) {
	words, err := shellWords(text)
	if err != nil {
		text, _, _ = strings.Cut(text, " #")
		d.commands = append(d.commands, docCommand{line: line, text: strings.TrimSpace(text), err: err})
		return
	}
	// The text without its comment, for markers to match.
	var parts []string
	for _, w := range words {
		parts = append(parts, w.raw)
	}
	d.commands = append(d.commands, docCommand{line: line, text: strings.Join(parts, " "), words: words})
}

func parseMarker(t *testing.T, doc string, line int, body string) *docMarker {
	t.Helper()
	kind, rest, _ := strings.Cut(body, " ")
	var quoted []string
	for rest = strings.TrimSpace(rest); strings.HasPrefix(rest, `"`); rest = strings.TrimSpace(rest) {
		q, err := strconv.QuotedPrefix(rest)
		if err != nil {
			t.Fatalf("%s:%d: doctest marker %q: %v", doc, line, body, err)
		}
		v, _ := strconv.Unquote(q)
		quoted = append(quoted, v)
		rest = rest[len(q):]
	}
	if len(quoted) == 0 {
		t.Fatalf("%s:%d: doctest marker %q: want KIND \"PREFIX\" ...", doc, line, body)
	}
	m := &docMarker{line: line, kind: kind, prefix: quoted[0], args: quoted[1:]}
	switch m.kind {
	case "skip":
		if rest == "" || len(m.args) > 0 {
			t.Fatalf("%s:%d: want skip \"PREFIX\" REASON", doc, line)
		}
		m.args = []string{rest}
	case "want":
		if len(m.args) == 0 || rest != "" {
			t.Fatalf("%s:%d: want want \"PREFIX\" \"TEXT\"...", doc, line)
		}
	case "output":
		if len(m.args) > 0 || rest != "" {
			t.Fatalf("%s:%d: want output \"COMMAND\"", doc, line)
		}
		m.args = nil
	default:
		t.Fatalf("%s:%d: unknown doctest marker %q (want skip, want or output)", doc, line, m.kind)
	}
	return m
}

// matches reports whether a marker's prefix names the command.
func (m *docMarker) matches(text string) bool {
	return text == m.prefix || strings.HasPrefix(text, m.prefix+" ")
}

func (d *document) markersFor(text, kind string) []*docMarker {
	var out []*docMarker
	for _, m := range d.markers {
		if m.kind == kind && m.matches(text) {
			m.used = true
			out = append(out, m)
		}
	}
	return out
}

// run runs the document's commands in order, then its output markers.
func (d *document) run(t *testing.T) {
	lastRun := ""
	for _, c := range d.commands {
		where := fmt.Sprintf("%s:%d: %s", d.name, c.line, c.text)
		if skips := d.markersFor(c.text, "skip"); len(skips) > 0 {
			t.Logf("%s: not run: %s", where, strings.Join(skips[0].args, " "))
			continue
		}
		if c.err != nil {
			t.Errorf("%s: %v; mark it <!-- doctest: skip \"PREFIX\" REASON --> if it cannot run in a test", where, c.err)
			continue
		}
		args, err := expand(c.words[1:], lastRun)
		if err == nil && args[0] == "dev" {
			err = errors.New("runs until interrupted")
		}
		if err != nil {
			t.Errorf("%s: %v; mark it <!-- doctest: skip \"PREFIX\" REASON --> if it cannot run in a test", where, err)
			continue
		}
		r := weftDoc(t, args)
		if r.code != 0 {
			t.Errorf("%s: exit %d\n%s%s\nfix the docs, or mark it <!-- doctest: skip \"PREFIX\" REASON --> if it cannot run in a test", where, r.code, r.stdout, r.stderr)
			continue
		}
		if args[0] == "run" {
			m := runID.FindStringSubmatch(r.stdout)
			if m == nil {
				t.Errorf("%s: printed no run id:\n%s", where, r.stdout)
				continue
			}
			lastRun = m[1]
		}
		for _, m := range d.markersFor(c.text, "want") {
			out := squeeze(r.stdout)
			for _, want := range m.args {
				i := strings.Index(out, squeeze(want))
				if i < 0 {
					t.Errorf("%s: the output does not hold %q after the texts before it (%s:%d):\n%s", where, want, d.name, m.line, r.stdout)
					break
				}
				out = out[i+len(squeeze(want)):]
			}
		}
	}
	for _, m := range d.markers {
		if m.kind != "output" {
			continue
		}
		m.used = true
		words, err := shellWords(m.prefix)
		if err != nil || len(words) < 2 || words[0].s != "weft" {
			t.Errorf("%s:%d: output marker: %q is not a weft command", d.name, m.line, m.prefix)
			continue
		}
		args, _ := expand(words[1:], lastRun)
		r := weftDoc(t, args)
		if r.code != 0 {
			t.Errorf("%s:%d: %s: exit %d\n%s", d.name, m.line, m.prefix, r.code, r.stderr)
			continue
		}
		doc, got := timeline(strings.Join(m.args, "\n")), timeline(r.stdout)
		if !slices.Equal(doc, got) {
			t.Errorf("%s:%d: %s prints another timeline than the document shows:\ndocument: %q\nprinted:  %q", d.name, m.line, m.prefix, doc, got)
		}
		if ds, gs := stateOf(strings.Join(m.args, "\n")), stateOf(r.stdout); ds != gs {
			t.Errorf("%s:%d: %s prints another state than the document shows:\ndocument: %s\nprinted:  %s", d.name, m.line, m.prefix, ds, gs)
		}
	}
	for _, m := range d.markers {
		if !m.used {
			t.Errorf("%s:%d: doctest %s %q matches no command", d.name, m.line, m.kind, m.prefix)
		}
	}
}

// weftDoc runs a documented command line in-process.
func weftDoc(t *testing.T, args []string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr testkit.Buffer
	code := cli.Main(ctx, args, strings.NewReader(""), &stdout, &stderr)
	return result{stdout.String(), stderr.String(), code}
}

// expand replaces RUN with the last run and expands unquoted globs.
func expand(words []word, lastRun string) ([]string, error) {
	var args []string
	for _, w := range words {
		switch {
		case w.s == "RUN":
			if lastRun == "" {
				return nil, fmt.Errorf("RUN before any weft run")
			}
			args = append(args, lastRun)
		case w.glob:
			matches, err := filepath.Glob(w.s)
			if err != nil || len(matches) == 0 {
				return nil, fmt.Errorf("%s matches no file", w.s)
			}
			args = append(args, matches...)
		default:
			args = append(args, w.s)
		}
	}
	if len(args) == 0 {
		return nil, fmt.Errorf("no command")
	}
	return args, nil
}

// timelineRow is an event row of weft's timeline: its event and node.
var timelineRow = regexp.MustCompile(`^(?:\d+\s+\d+\s+\+\S+\s+)?\s*((?:run|node|retry|timer|signal|child)\.[a-z_]+)\s+(\S+)`)

func timeline(out string) []string {
	var rows []string
	for _, line := range strings.Split(out, "\n") {
		if m := timelineRow.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			rows = append(rows, m[1]+" "+m[2])
		}
	}
	return rows
}

// squeeze turns every run of blanks into one space.
func squeeze(s string) string { return strings.Join(strings.Fields(s), " ") }

// stateOf is the JSON after "state:", whitespace removed.
func stateOf(out string) string {
	_, s, _ := strings.Cut(out, "\nstate:\n")
	return strings.Join(strings.Fields(s), "")
}

// word is one shell word: its value, its text as written, and whether it
// holds an unquoted glob.
type word struct {
	s, raw string
	glob   bool
}

// shellWords splits a command line as sh would for the commands the docs
// show: blanks separate words, '…' and "…" (with \" and \\) quote, # at a
// word's start comments out the rest. A trailing & (a command left
// running) is refused, and so are other shell operators.
func shellWords(line string) ([]word, error) {
	var words []word
	var cur *word
	start := 0
	end := func(i int) {
		if cur != nil {
			cur.raw = line[start:i]
			words = append(words, *cur)
			cur = nil
		}
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			end(i)
			continue
		case cur == nil && c == '#':
			return words, nil
		case cur == nil && strings.IndexByte("&|;<>()$`", c) >= 0:
			if c == '&' && strings.TrimSpace(line[i+1:]) == "" || c == '&' && strings.HasPrefix(strings.TrimSpace(line[i+1:]), "#") {
				return nil, fmt.Errorf("runs in the background (&)")
			}
			return nil, fmt.Errorf("shell operator %q", c)
		}
		if cur == nil {
			cur, start = &word{}, i
		}
		switch c {
		case '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unclosed '")
			}
			cur.s += line[i+1 : i+1+j]
			i += j + 1
		case '"':
			i++
			for ; i < len(line) && line[i] != '"'; i++ {
				if line[i] == '\\' && i+1 < len(line) && (line[i+1] == '"' || line[i+1] == '\\') {
					i++
				}
				cur.s += string(line[i])
			}
			if i >= len(line) {
				return nil, fmt.Errorf("unclosed \"")
			}
		default:
			if strings.IndexByte("*?[", c) >= 0 {
				cur.glob = true
			}
			cur.s += string(c)
		}
	}
	end(len(line))
	return words, nil
}

func TestShellWords(t *testing.T) {
	tests := []struct {
		line    string
		want    []string
		wantErr bool
	}{
		{`weft run examples/hello.yaml -input '{"name":"Ada"}' -wait`, []string{"weft", "run", "examples/hello.yaml", "-input", `{"name":"Ada"}`, "-wait"}, false},
		{`weft fork RUN -at 5 -set name='"Bob"'           # a comment`, []string{"weft", "fork", "RUN", "-at", "5", "-set", `name="Bob"`}, false},
		{`weft cancel RUN -reason "no \"longer\" needed"`, []string{"weft", "cancel", "RUN", "-reason", `no "longer" needed`}, false},
		{`weft dev -data data/dev &      # until interrupted`, nil, true},
		{`weft list | head`, nil, true},
		{`weft run 'open`, nil, true},
	}
	for _, tt := range tests {
		words, err := shellWords(tt.line)
		if (err != nil) != tt.wantErr {
			t.Errorf("%s: err %v", tt.line, err)
			continue
		}
		var got []string
		for _, w := range words {
			got = append(got, w.s)
		}
		if !tt.wantErr && !slices.Equal(got, tt.want) {
			t.Errorf("%s:\ngot  %q\nwant %q", tt.line, got, tt.want)
		}
	}
}
