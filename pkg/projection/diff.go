package projection

import (
	"encoding/json"
	"reflect"
	"sort"
	"strconv"
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
