package lockcore

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/waitrec"
)

// TestWaitBookOwners: the book's index by owner holds each live record of
// an owner once, whichever of them ends first, and none once they all
// ended; ownWaits gives the written ones, not those being deleted, by
// field.
func TestWaitBookOwners(t *testing.T) {
	b := &waitBook{key: "k", live: map[string]*waitRecord{}}
	rec := func(field, owner string) *waitRecord {
		r := &waitRecord{field: field, rec: waitrec.Record{Owner: owner, Name: "n", Kind: "lock", Since: 1}, ok: true}
		b.add(r)
		return r
	}
	fields := func(owner string) []string {
		recs, sure := b.ownWaits(owner)
		require.True(t, sure)
		var out []string
		for _, r := range recs {
			out = append(out, r.field)
		}
		return out
	}
	r1, r2, r3 := rec("1", "c:a"), rec("2", "c:a"), rec("3", "c:a")
	r4 := rec("4", "c:b")
	require.Equal(t, []string{"1", "2", "3"}, fields("c:a"))
	require.Equal(t, []string{"4"}, fields("c:b"))
	r2.deleting = true
	require.Equal(t, []string{"1", "3"}, fields("c:a"), "a record being deleted")
	b.remove(r2)
	require.Equal(t, []string{"1", "3"}, fields("c:a"))
	b.remove(r3) // the latest: the head
	require.Equal(t, []string{"1"}, fields("c:a"))
	r5 := rec("5", "c:a")
	r5.ok = false
	require.Equal(t, []string{"1"}, fields("c:a"), "a record not written")
	b.remove(r1)
	b.remove(r5)
	b.remove(r4)
	require.Empty(t, b.owners)
	require.Empty(t, b.live)
	require.Empty(t, fields("c:a"))
}
