package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/ratelimit"
	"github.com/relock-go/relock/rlock"
)

// requireConflict checks that err is a refusal of asked because its other
// form inUse is in use, naming both.
func requireConflict(t *testing.T, err error, asked, inUse, what string) {
	t.Helper()
	require.ErrorIs(t, err, relock.ErrNameConflict, what)
	assert.Contains(t, err.Error(), "rate limiter", "%s: the error names the kind", what)
	assert.Contains(t, err.Error(), `"`+asked+`"`, "%s: the error names the name asked for", what)
	assert.Contains(t, err.Error(), `"`+inUse+`"`, "%s: the error names the form in use", what)
	assert.NotErrorIs(t, err, relock.ErrNotAcquired, "%s: a refusal, not a wait that ended", what)
}

// TestNameFormsRateLimiter (issue 32, item 1, for the rate limiter): the
// rate limiters "a" and "{a}" derive the same window ({a}:value,
// {a}:permits) and channel, and differ only in the hash under the name.
// While one form has its rate, every call of the other is refused with
// ErrNameConflict, naming both names and writing nothing: the other's
// hash is not made, and the shared window keeps its grants; a waiting
// Acquire ends at once. Both ways round, and against a lock under the
// other form.
func TestNameFormsRateLimiter(t *testing.T) {
	for _, bracedFirst := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain first", true: "braced first"}[bracedFirst], func(t *testing.T) {
			c := relocktest.Client(t)
			raw := relocktest.Raw(t)
			plain, braced := relocktest.NamePair(t)
			inUse, asked := plain, braced
			if bracedFirst {
				inUse, asked = braced, plain
			}
			first, other := c.GetRateLimiter(inUse), c.GetRateLimiter(asked)
			setRate(t, first, 3, time.Minute)
			require.NoError(t, first.Acquire(t.Context(), 2))
			before, err := grants(raw, inUse)
			require.NoError(t, err)

			ok, err := other.TrySetRate(t.Context(), 10, time.Second)
			assert.False(t, ok, "the other form's rate set")
			requireConflict(t, err, asked, inUse, "TrySetRate of the other form")
			requireConflict(t, other.SetRate(t.Context(), 10, time.Second), asked, inUse, "SetRate of the other form")
			_, err = other.AvailablePermits(t.Context())
			requireConflict(t, err, asked, inUse, "AvailablePermits of the other form")
			ok, err = other.TryAcquire(t.Context(), 1, 0)
			assert.False(t, ok)
			requireConflict(t, err, asked, inUse, "TryAcquire of the other form")
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			start := time.Now()
			requireConflict(t, other.Acquire(ctx, 1), asked, inUse, "Acquire of the other form")
			assert.Less(t, time.Since(start), 2*time.Second, "a refused Acquire ends at once, it does not wait")

			n, err := raw.Do(t.Context(), raw.B().Exists().Key(asked).Build()).AsInt64()
			require.NoError(t, err)
			assert.Zero(t, n, "a refused call wrote the other form's hash")
			after, err := grants(raw, inUse)
			require.NoError(t, err)
			assert.Equal(t, before, after, "the shared window's grants")
			assert.Equal(t, 1, available(t, first), "the first form's window")

			// A lock under the other form is refused too, and refuses it.
			lock := c.GetLock(asked)
			ok, err = lock.TryLock(rlock.WithOwner(t.Context(), "o"), 0, 0)
			assert.False(t, ok)
			require.ErrorIs(t, err, relock.ErrNameConflict, "a lock of the other form")

			// Gone, the first form leaves the name to the other.
			require.NoError(t, raw.Do(t.Context(), raw.B().Del().Key(inUse).Build()).Error())
			setRate(t, other, 5, time.Minute)
			_, err = first.AvailablePermits(t.Context())
			requireConflict(t, err, inUse, asked, "the first form once the other has its rate")
		})
	}
}

// TestNameFormsRateWaiter: a waiter of "{a}" whose name's other form
// comes into use while it waits (a Redisson client, which does not refuse,
// sets the rate of "a") ends at its next attempt, woken by a SetRate
// message on the shared channel, with ErrNameConflict, having taken
// nothing.
func TestNameFormsRateWaiter(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	plain, braced := relocktest.NamePair(t)
	l := c.GetRateLimiter(braced)
	setRate(t, l, 1, time.Minute)
	require.NoError(t, l.Acquire(t.Context(), 1))
	done := make(chan error, 1)
	go func() { done <- l.Acquire(t.Context(), 1) }()
	ch := layout.RateLimiter(braced).Channel
	relocktest.Eventually(t, 5*time.Second, "the waiter to subscribe", func() bool {
		return relocktest.Subscribers(raw, ch) == 1
	})
	require.NoError(t, raw.Do(t.Context(), raw.B().Hset().Key(plain).FieldValue().FieldValue("rate", "5").
		FieldValue("interval", "60000").FieldValue("type", "0").Build()).Error())
	require.NoError(t, raw.Do(t.Context(), raw.B().Publish().Channel(ch).Message("5").Build()).Error())
	err := relocktest.Receive(t, done, 5*time.Second, "the waiter after the other form came into use")
	requireConflict(t, err, braced, plain, "the waiter")
	g, err := grants(raw, braced)
	require.NoError(t, err)
	assert.Len(t, g, 1, "the waiter took nothing")
}

// TestRateLimiterAndLockOnOneName (issue 32, item 7, for the rate
// limiter): a rate limiter's hash and a lock's are refused by each
// other with ErrWrongKind, naming the kind found, changing nothing: a
// plain, fenced, fair or read-write lock does not take (or wait on) a
// rate limiter's configuration, and no call of the rate limiter writes
// into a lock's hash or reads it as one with no rate.
func TestRateLimiterAndLockOnOneName(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	ctx := t.Context()
	o := rlock.WithOwner(ctx, "o")

	rate := relocktest.Name(t)
	setRate(t, c.GetRateLimiter(rate), 2, time.Minute)
	config := relocktest.HGetAll(t, raw, rate)
	wrongKind := func(err error, found, what string) {
		t.Helper()
		require.ErrorIs(t, err, relock.ErrWrongKind, what)
		assert.Contains(t, err.Error(), found, "%s: the error names the kind found", what)
		assert.NotErrorIs(t, err, relock.ErrNotAcquired, "%s: a refusal, not a wait that ended", what)
	}
	for what, try := range map[string]func() (bool, error){
		"plain TryLock": func() (bool, error) { return c.GetLock(rate).TryLock(o, 0, 0) },
		"fenced TryLock": func() (bool, error) {
			_, ok, err := c.GetFencedLock(rate).TryLockAndGetToken(o, 0, 0)
			return ok, err
		},
		"fair TryLock":  func() (bool, error) { return c.GetFairLock(rate).TryLock(o, 0, 0) },
		"read TryLock":  func() (bool, error) { return c.GetReadWriteLock(rate).ReadLock().TryLock(o, 0, 0) },
		"write TryLock": func() (bool, error) { return c.GetReadWriteLock(rate).WriteLock().TryLock(o, 0, 0) },
	} {
		ok, err := try()
		assert.False(t, ok, what)
		wrongKind(err, "holds a rate limiter", what)
	}
	wait, cancel := context.WithTimeout(o, 5*time.Second)
	defer cancel()
	start := time.Now()
	wrongKind(c.GetLock(rate).Lock(wait), "holds a rate limiter", "plain Lock")
	assert.Less(t, time.Since(start), 2*time.Second, "a refused Lock ends at once, it does not wait")
	assert.Equal(t, config, relocktest.HGetAll(t, raw, rate), "the rate limiter's hash")

	lock := relocktest.Name(t)
	require.NoError(t, c.GetLock(lock).Lock(o))
	defer c.GetLock(lock).Unlock(o)
	held := relocktest.HGetAll(t, raw, lock)
	l := c.GetRateLimiter(lock)
	const found = "holds a plain, fenced or fair lock"
	wrongKind(l.SetRate(ctx, 1, time.Second), found, "SetRate on a lock")
	_, err := l.TrySetRate(ctx, 1, time.Second)
	wrongKind(err, found, "TrySetRate on a lock")
	_, err = l.AvailablePermits(ctx)
	wrongKind(err, found, "AvailablePermits on a lock")
	_, err = l.TryAcquire(ctx, 1, time.Second)
	wrongKind(err, found, "TryAcquire on a lock")
	assert.NotErrorIs(t, err, ratelimit.ErrNoRate, "a lock is not a rate limiter without a rate")
	assert.Equal(t, held, relocktest.HGetAll(t, raw, lock), "the lock's hash")

	rw := relocktest.Name(t)
	require.NoError(t, c.GetReadWriteLock(rw).ReadLock().Lock(o))
	defer c.GetReadWriteLock(rw).ReadLock().Unlock(o)
	_, err = c.GetRateLimiter(rw).TrySetRate(ctx, 1, time.Second)
	wrongKind(err, "read-write lock", "TrySetRate on a read-write lock")
}
