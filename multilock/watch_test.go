package multilock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/multilock"
)

// watchCounter is a fake that counts the calls to its Done.
type watchCounter struct {
	*fake
	dones *atomic.Int32
}

func (w watchCounter) Done(ctx context.Context) <-chan struct{} {
	w.dones.Add(1)
	return w.fake.Done(ctx)
}

// TestWatchesStartWhenAsked: a hold on the watchdog lease asks its locks
// for nothing until its Done (or HoldContext, or Do) is called; then it
// watches every lock it took.
func TestWatchesStartWhenAsked(t *testing.T) {
	for _, kind := range []string{"multilock", "redlock"} {
		t.Run(kind, func(t *testing.T) {
			var dones atomic.Int32
			fs := fakes(&journal{}, "a", "b", "c")
			locks := make([]multilock.Locker, len(fs))
			for i, f := range fs {
				locks[i] = watchCounter{f, &dones}
			}
			var l fullLocker = multilock.New(locks...)
			if kind == "redlock" {
				l = multilock.NewRedLock(locks...)
			}
			ctx := lockcore.WithOwner(t.Context(), "o")
			require.NoError(t, l.Lock(ctx))
			assert.Zero(t, dones.Load(), "locks watched before anyone asked")
			done := l.Done(ctx)
			assert.EqualValues(t, 3, dones.Load(), "locks watched after Done")
			l.Done(ctx)
			assert.EqualValues(t, 3, dones.Load(), "locks watched again by a second Done")
			require.NoError(t, l.Unlock(ctx))
			select {
			case <-done:
			default:
				assert.Fail(t, "Done still open after the final Unlock")
			}
		})
	}
}

// TestLossSeenByLateWatch: locks lost before anyone watched the hold are
// seen lost as soon as someone does.
func TestLossSeenByLateWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := fakes(&journal{}, "x", "x", "x", "x", "x")
		r := multilock.NewRedLock(lockers(fs)...)
		ctx := lockcore.WithOwner(t.Context(), "o")
		require.NoError(t, r.Lock(ctx))
		for _, f := range fs[:3] {
			f.lose()
		}
		hold := r.HoldContext(ctx)
		synctest.Wait()
		require.Error(t, hold.Err(), "the hold's context is live with 2 of 5 locks held")
		assert.ErrorIs(t, context.Cause(hold), multilock.ErrLockLost)
		assert.ErrorIs(t, r.Unlock(ctx), multilock.ErrLockLost)
	})
}

// TestUnwatchedLossAtUnlock: the final Unlock of a hold on the watchdog
// lease that nobody watched reports a loss when the locks' answers say
// that too few of them were still held, and only then.
func TestUnwatchedLossAtUnlock(t *testing.T) {
	cases := []struct {
		kind string
		lose int // of 5 locks
		lost bool
	}{
		{"redlock", 0, false},
		{"redlock", 2, false},
		{"redlock", 3, true},
		{"multilock", 0, false},
		{"multilock", 1, true},
	}
	for _, c := range cases {
		fs := fakes(&journal{}, "a", "b", "c", "d", "e")
		l := newKind(c.kind, fs)
		ctx := lockcore.WithOwner(t.Context(), "o")
		require.NoError(t, l.Lock(ctx), "%s: Lock", c.kind)
		for _, f := range fs[:c.lose] {
			f.lose()
		}
		err := l.Unlock(ctx)
		assert.Equal(t, c.lost, errors.Is(err, multilock.ErrLockLost),
			"%s with %d of 5 locks lost: Unlock = %v; want ErrLockLost: %v", c.kind, c.lose, err, c.lost)
		if c.kind == "redlock" && !c.lost {
			assert.NoError(t, err, "%s with %d of 5 locks lost", c.kind, c.lose)
		}
		for i, f := range fs {
			_, n := f.held()
			assert.Zero(t, n, "%s: lock %d left held", c.kind, i)
		}
	}
}

// TestObservedLossWithoutWatchers: with an observer, a hold is watched
// from the start, so its loss is reported when it happens, not at Unlock.
func TestObservedLossWithoutWatchers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{kinds: []string{"redlock"}}
		fs := fakes(&journal{}, "x", "x", "x")
		r := multilock.NewRedLock(lockers(fs)...).With(multilock.WithObserver(rec))
		ctx := lockcore.WithOwner(t.Context(), "o")
		require.NoError(t, r.Lock(ctx))
		fs[0].lose()
		fs[1].lose()
		synctest.Wait()
		wantEvents(t, rec.take(), "AcquireStart redlock", "HoldStart redlock", "AcquireEnd redlock acquired",
			"HoldEnd redlock lost")
		assert.ErrorIs(t, r.Unlock(ctx), multilock.ErrLockLost)
	})
}

// stuckUnlock is a fake whose Unlock ignores its context and blocks until
// release is closed.
type stuckUnlock struct {
	*fake
	release chan struct{}
}

func (s stuckUnlock) Unlock(ctx context.Context) error {
	<-s.release
	return s.fake.Unlock(ctx)
}

// TestRedLockUnlockStopsWaiting: a release that ignores its context is
// waited for a bounded time; Unlock then reports it, and the RedLock goes
// on working once it returns.
func TestRedLockUnlockStopsWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := fakes(&journal{}, "x", "x", "x")
		stuck := stuckUnlock{fs[2], make(chan struct{})}
		r := multilock.NewRedLock(fs[0], fs[1], stuck)
		ctx := lockcore.WithOwner(t.Context(), "o")
		require.NoError(t, r.Lock(ctx))
		start := time.Now()
		err := r.Unlock(ctx)
		waited := time.Since(start)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		var ne *multilock.NodeError
		if assert.ErrorAs(t, err, &ne) {
			assert.Equal(t, 2, ne.Index, "the lock that did not answer")
		}
		// The default instance timeout is 50ms with the watchdog lease:
		// Unlock waits 500ms, then what rlock gives a release beyond.
		assert.GreaterOrEqual(t, waited, 500*time.Millisecond)
		assert.LessOrEqual(t, waited, time.Second)
		close(stuck.release)
		synctest.Wait()
		for i, f := range fs {
			_, n := f.held()
			assert.Zero(t, n, "lock %d left held", i)
		}
		for range 2 {
			require.NoError(t, r.Lock(ctx))
			require.NoError(t, r.Unlock(ctx))
		}
	})
}
