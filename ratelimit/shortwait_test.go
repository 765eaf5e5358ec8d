package ratelimit_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/relocktest"
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
