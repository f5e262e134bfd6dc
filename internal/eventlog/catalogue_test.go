package eventlog_test

import (
	"testing"

	"github.com/weft-dev/weft/internal/eventlog"
)

// TestLayoutPlacesTheCatalogue holds the subject layout's table
// (internal/eventlog) to the catalogue: every type has a kind token and a
// writer class, no two types share a kind, and a type outside the
// catalogue has neither.
func TestLayoutPlacesTheCatalogue(t *testing.T) {
	seen := map[string]eventlog.Type{}
	for _, typ := range eventlog.Types() {
		kind, ok := eventlog.Kind(typ)
		if !ok || kind == "" || eventlog.Class(typ) == "" {
			t.Fatalf("%s: no place in the layout (kind %q, class %q)", typ, kind, eventlog.Class(typ))
		}
		if other, dup := seen[kind]; dup {
			t.Fatalf("%s and %s share the kind %q", typ, other, kind)
		}
		seen[kind] = typ
	}
	if eventlog.LocalQueue != eventlog.LocalQueue || eventlog.DefaultStream != eventlog.DefaultStream {
		t.Fatalf("LocalQueue %q, DefaultStream %q: the layout has %q, %q", eventlog.LocalQueue, eventlog.DefaultStream, eventlog.LocalQueue, eventlog.DefaultStream)
	}
	if _, ok := eventlog.Kind(eventlog.Type("dev.weft.nope.v1")); ok || eventlog.Type("dev.weft.nope.v1").Known() {
		t.Fatal("a type outside the catalogue has a place")
	}
}
