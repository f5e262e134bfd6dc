package coordinator

import (
	"context"
	"strconv"
	"strings"

	"github.com/weft-dev/weft/internal/decider"
	"github.com/weft-dev/weft/internal/flow"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// Map items' slots (internal/decider's mapslots.go): each item's attempt
// holds a slot of its map node's limit, under the holder node
// "<node>.<item>" (a node id has no '.'). The slot an item's attempt
// holds is in its node-ready (projection.ItemState.Slot), given back once
// the item's attempt is no longer live; an item queued for a slot records
// nothing in the log, and leaves the line when the sweep finds its run
// ended or the item readied by another attempt, or when it is granted.

// holderNode is the holder node of ref: the node, or for a map item
// "<node>.<item>".
func holderNode(ref events.NodeRef) string {
	if ref.Item == nil {
		return ref.Node
	}
	return ref.Node + "." + strconv.Itoa(*ref.Item)
}

// itemOf parses a map item's holder node.
func itemOf(holder string) (string, int, bool) {
	node, item, ok := strings.Cut(holder, ".")
	if !ok {
		return "", 0, false
	}
	i, err := strconv.Atoi(item)
	return node, i, err == nil && i >= 0
}

// itemSlotLive reports whether, in s, attempt h of item i of node still
// holds its slot (readied or running at that attempt) or waits for it
// (not readied yet at that attempt).
func itemSlotLive(s *projection.State, node string, i int, h flow.Holder) bool {
	return itemSlotLife(s, node, i, h) != flow.Gone
}

// itemSlotLife is itemSlotLive, saying which.
func itemSlotLife(s *projection.State, node string, i int, h flow.Holder) flow.Life {
	ns := s.Nodes[node]
	if s.Status.Ended() || ns == nil || ns.Iteration != h.Iteration || i >= len(ns.Items) {
		return flow.Gone
	}
	it := ns.Items[i]
	switch it.Status {
	case projection.NodeReady, projection.NodeRunning:
		if it.Attempt == h.Attempt {
			return flow.Holds
		}
	case projection.NodeIdle, projection.NodeRetryDue, projection.NodeRetrying:
		if it.Attempt+1 == h.Attempt {
			return flow.Waits
		}
	}
	return flow.Gone
}

// releaseItemSlots gives back the slots of map items' attempts that
// ended, and, once the run ended, the places in line of its items still
// queued; it wakes who they let in.
func (c *Coordinator) releaseItemSlots(ctx context.Context, ent *runEntry) error {
	s := ent.state
	for id, ns := range s.Nodes {
		for i, it := range ns.Items {
			item := i
			h := flow.Holder{Run: s.RunID, Node: holderNode(events.NodeRef{Node: id, Item: &item}), Iteration: ns.Iteration, Attempt: it.Attempt}
			slot := it.Slot
			if s.Status.Ended() && (it.Status == projection.NodeIdle || it.Status == projection.NodeRetryDue || it.Status == projection.NodeCancelled && it.Slot == nil) {
				h.Attempt++ // queued, perhaps: its place in line
				slot = c.itemSlot(s, id, i)
			}
			if slot == nil || itemSlotLive(s, id, i, h) {
				continue
			}
			if err := c.releaseOnce(ctx, ent, *slot, h); err != nil {
				return err
			}
		}
	}
	return nil
}

// itemSlot is the slot item i of node would take (nil: none, or its key
// cannot be worked out: the sweep reclaims its place).
func (c *Coordinator) itemSlot(s *projection.State, node string, i int) *events.SlotRef {
	g, err := c.graphFor(s)
	if err != nil {
		return nil
	}
	slot, err := decider.ItemSlot(g, s, node, i)
	if err != nil {
		return nil
	}
	return slot
}

// releaseOnce releases h's slot (or place in line) once per entry and
// wakes who it lets in.
func (c *Coordinator) releaseOnce(ctx context.Context, ent *runEntry, slot events.SlotRef, h flow.Holder) error {
	if _, done := ent.released[h.ID()]; done {
		return nil
	}
	if err := c.giveBack(ctx, slotOf(slot), h); err != nil {
		return err
	}
	if ent.released == nil {
		ent.released = map[string]struct{}{}
	}
	ent.released[h.ID()] = struct{}{}
	return nil
}
