package semaphore_test

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/observe"
	"github.com/relock-go/relock/rlock"
	"github.com/relock-go/relock/semaphore"
)

// The expirable semaphore's calls for several permits at once and for a
// held permit's lease (issue 33).

func ids(ps []*semaphore.Permit) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.ID()
	}
	return out
}

// snapshotKeys is the content of every key of the semaphore name (DUMP),
// for checking that a call changed nothing.
func snapshotKeys(t *testing.T, name string) map[string]string {
	t.Helper()
	raw := relocktest.Raw(t)
	keys, err := raw.Do(t.Context(), raw.B().Keys().Pattern("*"+name+"*").Build()).AsStrSlice()
	require.NoError(t, err)
	sort.Strings(keys)
	out := map[string]string{}
	for _, k := range keys {
		dump, err := raw.Do(t.Context(), raw.B().Dump().Key(k).Build()).ToString()
		require.NoError(t, err)
		out[k] = dump
	}
	return out
}

// TestAcquirePermitsAllOrNone: several permits are taken in one call, each
// with an ID of its own and the watchdog lease (renewed until released),
// or none is: a call for more than are free takes nothing.
func TestAcquirePermitsAllOrNone(t *testing.T) {
	c := relocktest.Client(t, rlock.WithWatchdogTimeout(300*time.Millisecond))
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	s := c.GetSemaphore(name)
	setPermits(t, s, 3)

	ps, err := s.AcquirePermits(t.Context(), 2, 0)
	require.NoError(t, err)
	require.Len(t, ps, 2)
	assert.NotEqual(t, ps[0].ID(), ps[1].ID(), "each permit has an ID of its own")
	assert.Equal(t, 1, available(t, s))
	held := leases(t, raw, name)
	require.Len(t, held, 2)
	now := serverMillis(t, raw)
	for _, p := range ps {
		end, ok := held[unhex(t, p.ID())]
		require.True(t, ok, "permit %s in the leases", p.ID())
		assert.InDelta(t, now+300, end, 300, "permit %s on the watchdog lease", p.ID())
	}

	before := snapshotKeys(t, name)
	none, err := s.TryAcquirePermits(t.Context(), 2, 0, 0)
	require.NoError(t, err)
	assert.Nil(t, none, "two permits while one is free")
	assert.Equal(t, before, snapshotKeys(t, name), "a call that took nothing changed Redis")

	// Renewed until released: held past two watchdog leases.
	select {
	case <-ps[0].Done():
		require.FailNow(t, "a permit's context ended while it was held")
	case <-time.After(700 * time.Millisecond):
		// The scenario, not a wait: two leases pass.
	}
	assert.Len(t, leases(t, raw, name), 2, "permits renewed past their lease")
	assert.Equal(t, 1, available(t, s))

	for _, p := range ps {
		require.NoError(t, p.Release(t.Context()))
		assert.ErrorIs(t, context.Cause(p.Context()), context.Canceled)
	}
	assert.Equal(t, 3, available(t, s))

	// A fixed lease for each permit; the one-permit call of the family.
	ps, err = s.AcquirePermits(t.Context(), 1, 10*time.Second)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	d, ok := ps[0].Context().Deadline()
	require.True(t, ok, "a permit on a fixed lease has a deadline")
	assert.WithinDuration(t, time.Now().Add(10*time.Second), d, time.Second)
	require.NoError(t, s.Release(t.Context(), ps[0].ID()))
}

// TestAcquirePermitsBadInput: a call for no permits, fewer than none, or
// more than the semaphore has (available and held), or with a negative
// lease or wait, returns ErrInvalidArgument and changes nothing; a waiting
// call ends at once.
func TestAcquirePermitsBadInput(t *testing.T) {
	c := relocktest.Client(t)
	name := relocktest.Name(t)
	s := c.GetSemaphore(name)
	setPermits(t, s, 3)
	p, err := s.AcquirePermit(t.Context(), 0)
	require.NoError(t, err)
	before := snapshotKeys(t, name)
	ctx := t.Context()
	bad := []struct {
		what string
		call func() error
	}{
		{"no permits", func() error { _, err := s.AcquirePermits(ctx, 0, 0); return err }},
		{"negative permits", func() error { _, err := s.TryAcquirePermits(ctx, -1, 0, 0); return err }},
		{"more than the semaphore has", func() error { _, err := s.TryAcquirePermits(ctx, 4, 0, 0); return err }},
		{"more than it has, waiting", func() error { _, err := s.AcquirePermits(ctx, 4, 0); return err }},
		{"negative lease", func() error { _, err := s.AcquirePermits(ctx, 2, -time.Second); return err }},
		{"lease under 1ms", func() error { _, err := s.AcquirePermits(ctx, 2, time.Microsecond); return err }},
		{"negative wait", func() error { _, err := s.TryAcquirePermits(ctx, 2, -time.Second, 0); return err }},
	}
	for _, b := range bad {
		start := time.Now()
		err := b.call()
		assert.ErrorIs(t, err, semaphore.ErrInvalidArgument, b.what)
		assert.NotErrorIs(t, err, semaphore.ErrNotAcquired, "%s: a refusal, not a wait that ended", b.what)
		assert.Less(t, time.Since(start), 2*time.Second, "%s: refused at once", b.what)
	}
	assert.Equal(t, before, snapshotKeys(t, name), "the bad calls changed Redis")
	require.NoError(t, p.Release(ctx))

	// All three are there to take, one held or not.
	ps, err := s.AcquirePermits(ctx, 3, 0)
	require.NoError(t, err)
	require.Len(t, ps, 3)
	for _, p := range ps {
		require.NoError(t, p.Release(ctx))
	}
}

// TestAcquirePermitsWaits: a waiter for two goes on within a round trip
// of the release that makes two free, not at the first release.
func TestAcquirePermitsWaits(t *testing.T) {
	c := relocktest.Client(t)
	name := relocktest.Name(t)
	s := c.GetSemaphore(name)
	setPermits(t, s, 2)
	a, err := s.AcquirePermit(t.Context(), 0)
	require.NoError(t, err)
	b, err := s.AcquirePermit(t.Context(), 0)
	require.NoError(t, err)
	got := make(chan []*semaphore.Permit, 1)
	go func() {
		ps, err := s.AcquirePermits(t.Context(), 2, 0)
		if err != nil {
			t.Errorf("AcquirePermits: %v", err)
		}
		got <- ps
	}()
	relocktest.Eventually(t, 5*time.Second, "the waiter to subscribe", func() bool {
		return relocktest.Subscribers(relocktest.Raw(t), semaphore.KeysOf(name).Channel) == 1
	})
	require.NoError(t, a.Release(t.Context()))
	select {
	case <-got:
		require.FailNow(t, "a waiter for two went on with one free")
	case <-time.After(300 * time.Millisecond):
		// The scenario: one permit free is not enough.
	}
	assert.Equal(t, 1, available(t, s), "the free permit is not taken")
	require.NoError(t, b.Release(t.Context()))
	ps := relocktest.Receive(t, got, handoff, "the waiter for two once two are free")
	require.Len(t, ps, 2)
	assert.Equal(t, 0, available(t, s))
}

// TestAcquirePermitsNotPassedOver: a waiter for several permits that has
// joined the queue holds them back: a later waiter for one does not take
// the permits that come free one by one before it has them all.
func TestAcquirePermitsNotPassedOver(t *testing.T) {
	semaphore.SetTiming(t, 20*time.Millisecond, 300*time.Millisecond)
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	s := c.GetSemaphore(name)
	setPermits(t, s, 3)
	holders, err := s.AcquirePermits(t.Context(), 3, 0)
	require.NoError(t, err)

	big := make(chan []*semaphore.Permit, 1)
	go func() {
		ps, err := s.AcquirePermits(t.Context(), 3, 0)
		if err != nil {
			t.Errorf("AcquirePermits(3): %v", err)
		}
		big <- ps
	}()
	queued := func() int64 {
		n, _ := raw.Do(t.Context(), raw.B().Zcard().Key(semaphore.KeysOf(name).Queue).Build()).AsInt64()
		return n
	}
	relocktest.Eventually(t, 5*time.Second, "the waiter for three to join the queue", func() bool { return queued() == 3 })

	small := make(chan string, 1)
	other := relocktest.Client(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		id, err := other.GetSemaphore(name).Acquire(ctx, 0)
		if err != nil {
			id = "error: " + err.Error()
		}
		small <- id
	}()
	for _, h := range holders {
		require.NoError(t, h.Release(t.Context()))
		select {
		case id := <-small:
			require.FailNow(t, "a later waiter for one took a permit held back for the waiter for three", "got %s", id)
		case <-time.After(150 * time.Millisecond):
			// The scenario: a refresh of each waiter passes.
		}
	}
	ps := relocktest.Receive(t, big, handoff, "the waiter for three")
	require.Len(t, ps, 3)
	require.NoError(t, ps[0].Release(t.Context()))
	within(t, small, handoff, "the waiter for one")
	cancel()
}

// TestAcquirePermitsObserved: a call for several permits is one
// acquisition in the observer's events, naming every permit; each permit
// on the watchdog lease is a hold of its own.
func TestAcquirePermitsObserved(t *testing.T) {
	o := &permitObserver{}
	c := relocktest.Client(t, rlock.WithObserver(o))
	name := relocktest.Name(t)
	s := c.GetSemaphore(name)
	setPermits(t, s, 3)
	ps, err := s.AcquirePermits(t.Context(), 3, 0)
	require.NoError(t, err)
	for _, p := range ps {
		require.NoError(t, p.Release(t.Context()))
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	assert.Equal(t, []string{"AcquireStart " + strings.Join(ids(ps), ","), "AcquireEnd " + strings.Join(ids(ps), ",") + " acquired"}, o.acquires)
	var holds []string
	for _, p := range ps {
		holds = append(holds, p.ID())
	}
	assert.ElementsMatch(t, holds, o.holdStarts, "a hold per permit")
	assert.ElementsMatch(t, holds, o.holdEnds, "each hold ended by its release")
}

type permitObserver struct {
	observe.Base
	mu                             sync.Mutex
	acquires, holdStarts, holdEnds []string
}

func (o *permitObserver) AcquireStart(ctx context.Context, a observe.Acquire) context.Context {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.acquires = append(o.acquires, "AcquireStart "+a.Owner)
	return ctx
}

func (o *permitObserver) AcquireEnd(_ context.Context, a observe.Acquire) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.acquires = append(o.acquires, "AcquireEnd "+a.Owner+" "+string(a.Outcome))
}

func (o *permitObserver) HoldStart(h observe.Hold) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.holdStarts = append(o.holdStarts, h.Owner)
}

func (o *permitObserver) HoldEnd(h observe.Hold) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if h.Outcome == observe.OutcomeReleased {
		o.holdEnds = append(o.holdEnds, h.Owner)
	}
}

// TestUpdateLeaseFixed: a permit on a fixed lease gets a new lease, longer
// or shorter, in Redis and in its Permit's context, which ends when the
// new lease does; RemainingLease reads it.
func TestUpdateLeaseFixed(t *testing.T) {
	c := relocktest.Client(t)
	name := relocktest.Name(t)
	s := c.GetSemaphore(name)
	setPermits(t, s, 2)
	p, err := s.AcquirePermit(t.Context(), time.Second)
	require.NoError(t, err)

	require.NoError(t, p.UpdateLease(t.Context(), time.Minute))
	left, err := p.RemainingLease(t.Context())
	require.NoError(t, err)
	assert.InDelta(t, float64(time.Minute), float64(left), float64(time.Second), "the lease after a longer one")
	d, ok := p.Context().Deadline()
	require.True(t, ok)
	assert.WithinDuration(t, time.Now().Add(time.Minute), d, time.Second, "the Permit's deadline follows")
	select {
	case <-p.Done():
		require.FailNow(t, "the Permit's context ended at its old lease")
	case <-time.After(1200 * time.Millisecond):
		// The scenario: the old lease of 1s passes.
	}
	left, err = s.RemainingLease(t.Context(), p.ID())
	require.NoError(t, err)
	assert.Greater(t, left, 50*time.Second, "held past its old lease")

	start := time.Now()
	require.NoError(t, p.UpdateLease(t.Context(), 200*time.Millisecond))
	relocktest.Receive(t, p.Done(), 2*time.Second, "the Permit's context to end with its new lease")
	assert.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond, "ended with the new lease, not before")
	assert.ErrorIs(t, context.Cause(p.Context()), rlock.ErrLockLost)
	relocktest.Eventually(t, 5*time.Second, "the permit back with its lease", func() bool { return availableNow(s) == 2 })
	_, err = s.RemainingLease(t.Context(), p.ID())
	assert.ErrorIs(t, err, semaphore.ErrNotHeld, "a permit whose lease ended")
	err = p.UpdateLease(t.Context(), time.Minute)
	assert.ErrorIs(t, err, semaphore.ErrNotHeld, "a Permit whose context ended")
	assert.Equal(t, 2, available(t, s), "an update of an ended Permit takes nothing")

	// By ID, for a permit taken by Acquire.
	id, err := s.Acquire(t.Context(), time.Second)
	require.NoError(t, err)
	require.NoError(t, s.UpdateLease(t.Context(), id, time.Hour))
	left, err = s.RemainingLease(t.Context(), id)
	require.NoError(t, err)
	assert.InDelta(t, float64(time.Hour), float64(left), float64(time.Second))
	require.NoError(t, s.Release(t.Context(), id))
}

// TestUpdateLeaseWatchdog: a permit on this Client's watchdog lease that
// gets a fixed lease leaves the watchdog: it is no longer renewed, comes
// back when the new lease ends, and its Permit's context ends then, the
// loss told to the lost handler.
func TestUpdateLeaseWatchdog(t *testing.T) {
	lost := make(chan string, 4)
	c := relocktest.Client(t, rlock.WithWatchdogTimeout(300*time.Millisecond),
		rlock.WithLostHandler(func(_, owner string, cause error) {
			if errors.Is(cause, rlock.ErrLockLost) {
				lost <- owner
			}
		}))
	name := relocktest.Name(t)
	s := c.GetSemaphore(name)
	setPermits(t, s, 1)
	p, err := s.AcquirePermit(t.Context(), 0)
	require.NoError(t, err)
	require.NoError(t, p.UpdateLease(t.Context(), 3*time.Second))
	select {
	case <-p.Done():
		require.FailNow(t, "the Permit's context ended before its new lease")
	case <-time.After(700 * time.Millisecond):
		// The scenario: six renewals of the 300ms watchdog lease would
		// have run.
	}
	left, err := p.RemainingLease(t.Context())
	require.NoError(t, err)
	assert.Greater(t, left, time.Second, "the new lease, not reset to the watchdog's by a renewal")

	// Not renewed: a waiter of another Client gets the permit when the
	// new lease ends.
	other := relocktest.Client(t).GetSemaphore(name)
	_, ok, err := other.TryAcquire(t.Context(), 5*time.Second, time.Second)
	require.NoError(t, err)
	require.True(t, ok, "the permit back at the end of its new lease")
	relocktest.Receive(t, p.Done(), 2*time.Second, "the Permit's context to end with its new lease")
	assert.ErrorIs(t, context.Cause(p.Context()), rlock.ErrLockLost)
	assert.Equal(t, p.ID(), relocktest.Receive(t, lost, 2*time.Second, "the loss to be told"))
	err = p.Release(t.Context())
	assert.ErrorIs(t, err, semaphore.ErrNotHeld)
}

// TestUpdateLeaseNotHeld: an update of a permit that is not held returns
// ErrNotHeld and brings nothing back; one of a permit this Client held on
// the watchdog that is gone reports the loss; bad input is
// ErrInvalidArgument and changes nothing.
func TestUpdateLeaseNotHeld(t *testing.T) {
	lost := make(chan string, 4)
	c := relocktest.Client(t, rlock.WithLostHandler(func(_, owner string, cause error) {
		if errors.Is(cause, rlock.ErrLockLost) {
			lost <- owner
		}
	}))
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	s := c.GetSemaphore(name)
	setPermits(t, s, 2)
	ctx := t.Context()

	id, err := s.Acquire(ctx, time.Minute)
	require.NoError(t, err)
	require.NoError(t, s.Release(ctx, id))
	err = s.UpdateLease(ctx, id, time.Minute)
	assert.ErrorIs(t, err, semaphore.ErrNotHeld, "a released permit")
	assert.NotErrorIs(t, err, semaphore.ErrLockLost, "a released permit was not lost")
	assert.Equal(t, 2, available(t, s), "a released permit is not taken again")
	_, err = s.RemainingLease(ctx, id)
	assert.ErrorIs(t, err, semaphore.ErrNotHeld)

	p, err := s.AcquirePermit(ctx, 0)
	require.NoError(t, err)
	require.NoError(t, raw.Do(ctx, raw.B().Zrem().Key(semaphore.KeysOf(name).Leases).Member(unhex(t, p.ID())).Build()).Error())
	err = p.UpdateLease(ctx, time.Minute)
	assert.ErrorIs(t, err, semaphore.ErrNotHeld)
	assert.ErrorIs(t, err, semaphore.ErrLockLost, "a watched permit found gone")
	assert.Equal(t, p.ID(), relocktest.Receive(t, lost, 2*time.Second, "the loss to be told"))
	relocktest.Receive(t, p.Done(), time.Second, "the Permit's context to end")

	q, err := s.AcquirePermit(ctx, time.Minute)
	require.NoError(t, err)
	before := snapshotKeys(t, name)
	bad := []struct {
		what string
		call func() error
	}{
		{"lease 0", func() error { return s.UpdateLease(ctx, q.ID(), 0) }},
		{"negative lease", func() error { return q.UpdateLease(ctx, -time.Second) }},
		{"lease under 1ms", func() error { return s.UpdateLease(ctx, q.ID(), time.Microsecond) }},
		{"short permit ID", func() error { return s.UpdateLease(ctx, "abc", time.Second) }},
		{"upper-case permit ID", func() error {
			return s.UpdateLease(ctx, strings.ToUpper(q.ID()), time.Second)
		}},
		{"remaining lease of a bad ID", func() error { _, err := s.RemainingLease(ctx, "abc"); return err }},
	}
	for _, b := range bad {
		assert.ErrorIs(t, b.call(), semaphore.ErrInvalidArgument, b.what)
	}
	assert.Equal(t, before, snapshotKeys(t, name), "the bad calls changed Redis")
	assert.NoError(t, q.Context().Err(), "a bad update ends nothing")
	require.NoError(t, q.Release(ctx))
}

// TestUpdateLeaseWakesWaiter: a lease made shorter wakes a waiter that
// sleeps until the old lease's end (the only permit is held on a long
// fixed lease, and the waiter has no other reason to look again before
// then): it takes the permit when the new lease ends.
func TestUpdateLeaseWakesWaiter(t *testing.T) {
	semaphore.SetTiming(t, time.Minute, time.Minute)
	c := relocktest.Client(t)
	name := relocktest.Name(t)
	s := c.GetSemaphore(name)
	setPermits(t, s, 1)
	id, err := s.Acquire(t.Context(), time.Minute)
	require.NoError(t, err)
	w := relocktest.Client(t).GetSemaphore(name)
	got := make(chan bool, 1)
	go func() {
		_, ok, err := w.TryAcquire(t.Context(), 20*time.Second, time.Second)
		if err != nil {
			t.Errorf("TryAcquire: %v", err)
		}
		got <- ok
	}()
	relocktest.Eventually(t, 5*time.Second, "the waiter to subscribe", func() bool {
		return relocktest.Subscribers(relocktest.Raw(t), semaphore.KeysOf(name).Channel) == 1
	})
	start := time.Now()
	require.NoError(t, s.UpdateLease(t.Context(), id, 100*time.Millisecond))
	assert.True(t, relocktest.Receive(t, got, handoff, "the waiter once the shorter lease ended"))
	assert.Less(t, time.Since(start), handoff)
}

// TestAcquirePermitsGiveUpLeavesNothing: a waiter for several permits
// that joined the queue and gives up takes every member of its own out
// of the queue, so that it holds nothing back after its call.
func TestAcquirePermitsGiveUpLeavesNothing(t *testing.T) {
	semaphore.SetTiming(t, 20*time.Millisecond, 100*time.Millisecond)
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	s := c.GetSemaphore(name)
	setPermits(t, s, 3)
	held, err := s.AcquirePermits(t.Context(), 2, time.Minute)
	require.NoError(t, err)
	ps, err := s.TryAcquirePermits(t.Context(), 3, 300*time.Millisecond, 0)
	require.NoError(t, err)
	assert.Nil(t, ps, "three while one is free")
	n, err := raw.Do(t.Context(), raw.B().Exists().Key(semaphore.KeysOf(name).Queue, semaphore.KeysOf(name).QueueDeadlines).Build()).AsInt64()
	require.NoError(t, err)
	assert.Zero(t, n, "queue keys left by a waiter that gave up")
	_, ok, err := s.TryAcquire(t.Context(), 0, 0)
	require.NoError(t, err)
	assert.True(t, ok, "the free permit, held back for nobody")
	for _, p := range held {
		require.NoError(t, p.Release(t.Context()))
	}
}

// TestPermitsCallsNameForms: while the name's other form has its count,
// the new calls of the semaphore are refused with ErrNameConflict and
// change nothing; a waiting AcquirePermits ends at once.
func TestPermitsCallsNameForms(t *testing.T) {
	c := relocktest.Client(t)
	plain, braced := relocktest.NamePair(t)
	a, b := c.GetSemaphore(plain), c.GetSemaphore(braced)
	setPermits(t, a, 2)
	p, err := a.AcquirePermit(t.Context(), time.Minute)
	require.NoError(t, err)
	before := snapshotKeys(t, plain)
	start := time.Now()
	_, err = b.AcquirePermits(t.Context(), 2, 0)
	assert.ErrorIs(t, err, rlock.ErrNameConflict, "AcquirePermits of the other form")
	assert.Less(t, time.Since(start), 2*time.Second, "a refused AcquirePermits ends at once")
	_, err = b.TryAcquirePermits(t.Context(), 1, 0, 0)
	assert.ErrorIs(t, err, rlock.ErrNameConflict, "TryAcquirePermits of the other form")
	assert.ErrorIs(t, b.UpdateLease(t.Context(), p.ID(), time.Second), rlock.ErrNameConflict, "UpdateLease of the other form")
	_, err = b.RemainingLease(t.Context(), p.ID())
	assert.ErrorIs(t, err, rlock.ErrNameConflict, "RemainingLease of the other form")
	assert.Equal(t, before, snapshotKeys(t, plain), "refused calls changed Redis")
	require.NoError(t, p.Release(t.Context()))
}
