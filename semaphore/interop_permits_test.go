package semaphore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redissontest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
	"github.com/relock-go/relock/semaphore"
)

// Redisson's calls for several permits (acquire(permits, leaseTime),
// tryRelease(permitsIds)) and for a permit's lease (updateLeaseTime,
// getLeaseTime) beside relock's AcquirePermits, UpdateLease and
// RemainingLease (issue 33).

// TestInteropSeveralPermits: permits that Redisson takes several at a
// time are counted by relock, which reads their leases and can release
// them; permits relock takes several at a time are counted by Redisson,
// which reads their leases and can release them (relock then finds them
// gone); a waiter for two on one side goes on at the other's release of
// two.
func TestInteropSeveralPermits(t *testing.T) {
	c := relocktest.Client(t, rlock.WithWatchdogTimeout(3*time.Second))
	raw := relocktest.Raw(t)
	j := redissontest.New(t, relocktest.Raw(t))
	name := relocktest.Name(t)
	ctx := t.Context()
	s, js := c.GetSemaphore(name), j.Semaphore(name)
	setPermits(t, s, 5)

	jids, err := js.AcquireN(ctx, 3, time.Minute)
	require.NoError(t, err)
	require.Len(t, jids, 3)
	assert.Equal(t, 2, available(t, s), "relock's count after Redisson took three")
	for _, id := range jids {
		left, err := s.RemainingLease(ctx, id)
		require.NoError(t, err, "relock reads the lease of Redisson's permit %s", id)
		assert.InDelta(t, float64(time.Minute), float64(left), float64(2*time.Second))
	}
	none, err := s.TryAcquirePermits(ctx, 3, 0, 0)
	require.NoError(t, err)
	assert.Nil(t, none, "three beside Redisson's three of five")

	ps, err := s.AcquirePermits(ctx, 2, 0)
	require.NoError(t, err)
	n, err := js.AvailablePermits(ctx)
	require.NoError(t, err)
	assert.Equal(t, 0, n, "Redisson's count after relock took two")
	for _, p := range ps {
		left, err := js.GetLeaseTime(ctx, p.ID())
		require.NoError(t, err, "Redisson reads the lease of relock's permit")
		assert.InDelta(t, float64(3*time.Second), float64(left), float64(time.Second), "the watchdog lease")
	}
	released, err := js.TryReleaseAll(ctx, ids(ps))
	require.NoError(t, err)
	assert.Equal(t, 2, released, "Redisson releases relock's two permits")
	relocktest.Receive(t, ps[0].Done(), 5*time.Second, "relock's permit released by Redisson to be found gone")
	assert.ErrorIs(t, ps[1].Release(ctx), semaphore.ErrNotHeld)

	// A relock waiter for two goes on at Redisson's release of two.
	ps, err = s.AcquirePermits(ctx, 2, 0)
	require.NoError(t, err)
	msgs := redissontest.Listen(t, raw, js.Channel())
	got := redissontest.Async(func() error {
		more, err := s.AcquirePermits(ctx, 2, time.Minute)
		for _, p := range more {
			_ = p.Release(ctx)
		}
		return err
	})
	redissontest.WaitSubscribers(t, raw, js.Channel(), 2)
	redissontest.Pending(t, got, "relock's waiter for two beside Redisson's three and relock's two")
	start := time.Now()
	released, err = js.TryReleaseAll(ctx, jids[:2])
	require.NoError(t, err)
	require.Equal(t, 2, released)
	redissontest.Message(t, msgs, "2", "Redisson's release of two")
	redissontest.Handoff(t, got, start, "relock's waiter for two")
	for _, p := range ps {
		require.NoError(t, s.Release(ctx, p.ID()))
	}
	require.NoError(t, s.Release(ctx, jids[2]), "relock releases Redisson's third")
	assert.Equal(t, 5, available(t, s))
}

// TestInteropLeaseUpdate: a lease updated on one side is read on the
// other, a permit without a lease (Redisson's) reads as NeverExpires, and
// a lease relock makes shorter wakes a Redisson waiter sleeping until the
// old end.
func TestInteropLeaseUpdate(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	j := redissontest.New(t, relocktest.Raw(t))
	name := relocktest.Name(t)
	ctx := t.Context()
	s, js := c.GetSemaphore(name), j.Semaphore(name)
	setPermits(t, s, 2)

	jid, err := js.Acquire(ctx, time.Minute)
	require.NoError(t, err)
	require.NoError(t, s.UpdateLease(ctx, jid, 2*time.Hour), "relock updates Redisson's permit")
	left, err := js.GetLeaseTime(ctx, jid)
	require.NoError(t, err)
	assert.InDelta(t, float64(2*time.Hour), float64(left), float64(2*time.Second), "Redisson reads relock's update")

	p, err := s.AcquirePermit(ctx, time.Minute)
	require.NoError(t, err)
	ok, err := js.UpdateLeaseTime(ctx, p.ID(), 3*time.Hour)
	require.NoError(t, err)
	require.True(t, ok, "Redisson updates relock's permit")
	left, err = s.RemainingLease(ctx, p.ID())
	require.NoError(t, err)
	assert.InDelta(t, float64(3*time.Hour), float64(left), float64(2*time.Second), "relock reads Redisson's update")
	ok, err = js.UpdateLeaseTime(ctx, p.ID(), 0)
	require.NoError(t, err)
	require.True(t, ok, "Redisson takes the lease away")
	left, err = p.RemainingLease(ctx)
	require.NoError(t, err)
	assert.Equal(t, semaphore.NeverExpires, left, "a permit without a lease")
	require.NoError(t, s.UpdateLease(ctx, p.ID(), time.Hour), "relock gives it a lease again")
	left, err = js.GetLeaseTime(ctx, p.ID())
	require.NoError(t, err)
	assert.InDelta(t, float64(time.Hour), float64(left), float64(2*time.Second))

	require.NoError(t, js.Release(ctx, jid))
	_, err = s.RemainingLease(ctx, jid)
	assert.ErrorIs(t, err, semaphore.ErrNotHeld, "relock reads a permit Redisson released")
	_, err = js.GetLeaseTime(ctx, jid)
	assert.ErrorIs(t, err, redissontest.ErrPermitNotHeld)
	ok, err = js.UpdateLeaseTime(ctx, jid, time.Minute)
	require.NoError(t, err)
	assert.False(t, ok, "Redisson updates a permit released")

	// Both permits held, relock's on an hour: a Redisson waiter sleeps
	// until the earliest lease end; relock makes it 100ms from now.
	jid, err = js.Acquire(ctx, time.Hour)
	require.NoError(t, err)
	msgs := redissontest.Listen(t, raw, js.Channel())
	got := redissontest.Async(func() error {
		id, err := js.Acquire(ctx, time.Minute)
		if err == nil {
			err = js.Release(ctx, id)
		}
		return err
	})
	redissontest.WaitSubscribers(t, raw, js.Channel(), 2)
	redissontest.WaitSleeping(t, j, js.Channel(), 1)
	redissontest.Pending(t, got, "Redisson's waiter beside two permits on an hour")
	start := time.Now()
	require.NoError(t, p.UpdateLease(ctx, 100*time.Millisecond))
	redissontest.Message(t, msgs, "1", "relock's shorter lease")
	redissontest.Handoff(t, got, start, "Redisson's waiter once the shorter lease ended")
	require.NoError(t, js.Release(ctx, jid))
}
