package semaphore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/relocktest"
)

// TestNameFormsShareNoPermits (issue 32, item 1a): the semaphores "a"
// and "{a}" derive the same leases key, so a permit of "a" whose lease
// ended was given back by the next call on "{a}" to "{a}"'s count: "{a}"
// handed out two permits at once while set to one, and "a" had none for
// good. While "a" has its count, every call of "{a}" that would write a
// count or read the leases is refused with ErrNameConflict, changing
// nothing, and "a"'s permit comes back to "a".
func TestNameFormsShareNoPermits(t *testing.T) {
	c := relocktest.Client(t)
	plain, braced := relocktest.NamePair(t)
	a, b := c.GetSemaphore(plain), c.GetSemaphore(braced)
	conflict := func(err error, what string) {
		t.Helper()
		require.ErrorIs(t, err, relock.ErrNameConflict, what)
		assert.Contains(t, err.Error(), `"`+braced+`"`, "%s: the error names the name asked for", what)
		assert.Contains(t, err.Error(), `"`+plain+`"`, "%s: the error names the form in use", what)
	}

	setPermits(t, a, 1)
	ok, err := b.TrySetPermits(t.Context(), 1)
	assert.False(t, ok, "the other form's count set")
	conflict(err, "TrySetPermits of the other form")
	_, ok, err = a.TryAcquire(t.Context(), 0, 200*time.Millisecond)
	require.NoError(t, err)
	require.True(t, ok, "a's permit")

	// A waiting call of the other form ends at once.
	start := time.Now()
	_, ok, err = b.TryAcquire(t.Context(), 5*time.Second, 0)
	assert.False(t, ok)
	conflict(err, "TryAcquire of the other form")
	assert.Less(t, time.Since(start), 2*time.Second, "a refused TryAcquire ends at once, it does not wait")
	conflict(b.AddPermits(t.Context(), 1), "AddPermits of the other form")
	_, err = b.Delete(t.Context())
	conflict(err, "Delete of the other form")
	_, err = b.AvailablePermits(t.Context())
	conflict(err, "AvailablePermits of the other form")

	// The permit whose lease ends comes back to "a": a waiter of "a" takes
	// it then, and "a" is back to one permit, "{a}" never got one.
	id, ok, err := a.TryAcquire(t.Context(), 5*time.Second, 0)
	require.NoError(t, err)
	require.True(t, ok, "a's permit back after its lease")
	require.NoError(t, a.Release(t.Context(), id))
	assert.Equal(t, 1, available(t, a), "a's permits")
	_, err = b.AvailablePermits(t.Context())
	conflict(err, "AvailablePermits of the other form")
	raw := relocktest.Raw(t)
	n, err := raw.Do(t.Context(), raw.B().Exists().Key(braced).Build()).AsInt64()
	require.NoError(t, err)
	assert.Zero(t, n, "the other form's count was written")

	// Deleted, "a" leaves the name to "{a}".
	_, err = a.Delete(t.Context())
	require.NoError(t, err)
	setPermits(t, b, 1)
	_, err = a.AvailablePermits(t.Context())
	require.ErrorIs(t, err, relock.ErrNameConflict, "the first form once the other has its count")
}

// TestNameFormsCounting (issue 32, item 1, for the counting semaphore):
// the counting semaphores "a" and "{a}" derive the same grants and the
// same channel. While one form has its count, every call of the other
// that sets, takes, gives or drains permits is refused with
// ErrNameConflict, naming both names and writing nothing; a waiting
// Acquire ends at once. Both ways round.
func TestNameFormsCounting(t *testing.T) {
	for _, bracedFirst := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain first", true: "braced first"}[bracedFirst], func(t *testing.T) {
			c := relocktest.Client(t)
			raw := relocktest.Raw(t)
			plain, braced := relocktest.NamePair(t)
			inUse, asked := plain, braced
			if bracedFirst {
				inUse, asked = braced, plain
			}
			first, other := c.GetCountingSemaphore(inUse), c.GetCountingSemaphore(asked)
			conflict := func(err error, what string) {
				t.Helper()
				require.ErrorIs(t, err, relock.ErrNameConflict, what)
				assert.Contains(t, err.Error(), `"`+asked+`"`, "%s: the error names the name asked for", what)
				assert.Contains(t, err.Error(), `"`+inUse+`"`, "%s: the error names the form in use", what)
				assert.NotErrorIs(t, err, relock.ErrNotAcquired, "%s: a refusal, not a wait that ended", what)
			}

			setCounting(t, first, 2)
			require.NoError(t, first.Acquire(t.Context(), 1))
			before := grants(t, raw, inUse)
			ok, err := other.TrySetPermits(t.Context(), 5)
			assert.False(t, ok, "the other form's count set")
			conflict(err, "TrySetPermits of the other form")
			conflict(other.AddPermits(t.Context(), 1), "AddPermits of the other form")
			conflict(other.Release(t.Context(), 1), "Release of the other form")
			_, err = other.DrainPermits(t.Context())
			conflict(err, "DrainPermits of the other form")
			ok, err = other.TryAcquire(t.Context(), 1, 0)
			assert.False(t, ok)
			conflict(err, "TryAcquire of the other form")
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			start := time.Now()
			conflict(other.Acquire(ctx, 1), "Acquire of the other form")
			assert.Less(t, time.Since(start), 2*time.Second, "a refused Acquire ends at once, it does not wait")

			assert.Equal(t, "", rawCount(t, raw, asked), "a refused call wrote the other form's count")
			assert.Equal(t, "1", rawCount(t, raw, inUse), "the count in use")
			assert.Equal(t, before, grants(t, raw, inUse), "the shared grants")

			// Gone, the first form leaves the name to the other.
			require.NoError(t, raw.Do(t.Context(), raw.B().Del().Key(inUse).Build()).Error())
			setCounting(t, other, 1)
			_, err = first.DrainPermits(t.Context())
			require.ErrorIs(t, err, relock.ErrNameConflict, "the first form once the other has its count")
		})
	}
}

// TestNameFormsCountingWaiter: a waiter of "{a}" whose name's other form
// comes into use while it waits (a Redisson client, which does not refuse,
// sets "a" and publishes on the shared channel) ends at its next attempt
// with ErrNameConflict, having taken nothing.
func TestNameFormsCountingWaiter(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	plain, braced := relocktest.NamePair(t)
	s := c.GetCountingSemaphore(braced)
	setCounting(t, s, 0)
	done := make(chan error, 1)
	go func() { done <- s.Acquire(t.Context(), 1) }()
	ch := layout.CountingSemaphore(braced).Channel
	relocktest.Eventually(t, 5*time.Second, "the waiter to subscribe", func() bool {
		return relocktest.Subscribers(raw, ch) == 1
	})
	require.NoError(t, raw.Do(t.Context(), raw.B().Set().Key(plain).Value("3").Build()).Error())
	require.NoError(t, raw.Do(t.Context(), raw.B().Publish().Channel(ch).Message("3").Build()).Error())
	err := relocktest.Receive(t, done, 5*time.Second, "the waiter after the other form came into use")
	require.ErrorIs(t, err, relock.ErrNameConflict)
	assert.Equal(t, "0", rawCount(t, raw, braced), "the waiter's count")
	assert.Equal(t, "3", rawCount(t, raw, plain), "the other form's count")
}
