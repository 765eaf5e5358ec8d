package rlock_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/observe"
	"github.com/relock-go/relock/rlock"
)

// TestRenewalReportsTakeover: a holder whose lock key was deleted (a
// failover that lost it, an operator) and taken at once by another owner
// learns of its loss at its next renewal, and that renewal leaves the new
// owner's hold and lease as they were: it does not stretch them to the
// watchdog's lease.
func TestRenewalReportsTakeover(t *testing.T) {
	const watchdogTimeout = 3 * time.Second // renewals every second
	const lease = 2 * time.Second           // the new owner's, shorter
	causes := make(chan error, 1)
	c := relocktest.Client(t, rlock.WithWatchdogTimeout(watchdogTimeout),
		rlock.WithLostHandler(func(_, _ string, cause error) {
			select {
			case causes <- cause:
			default:
			}
		}))
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	l := c.GetLock(name)
	a := rlock.WithOwner(t.Context(), "a")
	require.NoError(t, l.Lock(a))

	// The key is deleted and the lock taken by another client's owner in
	// one step, so that no renewal runs in between and finds it free.
	next := layout.Field("another-client", "b")
	require.NoError(t, raw.Do(t.Context(), raw.B().Eval().Script(`
redis.call('del', KEYS[1])
redis.call('hset', KEYS[1], ARGV[1], 1)
redis.call('pexpire', KEYS[1], ARGV[2])
return 1`).Numkeys(1).Key(name).Arg(next, strconv.FormatInt(lease.Milliseconds(), 10)).Build()).Error())
	taken := time.Now()

	// (Done is not asked for before: a holder that watches its hold also
	// listens for force-unlocks, and this is about the renewals.)
	select {
	case cause := <-causes:
		assert.ErrorIs(t, cause, rlock.ErrLockLost, "the lost handler's cause")
	case <-time.After(watchdogTimeout/3 + time.Second): // the next renewal, with room to spare
		t.Errorf("no loss reported %v after the lock passed to another owner (renewals every %v)",
			time.Since(taken).Round(time.Millisecond), watchdogTimeout/3)
	}
	select {
	case <-l.Done(a):
	default:
		t.Error("Done is open after the loss")
	}

	// Whatever the renewals did, the new owner's hold is as it was taken.
	hash, err := raw.Do(t.Context(), raw.B().Hgetall().Key(name).Build()).AsStrMap()
	require.NoError(t, err)
	assert.Equal(t, map[string]string{next: "1"}, hash, "the new owner's hold")
	// taken is after the lease was set: the lease left is at most lease
	// minus the time since taken (plus a millisecond of rounding).
	elapsed := time.Since(taken)
	pttl, err := raw.Do(t.Context(), raw.B().Pttl().Key(name).Build()).AsInt64()
	require.NoError(t, err)
	left := time.Duration(pttl) * time.Millisecond
	assert.LessOrEqual(t, left, lease-elapsed+time.Millisecond,
		"the new owner's lease (%v, taken %v ago) was extended", lease, elapsed.Round(time.Millisecond))

	err = l.Unlock(a)
	assert.True(t, errors.Is(err, rlock.ErrNotHeld) || errors.Is(err, rlock.ErrLockLost),
		"Unlock after the loss = %v, want ErrNotHeld or ErrLockLost", err)
	held, err := l.IsHeldByOwner(a)
	require.NoError(t, err)
	assert.False(t, held, "the old holder still holds")
}

// renewals is an observer that reports the watchdog's renewals.
type renewals struct {
	observe.Base
	ok chan struct{}
}

func (r *renewals) Renewal(e observe.Renewal) {
	if e.Outcome == observe.OutcomeOK {
		select {
		case r.ok <- struct{}{}:
		default:
		}
	}
}

// TestForceUnlockReachesHolder: a holder that watches its hold (Done) is
// told of a force-unlock by another Client through the lock's channel,
// at once, not at its next renewal (a third of the 30s watchdog lease
// away).
func TestForceUnlockReachesHolder(t *testing.T) {
	for _, kind := range []string{"Lock", "FairLock"} {
		t.Run(kind, func(t *testing.T) {
			obs := &renewals{ok: make(chan struct{}, 1)}
			c := relocktest.Client(t, rlock.WithObserver(obs))
			other := relocktest.Client(t)
			name := relocktest.Name(t)
			get := func(c *rlock.Client) interface {
				Lock(context.Context) error
				Done(context.Context) <-chan struct{}
				ForceUnlock(context.Context) (bool, error)
			} {
				if kind == "FairLock" {
					return c.GetFairLock(name)
				}
				return c.GetLock(name)
			}
			a := rlock.WithOwner(t.Context(), "a")
			require.NoError(t, get(c).Lock(a))
			done := get(c).Done(a)
			// Once its subscription is confirmed, the holder renews at
			// once (a force-unlock may have come before it listened); the
			// force-unlock must come after that, so that only its message
			// can tell the holder.
			select {
			case <-obs.ok:
			case <-time.After(5 * time.Second):
				t.Fatal("no renewal 5s after the holder started to listen")
			}
			forced := time.Now()
			ok, err := get(other).ForceUnlock(t.Context())
			require.NoError(t, err)
			require.True(t, ok, "ForceUnlock of a held lock")
			select {
			case <-done:
				assert.Less(t, time.Since(forced), time.Second, "the holder noticed the force-unlock")
			case <-time.After(2 * time.Second):
				t.Fatalf("the holder had not noticed the force-unlock %v later", time.Since(forced).Round(time.Millisecond))
			}
		})
	}
}
