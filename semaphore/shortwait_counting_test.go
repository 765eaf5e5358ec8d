package semaphore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/lua"
)

// TestCountingShortWait: a wait shorter than a round trip takes free
// permits (the grant that comes back after the wait counts), through 1ms
// of latency each way.
func TestCountingShortWait(t *testing.T) {
	c := relocktest.SlowClient(t, time.Millisecond, nil)
	s := c.GetCountingSemaphore(relocktest.Name(t))
	ok, err := s.TrySetPermits(t.Context(), 20)
	require.NoError(t, err)
	require.True(t, ok)
	for i := range 20 {
		ok, err := s.TryAcquire(t.Context(), 1, time.Microsecond)
		require.NoError(t, err)
		require.True(t, ok, "try %d: a free permit with a 1µs wait", i)
	}
}

// TestCountingGrantAfterWaitKept: a grant whose reply comes back after
// the wait ended, from an attempt sent within it (the one made at once
// after subscribing), is the call's success: TryAcquire returns true and
// the permit is the caller's, not given back.
func TestCountingGrantAfterWaitKept(t *testing.T) {
	const wait = time.Second
	ctx := t.Context()
	name := relocktest.Name(t)
	direct := relocktest.Client(t).GetCountingSemaphore(name)
	ok, err := direct.TrySetPermits(ctx, 1)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, direct.Acquire(ctx, 1), "the only permit (and the acquire script loaded)")
	c, attempts := relocktest.LateGrantClient(t, lua.CountingAcquire.SHA1, wait, func() {
		assert.NoError(t, direct.Release(ctx, 1), "a permit freed before the second attempt")
	})
	ok, err = c.GetCountingSemaphore(name).TryAcquire(ctx, 1, wait)
	require.NoError(t, err)
	require.EqualValues(t, 2, attempts.Load(), "attempts: one refused, one granted after the wait")
	assert.True(t, ok, "TryAcquire whose grant came back after the wait ended")
	n, err := direct.AvailablePermits(ctx)
	require.NoError(t, err)
	assert.Equal(t, 0, n, "available permits: the grant was kept, not given back")
}
