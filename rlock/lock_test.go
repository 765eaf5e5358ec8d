package rlock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// rueidis leaves a short-lived goroutine behind after a failed dial
// (TestNewClientDialError); it ends by itself.
func TestMain(m *testing.M) {
	redistest.Main(m, goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1"))
}

func TestReentrantHoldCount(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	ctx := rlock.WithOwner(t.Context(), "a")
	l := c.GetLock(relocktest.Name(t))

	for want := 1; want <= 3; want++ {
		if err := l.Lock(ctx); err != nil {
			t.Fatalf("Lock #%d: %v", want, err)
		}
		n, err := l.HoldCount(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Errorf("HoldCount = %d, want %d", n, want)
		}
	}
	fields := relocktest.HGetAll(t, raw, l.Name())
	if len(fields) != 1 || fields[c.ID()+":a"] != "3" {
		t.Errorf("HGETALL = %v, want one field %q -> 3", fields, c.ID()+":a")
	}
	for want := 2; want >= 0; want-- {
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
		if n, _ := l.HoldCount(ctx); n != want {
			t.Errorf("HoldCount after Unlock = %d, want %d", n, want)
		}
	}
	if locked, _ := l.IsLocked(ctx); locked {
		t.Error("IsLocked after the last Unlock = true, want false")
	}
}

func TestReentryAcrossHandles(t *testing.T) {
	c := relocktest.Client(t)
	ctx := rlock.WithOwner(t.Context(), "job-42")
	name := relocktest.Name(t)
	if err := c.GetLock(name).Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := c.GetLock(name).TryLock(ctx, 0, 0); err != nil || !ok {
		t.Fatalf("TryLock on a second handle = %v, %v, want re-entry", ok, err)
	}
	if n, _ := c.GetLock(name).HoldCount(ctx); n != 2 {
		t.Errorf("HoldCount = %d, want 2", n)
	}
	for range 2 {
		if err := c.GetLock(name).Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func TestExclusion(t *testing.T) {
	c1 := relocktest.Client(t)
	c2 := relocktest.Client(t)
	name := relocktest.Name(t)
	a := rlock.WithOwner(t.Context(), "a")
	b := rlock.WithOwner(t.Context(), "b")
	if err := c1.GetLock(name).Lock(a); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		desc   string
		c      *rlock.Client
		ctx    context.Context
		reason string
	}{
		{"other owner, same client", c1, b, "owners exclude each other"},
		{"same owner name, other client", c2, a, "owner names are per client"},
		{"anonymous, same client", c1, t.Context(), "an anonymous owner is a fresh owner"},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			ok, err := tc.c.GetLock(name).TryLock(tc.ctx, 0, 0)
			if err != nil || ok {
				t.Errorf("TryLock = %v, %v, want false, nil: %s", ok, err, tc.reason)
			}
		})
	}
	if err := c1.GetLock(name).Unlock(a); err != nil {
		t.Fatal(err)
	}
	if ok, err := c2.GetLock(name).TryLock(b, 0, 0); err != nil || !ok {
		t.Fatalf("TryLock after Unlock = %v, %v, want true", ok, err)
	}
	_ = c2.GetLock(name).Unlock(b)
}

func TestAnonymousIsNotReentrant(t *testing.T) {
	c := relocktest.Client(t)
	l := c.GetLock(relocktest.Name(t))
	ctx := t.Context()
	if err := l.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := l.TryLock(ctx, 0, 0); ok || err != nil {
		t.Errorf("second anonymous TryLock = %v, %v, want false, nil", ok, err)
	}
	if held, _ := l.IsHeldByOwner(ctx); !held {
		t.Error("IsHeldByOwner without owner = false, want the handle's anonymous hold")
	}
	if n, _ := l.HoldCount(ctx); n != 1 {
		t.Errorf("HoldCount = %d, want 1", n)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock of the anonymous hold: %v", err)
	}
	if err := l.Unlock(ctx); !errors.Is(err, rlock.ErrNotHeld) {
		t.Errorf("second Unlock = %v, want ErrNotHeld", err)
	}
}

func TestAnonymousHandleExcludesGoroutines(t *testing.T) {
	c := relocktest.Client(t)
	l := c.GetLock(relocktest.Name(t))
	var inside, violations, done atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 5 {
				if err := l.Lock(t.Context()); err != nil {
					t.Error(err)
					return
				}
				if inside.Add(1) != 1 {
					violations.Add(1)
				}
				inside.Add(-1)
				if err := l.Unlock(t.Context()); err != nil {
					t.Error(err)
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if violations.Load() != 0 {
		t.Errorf("%d overlapping holds, want 0", violations.Load())
	}
	if done.Load() != 40 {
		t.Errorf("%d acquisitions, want 40", done.Load())
	}
}

func TestUnlockByNonOwner(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	l := c.GetLock(relocktest.Name(t))
	a := rlock.WithOwner(t.Context(), "a")
	if err := l.Lock(a); err != nil {
		t.Fatal(err)
	}
	before := relocktest.HGetAll(t, raw, l.Name())
	pttl := func() time.Duration { d, _ := l.RemainingLease(a); return d }
	ttlBefore := pttl()

	for _, ctx := range []context.Context{rlock.WithOwner(t.Context(), "b"), t.Context()} {
		if err := l.Unlock(ctx); !errors.Is(err, rlock.ErrNotHeld) {
			t.Errorf("Unlock by non-owner = %v, want ErrNotHeld", err)
		}
	}
	other := relocktest.Client(t)
	if err := other.GetLock(l.Name()).Unlock(a); !errors.Is(err, rlock.ErrNotHeld) {
		t.Errorf("Unlock by the same owner name on another client = %v, want ErrNotHeld", err)
	}
	after := relocktest.HGetAll(t, raw, l.Name())
	if len(after) != 1 || after[c.ID()+":a"] != before[c.ID()+":a"] {
		t.Errorf("hash changed: before %v, after %v", before, after)
	}
	if ttl := pttl(); ttl > ttlBefore {
		t.Errorf("lease grew from %v to %v after a failed Unlock", ttlBefore, ttl)
	}
	_ = l.Unlock(a)
}

func TestFixedLeaseExpires(t *testing.T) {
	c := relocktest.Client(t)
	l := c.GetLock(relocktest.Name(t))
	a := rlock.WithOwner(t.Context(), "a")
	if err := l.LockLease(a, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	d, err := l.RemainingLease(a)
	if err != nil || d <= 0 || d > 100*time.Millisecond {
		t.Fatalf("RemainingLease = %v, %v, want in (0, 100ms]", d, err)
	}
	// The lease is not renewed: another owner gets the lock when it ends.
	b := rlock.WithOwner(t.Context(), "b")
	start := time.Now()
	ok, err := l.TryLock(b, 5*time.Second, time.Second)
	if err != nil || !ok {
		t.Fatalf("TryLock after the lease = %v, %v", ok, err)
	}
	if waited := time.Since(start); waited > 2*time.Second {
		t.Errorf("waited %v for a 100ms lease", waited)
	}
	if err := l.Unlock(a); !errors.Is(err, rlock.ErrNotHeld) {
		t.Errorf("Unlock by the expired holder = %v, want ErrNotHeld", err)
	}
	_ = l.Unlock(b)
}

func TestWatchdogLeaseLength(t *testing.T) {
	for _, tc := range []struct {
		desc string
		opts []rlock.Option
		want time.Duration
	}{
		{"default", nil, 30 * time.Second},
		{"WithWatchdogTimeout", []rlock.Option{rlock.WithWatchdogTimeout(7 * time.Second)}, 7 * time.Second},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c := relocktest.Client(t, tc.opts...)
			l := c.GetLock(relocktest.Name(t))
			if err := l.Lock(t.Context()); err != nil {
				t.Fatal(err)
			}
			defer l.Unlock(t.Context())
			d, err := l.RemainingLease(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if d > tc.want || d < tc.want-time.Second {
				t.Errorf("RemainingLease = %v, want about %v", d, tc.want)
			}
		})
	}
}

func TestForceUnlock(t *testing.T) {
	c := relocktest.Client(t)
	l := c.GetLock(relocktest.Name(t))
	a := rlock.WithOwner(t.Context(), "a")
	if err := l.Lock(a); err != nil {
		t.Fatal(err)
	}
	if err := l.Lock(a); err != nil {
		t.Fatal(err)
	}
	other := relocktest.Client(t).GetLock(l.Name())
	ok, err := other.ForceUnlock(t.Context())
	if err != nil || !ok {
		t.Fatalf("ForceUnlock = %v, %v, want true", ok, err)
	}
	if locked, _ := l.IsLocked(t.Context()); locked {
		t.Error("IsLocked after ForceUnlock = true")
	}
	ok, err = other.ForceUnlock(t.Context())
	if err != nil || ok {
		t.Errorf("second ForceUnlock = %v, %v, want false, nil", ok, err)
	}
	if err := l.Unlock(a); !errors.Is(err, rlock.ErrNotHeld) {
		t.Errorf("Unlock after ForceUnlock = %v, want ErrNotHeld", err)
	}
}

func TestRemainingLeaseUnlocked(t *testing.T) {
	c := relocktest.Client(t)
	d, err := c.GetLock(relocktest.Name(t)).RemainingLease(t.Context())
	if err != nil || d != 0 {
		t.Errorf("RemainingLease of a free lock = %v, %v, want 0, nil", d, err)
	}
}

func TestInvalidArguments(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	good := relocktest.Name(t)
	ctx := t.Context()
	before := relocktest.DBSize(t, raw)

	type call func(l *rlock.Lock, ctx context.Context) error
	lock := func(l *rlock.Lock, ctx context.Context) error { return l.Lock(ctx) }
	tryLock := func(wait, lease time.Duration) call {
		return func(l *rlock.Lock, ctx context.Context) error {
			_, err := l.TryLock(ctx, wait, lease)
			return err
		}
	}
	lockLease := func(lease time.Duration) call {
		return func(l *rlock.Lock, ctx context.Context) error { return l.LockLease(ctx, lease) }
	}
	cases := []struct {
		desc  string
		name  string
		owner *string
		call  call
	}{
		{"empty name Lock", "", nil, lock},
		{"empty name Unlock", "", nil, func(l *rlock.Lock, ctx context.Context) error { return l.Unlock(ctx) }},
		{"empty name IsLocked", "", nil, func(l *rlock.Lock, ctx context.Context) error { _, err := l.IsLocked(ctx); return err }},
		{"empty name ForceUnlock", "", nil, func(l *rlock.Lock, ctx context.Context) error { _, err := l.ForceUnlock(ctx); return err }},
		{"control character in name", "a\nb", nil, lock},
		{"oversized name", strings.Repeat("x", 1025), nil, lock},
		{"negative wait", good, nil, tryLock(-time.Second, 0)},
		{"negative lease", good, nil, tryLock(0, -time.Second)},
		{"sub-millisecond lease", good, nil, tryLock(0, time.Microsecond)},
		{"overflowing lease", good, nil, tryLock(0, time.Duration(1<<62))},
		{"LockLease zero", good, nil, lockLease(0)},
		{"LockLease negative", good, nil, lockLease(-time.Millisecond)},
		{"empty owner", good, ptr(""), lock},
		{"empty owner Unlock", good, ptr(""), func(l *rlock.Lock, ctx context.Context) error { return l.Unlock(ctx) }},
		{"control character in owner", good, ptr("a\x00b"), lock},
		{"oversized owner", good, ptr(strings.Repeat("o", 257)), lock},
		{"nil Do function", good, nil, func(l *rlock.Lock, ctx context.Context) error { return l.Do(ctx, nil) }},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			cctx := ctx
			if tc.owner != nil {
				cctx = rlock.WithOwner(ctx, *tc.owner)
			}
			err := tc.call(c.GetLock(tc.name), cctx)
			if !errors.Is(err, rlock.ErrInvalidArgument) {
				t.Errorf("err = %v, want ErrInvalidArgument", err)
			}
		})
	}
	if after := relocktest.DBSize(t, raw); after != before {
		t.Errorf("DBSIZE = %d after invalid calls, want %d", after, before)
	}
	if _, err := rlock.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:1"}}, rlock.WithWatchdogTimeout(0)); !errors.Is(err, rlock.ErrInvalidArgument) {
		t.Errorf("WithWatchdogTimeout(0) = %v, want ErrInvalidArgument", err)
	}
	if _, err := rlock.New(nil); !errors.Is(err, rlock.ErrInvalidArgument) {
		t.Errorf("New(nil) = %v, want ErrInvalidArgument", err)
	}
}

func ptr[T any](v T) *T { return &v }

func TestClosedClient(t *testing.T) {
	c := relocktest.Client(t)
	l := c.GetLock(relocktest.Name(t))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	ctx := t.Context()
	checks := map[string]error{
		"Lock":      l.Lock(ctx),
		"LockLease": l.LockLease(ctx, time.Second),
		"Unlock":    l.Unlock(ctx),
	}
	_, checks["TryLock"] = l.TryLock(ctx, 0, 0)
	_, checks["IsLocked"] = l.IsLocked(ctx)
	_, checks["HoldCount"] = l.HoldCount(ctx)
	_, checks["ForceUnlock"] = l.ForceUnlock(ctx)
	_, checks["RemainingLease"] = l.RemainingLease(ctx)
	checks["Do"] = l.Do(ctx, func(context.Context) error { return nil })
	for call, err := range checks {
		if !errors.Is(err, rlock.ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", call, err)
		}
	}
}

func TestNewLeavesCallersClientOpen(t *testing.T) {
	raw := relocktest.Raw(t)
	c, err := rlock.New(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.GetLock(relocktest.Name(t)).Lock(t.Context()); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	if err := raw.Do(t.Context(), raw.B().Ping().Build()).Error(); err != nil {
		t.Errorf("PING on the caller's client after Close = %v, want nil", err)
	}
}

func TestKilledServerIsAnError(t *testing.T) {
	srv := redistest.Start(t)
	c := relocktest.ClientOn(t, srv)
	l := c.GetLock("killed")
	ctx := rlock.WithOwner(t.Context(), "a")
	if err := l.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	tctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if ok, err := c.GetLock("other").TryLock(tctx, 0, time.Second); err == nil || ok {
		t.Errorf("TryLock on a dead server = %v, %v, want an error", ok, err)
	}
	if err := l.Unlock(tctx); err == nil || errors.Is(err, rlock.ErrNotHeld) {
		t.Errorf("Unlock on a dead server = %v, want a Redis error", err)
	}
	if _, err := l.IsLocked(tctx); err == nil {
		t.Error("IsLocked on a dead server = nil error")
	}
	// A waiting Lock rides out the outage until its context ends, then
	// reports both the context and the last Redis failure.
	wctx, wcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer wcancel()
	err := c.GetLock("other").Lock(wctx)
	if !errors.Is(err, rlock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) ||
		!strings.Contains(err.Error(), "connection refused") {
		t.Errorf("Lock on a dead server = %v, want ErrNotAcquired, DeadlineExceeded and the connection error", err)
	}
}

func TestWaitEndedByContext(t *testing.T) {
	c := relocktest.Client(t)
	l := c.GetLock(relocktest.Name(t))
	a := rlock.WithOwner(t.Context(), "a")
	if err := l.Lock(a); err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(a)

	ctx, cancel := context.WithTimeout(rlock.WithOwner(t.Context(), "b"), 50*time.Millisecond)
	defer cancel()
	err := l.Lock(ctx)
	if !errors.Is(err, rlock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Lock = %v, want ErrNotAcquired and DeadlineExceeded", err)
	}
	ok, err := l.TryLock(ctx, time.Second, 0)
	if ok || !errors.Is(err, rlock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("TryLock with an ended context = %v, %v, want ErrNotAcquired and DeadlineExceeded", ok, err)
	}
	// TryLock whose wait ends while the context lives: false, nil.
	ok, err = l.TryLock(rlock.WithOwner(t.Context(), "b"), 30*time.Millisecond, 0)
	if ok || err != nil {
		t.Errorf("TryLock with a short wait = %v, %v, want false, nil", ok, err)
	}
	if fields := relocktest.HGetAll(t, relocktest.Raw(t), l.Name()); len(fields) != 1 {
		t.Errorf("hash = %v, want only the holder", fields)
	}
}

func TestUnlockWithCancelledContext(t *testing.T) {
	c := relocktest.Client(t)
	l := c.GetLock(relocktest.Name(t))
	ctx, cancel := context.WithCancel(rlock.WithOwner(t.Context(), "a"))
	if err := l.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock with a cancelled context = %v, want nil", err)
	}
	if locked, _ := l.IsLocked(t.Context()); locked {
		t.Error("still locked after Unlock with a cancelled context")
	}
}

func TestRedisErrorIsNotSuccess(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	// A key of the wrong type makes every script fail with WRONGTYPE.
	if err := raw.Do(t.Context(), raw.B().Set().Key(name).Value("x").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	l := c.GetLock(name)
	ctx := rlock.WithOwner(t.Context(), "a")
	if ok, err := l.TryLock(ctx, 0, time.Second); ok || err == nil {
		t.Errorf("TryLock on a string key = %v, %v, want an error", ok, err)
	}
	if _, err := l.HoldCount(ctx); err == nil {
		t.Error("HoldCount on a string key = nil error")
	}
	// A release that meets the wrong type is an error too, not a success
	// nor ErrNotHeld.
	if err := raw.Do(t.Context(), raw.B().Del().Key(name).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := l.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := raw.Do(t.Context(), raw.B().Set().Key(name).Value("x").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err == nil || errors.Is(err, rlock.ErrNotHeld) {
		t.Errorf("Unlock on a string key = %v, want a Redis error", err)
	}
}
