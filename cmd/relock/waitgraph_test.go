package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestFindCycles: one cycle per group of owners that wait for one another,
// the shortest ring through its first owner; owners that only lead into a
// ring, and chains, are in none.
func TestFindCycles(t *testing.T) {
	e := func(from, to string) edge {
		return edge{Waiter: from, Holder: to, from: from, to: to, Name: "held by " + to}
	}
	edges := []edge{
		e("a", "b"), e("b", "a"), // a ring of two
		e("x", "a"),                           // leads into it
		e("c", "d"), e("d", "e"), e("e", "c"), // a ring of three
		e("e", "d"),              // and a shorter one inside the group
		e("s", "s"),              // an owner that waits for itself
		e("p", "q"), e("q", "r"), // a chain
	}
	cs := findCycles(edges)
	var owners [][]string
	for _, c := range cs {
		owners = append(owners, c.Owners)
		for i, ed := range c.Edges {
			assert.Equal(t, c.Edges[(i+1)%len(c.Edges)].Waiter, ed.to, "a ring: each edge leads to the next waiter")
		}
	}
	assert.Equal(t, [][]string{{"a", "b"}, {"c", "d", "e"}, {"s"}}, owners)
	assert.Empty(t, findCycles([]edge{e("p", "q"), e("q", "r")}))

	// A cycle whose edges are not all read again is not confirmed.
	ring := []edge{e("a", "b"), e("b", "a")}
	ring[0].id, ring[1].id = "1", "2"
	c := findCycles(ring)
	assert.Len(t, confirmed(c, ring), 1)
	assert.Empty(t, confirmed(c, ring[:1]))
}
