package semaphore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/relocktest"
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
