package projection

import (
	"encoding/json"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// Change is one difference between two states: the JSON path of a value and
// its value before and after (absent values are nil).
type Change struct {
	Path   string          `json:"path"`
	Before json.RawMessage `json:"before,omitempty"`
	After  json.RawMessage `json:"after,omitempty"`
}

// Diff lists the differences between two states, in path order. Paths are
// JSON-pointer-like: "/nodes/fetch/status".
func Diff(a, b *State) []Change {
	var x, y any
	_ = json.Unmarshal(a.Marshal(), &x)
	_ = json.Unmarshal(b.Marshal(), &y)
	var out []Change
	diff("", x, y, &out)
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// StateDiff is Diff as a person reads it. A record that appears or goes
// (a node activated, a state key set) is listed field by field, so that
// a node's change reads "/nodes/fetch/status: ready", not its whole
// record; and, unless all, the fold's own bookkeeping (IsBookkeeping) is
// left out, so that what is left is what the event changed in the run.
func StateDiff(a, b *State, all bool) []Change {
	var x, y any
	_ = json.Unmarshal(a.Marshal(), &x)
	_ = json.Unmarshal(b.Marshal(), &y)
	var out []Change
	diffFields("", x, y, &out)
	if !all {
		kept := out[:0]
		for _, c := range out {
			if !IsBookkeeping(c.Path) {
				kept = append(kept, c)
			}
		}
		out = kept
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// bookkeeping are the paths of State (top level) and of NodeState
// (under /nodes/ID) that the fold keeps for itself: positions and
// counters, routing and signal de-duplication, timers (a node's status
// says what they are for), the graph and its configuration.
var bookkeeping = map[string]bool{
	"/endReached": true, "/entryRouted": true, "/lastSeq": true, "/updatedAt": true, "/stats": true,
	"/pending": true, "/signalIds": true, "/timers": true, "/graph": true, "/config": true,
	"/nonce": true, "/startSeq": true, "/graphDigest": true,
}

var nodeBookkeeping = map[string]bool{
	"routed": true, "owed": true, "delivery": true, "executions": true, "readyAt": true,
	"timeoutMs": true, "heartbeatMs": true, "localAttempt": true,
}

// IsBookkeeping reports whether a path of a state's Diff is the fold's
// bookkeeping rather than the run's state: /lastSeq, /updatedAt,
// /stats/..., /endReached, /timers/..., a node's routed, owed, delivery
// and executions counters, and the like.
func IsBookkeeping(path string) bool {
	top := path
	if i := strings.IndexByte(path[min(1, len(path)):], '/'); i >= 0 {
		top = path[:i+1]
	}
	if bookkeeping[top] {
		return true
	}
	if rest, ok := strings.CutPrefix(path, "/nodes/"); ok {
		parts := strings.Split(rest, "/")
		if len(parts) >= 2 && nodeBookkeeping[parts[1]] {
			return true
		}
		// A map item's delivery, as its node's.
		if len(parts) >= 4 && parts[1] == "items" && nodeBookkeeping[parts[3]] {
			return true
		}
	}
	return false
}

// DiffJSON lists the differences between two JSON documents, as Diff
// does for states.
func DiffJSON(a, b json.RawMessage) []Change {
	var x, y any
	_ = json.Unmarshal(a, &x)
	_ = json.Unmarshal(b, &y)
	var out []Change
	diff("", x, y, &out)
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

func diff(path string, a, b any, out *[]Change) {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		for k, av := range am {
			diff(path+"/"+k, av, bm[k], out)
		}
		for k, bv := range bm {
			if _, ok := am[k]; !ok {
				diff(path+"/"+k, nil, bv, out)
			}
		}
		return
	}
	al, alok := a.([]any)
	bl, blok := b.([]any)
	if alok && blok && len(al) == len(bl) {
		for i := range al {
			diff(path+"/"+strconv.Itoa(i), al[i], bl[i], out)
		}
		return
	}
	if reflect.DeepEqual(a, b) {
		return
	}
	c := Change{Path: path}
	if a != nil {
		c.Before, _ = json.Marshal(a)
	}
	if b != nil {
		c.After, _ = json.Marshal(b)
	}
	*out = append(*out, c)
}

// diffFields is diff, but a map that appears or goes is listed by its
// fields.
func diffFields(path string, a, b any, out *[]Change) {
	if diffRecords(path, a, b, out) {
		return
	}
	al, alok := a.([]any)
	bl, blok := b.([]any)
	if alok && blok && len(al) == len(bl) {
		for i := range al {
			diffFields(path+"/"+strconv.Itoa(i), al[i], bl[i], out)
		}
		return
	}
	diff(path, a, b, out)
}

// diffRecords is diffFields for records (maps): it lists a record that
// appears or goes by its fields, an empty one whole, and reports false
// when a or b is neither a record nor absent beside one.
func diffRecords(path string, a, b any, out *[]Change) bool {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	switch {
	case aok && b == nil && len(am) == 0, bok && a == nil && len(bm) == 0:
		diff(path, a, b, out) // an empty record has no fields to list
		return true
	case aok && b == nil:
		bm, bok = map[string]any{}, true
	case bok && a == nil:
		am, aok = map[string]any{}, true
	}
	if !aok || !bok {
		return false
	}
	for k, av := range am {
		diffFields(path+"/"+k, av, bm[k], out)
	}
	for k, bv := range bm {
		if _, ok := am[k]; !ok {
			diffFields(path+"/"+k, nil, bv, out)
		}
	}
	return true
}
