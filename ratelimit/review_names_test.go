package ratelimit_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// TestRateNameFormsShareNoWindow (review of issue 32, item 1): the rate
// limiters "a" and "{a}" derive the same window ({a}:value, {a}:permits)
// and channel. Their scripts took no other form's key, so both were
// accepted: a SetRate of "{a}" emptied "a"'s window, and "a", at 1
// permit a minute, handed out a second permit within the minute. While
// "a" has its configuration, every call of "{a}" that would set a rate or
// look at the window is refused with ErrNameConflict and changes
// nothing; so is a limiter whose other form holds a lock.
func TestRateNameFormsShareNoWindow(t *testing.T) {
	c := relocktest.Client(t)
	plain, braced := relocktest.NamePair(t)
	conflict := func(err error, asked, inUse, what string) {
		t.Helper()
		require.ErrorIs(t, err, relock.ErrNameConflict, what)
		assert.Contains(t, err.Error(), `"`+asked+`"`, "%s: the error names the name asked for", what)
		assert.Contains(t, err.Error(), `"`+inUse+`"`, "%s: the error names the form in use", what)
	}
	a, b := c.GetRateLimiter(plain), c.GetRateLimiter(braced)
	setRate(t, a, 1, time.Minute)
	ok, err := a.TryAcquire(t.Context(), 1, 0)
	require.NoError(t, err)
	require.True(t, ok, "a's one permit of the minute")

	ok, err = b.TrySetRate(t.Context(), 5, time.Minute)
	assert.False(t, ok, "the other form's rate set")
	conflict(err, braced, plain, "TrySetRate of the other form")
	conflict(b.SetRate(t.Context(), 5, time.Minute), braced, plain, "SetRate of the other form")
	_, err = b.AvailablePermits(t.Context())
	conflict(err, braced, plain, "AvailablePermits of the other form")
	ok, err = b.TryAcquire(t.Context(), 1, time.Second)
	assert.False(t, ok)
	conflict(err, braced, plain, "TryAcquire of the other form")

	ok, err = a.TryAcquire(t.Context(), 1, 0)
	require.NoError(t, err)
	assert.False(t, ok, "a second permit of a within its minute")
	assert.Equal(t, 0, available(t, a), "a's window")
	raw := relocktest.Raw(t)
	n, err := raw.Do(t.Context(), raw.B().Exists().Key(braced).Build()).AsInt64()
	require.NoError(t, err)
	assert.Zero(t, n, "a refused call wrote the other form's configuration")

	// A lock held under the other form of a limiter's name.
	lockName := relocktest.Name(t)
	o := rlock.WithOwner(t.Context(), "o")
	require.NoError(t, c.GetLock("{"+lockName+"}").Lock(o))
	defer c.GetLock("{" + lockName + "}").Unlock(o)
	ok, err = c.GetRateLimiter(lockName).TrySetRate(t.Context(), 1, time.Minute)
	assert.False(t, ok)
	conflict(err, lockName, "{"+lockName+"}", "TrySetRate beside a lock of the other form")
}
