package graph

import (
	"slices"
	"strings"

	"github.com/weft-dev/weft/internal/suggest"
)

// Limits by node type and by queue (Definition.Limits). Each entry is
// checked where it is written (limits.types.<type>, limits.queues.<queue>)
// and then given to the nodes it applies to as their own limit, named
// "type/<type>" or "queue/<queue>" unless it names one, so the engine
// sees one limit per node, as it does without them; graphs that use the
// same name share the slots or turns. A type or queue that no node of
// the graph has is refused (it would limit nothing here: a typo, or a
// limit meant for another graph).

// lowerLimits checks g's limits by type and queue, and gives each valid
// one to the nodes of g it applies to that have no limit of their own.
func lowerLimits(g *Graph, o *options, p *problems) {
	l := g.def.Limits
	if l == nil {
		return
	}
	types, queues := map[string]bool{}, map[string]bool{}
	for i := range g.def.Nodes {
		types[g.def.Nodes[i].Type] = true
		queues[g.def.Nodes[i].Queue] = true
	}
	okTypes := checkNodeLimits(g, "types", "type", l.Types, types, o, p)
	okQueues := checkNodeLimits(g, "queues", "queue", l.Queues, queues, o, p)
	for i := range g.def.Nodes {
		n := &g.def.Nodes[i]
		if n.Concurrency != nil || n.Rate != nil {
			continue // its own limit replaces them
		}
		t, byType := okTypes[n.Type]
		q, byQueue := okQueues[n.Queue]
		byQueue = byQueue && !coordinatorType(n.Type) // on no worker's queue
		switch {
		case byType && byQueue:
			p.node(n.ID, "type", "node is under both limits.types.%s and limits.queues.%s: give it a limit of its own, or keep one of the two", n.Type, n.Queue)
		case byType:
			giveLimits(n, t, "type/"+n.Type)
		case byQueue:
			giveLimits(n, q, "queue/"+n.Queue)
		}
	}
}

// checkNodeLimits checks the entries of limits.<kind> (what names one
// key: "type" or "queue") and returns the valid ones; used lists the
// types or queues the graph's nodes have.
func checkNodeLimits(g *Graph, kind, what string, entries map[string]NodeLimits, used map[string]bool, o *options, p *problems) map[string]NodeLimits {
	ok := map[string]NodeLimits{}
	for _, name := range sortedKeys(entries) {
		e := entries[name]
		at := "limits." + kind + "." + name
		before := len(p.errs)
		bad := func(field, format string, args ...any) { p.top(at+"."+field, format, args...) }
		switch {
		case !used[name]:
			have := slices.Sorted(func(yield func(string) bool) {
				for k := range used {
					if !yield(k) {
						return
					}
				}
			})
			msg := "no node of this graph has " + what + " %q (they have: %s)"
			if s := suggest.Closest(name, have); s != "" {
				msg += "; did you mean %q?"
				p.top(at, msg, name, strings.Join(have, ", "), s)
			} else {
				p.top(at, msg, name, strings.Join(have, ", "))
			}
		case e.Concurrency == nil && e.Rate == nil:
			p.top(at, "give a concurrency or a rate limit")
		}
		probe := &Node{Type: name, Concurrency: e.Concurrency, Rate: e.Rate}
		if kind == "queues" {
			probe.Type = ""
		}
		validateConcurrency(g, probe, o, bad)
		validateRate(g, probe, o, bad)
		delete(g.flowKey, "")
		delete(g.rateKey, "")
		delete(g.rateUnit, "")
		if len(p.errs) == before {
			ok[name] = e
		}
	}
	return ok
}

// giveLimits gives node n the limits of an entry, named name unless the
// entry names them; a map node's items take its limits each.
func giveLimits(n *Node, e NodeLimits, name string) {
	if c := e.Concurrency; c != nil {
		cc := *c
		if cc.Name == "" {
			cc.Name = name
		}
		n.Concurrency = &cc
	}
	if r := e.Rate; r != nil {
		rr := *r
		if rr.Name == "" {
			rr.Name = name
		}
		n.Rate = &rr
	}
}
