package semaphore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
	"github.com/relock-go/relock/semaphore"
)

// TestPermitWatchdogTimeout: a semaphore handle may hold its permits on a
// watchdog lease of its own, shorter than the Client's: renewed while
// held, back soon after its Client is gone.
func TestPermitWatchdogTimeout(t *testing.T) {
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	c := relocktest.Client(t) // the Client's watchdog timeout: 30s
	s := c.GetSemaphore(name).WithWatchdogTimeout(300 * time.Millisecond)
	setPermits(t, s, 1)
	id, err := s.Acquire(t.Context(), 0)
	require.NoError(t, err)
	end := func() float64 { return leases(t, raw, name)[unhex(t, id)] }
	left := end() - serverMillis(t, raw)
	assert.LessOrEqual(t, left, 300.0, "the permit's lease, in ms")
	// Renewed: still held well past its lease.
	time.Sleep(700 * time.Millisecond) // past two leases: the renewals must have run
	assert.Greater(t, end()-serverMillis(t, raw), 0.0, "the permit's lease after 700ms")

	// Its Client gone, the permit comes back within its short lease.
	other := relocktest.Client(t)
	gone := relocktest.Client(t)
	gs := gone.GetSemaphore(name).WithWatchdogTimeout(300 * time.Millisecond)
	require.NoError(t, s.Release(t.Context(), id))
	_, err = gs.Acquire(t.Context(), 0)
	require.NoError(t, err)
	require.NoError(t, gone.Close())
	start := time.Now()
	_, ok, err := other.GetSemaphore(name).TryAcquire(t.Context(), 5*time.Second, time.Second)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Less(t, time.Since(start), 2*time.Second, "wait for the permit of a closed Client")

	for _, d := range []time.Duration{0, time.Millisecond, -time.Second} {
		_, err := c.GetSemaphore(name).WithWatchdogTimeout(d).Acquire(t.Context(), 0)
		assert.ErrorIs(t, err, rlock.ErrInvalidArgument, "WithWatchdogTimeout(%v)", d)
	}
}

// TestPermitErrorsSpeakOfPermits: the errors of a release name the permit
// and the semaphore, with one prefix.
func TestPermitErrorsSpeakOfPermits(t *testing.T) {
	c := relocktest.Client(t)
	name := relocktest.Name(t)
	s := c.GetSemaphore(name)
	setPermits(t, s, 1)
	id, err := s.Acquire(t.Context(), 0)
	require.NoError(t, err)
	require.NoError(t, s.Release(t.Context(), id))
	err = s.Release(t.Context(), id)
	require.ErrorIs(t, err, semaphore.ErrNotHeld)
	assert.False(t, errors.Is(err, semaphore.ErrLockLost), "a permit released twice was not lost")
	msg := err.Error()
	assert.Contains(t, msg, "permit "+id)
	assert.Contains(t, msg, "semaphore")
	assert.NotRegexp(t, `\block\b`, msg)
	assert.Equal(t, 1, strings.Count(msg, "relock:"), "one prefix: %q", msg)
}
