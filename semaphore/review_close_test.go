package semaphore_test

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
	"github.com/relock-go/relock/rlock"
	"github.com/relock-go/relock/semaphore"
)

// closeAfter makes a Client on a fault-injecting client whose next run
// of script begins the Client's Close between the script's run on the
// server and its reply reaching the caller.
func closeAfter(t *testing.T, script string) *rlock.Client {
	t.Helper()
	f := relocktest.NewFaulty(redistest.Shared(t).Client(t))
	c, err := rlock.New(f)
	require.NoError(t, err)
	var closing sync.WaitGroup
	t.Cleanup(closing.Wait)
	f.Inject(&relocktest.Rule{SHA1s: []string{script}, N: 1, Run: true, Keep: true,
		After: func([]string) { closing.Go(func() { _ = c.Close() }); closeBegun(t, c) }})
	return c
}

// closeBegun waits until Close of c has begun: its calls are refused.
func closeBegun(t *testing.T, c *rlock.Client) {
	t.Helper()
	l := c.GetLock("relock-test:close-begun")
	relocktest.Eventually(t, 5*time.Second, "Close to begin", func() bool {
		_, err := l.IsLocked(context.Background())
		return errors.Is(err, rlock.ErrClosed)
	})
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

// TestCountingCloseOwnedConnection: Close of a Client that owns its
// connection (NewClient), while an acquisition's reply is on its way
// (the script took the permits), lets the call give them back before it
// closes the connection: it closed it at once, the give-back was refused,
// and the permits, which have no lease, stayed taken for good.
func TestCountingCloseOwnedConnection(t *testing.T) {
	srv := redistest.Shared(t)
	p, err := relocktest.NewProxy(srv.Addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	opt := srv.ClientOption()
	opt.InitAddress = []string{p.Addr()}
	c, err := rlock.NewClient(opt)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	name := relocktest.Name(t)
	other := relocktest.Client(t).GetCountingSemaphore(name)
	setCounting(t, other, 3)
	s := c.GetCountingSemaphore(name)
	_, err = s.AvailablePermits(t.Context()) // the connection is made
	require.NoError(t, err)
	p.SetDelay(150 * time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- s.Acquire(context.Background(), 2) }()
	relocktest.Eventually(t, 5*time.Second, "the acquisition to take its permits", func() bool {
		n, err := other.AvailablePermits(context.Background())
		return err == nil && n == 1
	})
	require.NoError(t, c.Close())
	err = relocktest.Receive(t, done, 5*time.Second, "the acquisition's end")
	assert.ErrorIs(t, err, semaphore.ErrClosed)
	assert.Equal(t, 3, countOf(t, other), "permits after Close")
}
