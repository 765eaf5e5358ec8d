package semaphore_test

import (
	"context"
	"errors"
	"sync/atomic"
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

// TestRefusedWakeUpPassedOn: one Client's queued waiters are woken in the
// order they subscribed, which need not be their order in the queue. A
// release wakes the Client's longest-subscribed waiter; refused (the
// permit is kept for the queue's head), it passes the wake-up on, and the
// head takes the permit at once instead of at its next refresh.
func TestRefusedWakeUpPassedOn(t *testing.T) {
	// Waiters queue at their first attempt, and refreshes are out of the
	// way: only a wake-up can hand the permit on.
	semaphore.SetTiming(t, 0, time.Hour)
	name := relocktest.Name(t)
	raw := relocktest.Raw(t)
	holder := relocktest.Client(t)
	s := holder.GetSemaphore(name)
	setPermits(t, s, 1)
	held, err := s.Acquire(t.Context(), 0)
	require.NoError(t, err)

	// The first waiter queues, then stops before it subscribes until the
	// second has queued and subscribed: the first is the queue's head, the
	// second the Client's longest-subscribed waiter.
	faulty := relocktest.NewFaulty(redistest.Shared(t).Client(t))
	var first atomic.Bool
	queued, proceed := make(chan struct{}), make(chan struct{})
	faulty.Inject(&relocktest.Rule{SHA1s: []string{lua.SemAcquire.SHA1}, N: 1, Run: true, Keep: true,
		Match: func([]string) bool { return first.CompareAndSwap(false, true) },
		After: func([]string) { close(queued); <-proceed }})
	attempts := faulty.Inject(&relocktest.Rule{SHA1s: []string{lua.SemAcquire.SHA1}, N: -1, Run: true, Keep: true})
	c, err := rlock.New(faulty)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	head := acquireAsync(ctx, c.GetSemaphore(name), 0)
	relocktest.Receive(t, queued, handoff, "the first waiter to queue")
	// Waiters that join in one millisecond of the server's clock are in
	// no set order.
	joined := serverMillis(t, raw)
	relocktest.Eventually(t, handoff, "the server's clock to move on", func() bool {
		now, err := raw.Do(context.Background(), raw.B().Time().Build()).AsIntSlice()
		return err == nil && len(now) == 2 && float64(now[0]*1000+now[1]/1000) > joined
	})
	second := acquireAsync(ctx, c.GetSemaphore(name), 0)
	queue := semaphore.KeysOf(name).Queue
	relocktest.Eventually(t, handoff, "the second waiter to queue and sleep", func() bool {
		n, err := raw.Do(t.Context(), raw.B().Zcard().Key(queue).Build()).AsInt64()
		return err == nil && n == 2 && attempts.Hits() == 2
	})
	close(proceed)
	relocktest.Eventually(t, handoff, "the head to sleep", func() bool { return attempts.Hits() == 3 })

	start := time.Now()
	require.NoError(t, s.Release(t.Context(), held))
	id := within(t, head, time.Second, "the queue's head")
	assert.NotEmpty(t, id, "the head's permit")
	assert.Less(t, time.Since(start), time.Second, "hand-off to the queue's head")
	cancel()
	id = relocktest.Receive(t, second, handoff, "the cancelled second waiter to return")
	assert.NotEqual(t, 32, len(id), "the second waiter got permit %q of one", id)
}

// TestPermitLossReported: a permit on the watchdog lease whose semaphore
// is deleted is reported lost to the lost handler, with the semaphore's
// name and the permit's ID, at its next renewal; Release then says so.
func TestPermitLossReported(t *testing.T) {
	name := relocktest.Name(t)
	lost := make(chan [2]string, 4)
	c := relocktest.Client(t, rlock.WithWatchdogTimeout(300*time.Millisecond),
		rlock.WithLostHandler(func(name, owner string, cause error) {
			if errors.Is(cause, rlock.ErrLockLost) {
				lost <- [2]string{name, owner}
			}
		}))
	s := c.GetSemaphore(name)
	setPermits(t, s, 2)
	id, err := s.Acquire(t.Context(), 0)
	require.NoError(t, err)
	_, err = s.Delete(t.Context())
	require.NoError(t, err)
	l := relocktest.Receive(t, lost, 2*time.Second, "the permit's loss to be reported")
	assert.Equal(t, [2]string{name, id}, l, "the lost handler's name and owner")
	err = s.Release(t.Context(), id)
	assert.ErrorIs(t, err, rlock.ErrNotHeld)
}

// TestPermitContext: a Permit's context lives while the permit is held,
// ends with a cause matching ErrLockLost when it is lost, and with
// context.Canceled at Release; a permit on a fixed lease ends with its
// lease.
func TestPermitContext(t *testing.T) {
	name := relocktest.Name(t)
	c := relocktest.Client(t, rlock.WithWatchdogTimeout(300*time.Millisecond))
	s := c.GetSemaphore(name)
	setPermits(t, s, 3)

	released, err := s.AcquirePermit(t.Context(), 0)
	require.NoError(t, err)
	assert.Len(t, released.ID(), 32)
	require.NoError(t, released.Release(t.Context()))
	relocktest.Receive(t, released.Done(), time.Second, "the released permit's context to end")
	assert.ErrorIs(t, context.Cause(released.Context()), context.Canceled)

	fixed, err := s.TryAcquirePermit(t.Context(), 0, 100*time.Millisecond)
	require.NoError(t, err)
	require.NotNil(t, fixed)
	relocktest.Receive(t, fixed.Done(), 2*time.Second, "a fixed-lease permit's context to end with its lease")
	assert.ErrorIs(t, context.Cause(fixed.Context()), rlock.ErrLockLost)

	p, err := s.AcquirePermit(t.Context(), 0)
	require.NoError(t, err)
	select {
	case <-p.Done():
		require.FailNow(t, "the permit's context ended while it was held")
	case <-time.After(400 * time.Millisecond):
		// The scenario, not a wait: the permit stays held past a renewal
		// (every 100ms) of its 300ms lease.
	}
	_, err = s.Delete(t.Context())
	require.NoError(t, err)
	relocktest.Receive(t, p.Done(), 2*time.Second, "the lost permit's context to end")
	assert.ErrorIs(t, context.Cause(p.Context()), rlock.ErrLockLost)
	err = p.Release(t.Context())
	assert.ErrorIs(t, err, rlock.ErrNotHeld)
}
