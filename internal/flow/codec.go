package flow

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// The stored form of an Entry (the package docs, "Bounds"): not the
// Entry's JSON (which 'weft queues -o json' and the UI show), but a
// compact one, since every write of a key carries its every holder and
// waiter. It is the version byte '2' followed by a JSON object with short
// names, each holder a positional array:
//
//	2{"l":limit,"k":key,"m":max,"t":base,
//	  "h":[[run,node,iteration,attempt,since-base(,priority(,fairness(,by)))],...],
//	  "w":[...waiters...],"s":{fairness:served},"e":{waiter id:holder},
//	  "p":{line:{"priority":p,"fairness":f,"count":n,"after":revision}}}
//
// base is the earliest Since, in Unix milliseconds, and each holder's
// Since is stored as milliseconds after it. A holder is some 50 bytes
// (was some 130), and is written by hand, not by reflection. The leading
// '2' is not JSON: a coordinator of an older version, which reads entries
// as JSON, refuses the entry (an error reaching the bucket, its decision
// made again) rather than reading it as empty. Entries written by an older
// version (JSON, starting with '{') are read still.

const wireVersion = '2'

// MaxEntryBytes bounds the stored form of one key's entry. Its holders
// and waiters are bounded in number (MaxSlots, MaxWaiters) and each in
// size (a run id, a node id, a fairness key of at most MaxFairnessLen
// bytes); an attempt that would take the entry past it is refused as one
// past MaxWaiters is (ErrQueueFull). It is below the server's default
// max_payload (1 MiB).
const MaxEntryBytes = 900 << 10

// MaxFairnessLen is the longest fairness key an entry stores: a longer
// one is cut to it (it only ranks waiters).
const MaxFairnessLen = 128

// wireSize is an upper bound of a holder's stored size: its strings as
// stored, and 48 bytes for its numbers (iteration and attempt up to 10
// digits, the time up to 13 and the priority 1), brackets and commas.
func (h Holder) wireSize() int {
	if w := h.wire; w != nil && w.as == h.wireKey(w.as.base) {
		return len(w.b) + 8 // a base moved lengthens the time by as much
	}
	return stringSize(h.Run) + stringSize(h.Node) + stringSize(h.Fairness) + stringSize(h.By) + 48
}

// size is an upper bound of the entry's stored size (encodeEntry).
func (e *Entry) size() int {
	n := 64 + stringSize(e.Limit) + stringSize(e.Key)
	for _, h := range e.Holders {
		n += h.wireSize()
	}
	for _, h := range e.Waiters {
		n += h.wireSize()
	}
	for k := range e.Served {
		n += stringSize(k) + 24
	}
	for id, h := range e.Evicts {
		n += stringSize(id) + 1 + h.wireSize()
	}
	for line := range e.Parked {
		n += 2*stringSize(line) + 64 // the line, its fairness key, its numbers
	}
	return n
}

// stringSize is the size of s stored (appendString).
func stringSize(s string) int {
	if plain(s) {
		return len(s) + 2
	}
	q, _ := json.Marshal(s) // a string always marshals
	return len(q)
}

// plain reports whether s is printable ASCII that JSON takes as it is.
func plain(s string) bool {
	for i := range len(s) {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// encodeEntry is e's stored form. It remembers each holder's stored form
// in e, for the next write of the entry.
func encodeEntry(e *Entry) []byte {
	base := e.storedBase()
	b := make([]byte, 0, e.size())
	b = append(b, wireVersion)
	b = append(b, `{"l":`...)
	b = appendString(b, e.Limit)
	b = append(b, `,"k":`...)
	b = appendString(b, e.Key)
	b = append(b, `,"m":`...)
	b = strconv.AppendInt(b, int64(e.Max), 10)
	b = append(b, `,"t":`...)
	b = strconv.AppendInt(b, base, 10)
	b = appendHolders(append(b, `,"h":`...), e.Holders, base)
	b = appendHolders(append(b, `,"w":`...), e.Waiters, base)
	if len(e.Served) > 0 {
		b = append(b, `,"s":{`...)
		first := true
		for k, n := range e.Served {
			if !first {
				b = append(b, ',')
			}
			first = false
			b = strconv.AppendInt(append(appendString(b, k), ':'), int64(n), 10)
		}
		b = append(b, '}')
	}
	if len(e.Evicts) > 0 {
		b = append(b, `,"e":{`...)
		first := true
		for id, h := range e.Evicts {
			if !first {
				b = append(b, ',')
			}
			first = false
			b = appendHolder(append(appendString(b, id), ':'), h, base)
		}
		b = append(b, '}')
	}
	if len(e.Parked) > 0 {
		p, _ := json.Marshal(e.Parked) // plain fields: always marshals
		b = append(append(b, `,"p":`...), p...)
	}
	return append(b, '}')
}

// storedBase is the base the entry's holders' times are stored relative
// to: the one it has while no holder is earlier and it is no more than
// baseSpan before the earliest (the stored times stay short), else the
// earliest Since.
func (e *Entry) storedBase() int64 {
	least := e.earliest()
	if !e.hasBase || least < e.base || least-e.base > baseSpan.Milliseconds() {
		e.base, e.hasBase = least, true
	}
	return e.base
}

// baseSpan bounds how far the stored base may lag the earliest holder.
const baseSpan = time.Hour

// earliest is the earliest Since of the entry's holders, in Unix milliseconds.
func (e *Entry) earliest() int64 {
	var base int64
	first := true
	each := func(h Holder) {
		if ms := h.Since.UnixMilli(); first || ms < base {
			base, first = ms, false
		}
	}
	for _, h := range e.Holders {
		each(h)
	}
	for _, h := range e.Waiters {
		each(h)
	}
	for _, h := range e.Evicts {
		each(h)
	}
	return base
}

// appendHolders appends hs, each as it was stored last when nothing it
// says changed, and remembers each one's stored form.
func appendHolders(b []byte, hs []Holder, base int64) []byte {
	b = append(b, '[')
	for i := range hs {
		if i > 0 {
			b = append(b, ',')
		}
		h := &hs[i]
		k := h.wireKey(base)
		if w := h.wire; w != nil && w.as == k {
			b = append(b, w.b...)
			continue
		}
		from := len(b)
		b = appendHolder(b, *h, base)
		// A copy: the entry's buffer goes to the bucket, and the stored
		// forms stay as long as their holders.
		h.wire = &holderWire{b: slices.Clone(b[from:]), as: k}
	}
	return append(b, ']')
}

func appendHolder(b []byte, h Holder, base int64) []byte {
	b = append(b, '[')
	b = appendString(b, h.Run)
	b = append(b, ',')
	b = appendString(b, h.Node)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(h.Iteration), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(h.Attempt), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, h.Since.UnixMilli()-base, 10)
	if h.Priority != 0 || h.Fairness != "" || h.By != "" {
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(h.Priority), 10)
	}
	if h.Fairness != "" || h.By != "" {
		b = append(b, ',')
		b = appendString(b, h.Fairness)
	}
	if h.By != "" {
		b = append(b, ',')
		b = appendString(b, h.By)
	}
	return append(b, ']')
}

// appendString appends s as a JSON string: as it is when it is plain
// printable ASCII (run and node ids are), else by encoding/json.
func appendString(b []byte, s string) []byte {
	if !plain(s) {
		q, _ := json.Marshal(s) // a string always marshals
		return append(b, q...)
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// wireEntry is the stored form as decoded: each holder a list of its
// fields (strings and float64s; a time in milliseconds is well within a
// float64's exact integers).
type wireEntry struct {
	Limit  string                `json:"l"`
	Key    string                `json:"k"`
	Max    int                   `json:"m"`
	Base   int64                 `json:"t"`
	H      []wireHolder          `json:"h"`
	W      []wireHolder          `json:"w"`
	Served map[string]int        `json:"s"`
	Evicts map[string]wireHolder `json:"e"`
	Parked map[string]*Parked    `json:"p"`
}

type wireHolder []any

func (w wireHolder) holder(base int64) (Holder, error) {
	if len(w) < 5 || len(w) > 8 {
		return Holder{}, fmt.Errorf("a holder has %d fields, want 5 to 8", len(w))
	}
	var h Holder
	var ok [8]bool
	h.Run, ok[0] = w[0].(string)
	h.Node, ok[1] = w[1].(string)
	h.Iteration, ok[2] = wireInt(w[2])
	h.Attempt, ok[3] = wireInt(w[3])
	since, ok4 := w[4].(float64)
	ok[4] = ok4 && since == float64(int64(since))
	ok[5], ok[6], ok[7] = true, true, true
	if len(w) > 5 {
		h.Priority, ok[5] = wireInt(w[5])
	}
	if len(w) > 6 {
		h.Fairness, ok[6] = w[6].(string)
	}
	if len(w) > 7 {
		h.By, ok[7] = w[7].(string)
	}
	for i, good := range ok {
		if !good {
			return Holder{}, fmt.Errorf("a holder's field %d is %v", i, w[i])
		}
	}
	h.Since = time.UnixMilli(base + int64(since)).UTC()
	return h, nil
}

// wireInt is a decoded number that is an int.
func wireInt(v any) (int, bool) {
	f, ok := v.(float64)
	if !ok || f != float64(int(f)) {
		return 0, false
	}
	return int(f), true
}

// decodeEntry reads an entry in its stored form, or as the JSON an
// older version wrote.
func decodeEntry(b []byte) (*Entry, error) {
	if len(b) == 0 || b[0] != wireVersion {
		var e Entry
		if err := json.Unmarshal(b, &e); err != nil {
			return nil, err
		}
		return &e, nil
	}
	var w wireEntry
	if err := json.Unmarshal(b[1:], &w); err != nil {
		return nil, err
	}
	e := &Entry{Limit: w.Limit, Key: w.Key, Max: w.Max, Served: w.Served, Parked: w.Parked, base: w.Base, hasBase: true}
	var err error
	if e.Holders, err = holdersOf(w.H, w.Base); err != nil {
		return nil, err
	}
	if e.Waiters, err = holdersOf(w.W, w.Base); err != nil {
		return nil, err
	}
	if len(w.Evicts) > 0 {
		e.Evicts = make(map[string]Holder, len(w.Evicts))
		for id, wh := range w.Evicts {
			if e.Evicts[id], err = wh.holder(w.Base); err != nil {
				return nil, err
			}
		}
	}
	return e, nil
}

func holdersOf(ws []wireHolder, base int64) ([]Holder, error) {
	if len(ws) == 0 {
		return nil, nil
	}
	hs := make([]Holder, len(ws))
	for i, w := range ws {
		h, err := w.holder(base)
		if err != nil {
			return nil, err
		}
		hs[i] = h
	}
	return hs, nil
}
