package semaphore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/rlock"
	"github.com/relock-go/relock/semaphore"
)

// closeAfter makes a Client on a fault-injecting client whose next run
// of script closes the Client between the script's run on the server and
// its reply reaching the caller.
func closeAfter(t *testing.T, script string) *rlock.Client {
	t.Helper()
	f := relocktest.NewFaulty(redistest.Shared(t).Client(t))
	c, err := rlock.New(f)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	f.Inject(&relocktest.Rule{SHA1s: []string{script}, N: 1, Run: true, Keep: true,
		After: func([]string) { _ = c.Close() }})
	return c
}

// TestCountingCloseDuringAttempt: a Close that lands while an
// acquisition's script is in flight (it took the permits) ends the wait
// as Close does, with ErrNotAcquired and ErrClosed, and the permits go
// back: a closed Client cannot release them, and they have no lease, so
// they were taken for good.
func TestCountingCloseDuringAttempt(t *testing.T) {
	name := relocktest.Name(t)
	other := relocktest.Client(t).GetCountingSemaphore(name)
	setCounting(t, other, 3)
	s := closeAfter(t, lua.CountingAcquire.SHA1).GetCountingSemaphore(name)
	err := s.Acquire(t.Context(), 2)
	assert.ErrorIs(t, err, semaphore.ErrClosed)
	assert.ErrorIs(t, err, semaphore.ErrNotAcquired)
	assert.Equal(t, 3, countOf(t, other), "permits after the closed call")
}

// TestAcquirePermitsCloseDuringAttempt: the same for permits on a fixed
// lease (which the closed Client could not release before it ends).
func TestAcquirePermitsCloseDuringAttempt(t *testing.T) {
	name := relocktest.Name(t)
	other := relocktest.Client(t).GetSemaphore(name)
	setPermits(t, other, 3)
	s := closeAfter(t, lua.SemAcquireMany.SHA1).GetSemaphore(name)
	ps, err := s.AcquirePermits(t.Context(), 2, time.Minute)
	assert.Nil(t, ps)
	assert.ErrorIs(t, err, semaphore.ErrClosed)
	assert.ErrorIs(t, err, semaphore.ErrNotAcquired)
	n, err := other.AvailablePermits(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 3, n, "permits after the closed call")
}
