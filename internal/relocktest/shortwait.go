package relocktest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
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

// LateGrantClient returns a Client on the package's shared redis-server
// for a call that waits up to wait and whose grant comes back after its
// wait ended: the call's first attempt (a script whose SHA1 is sha)
// passes untouched; just before its second attempt, made at once after
// the call subscribed, is sent, free runs (it makes what the call waits
// for available, so that this attempt is granted); and that attempt's
// reply is held until the wait has ended (counted from the first
// attempt, which comes after the wait began, with a margin for the
// runtime to run the timer that ends it). The waiting core's contract
// makes the grant the call's success. The script must be loaded in the
// server already (an EVALSHA answered NOSCRIPT would be counted as an
// attempt). Attempts reports the attempts seen.
func LateGrantClient(t testing.TB, sha string, wait time.Duration, free func()) (c *rlock.Client, attempts *atomic.Int32) {
	t.Helper()
	attempts = new(atomic.Int32)
	var first time.Time
	tap := NewTap(redistest.Shared(t).Client(t), func(args []string) func(rueidis.RedisResult) {
		if ScriptSHA1(args) != sha {
			return nil
		}
		switch attempts.Add(1) {
		case 1:
			first = time.Now()
		case 2:
			free()
			return func(rueidis.RedisResult) {
				// The wait ends at the latest wait after first; its timer
				// cancels the call's wait context moments later.
				time.Sleep(time.Until(first.Add(wait + lateGrantMargin)))
			}
		}
		return nil
	})
	c, err := rlock.New(tap)
	require.NoError(t, err, "relocktest: New")
	t.Cleanup(func() { _ = c.Close() })
	return c, attempts
}

// lateGrantMargin is how long after its deadline LateGrantClient expects
// the wait's timer to have ended the wait context. The call under test
// returns the same on the code as meant whatever the margin: only a call
// that would wrongly give the grant back needs the wait to have ended.
const lateGrantMargin = 100 * time.Millisecond
