package multilock_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/multilock"
)

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
			if err := c.call(); !errors.Is(err, multilock.ErrInvalidArgument) {
				t.Errorf("error = %v, want one matching ErrInvalidArgument", err)
			}
		})
	}
	if calls := j.list(); len(calls) != 0 {
		t.Errorf("calls to the lock = %v, want none", calls)
	}
}

func TestMultiLockTakesLocksInNameOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		fs := fakes(j, "c", "a", "d", "b")
		// A nested MultiLock is expanded into the same order.
		m := multilock.New(fs[0], multilock.New(fs[2], fs[1]), fs[3])
		if got, want := m.Name(), "multilock[a,b,c,d]"; got != want {
			t.Errorf("Name = %q, want %q", got, want)
		}
		ctx := lockcore.WithOwner(t.Context(), "o")
		if ok, err := m.TryLock(ctx, 0, 0); !ok || err != nil {
			t.Fatalf("TryLock = %v, %v; want true, nil", ok, err)
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
		want := []string{"try a", "try b", "try c", "try d", "unlock d", "unlock c", "unlock b", "unlock a"}
		if got := j.list(); !slices.Equal(got, want) {
			t.Errorf("calls = %v, want %v", got, want)
		}
	})
}

func TestMultiLockAllOrNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		fs := fakes(j, "a", "b", "c")
		fs[1].set(func(f *fake) { f.busy = true })
		m := multilock.New(lockers(fs)...)
		ok, err := m.TryLock(t.Context(), 0, 0)
		if ok || err != nil {
			t.Fatalf("TryLock = %v, %v; want false, nil", ok, err)
		}
		// a was taken, then released; c was never asked.
		want := []string{"try a", "try b", "unlock a"}
		if got := j.list(); !slices.Equal(got, want) {
			t.Errorf("calls = %v, want %v", got, want)
		}
		for _, f := range fs {
			if o, n := f.held(); n != 0 {
				t.Errorf("%s held by %q (%d), want free", f.name, o, n)
			}
		}
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
		if ok || !errors.Is(err, boom) {
			t.Fatalf("TryLock = %v, %v; want false and an error matching boom", ok, err)
		}
		var ne *multilock.NodeError
		if !errors.As(err, &ne) || ne.Index != 0 || ne.Name != "c" {
			t.Errorf("NodeError = %+v, want Index 0 Name c", ne)
		}
		// The failed release of a is reported too, and b was released anyway.
		if got := err.Error(); !contains(got, "unlock failed") {
			t.Errorf("error %q does not report the failed release", got)
		}
		want := []string{"try a", "try b", "try c", "unlock b", "unlock a"}
		if got := j.list(); !slices.Equal(got, want) {
			t.Errorf("calls = %v, want %v", got, want)
		}
	})
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func TestMultiLockUnlockGoesOnPastErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		fs := fakes(j, "a", "b", "c")
		m := multilock.New(lockers(fs)...)
		ctx := lockcore.WithOwner(t.Context(), "o")
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		fs[1].lose()
		<-m.Done(ctx) // the loss was noticed
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		err := m.Unlock(cancelled)
		if !errors.Is(err, multilock.ErrNotHeld) || !errors.Is(err, multilock.ErrLockLost) {
			t.Errorf("Unlock = %v, want ErrNotHeld (for b) and ErrLockLost", err)
		}
		for _, f := range fs {
			if _, n := f.held(); n != 0 {
				t.Errorf("%s still held", f.name)
			}
		}
	})
}

func TestMultiLockWaitsInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		fs := fakes(j, "a", "b")
		m := multilock.New(lockers(fs)...)
		other := lockcore.WithOwner(t.Context(), "other")
		if ok, _ := fs[1].TryLock(other, 0, 0); !ok {
			t.Fatal("setup: b not taken")
		}
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
		if err := fs[1].Unlock(other); err != nil {
			t.Fatal(err)
		}
		if err := <-res; err != nil {
			t.Fatalf("TryLock: %v", err)
		}
		if o, _ := fs[1].held(); o != "o" {
			t.Errorf("b held by %q, want o", o)
		}
		if err := m.Unlock(ctx); err != nil {
			t.Error(err)
		}
	})
}

func TestMultiLockWaitEndsWithoutLocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		fs := fakes(j, "a", "b")
		fs[1].set(func(f *fake) { f.busy = true })
		m := multilock.New(lockers(fs)...)
		start := time.Now()
		ok, err := m.TryLock(t.Context(), 50*time.Millisecond, 0)
		if ok || err != nil {
			t.Fatalf("TryLock = %v, %v; want false, nil", ok, err)
		}
		if d := time.Since(start); d < 50*time.Millisecond {
			t.Errorf("TryLock gave up after %v, before its wait", d)
		}
		if _, n := fs[0].held(); n != 0 {
			t.Error("a left held")
		}
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		defer cancel()
		err = m.Lock(ctx)
		if !errors.Is(err, multilock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Lock = %v, want ErrNotAcquired and DeadlineExceeded", err)
		}
	})
}

func TestMultiLockFixedLeaseValidity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		fs := fakes(j, "a", "b")
		fs[1].set(func(f *fake) { f.delay = 30 * time.Millisecond })
		m := multilock.New(lockers(fs)...)
		// Taking b takes longer than the lease: the set is never held.
		ok, err := m.TryLock(t.Context(), 0, 20*time.Millisecond)
		if ok || err != nil {
			t.Fatalf("TryLock = %v, %v; want false, nil", ok, err)
		}
		for _, f := range fs {
			if _, n := f.held(); n != 0 {
				t.Errorf("%s left held", f.name)
			}
		}
		ok, err = m.TryLock(t.Context(), 0, time.Minute)
		if !ok || err != nil {
			t.Fatalf("TryLock with a long lease = %v, %v; want true, nil", ok, err)
		}
	})
}

func TestAnonymousHold(t *testing.T) {
	for _, kind := range []string{"multilock", "redlock"} {
		t.Run(kind, func(t *testing.T) {
			j := &journal{}
			fs := fakes(j, "a", "b", "c")
			l := newKind(kind, fs)
			ctx := t.Context()
			if ok, err := l.TryLock(ctx, 0, 0); !ok || err != nil {
				t.Fatalf("TryLock = %v, %v", ok, err)
			}
			// Not reentrant without an owner, like sync.Mutex.
			if ok, err := l.TryLock(ctx, 0, 0); ok || err != nil {
				t.Fatalf("second TryLock = %v, %v; want false, nil", ok, err)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatalf("Unlock: %v", err)
			}
			if err := l.Unlock(ctx); !errors.Is(err, multilock.ErrNotHeld) {
				t.Errorf("second Unlock = %v, want ErrNotHeld", err)
			}
			for _, f := range fs {
				if o, n := f.held(); n != 0 {
					t.Errorf("%s held by %q", f.name, o)
				}
			}
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
				if err := l.Lock(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if _, n := fs[0].held(); n != 2 {
				t.Errorf("hold count of a = %d, want 2", n)
			}
			done := l.Done(ctx)
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case <-done:
				t.Fatal("Done closed after the first of two Unlocks")
			default:
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			<-done
			for _, f := range fs {
				if _, n := f.held(); n != 0 {
					t.Errorf("%s left held", f.name)
				}
			}
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
			if got, want := r.Name(), "x"; got != want {
				t.Errorf("Name = %q, want %q", got, want)
			}
			ctx := lockcore.WithOwner(t.Context(), "o")
			ok, err := r.TryLock(ctx, 0, time.Minute)
			if ok != c.want || err != nil {
				t.Fatalf("%d busy: TryLock = %v, %v; want %v, nil", c.busy, ok, err, c.want)
			}
			if ok {
				if err := r.Unlock(ctx); err != nil {
					t.Errorf("%d busy: Unlock: %v", c.busy, err)
				}
			}
			for i, f := range fs {
				if o, n := f.held(); o == "o" {
					t.Errorf("%d busy: lock %d left held (%d)", c.busy, i, n)
				}
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
		ok, err := r.TryLock(t.Context(), 0, 0)
		if ok || err != nil {
			// 1 error of 5: the others were busy, so no error.
			t.Fatalf("TryLock = %v, %v; want false, nil", ok, err)
		}
		unlocks := 0
		for _, c := range j.list() {
			if c == "unlock x" {
				unlocks++
			}
		}
		if unlocks != 5 {
			t.Errorf("%d Unlocks after the failed round, want 5 (every lock)", unlocks)
		}
		for i, f := range fs[3:] {
			if _, n := f.held(); n != 0 {
				t.Errorf("lock %d left held", i+3)
			}
		}
	})
}

func TestRedLockTooManyErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := fakes(&journal{}, "a", "b", "c", "d", "e")
		boom := errors.New("boom")
		for _, f := range fs[2:] {
			f.set(func(f *fake) { f.tryErr = boom })
		}
		r := multilock.NewRedLock(lockers(fs)...).With(multilock.WithRetryDelay(2 * time.Millisecond))
		if got, want := r.Name(), `redlock["a" "b" "c" "d" "e"]`; got != want {
			t.Errorf("Name = %q, want %q", got, want)
		}
		start := time.Now()
		ok, err := r.TryLock(t.Context(), 50*time.Millisecond, 0)
		if ok || !errors.Is(err, boom) || !errors.Is(err, multilock.ErrNotAcquired) {
			t.Fatalf("TryLock = %v, %v; want false and an error matching boom and ErrNotAcquired", ok, err)
		}
		if d := time.Since(start); d < 50*time.Millisecond {
			t.Errorf("gave up after %v, before its wait", d)
		}
		var ne *multilock.NodeError
		if !errors.As(err, &ne) || ne.Index < 2 {
			t.Errorf("NodeError = %+v, want one of locks 2..4", ne)
		}
		for _, f := range fs[:2] {
			if _, n := f.held(); n != 0 {
				t.Errorf("%s left held", f.name)
			}
		}
	})
}

func TestRedLockHungInstance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := fakes(&journal{}, "x", "x", "x")
		fs[1].set(func(f *fake) { f.hang = true })
		r := multilock.NewRedLock(lockers(fs)...).With(multilock.WithInstanceTimeout(20 * time.Millisecond))
		ctx := lockcore.WithOwner(t.Context(), "o")
		start := time.Now()
		ok, err := r.TryLock(ctx, 0, time.Minute)
		if !ok || err != nil {
			t.Fatalf("TryLock = %v, %v; want true, nil", ok, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("TryLock took %v with one hung instance", d)
		}
		fs[1].set(func(f *fake) { f.hang = false })
		if err := r.Unlock(ctx); err != nil {
			t.Errorf("Unlock = %v, want nil (ErrNotHeld from the hung lock is expected)", err)
		}
	})
}

func TestRedLockValidityExpired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := fakes(&journal{}, "x", "x", "x")
		for _, f := range fs {
			f.set(func(f *fake) { f.delay = 25 * time.Millisecond })
		}
		r := multilock.NewRedLock(lockers(fs)...).With(multilock.WithInstanceTimeout(time.Second))
		ok, err := r.TryLock(t.Context(), 0, 20*time.Millisecond)
		if ok || err != nil {
			t.Fatalf("TryLock = %v, %v; want false, nil (validity ran out)", ok, err)
		}
		for i, f := range fs {
			if _, n := f.held(); n != 0 {
				t.Errorf("lock %d left held", i)
			}
		}
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
			}
			fs[4].lose()
			<-ctx.Done()
			<-done
			cause = context.Cause(ctx)
			return nil
		})
		if !errors.Is(cause, multilock.ErrLockLost) {
			t.Errorf("cause = %v, want ErrLockLost", cause)
		}
		if !errors.Is(err, multilock.ErrLockLost) {
			t.Errorf("Do = %v, want ErrLockLost", err)
		}
		for i, f := range fs {
			if _, n := f.held(); n != 0 {
				t.Errorf("lock %d left held after Do", i)
			}
		}
	})
}

func TestMultiLockLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := fakes(&journal{}, "a", "b")
		m := multilock.New(lockers(fs)...)
		err := m.Do(t.Context(), func(ctx context.Context) error {
			fs[1].lose()
			<-ctx.Done()
			return context.Cause(ctx)
		})
		if !errors.Is(err, multilock.ErrLockLost) {
			t.Errorf("Do = %v, want ErrLockLost", err)
		}
		if _, n := fs[0].held(); n != 0 {
			t.Error("a left held after Do")
		}
	})
}

func TestComposition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := fakes(&journal{}, "x", "x", "x", "y")
		r := multilock.NewRedLock(fs[0], fs[1], fs[2])
		m := multilock.New(fs[3], r)
		if got, want := m.Name(), "multilock[x,y]"; got != want {
			t.Errorf("Name = %q, want %q", got, want)
		}
		fs[0].set(func(f *fake) { f.busy = true })
		err := m.Do(t.Context(), func(ctx context.Context) error {
			if o, _ := fs[3].held(); o == "" {
				return errors.New("y not held")
			}
			fs[1].lose() // the RedLock loses its majority, so the MultiLock is lost
			<-ctx.Done()
			return nil
		})
		if !errors.Is(err, multilock.ErrLockLost) {
			t.Errorf("Do = %v, want ErrLockLost", err)
		}
		for i, f := range fs[1:] {
			if _, n := f.held(); n != 0 {
				t.Errorf("lock %d left held", i+1)
			}
		}
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
			t.Error(err)
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
			if err := l.(interface {
				LockLease(context.Context, time.Duration) error
			}).LockLease(t.Context(), 2*time.Millisecond); !errors.Is(err, multilock.ErrInvalidArgument) {
				t.Errorf("%s LockLease(2ms) = %v, want ErrInvalidArgument", kind, err)
			}
			if _, err := l.TryLock(t.Context(), time.Second, multilock.MinLease-time.Microsecond); !errors.Is(err, multilock.ErrInvalidArgument) {
				t.Errorf("%s TryLock with a lease under MinLease = %v, want ErrInvalidArgument", kind, err)
			}
		}
		if calls := j.list(); len(calls) != 0 {
			t.Errorf("calls to the locks = %v, want none", calls)
		}
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
		ok, err := m.TryLock(t.Context(), 200*time.Millisecond, multilock.MinLease)
		if ok || err != nil {
			t.Fatalf("TryLock = %v, %v; want false, nil", ok, err)
		}
		// Each round takes at least 5ms and pauses about as long: about 20
		// rounds fit in 200ms, a tight loop would make hundreds.
		if n := len(j.list()); n > 4*60 {
			t.Errorf("%d calls to the locks in 200ms, want a pause between rounds", n)
		}
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
					if v := recover(); v != "boom" {
						t.Errorf("recovered %v, want the function's own panic value", v)
					}
				}()
				_ = l.Do(t.Context(), func(context.Context) error { panic("boom") })
			}()
			for _, f := range fs {
				if o, n := f.held(); n != 0 {
					t.Errorf("%s still held by %q after the panic", f.name, o)
				}
			}
		})
	}
}
