package main

import (
	"fmt"
	"slices"
	"sort"

	"github.com/relock-go/relock/internal/layout"
)

// The wait-for graph: an owner that waits for a name points at each
// holder of the name that keeps it waiting. A cycle in it is a deadlock:
// every owner in it waits for the next, which waits in turn.

// edge is one "waits for": the waiter Waiter waits (a wait of kind Kind)
// for Name, held by Holder.
type edge struct {
	Waiter string `json:"waiter"` // <clientID>:<owner>
	Name   string `json:"name"`   // without --prefix
	Kind   string `json:"kind"`
	Holder string `json:"holder"` // the holder's hash field (":write" for a writer)

	from, to string // the graph's nodes: the waiter's and the holder's owner fields
	id       string // the wait and the hold, to read again
}

// cycle is a ring of owners each waiting for the next. Its JSON form is a
// line of 'relock waits --json' (type "cycle"); the field names are
// stable.
type cycle struct {
	Type string `json:"type"` // "cycle"
	// Owners are the owners of the ring, in its order (the first waits
	// for the second's name, ..., the last for the first's).
	Owners []string `json:"owners"`
	Edges  []edge   `json:"edges"`
}

// blocks reports whether the hold h of a name keeps the waiter w waiting;
// holders are all the holds of the name.
func blocks(w *waiter, h graphHolder, holders []graphHolder) bool {
	self := h.node() == w.Field
	switch w.Kind {
	case "lock", "fenced", "fair", "spin":
		return !self // an owner's own hold lets it in again
	case "read":
		return !self && h.Mode == layout.ModeWrite
	case "write":
		if !self {
			return true
		}
		// An owner that holds a read lock and waits for the write lock
		// of one name waits for itself: a read hold is never upgraded.
		// A writer that holds the write lock too gets in again.
		return h.Mode == layout.ModeRead && !slices.ContainsFunc(holders, func(o graphHolder) bool {
			return o.Mode == layout.ModeWrite && o.node() == w.Field
		})
	}
	// Semaphores, rate limiters and latches name no owner that holds
	// them: their waiters are in no cycle.
	return false
}

// edgesOf are the edges of the graph of names.
func edgesOf(names []*waitedName) []edge {
	var out []edge
	for _, n := range names {
		for _, w := range n.Waiters {
			for _, h := range n.Holders {
				if !blocks(w, h, n.Holders) {
					continue
				}
				out = append(out, edge{
					Waiter: w.Field, Name: n.Name, Kind: w.Kind, Holder: h.Field,
					from: w.Field, to: h.node(),
					id: fmt.Sprintf("%s\x00%s\x00%d\x00%s\x00%s", w.key, w.id, w.SinceMs, n.full, h.Field),
				})
			}
		}
	}
	return out
}

// findCycles finds the rings of the graph: one per group of owners that
// all wait for one another (a strongly connected component with more
// than one owner, or an owner that waits for itself), the shortest ring
// through the group's first owner.
func findCycles(edges []edge) []cycle {
	out := map[string][]edge{}
	var nodes []string
	seen := map[string]bool{}
	add := func(n string) {
		if !seen[n] {
			seen[n] = true
			nodes = append(nodes, n)
		}
	}
	for _, e := range edges {
		out[e.from] = append(out[e.from], e)
		add(e.from)
		add(e.to)
	}
	sort.Strings(nodes)
	var cycles []cycle
	for _, comp := range components(nodes, out) {
		in := map[string]bool{}
		for _, n := range comp {
			in[n] = true
		}
		start := slices.Min(comp)
		if ring := shortestRing(start, out, in); ring != nil {
			c := cycle{Type: "cycle", Edges: ring}
			for _, e := range ring {
				c.Owners = append(c.Owners, e.Waiter)
			}
			cycles = append(cycles, c)
		}
	}
	sort.Slice(cycles, func(i, j int) bool { return cycles[i].Owners[0] < cycles[j].Owners[0] })
	return cycles
}

// components are the strongly connected components of the graph (Tarjan).
func components(nodes []string, out map[string][]edge) [][]string {
	index, low := map[string]int{}, map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	var comps [][]string
	next := 0
	var visit func(v string)
	visit = func(v string) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, e := range out[v] {
			if _, done := index[e.to]; !done {
				visit(e.to)
				low[v] = min(low[v], low[e.to])
			} else if onStack[e.to] {
				low[v] = min(low[v], index[e.to])
			}
		}
		if low[v] == index[v] {
			var comp []string
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				comp = append(comp, w)
				if w == v {
					break
				}
			}
			comps = append(comps, comp)
		}
	}
	for _, v := range nodes {
		if _, done := index[v]; !done {
			visit(v)
		}
	}
	return comps
}

// shortestRing is the shortest path from start back to start through the
// nodes in, or nil when there is none (a component of one owner that
// does not wait for itself).
func shortestRing(start string, out map[string][]edge, in map[string]bool) []edge {
	via := map[string]edge{} // how each node was first reached
	queue := []string{start}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		for _, e := range out[v] {
			if !in[e.to] {
				continue
			}
			if e.to == start {
				ring := []edge{e}
				for n := v; n != start; n = via[n].from {
					ring = append(ring, via[n])
				}
				slices.Reverse(ring)
				return ring
			}
			if _, ok := via[e.to]; !ok {
				via[e.to] = e
				queue = append(queue, e.to)
			}
		}
	}
	return nil
}

// confirmed are the cycles of cs whose every edge is among again's (the
// graph read a second time): a ring seen while it formed or came apart,
// from waits and holds not read at one instant, is not reported.
func confirmed(cs []cycle, again []edge) []cycle {
	ids := map[string]bool{}
	for _, e := range again {
		ids[e.id] = true
	}
	var out []cycle
	for _, c := range cs {
		if !slices.ContainsFunc(c.Edges, func(e edge) bool { return !ids[e.id] }) {
			out = append(out, c)
		}
	}
	return out
}
