package rlock_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// TestObserverCountingAndRate: a counting semaphore's acquisitions and
// releases, and a rate limiter's acquisitions, report as their kinds,
// with no hold (no Client keeps track of their permits).
func TestObserverCountingAndRate(t *testing.T) {
	rec := &recorder{}
	c := relocktest.Client(t, rlock.WithObserver(rec))
	ctx := t.Context()

	s := c.GetCountingSemaphore(relocktest.Name(t))
	_, err := s.TrySetPermits(ctx, 2)
	require.NoError(t, err)
	require.NoError(t, s.Acquire(ctx, 2))
	ok, err := s.TryAcquire(ctx, 1, 20*time.Millisecond)
	requireTry(t, false, ok, err, "TryAcquire with none left")
	require.NoError(t, s.Release(ctx, 2))
	k := "counting_semaphore"
	wantEvents(t, rec.take(t),
		"AcquireStart "+k, "AcquireEnd "+k+" acquired",
		"AcquireStart "+k, "WaitStart "+k, "WaitEnd "+k, "AcquireEnd "+k+" not_acquired",
		"ReleaseStart "+k, "ReleaseEnd "+k+" released")

	l := c.GetRateLimiter(relocktest.Name(t))
	_, err = l.TrySetRate(ctx, 1, time.Minute)
	require.NoError(t, err)
	require.NoError(t, l.Acquire(ctx, 1))
	ok, err = l.TryAcquire(ctx, 1, 20*time.Millisecond)
	requireTry(t, false, ok, err, "TryAcquire of a full window")
	k = "rate_limiter"
	wantEvents(t, rec.take(t),
		"AcquireStart "+k, "AcquireEnd "+k+" acquired",
		"AcquireStart "+k, "WaitStart "+k, "WaitEnd "+k, "AcquireEnd "+k+" not_acquired")
}
