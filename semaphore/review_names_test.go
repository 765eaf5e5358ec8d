package semaphore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/relocktest"
)

// TestCountingNameFormsShareNothing (review of issue 32, item 1): the
// counting semaphores "a" and "{a}" derive the same grants key and
// channel. Their scripts took no other form's key, so both names were
// accepted at once: "{a}"'s AddPermits created its count beside "a"'s,
// and its waiters slept on "a"'s channel. While "a" has its count, every
// call of "{a}" that would write a count or take permits is refused with
// ErrNameConflict at once, and writes nothing.
func TestCountingNameFormsShareNothing(t *testing.T) {
	c := relocktest.Client(t)
	plain, braced := relocktest.NamePair(t)
	a, b := c.GetCountingSemaphore(plain), c.GetCountingSemaphore(braced)
	conflict := func(err error, what string) {
		t.Helper()
		require.ErrorIs(t, err, relock.ErrNameConflict, what)
		assert.Contains(t, err.Error(), `"`+braced+`"`, "%s: the error names the name asked for", what)
		assert.Contains(t, err.Error(), `"`+plain+`"`, "%s: the error names the form in use", what)
	}
	ok, err := a.TrySetPermits(t.Context(), 1)
	require.NoError(t, err)
	require.True(t, ok)

	ok, err = b.TrySetPermits(t.Context(), 1)
	assert.False(t, ok, "the other form's count set")
	conflict(err, "TrySetPermits of the other form")
	conflict(b.AddPermits(t.Context(), 1), "AddPermits of the other form")
	conflict(b.Release(t.Context(), 1), "Release of the other form")
	start := time.Now()
	ok, err = b.TryAcquire(t.Context(), 1, 5*time.Second)
	assert.False(t, ok)
	conflict(err, "TryAcquire of the other form")
	assert.Less(t, time.Since(start), 2*time.Second, "a refused TryAcquire ends at once, it does not wait")
	raw := relocktest.Raw(t)
	n, err := raw.Do(t.Context(), raw.B().Exists().Key(braced).Build()).AsInt64()
	require.NoError(t, err)
	assert.Zero(t, n, "a refused call wrote the other form's count")
	left, err := a.AvailablePermits(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 1, left, "a's permits")

	// Gone, "a" leaves the name to "{a}".
	require.NoError(t, raw.Do(t.Context(), raw.B().Del().Key(plain).Build()).Error())
	require.NoError(t, b.AddPermits(t.Context(), 1))
	conflict2 := a.AddPermits(t.Context(), 1)
	require.ErrorIs(t, conflict2, relock.ErrNameConflict, "the first form once the other has its count")
}
