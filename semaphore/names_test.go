package semaphore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
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
	plain := relocktest.Name(t)
	braced := "{" + plain + "}"
	srv := redistest.Shared(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = srv.Do(ctx, "DEL", braced)
	})
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
