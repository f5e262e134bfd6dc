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
	old, had := s.Vars[key]
	switch s.Config.Reducers[key] {
	case "append":
		var list []json.RawMessage
		if had {
			if json.Unmarshal(old, &list) != nil {
				list = []json.RawMessage{old}
			}
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
		s.Vars[key] = mustJSON(list)
	case "merge":
		var cur, add map[string]json.RawMessage
		if !had || json.Unmarshal(old, &cur) != nil || cur == nil {
			cur = map[string]json.RawMessage{}
		}
		if json.Unmarshal(v, &add) != nil || add == nil {
			s.Vars[key] = v
			return
		}
		maps.Copy(cur, add)
		s.Vars[key] = mustJSON(cur)
	case "sum":
		var a, b float64
		if json.Unmarshal(v, &b) != nil {
			s.Vars[key] = v
			return
		}
		if had {
			_ = json.Unmarshal(old, &a)
		}
		s.Vars[key] = mustJSON(a + b)
	default:
		s.Vars[key] = v
	}
}
