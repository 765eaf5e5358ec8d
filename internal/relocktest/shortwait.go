package relocktest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/rlock"
)

// ShortWaiter is one kind's acquisition with a wait, for CheckShortWait.
type ShortWaiter struct {
	// TryLock takes the lock (a permit, the set) for the owner in ctx,
	// waiting up to wait, as the kind's TryLock does.
	TryLock func(ctx context.Context, wait time.Duration) (bool, error)
	// Unlock releases what the owner's last successful TryLock took.
	Unlock func(ctx context.Context) error
	// Exclusive: while one owner holds the lock, another's TryLock is
	// refused (not a read lock's).
	Exclusive bool
}

// ShortWaits are waits shorter than a round trip through SlowClient with
// a millisecond each way.
var ShortWaits = []time.Duration{time.Microsecond, 100 * time.Microsecond, 250 * time.Microsecond,
	500 * time.Microsecond, time.Millisecond, 2 * time.Millisecond}

// CheckShortWait: a wait shorter than a round trip takes a free lock, as
// wait 0 does, every time: the call's first attempt is sent however short
// the wait, and the grant that comes back after the wait ended is the
// call's success. get returns the kind's handle on the lock name through
// a Client. It tries a 1µs wait on a Client straight to the server, and
// each of ShortWaits through a SlowClient that adds 1ms each way, 20
// times each. When w.Exclusive is set, a short wait on a lock another
// owner holds still returns (false, nil), without waiting longer than a
// round trip or two: the wait ends the sleeping.
func CheckShortWait(t *testing.T, get func(c *rlock.Client, name string) ShortWaiter) {
	t.Helper()
	name := Name(t)
	direct := get(Client(t), name)
	slow := get(SlowClient(t, time.Millisecond, nil), name)
	a := rlock.WithOwner(t.Context(), "a")
	try := func(w ShortWaiter, wait time.Duration, how string) {
		t.Helper()
		for i := range 20 {
			ok, err := w.TryLock(a, wait)
			require.NoError(t, err, "TryLock(wait %v) %s, try %d", wait, how, i+1)
			require.True(t, ok, "TryLock(wait %v) %s on a free lock, try %d: wait 0 takes it", wait, how, i+1)
			require.NoError(t, w.Unlock(a), "Unlock after TryLock(wait %v) %s", wait, how)
		}
	}
	try(direct, time.Microsecond, "straight to the server")
	for _, wait := range ShortWaits {
		try(slow, wait, "through 1ms of latency each way")
	}
	if !direct.Exclusive {
		return
	}
	h := rlock.WithOwner(t.Context(), "h")
	ok, err := direct.TryLock(h, 0)
	require.NoError(t, err)
	require.True(t, ok, "TryLock(wait 0) of the holder")
	b := rlock.WithOwner(t.Context(), "b")
	for _, wait := range ShortWaits {
		start := time.Now()
		ok, err := slow.TryLock(b, wait)
		took := time.Since(start)
		assert.NoError(t, err, "TryLock(wait %v) of a held lock", wait)
		assert.False(t, ok, "TryLock(wait %v) of a held lock", wait)
		// A round trip is 2ms; a subscription and a second attempt may
		// come before the wait's end is seen. A generous bound for a
		// loaded machine: a wait that stopped only at the lease's end
		// (the watchdog's 30s) or never would be far past it.
		assert.Less(t, took, 2*time.Second, "TryLock(wait %v) of a held lock: the wait ends the sleeping", wait)
	}
	require.NoError(t, direct.Unlock(h))
}
