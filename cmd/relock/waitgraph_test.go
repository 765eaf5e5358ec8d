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

// TestBlocks: which holds keep a waiter waiting, by the kind it waits for.
func TestBlocks(t *testing.T) {
	w := func(kind string) *waiter { return &waiter{Field: "c:w", Kind: kind} }
	other := graphHolder{Field: "c:o"}
	reader := graphHolder{Field: "c:o", Mode: "read"}
	writer := graphHolder{Field: "c:o:write", Mode: "write"}
	selfRead := graphHolder{Field: "c:w", Mode: "read"}
	selfWrite := graphHolder{Field: "c:w:write", Mode: "write"}
	for _, tc := range []struct {
		kind    string
		h       graphHolder
		holders []graphHolder
		want    bool
	}{
		{"lock", other, nil, true},
		{"fair", graphHolder{Field: "c:w"}, nil, false}, // its own hold: reentered
		{"read", writer, nil, true},
		{"read", reader, nil, false}, // readers share
		{"read", selfWrite, nil, false},
		{"write", reader, nil, true},
		{"write", writer, nil, true},
		{"write", selfRead, []graphHolder{selfRead}, true},             // no upgrade: a cycle of one
		{"write", selfRead, []graphHolder{selfWrite, selfRead}, false}, // a writer that also reads
		{"semaphore", other, nil, false},                               // names no owner
		{"latch", other, nil, false},
	} {
		holders := tc.holders
		if holders == nil {
			holders = []graphHolder{tc.h}
		}
		assert.Equal(t, tc.want, blocks(w(tc.kind), tc.h, holders), "%s waiter, hold %+v", tc.kind, tc.h)
	}
}
