package decider_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/decider"
	"github.com/weft-dev/weft/pkg/events"
)

const mapRated = `
name: mr
nodes:
  - {id: m, type: echo, map: {over: "state.items"}, rate: {limit: 2, per: 1s, key: "local.item.k"}}
edges:
  - {from: START, to: m}
  - {from: m, to: END}
`

// fakeTurns is a rate limit's keys in memory, as flow.Limiter.ReserveItem
// keeps them: GCRA per key, a later turn remembered per attempt.
type fakeTurns struct {
	tat   map[string]time.Time
	turns map[string]time.Time
	asked map[string]int // item ref key → times asked
	taken int            // turns taken
}

func (f *fakeTurns) reserve(r decider.ReserveRequest) decider.Reservation {
	id := fmt.Sprint(r.Ref.Key(), "/", r.Attempt)
	f.asked[r.Ref.Key()]++
	if at, ok := f.turns[id]; ok {
		if !at.After(r.Now) {
			delete(f.turns, id)
		}
		return decider.Reservation{At: at}
	}
	f.taken++
	T := r.Per / time.Duration(r.Limit)
	tat := f.tat[r.Rate.Key]
	if tat.Before(r.Now) {
		tat = r.Now
	}
	tat = tat.Add(T)
	f.tat[r.Rate.Key] = tat
	at := tat.Add(-r.Per)
	if at.After(r.Now) {
		f.turns[id] = at
		return decider.Reservation{At: at}
	}
	return decider.Reservation{}
}

// readiedItems decides until nothing more is decided, and counts the
// items readied per rate key; it fails on any wait recorded for a turn.
func (sm *sim) readiedItems(f *fakeTurns, got map[string]int) {
	sm.t.Helper()
	for range 100 {
		d := decider.DecideWith(sm.g, sm.s.Clone(), sm.clock, decider.Options{Reserve: f.reserve})
		for _, e := range d.Events {
			switch p := mustPayload(sm.t, e).(type) {
			case *events.NodeReadyData:
				if p.Item == nil || p.Rate == nil || p.Rate.Limit != "mr/m" {
					sm.t.Fatalf("readied %s with rate %+v, want an item with the node's limit", p.Key(), p.Rate)
				}
				got[p.Rate.Key]++
			case *events.NodeWaitingData:
				if p.For == "rate" {
					sm.t.Fatalf("an item's wait for its turn is in the log: %+v", p)
				}
			}
			sm.append(e)
		}
		if len(d.Events) == 0 {
			return
		}
	}
	sm.t.Fatal("the decisions never settled")
}

// A map node's items take turns of its rate limit by key: at 2 a second
// per key, the first decisions ready two items of each key (the burst)
// and record no wait; the items whose turns are later are not readied, and
// once a key's turn is over a horizon away its later items are not asked
// for; 600ms on, the third item of each key, asking again, is given the
// turn it was given first and readied, and only the items now within the
// horizon take new turns.
func TestMapItemsTakeTurns(t *testing.T) {
	items := `{"items":[{"k":"a"},{"k":"b"},{"k":"a"},{"k":"b"},{"k":"a"},{"k":"b"},{"k":"a"},{"k":"b"},{"k":"a"},{"k":"b"},{"k":"a"},{"k":"b"}]}`
	sm := newSim(t, mapRated, items, "", nil)
	f := &fakeTurns{tat: map[string]time.Time{}, turns: map[string]time.Time{}, asked: map[string]int{}}
	got := map[string]int{}
	sm.readiedItems(f, got)
	if got["a"] != 2 || got["b"] != 2 {
		t.Fatalf("readied %v, want the burst: 2 of each key", got)
	}
	// Turns at 0, 0, 500ms, 1s, 1.5s, 2s per key; the horizon is 500ms
	// (per less a turn): the fourth item of a key (items 6 and 7) is past
	// it, so the fifth and sixth (items 8 to 11) are not asked for.
	if f.asked["m/1/6"] == 0 || f.asked["m/1/7"] == 0 || f.asked["m/1/8"]+f.asked["m/1/9"]+f.asked["m/1/10"]+f.asked["m/1/11"] != 0 {
		t.Fatalf("asked %v: want items 6 and 7 asked, 8 to 11 not (past the horizon)", f.asked)
	}
	if f.taken != 8 {
		t.Fatalf("%d turns taken, want one for each of items 0 to 7", f.taken)
	}
	sm.clock = sm.clock.Add(600 * time.Millisecond)
	sm.readiedItems(f, got)
	if got["a"] != 3 || got["b"] != 3 {
		t.Fatalf("600ms on: readied %v, want 3 of each key", got)
	}
	if f.taken != 10 {
		t.Fatalf("%d turns taken, want 10: items 8 and 9 asked now, no fresh turn for the others", f.taken)
	}
}

// A fast rate (100 a second) over 300 items: a decision asks for at most
// ItemTurnsAhead later turns of a key, not the whole horizon's (99).
func TestMapItemTurnsAheadBounded(t *testing.T) {
	var items []string
	for range 300 {
		items = append(items, `{"k":"a"}`)
	}
	sm := newSim(t, strings.Replace(mapRated, "limit: 2", "limit: 100", 1), `{"items":[`+strings.Join(items, ",")+`]}`, "", nil)
	f := &fakeTurns{tat: map[string]time.Time{}, turns: map[string]time.Time{}, asked: map[string]int{}}
	most := 0
	for range 20 {
		later := 0
		reserve := func(r decider.ReserveRequest) decider.Reservation {
			res := f.reserve(r)
			if res.At.After(r.Now) {
				later++
			}
			return res
		}
		d := decider.DecideWith(sm.g, sm.s.Clone(), sm.clock, decider.Options{Reserve: reserve})
		most = max(most, later)
		for _, e := range d.Events {
			sm.append(e)
		}
		if len(d.Events) == 0 {
			break
		}
	}
	if most != decider.ItemTurnsAhead {
		t.Fatalf("a decision asked for %d later turns at most, want the bound, %d", most, decider.ItemTurnsAhead)
	}
}
