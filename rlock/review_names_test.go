package rlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// TestLockOnRateLimiterHash (review of issue 32, item 7): a rate
// limiter's configuration is a hash under its name, without a TTL. A
// plain, fenced or fair acquisition took it for a lock held by another
// owner with no lease: TryLock returned (false, nil) and Lock waited
// forever; a read-write lock named it a plain lock. Each is refused with
// ErrWrongKind, naming the rate limiter, and changes nothing.
func TestLockOnRateLimiterHash(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	ok, err := c.GetRateLimiter(name).TrySetRate(t.Context(), 1, time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	before := relocktest.HGetAll(t, raw, name)
	o := rlock.WithOwner(t.Context(), "o")
	for what, try := range map[string]func() (bool, error){
		"plain": func() (bool, error) { return c.GetLock(name).TryLock(o, time.Second, 0) },
		"fenced": func() (bool, error) {
			_, ok, err := c.GetFencedLock(name).TryLockAndGetToken(o, time.Second, 0)
			return ok, err
		},
		"fair":  func() (bool, error) { return c.GetFairLock(name).TryLock(o, time.Second, 0) },
		"read":  func() (bool, error) { return c.GetReadWriteLock(name).ReadLock().TryLock(o, time.Second, 0) },
		"write": func() (bool, error) { return c.GetReadWriteLock(name).WriteLock().TryLock(o, time.Second, 0) },
	} {
		ok, err := try()
		assert.False(t, ok, what)
		require.ErrorIs(t, err, rlock.ErrWrongKind, what)
		assert.Contains(t, err.Error(), "rate limiter", "%s: the error names the kind found", what)
	}
	ctx, cancel := context.WithTimeout(o, 5*time.Second)
	defer cancel()
	start := time.Now()
	require.ErrorIs(t, c.GetLock(name).Lock(ctx), rlock.ErrWrongKind, "Lock")
	assert.Less(t, time.Since(start), 2*time.Second, "a refused Lock ends at once, it does not wait")
	assert.Equal(t, before, relocktest.HGetAll(t, raw, name), "the refusals changed the configuration")
}
