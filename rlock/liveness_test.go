package rlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/rlock"
)

// waitingOn starts Lock of name on c and returns once attempts (a rule
// counting c's acquire scripts) has counted two (the waiter then sleeps),
// with a channel that gets Lock's error.
func waitingOn(t *testing.T, c *rlock.Client, attempts *relocktest.Rule, name string) <-chan error {
	t.Helper()
	before := attempts.Hits()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	got := make(chan error, 1)
	go func() { got <- c.GetLock(name).Lock(ctx) }()
	relocktest.Eventually(t, 5*time.Second, "the waiter to sleep", func() bool { return attempts.Hits() >= before+2 })
	return got
}

// countingClient returns a Client on rdb's server whose acquire scripts
// are counted.
func countingClient(t *testing.T, rdb rueidis.Client, opts ...rlock.Option) (*rlock.Client, *relocktest.Rule) {
	t.Helper()
	f := relocktest.NewFaulty(rdb)
	attempts := f.Inject(&relocktest.Rule{SHA1s: []string{lua.LockAcquire.SHA1}, N: -1, Run: true, Keep: true})
	c, err := rlock.New(f, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c, attempts
}

// TestDeadRegistrantDelaysNobody: with wake-one, a holder's release wakes
// the registered Client that registered first. When that Client closed,
// or died (its connections gone, its registration left behind), the
// release must still reach a waiter that is not registered (no option, or
// Redisson's), at once, not when the holder's lease would have ended.
func TestDeadRegistrantDelaysNobody(t *testing.T) {
	for _, death := range []string{"Close", "killed"} {
		t.Run(death, func(t *testing.T) {
			srv := redistest.Shared(t)
			raw := relocktest.Raw(t)
			name := relocktest.Name(t)
			ctx := rlock.WithOwner(t.Context(), "h")
			holder := relocktest.Client(t, rlock.WithWakeOne())
			require.NoError(t, holder.GetLock(name).Lock(ctx))

			opt := srv.ClientOption()
			opt.ClientName = "dead-registrant"
			rdb, err := rueidis.NewClient(opt)
			require.NoError(t, err)
			t.Cleanup(rdb.Close)
			registrant, rAttempts := countingClient(t, rdb, rlock.WithWakeOne())
			rGot := waitingOn(t, registrant, rAttempts, name)
			wakers := layout.Wakers(name)
			_, err = raw.Do(t.Context(), raw.B().Zscore().Key(wakers).Member(registrant.ID()).Build()).AsFloat64()
			require.NoError(t, err, "the registrant's registration")

			plain, pAttempts := countingClient(t, srv.Client(t))
			pGot := waitingOn(t, plain, pAttempts, name)

			if death == "Close" {
				require.NoError(t, registrant.Close())
				assert.ErrorIs(t, relocktest.Receive(t, rGot, 5*time.Second, "Close to end the registrant's wait"), rlock.ErrClosed)
				n, err := raw.Do(t.Context(), raw.B().Zcard().Key(wakers).Build()).AsInt64()
				require.NoError(t, err)
				assert.Zero(t, n, "registrations left after Close")
			} else {
				// Its connections end as a killed process's do, and it
				// makes no new ones; its registration stays. Close may
				// have ended some of them before the server lists them:
				// the wait below is what shows them all gone.
				rdb.Close()
				relocktest.KillConnections(t, raw, opt.ClientName)
				wake := layout.Derived(layout.WakePrefix, name) + ":" + registrant.ID()
				relocktest.Eventually(t, 5*time.Second, "the server to drop the dead Client", func() bool {
					return relocktest.Subscribers(raw, wake) == 0 && relocktest.Subscribers(raw, layout.Channel(name)) == 1
				})
			}
			start := time.Now()
			require.NoError(t, holder.GetLock(name).Unlock(ctx))
			require.NoError(t, relocktest.Receive(t, pGot, 5*time.Second, "the plain waiter to wake at the release"))
			assert.Less(t, time.Since(start), time.Second, "the plain waiter's wait after the release")
		})
	}
}

// TestReentryShortensLease: a re-entry with a shorter fixed lease sets the
// lock's lease to it, and a waiter that slept on the old lease is told: it
// gets the lock when the new lease ends, not the old one.
func TestReentryShortensLease(t *testing.T) {
	srv := redistest.Shared(t)
	name := relocktest.Name(t)
	ctx := rlock.WithOwner(t.Context(), "a")
	l := relocktest.Client(t).GetLock(name)
	require.NoError(t, l.Lock(ctx))
	c, attempts := countingClient(t, srv.Client(t))
	got := waitingOn(t, c, attempts, name)
	start := time.Now()
	require.NoError(t, l.LockLease(ctx, 200*time.Millisecond))
	require.NoError(t, relocktest.Receive(t, got, 5*time.Second, "the waiter to get the lock when the re-entered lease ended"))
	// Under the QuietHolderCap (1s) a waiter that was not told looks again
	// after: only the message brings it this soon.
	assert.Less(t, time.Since(start), 800*time.Millisecond, "the waiter's wait after the re-entry")
}
