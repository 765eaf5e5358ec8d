package lockcore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
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

// TestWaitBookEnded: a record whose call ended counts in the book's
// ended while it stays in the book; endedWaits gives its owner's such
// records for a name, each with a channel closed when it leaves; a
// record that left before its call ended never counts.
func TestWaitBookEnded(t *testing.T) {
	b := &waitBook{key: "k", live: map[string]*waitRecord{}}
	rec := func(field, name string) *waitRecord {
		r := &waitRecord{field: field, rec: waitrec.Record{Owner: "c:a", Name: name, Kind: "lock", Since: 1}, ok: true}
		b.add(r)
		return r
	}
	r1, r2, r3 := rec("1", "n"), rec("2", "n"), rec("3", "m")
	require.Empty(t, b.endedWaits("c:a", "n"), "no call ended")
	b.end(r1)
	b.end(r3)
	require.Equal(t, int64(2), b.ended.Load())
	gone := b.endedWaits("c:a", "n")
	require.Len(t, gone, 1, "r1's, not r2's (running) nor r3's (another name)")
	b.remove(r1)
	select {
	case <-gone[0]:
	default:
		t.Fatal("the channel of a record that left the book is open")
	}
	require.Equal(t, int64(1), b.ended.Load())
	b.remove(r2)
	b.end(r2) // left before its call ended
	b.remove(r3)
	require.Zero(t, b.ended.Load())
	require.Empty(t, b.endedWaits("c:a", "n"))
}

// TestUnlockWaitsForLateDeletesOnlyWithShortDelays: the last Unlock of an
// owner with an ended wait whose record delete has not been answered
// waits for that delete only with a detection delay under
// lateDeleteDelay. With the default delay it does not: waiting would add
// the delete's round trip to every hand-off of a waiter that releases at
// once.
func TestUnlockWaitsForLateDeletesOnlyWithShortDelays(t *testing.T) {
	for _, tc := range []struct {
		after time.Duration
		waits bool
	}{{0, false} /* the default delay */, {20 * time.Millisecond, true}, {lateDeleteDelay, false}} {
		t.Run(tc.after.String(), func(t *testing.T) {
			c := grantCore(t, redistest.Shared(t).Client(t), Config{DeadlockAfter: tc.after})
			m := NewMutex(c, grantName(t, c.RDB), Reentrant{})
			r := &waitRecord{field: "w", rec: waitrec.Record{Owner: m.Field("a"), Name: m.name, Kind: "lock", Since: 1}, ok: true}
			c.waits.mu.Lock()
			c.waits.add(r)
			c.waits.mu.Unlock()
			c.waits.end(r) // its delete is not answered
			before := endedWaitsAwaited.Load()
			done := make(chan struct{})
			go func() {
				m.awaitEndedWaits("a")
				close(done)
			}()
			if tc.waits {
				// It waits until the record leaves the book.
				waitUntil(t, 10*time.Second, "the Unlock waiting for the record's delete", func() bool { return endedWaitsAwaited.Load() != before })
				c.waits.mu.Lock()
				c.waits.remove(r)
				c.waits.mu.Unlock()
				receive(t, done, "the Unlock's wait")
				return
			}
			// It returns with the record still in the book (had it
			// waited, it would have counted that, and given up after
			// deleteTimeout).
			receive(t, done, "the Unlock's wait")
			if endedWaitsAwaited.Load() != before {
				t.Error("the Unlock waited for the record's delete")
			}
			c.waits.mu.Lock()
			c.waits.remove(r)
			c.waits.mu.Unlock()
		})
	}
}
