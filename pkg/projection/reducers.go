package projection

import (
	"bytes"
	"encoding/json"
	"maps"
)

// update merges one state update into the shared state by the key's
// reducer. Reducers are total: an update of the wrong shape for its reducer
// replaces the value rather than failing the fold, so a buggy node cannot
// wedge a run's history.
//
//   - replace (default): the update is the new value.
//   - append: the value is a list; a list update is appended element by
//     element, any other update as one element.
//   - merge: the value is an object; an object update is merged in key by
//     key (shallow), the update's keys winning.
//   - sum: the value is a number; a numeric update is added.
//
// Updates apply in log order, so parallel branches writing one key resolve
// the same way on every fold.
func (s *State) update(key string, v json.RawMessage) {
	if s.Vars == nil {
		s.Vars = map[string]json.RawMessage{}
	}
	old := s.Vars[key] // nil when absent
	switch s.Config.Reducers[key] {
	case "append":
		s.Vars[key] = appendReducer(old, v)
	case "merge":
		s.Vars[key] = mergeReducer(old, v)
	case "sum":
		s.Vars[key] = sumReducer(old, v)
	default:
		s.Vars[key] = v
	}
}

// appendReducer appends v (its elements, if it is a list) to the list old
// (nil for none; any other value becomes the list's first element).
func appendReducer(old, v json.RawMessage) json.RawMessage {
	var list []json.RawMessage
	if old != nil && json.Unmarshal(old, &list) != nil {
		list = []json.RawMessage{old}
	}
	var add []json.RawMessage
	if bytes.HasPrefix(bytes.TrimSpace(v), []byte("[")) && json.Unmarshal(v, &add) == nil {
		list = append(list, add...)
	} else {
		list = append(list, v)
	}
	if list == nil {
		list = []json.RawMessage{}
	}
	return mustJSON(list)
}

// mergeReducer merges the object v into the object old; v replaces old
// when it is not an object.
func mergeReducer(old, v json.RawMessage) json.RawMessage {
	var cur, add map[string]json.RawMessage
	if old == nil || json.Unmarshal(old, &cur) != nil || cur == nil {
		cur = map[string]json.RawMessage{}
	}
	if json.Unmarshal(v, &add) != nil || add == nil {
		return v
	}
	maps.Copy(cur, add)
	return mustJSON(cur)
}

// sumReducer adds the number v to old; v replaces old when it is not a
// number.
func sumReducer(old, v json.RawMessage) json.RawMessage {
	var a, b float64
	if json.Unmarshal(v, &b) != nil {
		return v
	}
	if old != nil {
		_ = json.Unmarshal(old, &a)
	}
	return mustJSON(a + b)
}
