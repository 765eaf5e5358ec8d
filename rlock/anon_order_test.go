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
