package multilock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/multilock"
	"github.com/relock-go/relock/rlock"
)

// TestShortWaitMultiLock: a MultiLock whose wait is shorter than a round
// trip takes two free locks, as wait 0 does (the first lock's grant used
// to be given back when it came after the wait).
func TestShortWaitMultiLock(t *testing.T) {
	relocktest.CheckShortWait(t, func(c *rlock.Client, n string) relocktest.ShortWaiter {
		m := multilock.New(c.GetLock(n), c.GetLock(n+":second"))
		return relocktest.ShortWaiter{
			TryLock:   func(ctx context.Context, wait time.Duration) (bool, error) { return m.TryLock(ctx, wait, 0) },
			Unlock:    m.Unlock,
			Exclusive: true,
		}
	})
}

// TestShortWaitRedLock: a RedLock whose wait is shorter than a round trip
// makes its first round, and takes three free locks, straight to the
// servers and through 1ms of latency each way.
func TestShortWaitRedLock(t *testing.T) {
	name := "relock-test:" + t.Name()
	var direct, slow []multilock.Locker
	for range 3 {
		srv := redistest.Start(t)
		direct = append(direct, relocktest.ClientOn(t, srv).GetLock(name))
		slow = append(slow, relocktest.SlowClientOn(t, srv, time.Millisecond, nil).GetLock(name))
	}
	a := rlock.WithOwner(t.Context(), "a")
	for _, c := range []struct {
		locks []multilock.Locker
		waits []time.Duration
		how   string
	}{
		{direct, []time.Duration{time.Microsecond}, "straight to the servers"},
		{slow, relocktest.ShortWaits, "through 1ms of latency each way"},
	} {
		// The per-instance timeout is not what is tried here: a generous
		// one, so that a round slowed down by a loaded machine does not
		// fail for it.
		r := multilock.NewRedLock(c.locks...).With(multilock.WithInstanceTimeout(10 * time.Second))
		for _, wait := range c.waits {
			for i := range 20 {
				ok, err := r.TryLock(a, wait, 0)
				require.NoError(t, err, "TryLock(wait %v) %s, try %d", wait, c.how, i+1)
				require.True(t, ok, "TryLock(wait %v) %s on free locks, try %d: wait 0 takes them", wait, c.how, i+1)
				require.NoError(t, r.Unlock(a), "Unlock after TryLock(wait %v) %s", wait, c.how)
			}
		}
	}
}
