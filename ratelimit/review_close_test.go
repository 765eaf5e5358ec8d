package ratelimit_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/ratelimit"
	"github.com/relock-go/relock/rlock"
)

// TestRateCloseDuringAttempt: a Close that lands while an acquisition's
// script is in flight (it made its grant) ends the wait as Close does,
// with ErrNotAcquired and ErrClosed, and the grant leaves the window.
func TestRateCloseDuringAttempt(t *testing.T) {
	name := relocktest.Name(t)
	other := relocktest.Client(t).GetRateLimiter(name)
	setRate(t, other, 3, time.Hour)
	f := relocktest.NewFaulty(redistest.Shared(t).Client(t))
	c, err := rlock.New(f)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	var closing sync.WaitGroup
	t.Cleanup(closing.Wait)
	f.Inject(&relocktest.Rule{SHA1s: []string{lua.RateAcquire.SHA1}, N: 1, Run: true, Keep: true,
		After: func([]string) {
			closing.Go(func() { _ = c.Close() })
			l := c.GetLock("relock-test:close-begun")
			relocktest.Eventually(t, 5*time.Second, "Close to begin", func() bool {
				_, err := l.IsLocked(context.Background())
				return errors.Is(err, rlock.ErrClosed)
			})
		}})
	err = c.GetRateLimiter(name).Acquire(t.Context(), 2)
	assert.ErrorIs(t, err, ratelimit.ErrClosed)
	assert.ErrorIs(t, err, ratelimit.ErrNotAcquired)
	assert.Equal(t, 3, available(t, other), "permits after the closed call")
}
