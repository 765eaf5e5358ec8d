package multilock_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/multilock"
)

// Most tests here run in a synctest bubble on fake locks: time passes on
// the fake clock, and a wait that nothing would end fails the test at once
// (the bubble deadlocks) or at a fake-clock deadline.
func TestMain(m *testing.M) { redistest.Main(m) }

func lockers(fs []*fake) []multilock.Locker {
	ls := make([]multilock.Locker, len(fs))
	for i, f := range fs {
		ls[i] = f
	}
	return ls
}

func TestInvalidArguments(t *testing.T) {
	j := &journal{}
	f := newFake("a", j)
	var typedNil *fake
	ctx := t.Context()
	cases := []struct {
		name string
		call func() error
	}{
		{"New no locks", func() error { _, err := multilock.New().TryLock(ctx, 0, 0); return err }},
		{"New nil lock", func() error { _, err := multilock.New(f, nil).TryLock(ctx, 0, 0); return err }},
		{"New typed nil lock", func() error { _, err := multilock.New(f, typedNil).TryLock(ctx, 0, 0); return err }},
		{"New nested invalid", func() error { return multilock.New(f, multilock.New()).Lock(ctx) }},
		{"New negative wait", func() error { _, err := multilock.New(f).TryLock(ctx, -1, 0); return err }},
		{"New lease under 1ms", func() error { _, err := multilock.New(f).TryLock(ctx, 0, time.Microsecond); return err }},
		{"New negative lease", func() error { _, err := multilock.New(f).TryLock(ctx, 0, -time.Second); return err }},
		{"New LockLease 0", func() error { return multilock.New(f).LockLease(ctx, 0) }},
		{"New empty owner", func() error { return multilock.New(f).Lock(lockcore.WithOwner(ctx, "")) }},
		{"New nil fn", func() error { return multilock.New(f).Do(ctx, nil) }},
		{"New Unlock no locks", func() error { return multilock.New().Unlock(ctx) }},
		{"RedLock no locks", func() error { _, err := multilock.NewRedLock().TryLock(ctx, 0, 0); return err }},
		{"RedLock nil lock", func() error { return multilock.NewRedLock(f, nil, f).Lock(ctx) }},
		{"RedLock negative wait", func() error { _, err := multilock.NewRedLock(f).TryLock(ctx, -time.Second, 0); return err }},
		{"RedLock lease under 1ms", func() error { _, err := multilock.NewRedLock(f).TryLock(ctx, 0, 10*time.Microsecond); return err }},
		{"RedLock LockLease 0", func() error { return multilock.NewRedLock(f).LockLease(ctx, 0) }},
		{"RedLock nil fn", func() error { return multilock.NewRedLock(f).Do(ctx, nil) }},
		{"RedLock bad option", func() error {
			return multilock.NewRedLock(f).With(multilock.WithRetryDelay(0)).Lock(ctx)
		}},
		{"RedLock bad watchdog", func() error {
			return multilock.NewRedLock(f).With(multilock.WithWatchdogTimeout(-time.Second)).Lock(ctx)
		}},
		{"RedLock bad instance timeout", func() error {
			_, err := multilock.NewRedLock(f).With(multilock.WithInstanceTimeout(time.Microsecond)).TryLock(ctx, 0, 0)
			return err
		}},
		{"RedLock Unlock nil lock", func() error { return multilock.NewRedLock(nil).Unlock(ctx) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.ErrorIs(t, c.call(), multilock.ErrInvalidArgument)
		})
	}
	assert.Empty(t, j.list(), "calls to the lock")
}

func TestMultiLockTakesLocksInNameOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		fs := fakes(j, "c", "a", "d", "b")
		// A nested MultiLock is expanded into the same order.
		m := multilock.New(fs[0], multilock.New(fs[2], fs[1]), fs[3])
		assert.Equal(t, "multilock[a,b,c,d]", m.Name(), "Name")
		ctx := lockcore.WithOwner(t.Context(), "o")
		requireTryLock(t, m, ctx, 0, 0, true)
		require.NoError(t, m.Unlock(ctx), "Unlock")
		want := []string{"try a", "try b", "try c", "try d", "unlock d", "unlock c", "unlock b", "unlock a"}
		assert.Equal(t, want, j.list(), "calls")
	})
}

func TestMultiLockAllOrNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		fs := fakes(j, "a", "b", "c")
		fs[1].set(func(f *fake) { f.busy = true })
		m := multilock.New(lockers(fs)...)
		requireTryLock(t, m, t.Context(), 0, 0, false)
		// a was taken, then released; c was never asked.
		assert.Equal(t, []string{"try a", "try b", "unlock a"}, j.list(), "calls")
		assertFree(t, fs...)
	})
}

func TestMultiLockErrorIsNodeError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		fs := fakes(j, "a", "b", "c")
		boom := errors.New("boom")
		fs[2].set(func(f *fake) { f.tryErr = boom })
		fs[0].set(func(f *fake) { f.unlockErr = errors.New("unlock failed") })
		m := multilock.New(fs[2], fs[1], fs[0]) // c is argument 0
		ok, err := m.TryLock(t.Context(), time.Second, 0)
		require.ErrorIs(t, err, boom, "TryLock")
		require.False(t, ok, "TryLock")
		var ne *multilock.NodeError
		if assert.ErrorAs(t, err, &ne) {
			assert.Equal(t, 0, ne.Index, "NodeError.Index")
			assert.Equal(t, "c", ne.Name, "NodeError.Name")
		}
		// The failed release of a is reported too, and b was released anyway.
		assert.ErrorContains(t, err, "unlock failed", "the error must report the failed release")
		assert.Equal(t, []string{"try a", "try b", "try c", "unlock b", "unlock a"}, j.list(), "calls")
	})
}

// requireTryLock runs l.TryLock and requires its answer to be want, nil.
func requireTryLock(t *testing.T, l multilock.Locker, ctx context.Context, wait, lease time.Duration, want bool) {
	t.Helper()
	ok, err := l.TryLock(ctx, wait, lease)
	require.NoError(t, err, "TryLock(wait %v, lease %v)", wait, lease)
	require.Equal(t, want, ok, "TryLock(wait %v, lease %v)", wait, lease)
}

// assertFree checks that no owner holds any of fs.
func assertFree(t *testing.T, fs ...*fake) {
	t.Helper()
	for _, f := range fs {
		o, n := f.held()
		assert.Zero(t, n, "%s held by %q", f.name, o)
	}
}

func TestMultiLockUnlockGoesOnPastErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		fs := fakes(j, "a", "b", "c")
		m := multilock.New(lockers(fs)...)
		ctx := lockcore.WithOwner(t.Context(), "o")
		require.NoError(t, m.Lock(ctx))
		fs[1].lose()
		relocktest.Receive(t, m.Done(ctx), time.Minute, "the loss to be noticed")
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		err := m.Unlock(cancelled)
		assert.ErrorIs(t, err, multilock.ErrNotHeld, "Unlock: b is not held")
		assert.ErrorIs(t, err, multilock.ErrLockLost, "Unlock")
		assertFree(t, fs...)
	})
}

func TestMultiLockWaitsInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		fs := fakes(j, "a", "b")
		m := multilock.New(lockers(fs)...)
		other := lockcore.WithOwner(t.Context(), "other")
		requireTryLock(t, fs[1], other, 0, 0, true)
		ctx := lockcore.WithOwner(t.Context(), "o")
		res := make(chan error, 1)
		go func() {
			ok, err := m.TryLock(ctx, 10*time.Second, 0)
			if err == nil && !ok {
				err = errors.New("not acquired")
			}
			res <- err
		}()
		// It waits for b holding a.
		relocktest.Eventually(t, 10*time.Second, "a to be held", func() bool { o, _ := fs[0].held(); return o == "o" })
		require.NoError(t, fs[1].Unlock(other))
		require.NoError(t, relocktest.Receive(t, res, 10*time.Second, "TryLock to return"), "TryLock")
		o, _ := fs[1].held()
		assert.Equal(t, "o", o, "the owner of b")
		assert.NoError(t, m.Unlock(ctx))
	})
}

func TestMultiLockWaitEndsWithoutLocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		fs := fakes(j, "a", "b")
		fs[1].set(func(f *fake) { f.busy = true })
		m := multilock.New(lockers(fs)...)
		start := time.Now()
		requireTryLock(t, m, t.Context(), 50*time.Millisecond, 0, false)
		assert.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond, "time TryLock waited before it gave up")
		assertFree(t, fs[0])
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		defer cancel()
		err := m.Lock(ctx)
		assert.ErrorIs(t, err, multilock.ErrNotAcquired, "Lock")
		assert.ErrorIs(t, err, context.DeadlineExceeded, "Lock")
	})
}

func TestMultiLockFixedLeaseValidity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		fs := fakes(j, "a", "b")
		fs[1].set(func(f *fake) { f.delay = 30 * time.Millisecond })
		m := multilock.New(lockers(fs)...)
		// Taking b takes longer than the lease: the set is never held.
		requireTryLock(t, m, t.Context(), 0, 20*time.Millisecond, false)
		assertFree(t, fs...)
		requireTryLock(t, m, t.Context(), 0, time.Minute, true)
	})
}

func TestAnonymousHold(t *testing.T) {
	for _, kind := range []string{"multilock", "redlock"} {
		t.Run(kind, func(t *testing.T) {
			j := &journal{}
			fs := fakes(j, "a", "b", "c")
			l := newKind(kind, fs)
			ctx := t.Context()
			requireTryLock(t, l, ctx, 0, 0, true)
			// Not reentrant without an owner, like sync.Mutex.
			requireTryLock(t, l, ctx, 0, 0, false)
			require.NoError(t, l.Unlock(ctx), "Unlock")
			assert.ErrorIs(t, l.Unlock(ctx), multilock.ErrNotHeld, "second Unlock")
			assertFree(t, fs...)
		})
	}
}

type fullLocker interface {
	multilock.Locker
	multilock.Watchable
	Lock(ctx context.Context) error
	Do(ctx context.Context, fn func(context.Context) error) error
}

func newKind(kind string, fs []*fake) fullLocker {
	if kind == "multilock" {
		return multilock.New(lockers(fs)...)
	}
	return multilock.NewRedLock(lockers(fs)...)
}

func TestReentrant(t *testing.T) {
	for _, kind := range []string{"multilock", "redlock"} {
		t.Run(kind, func(t *testing.T) {
			fs := fakes(&journal{}, "a", "b", "c")
			l := newKind(kind, fs)
			ctx := lockcore.WithOwner(t.Context(), "o")
			for range 2 {
				require.NoError(t, l.Lock(ctx))
			}
			_, n := fs[0].held()
			assert.Equal(t, 2, n, "hold count of a")
			done := l.Done(ctx)
			require.NoError(t, l.Unlock(ctx))
			select {
			case <-done:
				require.FailNow(t, "Done closed after the first of two Unlocks")
			default:
			}
			require.NoError(t, l.Unlock(ctx))
			relocktest.Receive(t, done, 5*time.Second, "Done to close after the last Unlock")
			assertFree(t, fs...)
		})
	}
}

func TestRedLockQuorum(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, c := range []struct {
			busy int
			want bool
		}{{0, true}, {1, true}, {2, true}, {3, false}, {5, false}} {
			j := &journal{}
			fs := fakes(j, "x", "x", "x", "x", "x")
			for _, f := range fs[:c.busy] {
				f.set(func(f *fake) { f.busy = true })
			}
			r := multilock.NewRedLock(lockers(fs)...)
			assert.Equal(t, "x", r.Name(), "Name")
			ctx := lockcore.WithOwner(t.Context(), "o")
			ok, err := r.TryLock(ctx, 0, time.Minute)
			require.NoError(t, err, "%d busy: TryLock", c.busy)
			require.Equal(t, c.want, ok, "%d busy: TryLock", c.busy)
			if ok {
				assert.NoError(t, r.Unlock(ctx), "%d busy: Unlock", c.busy)
			}
			for i, f := range fs {
				o, n := f.held()
				assert.NotEqual(t, "o", o, "%d busy: lock %d left held (%d)", c.busy, i, n)
			}
		}
	})
}

func TestRedLockFailedRoundUndoesEverywhere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		fs := fakes(j, "x", "x", "x", "x", "x")
		boom := errors.New("boom")
		fs[0].set(func(f *fake) { f.busy = true })
		fs[1].set(func(f *fake) { f.busy = true })
		fs[2].set(func(f *fake) { f.tryErr = boom })
		r := multilock.NewRedLock(lockers(fs)...)
		// 1 error of 5: the others were busy, so no error.
		requireTryLock(t, r, t.Context(), 0, 0, false)
		unlocks := 0
		for _, c := range j.list() {
			if c == "unlock x" {
				unlocks++
			}
		}
		assert.Equal(t, 5, unlocks, "Unlocks after the failed round: every lock")
		assertFree(t, fs[3:]...)
	})
}

// TestRedLockReusesAnonymousOwners: an anonymous acquisition takes the
// made-up owner of an earlier one that is done with (its locks then find
// the record they keep for it), but never one that a failed release or a
// failed attempt may have left holding a lock: a new acquisition with it
// would take that lock again as its own, by re-entry, and its Unlock
// would leave the lock held.
func TestRedLockReusesAnonymousOwners(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := fakes(&journal{}, "x", "x", "x")
		r := multilock.NewRedLock(lockers(fs)...)
		ctx := t.Context()
		lockUnlock := func(what string) string {
			require.NoError(t, r.Lock(ctx), "%s: Lock", what)
			o, n := fs[1].held()
			require.Equal(t, 1, n, "%s: lock 1's count", what)
			assert.NoError(t, r.Unlock(ctx), "%s: Unlock", what)
			return o
		}
		first := lockUnlock("first")
		assert.Equal(t, first, lockUnlock("second"), "owner after a clean release")

		// Lock 0's release fails: its hold stays with the owner.
		boom := errors.New("boom")
		fs[0].set(func(f *fake) { f.unlockErr = boom })
		require.NoError(t, r.Lock(ctx), "Lock")
		left, _ := fs[0].held()
		assert.ErrorIs(t, r.Unlock(ctx), boom, "Unlock with lock 0 failing")
		fs[0].set(func(f *fake) { f.unlockErr = nil })
		o, n := fs[0].held()
		require.Equal(t, left, o, "lock 0's holder after its failed release")
		require.Equal(t, 1, n, "lock 0's count after its failed release")
		next := lockUnlock("after a failed release")
		assert.NotEqual(t, left, next, "the owner a failed release left holding lock 0 was used again")
		o, n = fs[0].held()
		assert.Equal(t, left, o, "lock 0's holder")
		assert.Equal(t, 1, n, "lock 0's count: taken again by re-entry")

		// A failed attempt: lock 2's TryLock fails (it may have taken
		// the lock all the same), the quorum holds on 0 and 1.
		fs[0].lose()
		fs[2].set(func(f *fake) { f.tryErr = boom })
		require.NoError(t, r.Lock(ctx), "Lock with lock 2 failing")
		failed, _ := fs[0].held()
		assert.NoError(t, r.Unlock(ctx), "Unlock")
		fs[2].set(func(f *fake) { f.tryErr = nil })
		assert.NotEqual(t, failed, lockUnlock("after a failed attempt"), "the owner of an acquisition with a failed attempt was used again")

		// A failed round whose undo fails on the one lock it took.
		fs[0].set(func(f *fake) { f.busy = true })
		fs[1].set(func(f *fake) { f.busy = true })
		fs[2].set(func(f *fake) { f.unlockErr = boom })
		requireTryLock(t, r, ctx, 0, 0, false)
		undone, n := fs[2].held()
		require.Equal(t, 1, n, "lock 2's count after the failed undo")
		for _, f := range fs {
			f.set(func(f *fake) { f.busy, f.unlockErr = false, nil })
		}
		assert.NotEqual(t, undone, lockUnlock("after a failed undo"), "the owner a failed undo left holding a lock was used again")
		_, n = fs[2].held()
		assert.Equal(t, 1, n, "lock 2's count: taken again by re-entry")
	})
}

// TestRedLockCallsLeaveNoGoroutine: every goroutine a RedLock call
// starts to ask its locks has ended when the call returns (a RedLock has
// no Close to stop one later), whether the call succeeds, loses a round
// and undoes it, or waits on slow and hung masters.
func TestRedLockCallsLeaveNoGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		fs := fakes(j, "x", "x", "x", "x", "x")
		fs[0].set(func(f *fake) { f.delay = time.Millisecond })
		r := multilock.NewRedLock(lockers(fs)...)
		ctx := t.Context()
		left := func(after string) {
			t.Helper()
			synctest.Wait() // a goroutine that answered has ended, or is blocked
			assert.Empty(t, fanoutGoroutines(), "goroutines of the RedLock left after %s", after)
		}
		require.NoError(t, r.Lock(ctx), "Lock")
		left("Lock")
		require.NoError(t, r.Unlock(ctx), "Unlock")
		left("Unlock")
		require.NoError(t, r.Do(ctx, func(context.Context) error { return nil }), "Do")
		left("Do")
		for _, f := range fs[2:] {
			f.set(func(f *fake) { f.busy = true })
		}
		requireTryLock(t, r, ctx, 0, 0, false)
		left("a lost round and its undo")
		for _, f := range fs[2:] {
			f.set(func(f *fake) { f.busy = false })
		}
		fs[1].set(func(f *fake) { f.hang = true })
		requireTryLock(t, r, ctx, 0, 0, true)
		left("a round with a hung master")
		require.NoError(t, r.Unlock(ctx), "Unlock")
		left("Unlock after a round with a hung master")
		assertFree(t, fs...)
	})
}

// fanoutGoroutines returns the stacks of the goroutines that are in a
// RedLock's fan-out.
func fanoutGoroutines() []string {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var found []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		// A goroutine counts while one of its frames, not only the
		// "created by" line, is the fan-out's: one that has returned
		// from all of them and sits in the runtime's goexit has ended
		// its work, though the runtime still lists it for a moment.
		frames, _, _ := strings.Cut(g, "\ncreated by ")
		if strings.Contains(frames, "multilock.(*fanout)") {
			found = append(found, g)
		}
	}
	return found
}

func TestRedLockTooManyErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := fakes(&journal{}, "a", "b", "c", "d", "e")
		boom := errors.New("boom")
		for _, f := range fs[2:] {
			f.set(func(f *fake) { f.tryErr = boom })
		}
		r := multilock.NewRedLock(lockers(fs)...).With(multilock.WithRetryDelay(2 * time.Millisecond))
		assert.Equal(t, `redlock["a" "b" "c" "d" "e"]`, r.Name(), "Name")
		start := time.Now()
		ok, err := r.TryLock(t.Context(), 50*time.Millisecond, 0)
		require.ErrorIs(t, err, boom, "TryLock")
		require.ErrorIs(t, err, multilock.ErrNotAcquired, "TryLock")
		require.False(t, ok, "TryLock")
		assert.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond, "time TryLock waited before it gave up")
		var ne *multilock.NodeError
		if assert.ErrorAs(t, err, &ne) {
			assert.GreaterOrEqual(t, ne.Index, 2, "NodeError.Index: one of locks 2..4")
		}
		assertFree(t, fs[:2]...)
	})
}

func TestRedLockHungInstance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := fakes(&journal{}, "x", "x", "x")
		fs[1].set(func(f *fake) { f.hang = true })
		r := multilock.NewRedLock(lockers(fs)...).With(multilock.WithInstanceTimeout(20 * time.Millisecond))
		ctx := lockcore.WithOwner(t.Context(), "o")
		start := time.Now()
		requireTryLock(t, r, ctx, 0, time.Minute, true)
		assert.LessOrEqual(t, time.Since(start), 5*time.Second, "time TryLock took with one hung instance")
		fs[1].set(func(f *fake) { f.hang = false })
		assert.NoError(t, r.Unlock(ctx), "Unlock (ErrNotHeld from the hung lock is expected, and not reported)")
	})
}

func TestRedLockValidityExpired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := fakes(&journal{}, "x", "x", "x")
		for _, f := range fs {
			f.set(func(f *fake) { f.delay = 25 * time.Millisecond })
		}
		r := multilock.NewRedLock(lockers(fs)...).With(multilock.WithInstanceTimeout(time.Second))
		// The validity runs out before the quorum is reached.
		requireTryLock(t, r, t.Context(), 0, 20*time.Millisecond, false)
		assertFree(t, fs...)
	})
}

func TestRedLockLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := fakes(&journal{}, "x", "x", "x", "x", "x")
		r := multilock.NewRedLock(lockers(fs)...)
		var cause error
		err := r.Do(t.Context(), func(ctx context.Context) error {
			done := r.Done(ctx)
			fs[0].lose()
			fs[1].lose()
			select {
			case <-ctx.Done():
				return errors.New("cancelled with 3 of 5 held")
			case <-done:
				return errors.New("Done closed with 3 of 5 held")
			case <-time.After(20 * time.Millisecond):
				// The scenario: 20ms (fake clock) with 3 of 5 held, in
				// which the RedLock must stay held.
			}
			fs[4].lose()
			relocktest.Receive(t, ctx.Done(), time.Minute, "Do's context to end once 2 of 5 are held")
			relocktest.Receive(t, done, time.Minute, "Done to close once 2 of 5 are held")
			cause = context.Cause(ctx)
			return nil
		})
		assert.ErrorIs(t, cause, multilock.ErrLockLost, "the cause of Do's context")
		assert.ErrorIs(t, err, multilock.ErrLockLost, "Do")
		assertFree(t, fs...)
	})
}

func TestMultiLockLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := fakes(&journal{}, "a", "b")
		m := multilock.New(lockers(fs)...)
		err := m.Do(t.Context(), func(ctx context.Context) error {
			fs[1].lose()
			relocktest.Receive(t, ctx.Done(), time.Minute, "Do's context to end after the loss")
			return context.Cause(ctx)
		})
		assert.ErrorIs(t, err, multilock.ErrLockLost, "Do")
		assertFree(t, fs[0])
	})
}

func TestComposition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := fakes(&journal{}, "x", "x", "x", "y")
		r := multilock.NewRedLock(fs[0], fs[1], fs[2])
		m := multilock.New(fs[3], r)
		assert.Equal(t, "multilock[x,y]", m.Name(), "Name")
		fs[0].set(func(f *fake) { f.busy = true })
		err := m.Do(t.Context(), func(ctx context.Context) error {
			if o, _ := fs[3].held(); o == "" {
				return errors.New("y not held")
			}
			fs[1].lose() // the RedLock loses its majority, so the MultiLock is lost
			relocktest.Receive(t, ctx.Done(), time.Minute, "Do's context to end after the RedLock lost its majority")
			return nil
		})
		assert.ErrorIs(t, err, multilock.ErrLockLost, "Do")
		assertFree(t, fs[1:]...)
	})
}

// Two MultiLocks over the same locks, given in different orders, never
// deadlock: both take them in name order.
func TestMultiLockNoDeadlock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := fakes(&journal{}, "a", "b", "c")
		m1 := multilock.New(fs[0], fs[1], fs[2])
		m2 := multilock.New(fs[2], fs[1], fs[0])
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		for _, m := range []*multilock.MultiLock{m1, m2} {
			wg.Go(func() {
				for range 200 {
					if err := m.Do(t.Context(), func(context.Context) error { return nil }); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			assert.NoError(t, err, "Do")
		}
	})
}

// TestImpossibleLeaseRefused: a fixed lease that the drift alone uses up
// can never be valid: it is refused, and nothing is sent (a MultiLock used
// to re-take and release its locks with no pause, forever).
func TestImpossibleLeaseRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		fs := fakes(j, "a", "b")
		for _, kind := range []string{"multilock", "redlock"} {
			l := newKind(kind, fs)
			err := l.(interface {
				LockLease(context.Context, time.Duration) error
			}).LockLease(t.Context(), 2*time.Millisecond)
			assert.ErrorIs(t, err, multilock.ErrInvalidArgument, "%s LockLease(2ms)", kind)
			_, err = l.TryLock(t.Context(), time.Second, multilock.MinLease-time.Microsecond)
			assert.ErrorIs(t, err, multilock.ErrInvalidArgument, "%s TryLock with a lease under MinLease", kind)
		}
		assert.Empty(t, j.list(), "calls to the locks")
	})
}

// TestMultiLockNeverSpins: a set that cannot be gathered within its fixed
// lease is retried after a pause, not in a tight loop.
func TestMultiLockNeverSpins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		fs := fakes(j, "a", "b")
		fs[1].set(func(f *fake) { f.delay = 5 * time.Millisecond })
		m := multilock.New(lockers(fs)...)
		requireTryLock(t, m, t.Context(), 200*time.Millisecond, multilock.MinLease, false)
		// Each round takes at least 5ms and pauses about as long: about 20
		// rounds fit in 200ms, a tight loop would make hundreds.
		assert.LessOrEqual(t, len(j.list()), 4*60, "calls to the locks in 200ms: want a pause between rounds")
	})
}

// TestDoPanicReleasesEveryLock: a panic in the function of a MultiLock's
// or a RedLock's Do releases every lock and goes on with its value.
func TestDoPanicReleasesEveryLock(t *testing.T) {
	for _, kind := range []string{"multilock", "redlock"} {
		t.Run(kind, func(t *testing.T) {
			fs := fakes(&journal{}, "a", "b", "c")
			l := newKind(kind, fs)
			func() {
				defer func() {
					assert.Equal(t, "boom", recover(), "the panic value: the function's own")
				}()
				_ = l.Do(t.Context(), func(context.Context) error { panic("boom") })
			}()
			assertFree(t, fs...)
		})
	}
}
