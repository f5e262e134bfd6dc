package decider

import (
	"encoding/json"
	"time"

	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// A map node with a rate limit: each item's attempt takes a turn of its
// own (the key and units evaluated with the item as local), asked for as
// the item is to be readied, as its slot is under a concurrency limit
// (mapslots.go). An item whose turn is now is readied, its node-ready
// naming the limit; one whose turn is later is not readied and records
// nothing in the log: the limit's key remembers its turn
// (flow.Limiter.ReserveItem: asking again before it gives the same turn,
// not a fresh one), and the caller's Reserve arranges for the run to be
// decided again at it (the coordinator schedules a wake). Items are asked
// for in order; once an item's turn is more than a horizon away, the
// later items of its key are not asked in this decision (their turns
// could only be later still), nor once ItemTurnsAhead of its turns are
// later, so a large map takes at most the turns of a horizon ahead per
// decision, not one per item.
//
// The horizon is ItemTurnHorizon, and less than per − per/limit: a wake
// that comes late (a loaded coordinator) readies at once every item whose
// turn passed, and those are at most the turns taken ahead, the turns of
// a horizon plus the one past it, so at most limit: no more than the
// limit's own burst. GCRA's bound on the readies, limit + w·limit/per + 1
// in any window w, thus holds however late the wakes come.

// ItemTurnHorizon is the farthest ahead a decision takes map items' turns
// of one key.
const ItemTurnHorizon = time.Second

// ItemTurnsAhead bounds the later turns of one key a decision asks for
// (each a read of the key and a wake scheduled), whatever the rate: a
// fast rate (1,000 a second) would otherwise ask a thousand every
// decision.
const ItemTurnsAhead = 64

// itemHorizon is how far ahead a decision takes the turns of rate limit r
// for map items: ItemTurnHorizon, and less than per − per/limit.
func itemHorizon(r *graph.RateLimit) time.Duration {
	per := r.Per.D()
	return min(ItemTurnHorizon, per-per/time.Duration(r.Limit))
}

// readyRatedItem readies item i of map node n (which has a rate limit) as
// attempt when its turn is now; it reports whether it decided anything.
func (d *decider) readyRatedItem(n *graph.Node, ns *projection.NodeState, i, attempt int, input json.RawMessage, full map[string]bool) bool {
	ref, local := itemRef(n, ns, i), itemLocal(ns.Items[i].Data, i)
	rr, ok := d.rateRefFor(n, local)
	if !ok {
		return true // the run failed
	}
	late := "rate\x00" + rr.Key
	if full[late] || d.turnsAhead[rr.Key] >= ItemTurnsAhead {
		return false
	}
	if d.reserveFn != nil {
		r := d.reserveFn(ReserveRequest{Now: d.now, Run: d.s.RunID, Ref: ref, Attempt: attempt, Rate: *rr, Limit: n.Rate.Limit, Per: n.Rate.Per.D()})
		switch {
		case r.Failure != nil:
			d.failRun(*r.Failure, n.ID)
			return true
		case r.At.After(d.now.Add(itemHorizon(n.Rate))):
			full[late] = true
			return false
		case r.At.After(d.now):
			if d.turnsAhead == nil {
				d.turnsAhead = map[string]int{}
			}
			d.turnsAhead[rr.Key]++
			return false
		case !r.At.IsZero() && r.At.Before(d.now):
			at := r.At.UTC()
			rr.Turn = &at // the turn came before this decision
		}
	}
	before := len(d.out.Events)
	d.readyWith(n, ref, attempt, local, nil, nil, input, &cleared{rate: rr})
	return len(d.out.Events) > before
}
