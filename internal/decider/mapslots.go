package decider

import (
	"encoding/json"

	"github.com/weft-dev/weft/internal/graphrt"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// A map node with a concurrency limit: each item's attempt takes a slot
// of its own (the key evaluated with the item as local), asked for as the
// item is to be readied. An item that finds its key full is not readied
// and records nothing in the log: it is queued in the limit's line, and a
// release wakes the run, which asks again. Only the first item of a full
// key in one decision is queued (the others of the key cannot pass it),
// so a large map asks the bucket once per full key, not once per item.

// readyItem readies item i of map node n as attempt, taking its slot
// first when n has a concurrency limit; it reports whether it decided
// anything (the item readied, or the run failed). full holds the keys
// found full in this decision (and, for a rate limit, the keys whose
// turns are past the horizon: maprate.go).
func (d *decider) readyItem(n *graph.Node, ns *projection.NodeState, i, attempt int, input json.RawMessage, full map[string]bool) bool {
	if n.Rate != nil {
		return d.readyRatedItem(n, ns, i, attempt, input, full) // maprate.go
	}
	before := len(d.out.Events)
	ref, local := itemRef(n, ns, i), itemLocal(ns.Items[i].Data, i)
	done := (*cleared)(nil)
	if n.Concurrency != nil {
		slot, ok := d.slotFor(n, local)
		if !ok {
			return true
		}
		if full[slot.Key] {
			return false
		}
		granted, ok := d.admit(ref, attempt, slot)
		switch {
		case !ok:
			return true
		case !granted:
			full[slot.Key] = true
			return false
		}
		done = &cleared{slot: slot}
	}
	d.readyWith(n, ref, attempt, local, nil, nil, input, done)
	return len(d.out.Events) > before
}

// ItemSlot is the slot item i of map node node would take in state s
// (nil when the node has no concurrency limit): what a coordinator gives
// back for an item still queued when its run ended.
func ItemSlot(g *graph.Graph, s *projection.State, node string, i int) (*events.SlotRef, error) {
	n, ok := g.Node(node)
	ns := s.Nodes[node]
	if !ok || n.Concurrency == nil || ns == nil || i >= len(ns.Items) {
		return nil, nil
	}
	env := graphrt.Env{State: s.VarsMap(), Invocation: s.InvocationMap(), Local: decode(itemLocal(ns.Items[i].Data, i))}
	key, err := graphrt.Of(g).ConcurrencyKey(node, env)
	if err != nil {
		return nil, err
	}
	return &events.SlotRef{Limit: graph.LimitName(g.Definition(), n), Key: key, Max: n.Concurrency.Max}, nil
}
