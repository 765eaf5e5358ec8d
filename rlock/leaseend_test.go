package rlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/handle"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/observe"
	"github.com/relock-go/relock/rlock"
)

// holdKinds are the kinds of lock that hand out holds, by name, each on a
// handle of c.
var holdKinds = []struct {
	kind string
	get  func(c *rlock.Client, name string) *handle.Mutex
}{
	{"plain", func(c *rlock.Client, name string) *handle.Mutex { return c.GetLock(name).Mutex }},
	{"fenced", func(c *rlock.Client, name string) *handle.Mutex { return c.GetFencedLock(name).Mutex }},
	{"fair", func(c *rlock.Client, name string) *handle.Mutex { return c.GetFairLock(name).Mutex }},
	{"write", func(c *rlock.Client, name string) *handle.Mutex { return c.GetReadWriteLock(name).WriteLock().Mutex }},
	{"read", func(c *rlock.Client, name string) *handle.Mutex { return c.GetReadWriteLock(name).ReadLock().Mutex }},
}

// lostCauses is a lost handler that keeps the causes it is given.
type lostCauses chan error

func (l lostCauses) handler(_, _ string, cause error) { l <- cause }

// renewalLog is an observer that passes on the renewals it is told of.
type renewalLog chan observe.Renewal

func (l renewalLog) Renewal(r observe.Renewal) { l <- r }

// The rest of observe.Observer: nothing.
func (renewalLog) AcquireStart(ctx context.Context, _ observe.Acquire) context.Context { return ctx }
func (renewalLog) AcquireEnd(context.Context, observe.Acquire)                         {}
func (renewalLog) ReleaseStart(ctx context.Context, _ observe.Release) context.Context { return ctx }
func (renewalLog) ReleaseEnd(context.Context, observe.Release)                         {}
func (renewalLog) HoldStart(observe.Hold)                                              {}
func (renewalLog) HoldEnd(observe.Hold)                                                {}
func (renewalLog) WaitStart(context.Context, observe.Wait)                             {}
func (renewalLog) WaitEnd(context.Context, observe.Wait)                               {}

// TestFixedLeaseHoldEndsAtLease: the hold of a Hold taken on a fixed lease
// (the README's recipe: no owner in the context) ends when its lease ends,
// as its Context promises, with a cause that says the lease ran out; the
// lost handler hears of it once; the release after it says so. The same
// for a hold watched through the handle (HoldContext, Done), for every
// kind.
func TestFixedLeaseHoldEndsAtLease(t *testing.T) {
	const lease = 300 * time.Millisecond
	why := "its fixed lease of 300ms ran out"
	for _, k := range holdKinds {
		t.Run(k.kind, func(t *testing.T) {
			lost := make(lostCauses, 4)
			c := relocktest.Client(t, rlock.WithLostHandler(lost.handler))
			other := relocktest.Client(t)
			name := relocktest.Name(t)
			l := k.get(c, name)

			start := time.Now()
			h, err := l.TryAcquire(t.Context(), 0, lease)
			require.NoError(t, err)
			require.NotNil(t, h)
			relocktest.Receive(t, h.Done(), 3*time.Second, "the hold's context to end at its lease")
			assert.GreaterOrEqual(t, time.Since(start), lease, "the hold ended before its lease")
			cause := context.Cause(h.Context())
			assert.ErrorIs(t, cause, rlock.ErrLockLost)
			assert.ErrorContains(t, cause, why)
			got := relocktest.Receive(t, lost, 3*time.Second, "the lost handler")
			assert.Equal(t, cause, got, "the lost handler's cause")
			// The lock is free in Redis: another owner takes it.
			ok, err := k.get(other, name).TryLock(rlock.WithOwner(t.Context(), "other"), 3*time.Second, 0)
			require.NoError(t, err)
			require.True(t, ok, "another owner takes the lock after the lease")
			err = h.Release(t.Context())
			assert.ErrorIs(t, err, rlock.ErrNotHeld)
			assert.ErrorIs(t, err, rlock.ErrLockLost)
			assert.ErrorContains(t, err, why)
			require.NoError(t, k.get(other, name).Unlock(rlock.WithOwner(t.Context(), "other")))

			// Watched through the handle, for an owner given.
			a := rlock.WithOwner(t.Context(), "a")
			require.NoError(t, l.LockLease(a, lease))
			held := l.HoldContext(a)
			relocktest.Receive(t, l.Done(a), 3*time.Second, "Done to be closed at the lease's end")
			assert.ErrorContains(t, context.Cause(held), why)
			relocktest.Receive(t, lost, 3*time.Second, "the lost handler")
			err = l.Unlock(a)
			assert.ErrorIs(t, err, rlock.ErrLockLost)
			assert.ErrorContains(t, err, why)
			select {
			case cause := <-lost:
				t.Errorf("a loss reported twice: %v", cause)
			default:
			}
		})
	}
}

// TestReleaseAfterLossWithoutOwner: whether its context carried an owner
// or not, a Hold whose lock was force-unlocked elsewhere or deleted ends
// as lost, and its Release says so: ErrNotHeld and ErrLockLost, with the
// cause its Context ended with. A deletion, which publishes nothing, is
// not reported as a force-unlock heard.
func TestReleaseAfterLossWithoutOwner(t *testing.T) {
	raw := relocktest.Raw(t)
	for _, owner := range []string{"", "a"} {
		for _, how := range []string{"force-unlocked", "deleted"} {
			t.Run(how+" owner="+owner, func(t *testing.T) {
				c := relocktest.Client(t, rlock.WithWatchdogTimeout(300*time.Millisecond))
				name := relocktest.Name(t)
				ctx := t.Context()
				if owner != "" {
					ctx = rlock.WithOwner(ctx, owner)
				}
				h, err := c.GetLock(name).Acquire(ctx)
				require.NoError(t, err)
				if how == "deleted" {
					require.NoError(t, raw.Do(t.Context(), raw.B().Del().Key(name).Build()).Error())
				} else {
					ok, err := relocktest.Client(t).GetLock(name).ForceUnlock(t.Context())
					require.NoError(t, err)
					require.True(t, ok)
				}
				relocktest.Receive(t, h.Done(), 3*time.Second, "the hold to end")
				cause := context.Cause(h.Context())
				require.ErrorIs(t, cause, rlock.ErrLockLost)
				if how == "deleted" {
					// Nothing was published: the Client heard no message.
					assert.ErrorContains(t, cause, "its renewal found it gone")
				}
				err = h.Release(t.Context())
				assert.ErrorIs(t, err, rlock.ErrNotHeld)
				assert.ErrorIs(t, err, rlock.ErrLockLost)
				assert.ErrorContains(t, err, strings.TrimPrefix(cause.Error(), "relock: "))
				assert.False(t, errors.Is(h.Release(t.Context()), rlock.ErrLockLost), "a second Release")
			})
		}
	}
}

// TestLossCauseSaysWhatWasSeen: the cause of a loss says what the Client
// saw: a force-unlock heard on the lock's channel (a watched hold), a
// renewal that found the hold gone (a force-unlock of a hold nobody
// watches: its Client does not listen), a release that found nothing.
func TestLossCauseSaysWhatWasSeen(t *testing.T) {
	raw := relocktest.Raw(t)
	lost := make(lostCauses, 8)
	c := relocktest.Client(t, rlock.WithWatchdogTimeout(300*time.Millisecond), rlock.WithLostHandler(lost.handler))
	a := rlock.WithOwner(t.Context(), "a")
	force := func(t *testing.T, name string) {
		ok, err := relocktest.Client(t).GetLock(name).ForceUnlock(t.Context())
		require.NoError(t, err)
		require.True(t, ok)
	}
	check := func(t *testing.T, err error, why, not string) {
		t.Helper()
		assert.ErrorIs(t, err, rlock.ErrNotHeld)
		assert.ErrorIs(t, err, rlock.ErrLockLost)
		assert.ErrorContains(t, err, why)
		if not != "" {
			assert.NotContains(t, err.Error(), not)
		}
	}

	t.Run("force-unlocked, watched", func(t *testing.T) {
		// On the default watchdog lease, renewed every 10s: the renewals
		// of the test are those brought forward by the channel.
		renewals := make(renewalLog, 8)
		c := relocktest.Client(t, rlock.WithLostHandler(lost.handler), rlock.WithObserver(renewals))
		name := relocktest.Name(t)
		l := c.GetLock(name)
		require.NoError(t, l.Lock(a))
		done := l.Done(a)
		// The channel's subscription is made: a message may have been
		// missed, and a renewal looks.
		r := relocktest.Receive(t, renewals, 3*time.Second, "the renewal made once the hold listens")
		require.Equal(t, observe.OutcomeOK, r.Outcome)
		force(t, name)
		relocktest.Receive(t, done, 3*time.Second, "the hold to end")
		relocktest.Receive(t, lost, 3*time.Second, "the lost handler")
		check(t, l.Unlock(a), "it was force-unlocked: a message on its channel was heard", "")
	})
	t.Run("force-unlocked, not watched", func(t *testing.T) {
		name := relocktest.Name(t)
		l := c.GetLock(name)
		require.NoError(t, l.Lock(a))
		force(t, name)
		relocktest.Receive(t, lost, 3*time.Second, "the lost handler")
		check(t, l.Unlock(a), "its renewal found it gone (deleted or force-unlocked; no message on its channel was heard)",
			"force-unlocked:")
	})
	t.Run("deleted, found at the release", func(t *testing.T) {
		long := relocktest.Client(t) // renewed every 10s: the release comes first
		name := relocktest.Name(t)
		l := long.GetLock(name)
		require.NoError(t, l.Lock(a))
		require.NoError(t, raw.Do(t.Context(), raw.B().Del().Key(name).Build()).Error())
		check(t, l.Unlock(a), "its release found it gone (deleted or force-unlocked", "its renewal")
	})
	t.Run("fixed lease, released before it ran out", func(t *testing.T) {
		name := relocktest.Name(t)
		l := c.GetLock(name)
		require.NoError(t, l.LockLease(a, time.Minute))
		require.NoError(t, raw.Do(t.Context(), raw.B().Del().Key(name).Build()).Error())
		err := l.Unlock(a)
		check(t, err, "its release found it gone before its fixed lease of 1m0s ran out", "")
		relocktest.Receive(t, lost, 3*time.Second, "the lost handler")
	})
	assert.Empty(t, lost, "losses reported twice")
}

// TestBusyUnlockSettledForLease: a last Unlock answered BUSY by a real
// server that stays busy (a script runs) for longer than the Client's
// watchdog timeout is still finished once the server answers: the Client
// goes on releasing it for as long as the hold's fixed lease could last,
// not for the watchdog timeout, and another owner gets the lock then, not
// at the end of the lease.
func TestBusyUnlockSettledForLease(t *testing.T) {
	const watchdog = 200 * time.Millisecond
	srv := redistest.Start(t, "--lua-time-limit", "50") // busy-reply-threshold since Redis 7; lua-time-limit everywhere
	c := relocktest.ClientOn(t, srv, rlock.WithWatchdogTimeout(watchdog))
	other := relocktest.ClientOn(t, srv)
	raw := srv.Client(t)
	l := c.GetLock(relocktest.Name(t))
	u := rlock.WithOwner(t.Context(), "u")
	require.NoError(t, l.LockLease(u, time.Minute))

	busy := make(chan error, 1)
	go func() {
		_, err := srv.Do(context.Background(), "EVAL", `local function ms() local t = redis.call('time') return t[1]*1000 + t[2]/1000 end
local s = ms() while ms() - s < 1500 do end return 1`, "0")
		busy <- err
	}()
	relocktest.Eventually(t, 5*time.Second, "the server to answer BUSY", func() bool {
		err := raw.Do(context.Background(), raw.B().Ping().Build()).Error()
		return err != nil && strings.HasPrefix(err.Error(), "BUSY")
	})
	unlocked := time.Now()
	require.ErrorContains(t, l.Unlock(u), "BUSY", "Unlock while busy must return the BUSY error")
	require.NoError(t, relocktest.Receive(t, busy, 10*time.Second, "the busy script to end"), "the busy script")
	require.Greater(t, time.Since(unlocked), 2*watchdog, "the server was busy for longer than the watchdog timeout")

	o, cancel := context.WithTimeout(rlock.WithOwner(t.Context(), "o"), 10*time.Second)
	defer cancel()
	require.NoError(t, other.GetLock(l.Name()).Lock(o), "another owner, once the server answers again")
	assert.Less(t, time.Since(unlocked), 20*time.Second, "the lock was free long before its 1m lease ended")
	require.NoError(t, other.GetLock(l.Name()).Unlock(o))
}
