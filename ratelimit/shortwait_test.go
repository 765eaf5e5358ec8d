package ratelimit_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/lua"
)

// TestRateShortWait: a wait shorter than a round trip takes a permit the
// window has room for (the grant that comes back after the wait counts),
// through 1ms of latency each way.
func TestRateShortWait(t *testing.T) {
	c := relocktest.SlowClient(t, time.Millisecond, nil)
	l := c.GetRateLimiter(relocktest.Name(t))
	ok, err := l.TrySetRate(t.Context(), 20, time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	for i := range 20 {
		ok, err := l.TryAcquire(t.Context(), 1, time.Microsecond)
		require.NoError(t, err)
		require.True(t, ok, "try %d: a permit in the window with a 1µs wait", i)
	}
}

// TestRateGrantAfterWaitKept: a grant whose reply comes back after the
// wait ended, from an attempt sent within it (the one made at once after
// subscribing), is the call's success: TryAcquire returns true and the
// permit stays taken in the window, not given back.
func TestRateGrantAfterWaitKept(t *testing.T) {
	const wait = time.Second
	ctx := t.Context()
	name := relocktest.Name(t)
	direct := relocktest.Client(t).GetRateLimiter(name)
	ok, err := direct.TrySetRate(ctx, 1, time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = direct.TryAcquire(ctx, 1, 0)
	require.NoError(t, err)
	require.True(t, ok, "the window's only permit (and the acquire script loaded)")
	c, attempts := relocktest.LateGrantClient(t, lua.RateAcquire.SHA1, wait, func() {
		assert.NoError(t, direct.SetRate(ctx, 1, time.Hour), "a new window before the second attempt")
	})
	ok, err = c.GetRateLimiter(name).TryAcquire(ctx, 1, wait)
	require.NoError(t, err)
	require.EqualValues(t, 2, attempts.Load(), "attempts: one refused, one granted after the wait")
	assert.True(t, ok, "TryAcquire whose grant came back after the wait ended")
	n, err := direct.AvailablePermits(ctx)
	require.NoError(t, err)
	assert.Equal(t, 0, n, "available permits: the grant was kept, not given back")
}
