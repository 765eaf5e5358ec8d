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
// watchdog lease of its own, shorter than the Client's: renewed on that
// lease while held (or, when a starved process renews too late, lost and
// reported lost: a lease of 300ms is renewed every 100ms, which a
// machine with every core busy may miss), back soon after its Client is
// gone.
func TestPermitWatchdogTimeout(t *testing.T) {
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	lost := make(chan error, 1)
	// The Client's watchdog timeout: 30s.
	c := relocktest.Client(t, rlock.WithLostHandler(func(_, _ string, cause error) {
		select {
		case lost <- cause:
		default:
		}
	}))
	s := c.GetSemaphore(name).WithWatchdogTimeout(300 * time.Millisecond)
	setPermits(t, s, 1)
	id, err := s.Acquire(t.Context(), 0)
	require.NoError(t, err)
	end := func() float64 { return leases(t, raw, name)[unhex(t, id)] }
	first := end()
	assert.LessOrEqual(t, first-serverMillis(t, raw), 300.0, "the permit's lease, in ms")
	// Renewed: held on until its lease ends more than two leases after it
	// began (a renewal never brings back a permit whose lease ended: the
	// script gives it back first, so such a lease was renewed in time each
	// time). Or a renewal came too late, and the Client reports the loss
	// by itself; without renewals on the handle's lease, it would not
	// within the Client's (30s).
	var last float64
	var cause error
	require.Eventually(t, func() bool {
		select {
		case cause = <-lost:
			return true
		default:
		}
		last = end()
		return last > first+300
	}, 5*time.Second, 5*time.Millisecond, "the permit neither renewed past two leases nor reported lost")
	if cause != nil {
		require.ErrorIs(t, cause, rlock.ErrLockLost)
		t.Logf("the permit's renewals came too late (a starved process), and it was reported lost: %v", cause)
		require.ErrorIs(t, s.Release(t.Context(), id), rlock.ErrLockLost)
	} else {
		assert.LessOrEqual(t, last-serverMillis(t, raw), 300.0, "the renewed lease is the handle's, in ms")
		if err := s.Release(t.Context(), id); err != nil {
			// Lost since, reported (ErrLockLost): a starved process.
			require.ErrorIs(t, err, rlock.ErrLockLost)
		}
	}

	// Its Client gone, the permit comes back within its short lease.
	other := relocktest.Client(t)
	gone := relocktest.Client(t)
	gs := gone.GetSemaphore(name).WithWatchdogTimeout(300 * time.Millisecond)
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
