package eventlog_test

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/weft-dev/weft/internal/eventlog"
)

// A run's slot is its id's FNV-1a hash modulo the slots, as two hex
// digits: the subjects of runs already in a log depend on it not changing.
func TestSlotIsTheIDsHash(t *testing.T) {
	seen := map[string]bool{}
	for i := range 5000 {
		run := eventlog.NewRunID()
		if i%2 == 1 {
			run = fmt.Sprintf("run-%d", i) // any id a client may choose
		}
		h := fnv.New32a()
		_, _ = h.Write([]byte(run))
		want := fmt.Sprintf("%02x", h.Sum32()%eventlog.Slots)
		if got := eventlog.Slot(run); got != want {
			t.Fatalf("Slot(%q) = %q, want %q", run, got, want)
		}
		seen[want] = true
	}
	if got := eventlog.Slot(""); got != "05" {
		t.Fatalf(`Slot("") = %q, want "05" (the hash's offset basis, 0x811c9dc5, mod 64)`, got)
	}
	if len(seen) != eventlog.Slots {
		t.Fatalf("5,000 ids fell in %d slots of %d", len(seen), eventlog.Slots)
	}
}

// BenchmarkSlot is the slot of a run id, computed for every subject a
// run's event is written to or read from (Parse checks it).
func BenchmarkSlot(b *testing.B) {
	run := eventlog.NewRunID()
	b.ReportAllocs()
	for b.Loop() {
		_ = eventlog.Slot(run)
	}
}

// BenchmarkParse parses a worker's outcome subject, as every event
// decoded is placed (Parse).
func BenchmarkParse(b *testing.B) {
	subject := eventlog.RunBase("06h0cqv455l1fp9hqo8n8mr9a8") + "w.default.invoked"
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := eventlog.Parse(subject); !ok {
			b.Fatal("not parsed")
		}
	}
}

// Parse splits a subject in place, as strings.Split did: the same places
// for subjects of 1 to 8 tokens, empty ones included.
func TestParseSplitsAsBefore(t *testing.T) {
	run := "06h0cqv455l1fp9hqo8n8mr9a8"
	base := eventlog.RunBase(run)
	subjects := []string{
		base + "w.default.invoked", base + "w.default.step.n1", base + "w.default.step.", base + "w.default.step.n1.x",
		base + "d.ready.default", base + "d.ready.default.x", base + "d.completed", base + "c.started", base + "n.ended",
		base + "d", base + "d.", base + "..", base + "w..invoked", base + "w.default.invoked.", base + "x.y.z.w.v",
		"weft.r." + eventlog.Slot(run) + "." + run, "weft.r.zz." + run + ".d.completed", "weft.r.", "weft.x.y",
	}
	for _, s := range subjects {
		got, gotOK := eventlog.Parse(s)
		want, wantOK := splitParse(s)
		if got != want || gotOK != wantOK {
			t.Errorf("Parse(%q) = %+v %v, want %+v %v", s, got, gotOK, want, wantOK)
		}
	}
}

// splitParse is Parse as it was, with strings.Split.
func splitParse(subject string) (eventlog.Place, bool) {
	rest, ok := strings.CutPrefix(subject, "weft.r.")
	if !ok {
		return eventlog.Place{}, false
	}
	tok := strings.Split(rest, ".")
	if len(tok) < 4 || tok[0] != eventlog.Slot(tok[1]) {
		return eventlog.Place{}, false
	}
	p := eventlog.Place{Run: tok[1], Class: tok[2]}
	switch {
	case p.Class == eventlog.ClassWorker && len(tok) == 5:
		p.Queue, p.Kind = tok[3], tok[4]
	case p.Class == eventlog.ClassWorker && len(tok) == 6 && tok[4] == "step" && tok[5] != "":
		p.Queue, p.Kind, p.Node = tok[3], tok[4], tok[5]
	case p.Class == eventlog.ClassCoordinator && len(tok) == 5 && tok[3] == "ready":
		p.Kind, p.Queue = tok[3], tok[4]
	case len(tok) == 4 && (p.Class == eventlog.ClassClient || p.Class == eventlog.ClassCoordinator || p.Class == eventlog.ClassNotice):
		p.Kind = tok[3]
	default:
		return eventlog.Place{}, false
	}
	return p, p.Run != ""
}

// ValidToken says what the regexp it replaced said, for every string of
// interest: each edge of its classes, lengths about its bound, bytes
// outside ASCII, and random strings over an alphabet mixing all of them.
func TestValidTokenIsTheRegexp(t *testing.T) {
	re := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`)
	cases := []string{"", "a", "-", "_", "a-", "a_", "0", "Z9", "a.b", "a b", "a*", "a>", "é", "aé", "a\x00", "\xff",
		strings.Repeat("a", 127), strings.Repeat("a", 128), strings.Repeat("a", 129), "-" + strings.Repeat("a", 10)}
	alphabet := []byte("aZ09_-.*> \x00\x7f\x80é@[`{/:")
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		b := make([]byte, rng.IntN(132))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		cases = append(cases, string(b))
	}
	for _, s := range cases {
		if got, want := eventlog.ValidToken(s), re.MatchString(s); got != want {
			t.Fatalf("ValidToken(%q) = %v, the regexp says %v", s, got, want)
		}
	}
}

func BenchmarkValidToken(b *testing.B) {
	id := eventlog.NewRunID()
	for b.Loop() {
		eventlog.ValidToken(id)
	}
}
