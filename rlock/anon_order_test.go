package rlock_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/rlock"
)

// TestAnonymousGrantsProcessedOutOfOrder: two ownerless acquisitions of
// one Client; Redis grants the first (a fixed lease of 50ms), the lease
// runs out, and Redis grants the second; the Client learns of the second
// grant before the first (its reply is held back until the second Lock
// returned). The second hold is the live one: it must stay the Client's
// anonymous hold, not be reported lost, and an ownerless Unlock must
// release it.
func TestAnonymousGrantsProcessedOutOfOrder(t *testing.T) {
	var lost lostCounter
	lost.t = t
	var attempts atomic.Int32
	firstAnswered := make(chan struct{})
	release := make(chan struct{})
	tap := relocktest.NewTap(redistest.Shared(t).Client(t), func(args []string) func(rueidis.RedisResult) {
		if relocktest.ScriptSHA1(args) != lua.LockAcquire.SHA1 || attempts.Add(1) != 1 {
			return nil
		}
		return func(rueidis.RedisResult) {
			close(firstAnswered)
			<-release
		}
	})
	c, err := rlock.New(tap, lost.option())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	l := c.GetLock(relocktest.Name(t))
	ctx := t.Context()
	// The script loaded, so that the first attempt is one EVALSHA.
	require.NoError(t, relocktest.Client(t).GetLock(relocktest.Name(t)+":warm").LockLease(ctx, time.Millisecond))

	first := make(chan error, 1)
	go func() { first <- l.LockLease(ctx, 50*time.Millisecond) }()
	relocktest.Receive(t, firstAnswered, 5*time.Second, "the first acquisition's reply")
	require.NoError(t, l.Lock(ctx), "the second ownerless Lock, once the first hold's lease ran out")
	close(release)
	require.NoError(t, relocktest.Receive(t, first, 5*time.Second, "the first LockLease to return"))

	held(t, l, ctx, "the second, live hold")
	assert.NoError(t, l.Unlock(ctx), "ownerless Unlock: the live hold")
	locked, err := l.IsLocked(ctx)
	require.NoError(t, err)
	assert.False(t, locked, "IsLocked after the ownerless Unlock")
}

// TestAnonymousGrantSentLateNotStale: the send time a Client records for
// an ownerless attempt is taken before the attempt reaches its
// connection, and a goroutine may be held up in between. Attempt Y is
// recorded first but reaches Redis after another ownerless hold p was
// granted and released (p's Unlock not answered yet): Y is granted, live,
// on the watchdog. It must stay the Client's anonymous hold, not be
// judged the stale one of the two and reported lost (flake hunt: 2 runs
// in 60 of TestAnonymousHandleRandomCalls under load). The same holds
// for Y on a fixed lease still running (subtest fixed): only a lease that
// may have run out can make Y the stale one. Grant on release
// stays on: p's Unlock finds no sleeping waiter to hand the lock to (Y is
// in its first attempt), so it releases as without grants.
func TestAnonymousGrantSentLateNotStale(t *testing.T) {
	t.Run("watched", func(t *testing.T) { anonGrantSentLate(t, 0) })
	t.Run("fixed", func(t *testing.T) { anonGrantSentLate(t, time.Minute) })
}

// anonGrantSentLate is TestAnonymousGrantSentLateNotStale with Y taking
// lease (0: Lock, on the watchdog).
func anonGrantSentLate(t *testing.T, lease time.Duration) {
	var lost lostCounter
	lost.t = t
	var attempts, unlocks atomic.Int32
	yHeld, yGo := make(chan struct{}), make(chan struct{})
	pReleased, pGo := make(chan struct{}), make(chan struct{})
	tap := relocktest.NewTap(redistest.Shared(t).Client(t), func(args []string) func(rueidis.RedisResult) {
		switch relocktest.ScriptSHA1(args) {
		case lua.LockAcquire.SHA1:
			if attempts.Add(1) == 1 {
				close(yHeld)
				<-yGo // Y is held up after its send time was taken
			}
		case lua.LockUnlock.SHA1:
			if unlocks.Add(1) != 1 {
				return nil
			}
			// p's release: run by Redis, its reply held back.
			return func(rueidis.RedisResult) {
				close(pReleased)
				<-pGo
			}
		}
		return nil
	})
	c, err := rlock.New(tap, lost.option())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	l := c.GetLock(relocktest.Name(t))
	ctx := t.Context()
	// Both scripts loaded, so that each call is one EVALSHA (a NOSCRIPT
	// reply would answer p's release without running it).
	warm := relocktest.Client(t).GetLock(relocktest.Name(t) + ":warm")
	require.NoError(t, warm.Lock(ctx))
	require.NoError(t, warm.Unlock(ctx))

	y := make(chan error, 1)
	go func() {
		if lease == 0 {
			y <- l.Lock(ctx)
		} else {
			y <- l.LockLease(ctx, lease)
		}
	}()
	relocktest.Receive(t, yHeld, 5*time.Second, "Y's attempt held up")
	require.NoError(t, l.Lock(ctx), "p: granted while Y is held up")
	unlocked := make(chan error, 1)
	go func() { unlocked <- l.Unlock(ctx) }()
	relocktest.Receive(t, pReleased, 5*time.Second, "p's release run by Redis")
	close(yGo)
	require.NoError(t, relocktest.Receive(t, y, 5*time.Second, "Y's Lock"), "Y: granted on the free lock")
	close(pGo)
	require.NoError(t, relocktest.Receive(t, unlocked, 5*time.Second, "p's Unlock"), "p's Unlock")

	assert.Zero(t, lost.n.Load(), "holds reported lost")
	held(t, l, ctx, "Y's hold")
	assert.NoError(t, l.Unlock(ctx), "ownerless Unlock: Y's hold")
	locked, err := l.IsLocked(ctx)
	require.NoError(t, err)
	assert.False(t, locked, "IsLocked after the ownerless Unlock")
}
