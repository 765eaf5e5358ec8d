package rlock_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
		require.NoError(t, l.Lock(ctx), "Lock #%d", want)
		n, err := l.HoldCount(ctx)
		require.NoError(t, err)
		assert.Equal(t, want, n, "HoldCount")
	}
	assert.Equal(t, map[string]string{c.ID() + ":a": "3"}, relocktest.HGetAll(t, raw, l.Name()), "the lock hash")
	for want := 2; want >= 0; want-- {
		require.NoError(t, l.Unlock(ctx), "Unlock")
		n, err := l.HoldCount(ctx)
		require.NoError(t, err)
		assert.Equal(t, want, n, "HoldCount after Unlock")
	}
	assertLocked(t, l, false, "after the last Unlock")
}

// assertLocked checks IsLocked of l.
func assertLocked(t *testing.T, l interface {
	IsLocked(context.Context) (bool, error)
}, want bool, when string) {
	t.Helper()
	locked, err := l.IsLocked(t.Context())
	require.NoError(t, err, "IsLocked %s", when)
	assert.Equal(t, want, locked, "IsLocked %s", when)
}

// requireTry checks a TryLock's answer: no error, and ok as want.
func requireTry(t *testing.T, want bool, ok bool, err error, what string) {
	t.Helper()
	require.NoError(t, err, what)
	require.Equal(t, want, ok, what)
}

func TestReentryAcrossHandles(t *testing.T) {
	c := relocktest.Client(t)
	ctx := rlock.WithOwner(t.Context(), "job-42")
	name := relocktest.Name(t)
	require.NoError(t, c.GetLock(name).Lock(ctx))
	ok, err := c.GetLock(name).TryLock(ctx, 0, 0)
	requireTry(t, true, ok, err, "TryLock on a second handle: re-entry")
	n, err := c.GetLock(name).HoldCount(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, n, "HoldCount")
	for range 2 {
		require.NoError(t, c.GetLock(name).Unlock(ctx))
	}
}

func TestExclusion(t *testing.T) {
	c1 := relocktest.Client(t)
	c2 := relocktest.Client(t)
	name := relocktest.Name(t)
	a := rlock.WithOwner(t.Context(), "a")
	b := rlock.WithOwner(t.Context(), "b")
	require.NoError(t, c1.GetLock(name).Lock(a))
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
			assert.NoError(t, err)
			assert.False(t, ok, "TryLock: %s", tc.reason)
		})
	}
	require.NoError(t, c1.GetLock(name).Unlock(a))
	ok, err := c2.GetLock(name).TryLock(b, 0, 0)
	requireTry(t, true, ok, err, "TryLock after Unlock")
	_ = c2.GetLock(name).Unlock(b)
}

func TestAnonymousIsNotReentrant(t *testing.T) {
	c := relocktest.Client(t)
	l := c.GetLock(relocktest.Name(t))
	ctx := t.Context()
	require.NoError(t, l.Lock(ctx))
	ok, err := l.TryLock(ctx, 0, 0)
	requireTry(t, false, ok, err, "second anonymous TryLock")
	held, err := l.IsHeldByOwner(ctx)
	require.NoError(t, err)
	assert.True(t, held, "IsHeldByOwner without owner: the handle's anonymous hold")
	n, err := l.HoldCount(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "HoldCount")
	require.NoError(t, l.Unlock(ctx), "Unlock of the anonymous hold")
	assert.ErrorIs(t, l.Unlock(ctx), rlock.ErrNotHeld, "second Unlock")
}

// TestAnonymousHandleExcludesGoroutines: goroutines without owners take
// one handle's lock in turn, never two at once, and no hold is reported
// lost. Each release wakes the
// next waiter; were it to publish nothing, a waiter would sleep for the
// lease it saw (30s), so every Lock has a deadline of a few seconds and
// says so when it passes.
func TestAnonymousHandleExcludesGoroutines(t *testing.T) {
	// No hold is lost either: a waiter whose acquisition lands while the
	// Unlock that let it in is still on its way back must not take the
	// released hold for one lost.
	lost := &lostCounter{t: t}
	c := relocktest.Client(t, lost.option())
	l := c.GetLock(relocktest.Name(t))
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	var done atomic.Int32
	var x exclusion
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 25 {
				if !assert.NoError(t, l.Lock(ctx), "Lock: a release did not wake the waiters within 5s") {
					return
				}
				x.enter()
				if !assert.NoError(t, l.Unlock(ctx)) {
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	assert.Zero(t, x.overlaps.Load(), "overlapping holds")
	assert.EqualValues(t, 200, done.Load(), "acquisitions")
	assert.Zero(t, lost.n.Load(), "holds reported lost")
}

func TestUnlockByNonOwner(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	l := c.GetLock(relocktest.Name(t))
	a := rlock.WithOwner(t.Context(), "a")
	require.NoError(t, l.Lock(a))
	before := relocktest.HGetAll(t, raw, l.Name())
	pttl := func() time.Duration { d, _ := l.RemainingLease(a); return d }
	ttlBefore := pttl()

	for _, ctx := range []context.Context{rlock.WithOwner(t.Context(), "b"), t.Context()} {
		assert.ErrorIs(t, l.Unlock(ctx), rlock.ErrNotHeld, "Unlock by non-owner")
	}
	other := relocktest.Client(t)
	assert.ErrorIs(t, other.GetLock(l.Name()).Unlock(a), rlock.ErrNotHeld, "Unlock by the same owner name on another client")
	assert.Equal(t, before, relocktest.HGetAll(t, raw, l.Name()), "the hash after failed Unlocks")
	assert.LessOrEqual(t, pttl(), ttlBefore, "the lease after failed Unlocks must not grow")
	_ = l.Unlock(a)
}

func TestFixedLeaseExpires(t *testing.T) {
	c := relocktest.Client(t)
	l := c.GetLock(relocktest.Name(t))
	a := rlock.WithOwner(t.Context(), "a")
	require.NoError(t, l.LockLease(a, 100*time.Millisecond))
	d, err := l.RemainingLease(a)
	require.NoError(t, err)
	require.Positive(t, d, "RemainingLease")
	require.LessOrEqual(t, d, 100*time.Millisecond, "RemainingLease")
	// The lease is not renewed: another owner gets the lock when it ends.
	b := rlock.WithOwner(t.Context(), "b")
	start := time.Now()
	ok, err := l.TryLock(b, 5*time.Second, time.Second)
	requireTry(t, true, ok, err, "TryLock after the lease")
	assert.LessOrEqual(t, time.Since(start), 2*time.Second, "the wait for a 100ms lease")
	assert.ErrorIs(t, l.Unlock(a), rlock.ErrNotHeld, "Unlock by the expired holder")
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
			require.NoError(t, l.Lock(t.Context()))
			defer l.Unlock(t.Context())
			d, err := l.RemainingLease(t.Context())
			require.NoError(t, err)
			assert.LessOrEqual(t, d, tc.want, "RemainingLease: about the lease")
			assert.GreaterOrEqual(t, d, tc.want-time.Second, "RemainingLease: about the lease")
		})
	}
}

func TestForceUnlock(t *testing.T) {
	c := relocktest.Client(t)
	l := c.GetLock(relocktest.Name(t))
	a := rlock.WithOwner(t.Context(), "a")
	require.NoError(t, l.Lock(a))
	require.NoError(t, l.Lock(a))
	other := relocktest.Client(t).GetLock(l.Name())
	ok, err := other.ForceUnlock(t.Context())
	requireTry(t, true, ok, err, "ForceUnlock")
	assertLocked(t, l, false, "after ForceUnlock")
	ok, err = other.ForceUnlock(t.Context())
	require.NoError(t, err)
	assert.False(t, ok, "second ForceUnlock")
	assert.ErrorIs(t, l.Unlock(a), rlock.ErrNotHeld, "Unlock after ForceUnlock")
}

func TestRemainingLeaseUnlocked(t *testing.T) {
	c := relocktest.Client(t)
	d, err := c.GetLock(relocktest.Name(t)).RemainingLease(t.Context())
	require.NoError(t, err)
	assert.Zero(t, d, "RemainingLease of a free lock")
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
			assert.ErrorIs(t, tc.call(c.GetLock(tc.name), cctx), rlock.ErrInvalidArgument)
		})
	}
	assert.Equal(t, before, relocktest.DBSize(t, raw), "DBSIZE after invalid calls")
	_, err := rlock.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:1"}}, rlock.WithWatchdogTimeout(0))
	assert.ErrorIs(t, err, rlock.ErrInvalidArgument, "WithWatchdogTimeout(0)")
	_, err = rlock.New(nil)
	assert.ErrorIs(t, err, rlock.ErrInvalidArgument, "New(nil)")
}

func ptr[T any](v T) *T { return &v }

func TestClosedClient(t *testing.T) {
	c := relocktest.Client(t)
	l := c.GetLock(relocktest.Name(t))
	require.NoError(t, c.Close())
	assert.NoError(t, c.Close(), "second Close")
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
		assert.ErrorIs(t, err, rlock.ErrClosed, "%s after Close", call)
	}
}

func TestNewLeavesCallersClientOpen(t *testing.T) {
	raw := relocktest.Raw(t)
	c, err := rlock.New(raw)
	require.NoError(t, err)
	require.NoError(t, c.GetLock(relocktest.Name(t)).Lock(t.Context()))
	_ = c.Close()
	assert.NoError(t, raw.Do(t.Context(), raw.B().Ping().Build()).Error(), "PING on the caller's client after Close")
}

func TestKilledServerIsAnError(t *testing.T) {
	srv := redistest.Start(t)
	c := relocktest.ClientOn(t, srv)
	l := c.GetLock("killed")
	ctx := rlock.WithOwner(t.Context(), "a")
	require.NoError(t, l.Lock(ctx))
	srv.Kill()
	tctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	ok, err := c.GetLock("other").TryLock(tctx, 0, time.Second)
	assert.Error(t, err, "TryLock on a dead server")
	assert.False(t, ok, "TryLock on a dead server")
	err = l.Unlock(tctx)
	assert.Error(t, err, "Unlock on a dead server: want a Redis error")
	assert.NotErrorIs(t, err, rlock.ErrNotHeld, "Unlock on a dead server: want a Redis error")
	_, err = l.IsLocked(tctx)
	assert.Error(t, err, "IsLocked on a dead server")
	// A waiting Lock rides out the outage until its context ends, then
	// reports both the context and the last Redis failure.
	wctx, wcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer wcancel()
	err = c.GetLock("other").Lock(wctx)
	assert.ErrorIs(t, err, rlock.ErrNotAcquired, "Lock on a dead server")
	assert.ErrorIs(t, err, context.DeadlineExceeded, "Lock on a dead server")
	assert.ErrorContains(t, err, "connection refused", "Lock on a dead server must report the connection error")
}

func TestWaitEndedByContext(t *testing.T) {
	c := relocktest.Client(t)
	l := c.GetLock(relocktest.Name(t))
	a := rlock.WithOwner(t.Context(), "a")
	require.NoError(t, l.Lock(a))
	defer l.Unlock(a)

	ctx, cancel := context.WithTimeout(rlock.WithOwner(t.Context(), "b"), 50*time.Millisecond)
	defer cancel()
	err := l.Lock(ctx)
	assert.ErrorIs(t, err, rlock.ErrNotAcquired, "Lock")
	assert.ErrorIs(t, err, context.DeadlineExceeded, "Lock")
	ok, err := l.TryLock(ctx, time.Second, 0)
	assert.False(t, ok, "TryLock with an ended context")
	assert.ErrorIs(t, err, rlock.ErrNotAcquired, "TryLock with an ended context")
	assert.ErrorIs(t, err, context.DeadlineExceeded, "TryLock with an ended context")
	// TryLock whose wait ends while the context lives: false, nil.
	ok, err = l.TryLock(rlock.WithOwner(t.Context(), "b"), 30*time.Millisecond, 0)
	requireTry(t, false, ok, err, "TryLock with a short wait")
	assert.Len(t, relocktest.HGetAll(t, relocktest.Raw(t), l.Name()), 1, "hash fields: only the holder")
}

func TestUnlockWithCancelledContext(t *testing.T) {
	c := relocktest.Client(t)
	l := c.GetLock(relocktest.Name(t))
	ctx, cancel := context.WithCancel(rlock.WithOwner(t.Context(), "a"))
	require.NoError(t, l.Lock(ctx))
	cancel()
	require.NoError(t, l.Unlock(ctx), "Unlock with a cancelled context")
	assertLocked(t, l, false, "after Unlock with a cancelled context")
}

func TestRedisErrorIsNotSuccess(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	// A key of the wrong type makes every script fail with WRONGTYPE.
	require.NoError(t, raw.Do(t.Context(), raw.B().Set().Key(name).Value("x").Build()).Error())
	l := c.GetLock(name)
	ctx := rlock.WithOwner(t.Context(), "a")
	ok, err := l.TryLock(ctx, 0, time.Second)
	assert.Error(t, err, "TryLock on a string key")
	assert.False(t, ok, "TryLock on a string key")
	_, err = l.HoldCount(ctx)
	assert.Error(t, err, "HoldCount on a string key")
	// A release that meets the wrong type is an error too, not a success
	// nor ErrNotHeld.
	require.NoError(t, raw.Do(t.Context(), raw.B().Del().Key(name).Build()).Error())
	require.NoError(t, l.Lock(ctx))
	require.NoError(t, raw.Do(t.Context(), raw.B().Set().Key(name).Value("x").Build()).Error())
	err = l.Unlock(ctx)
	assert.Error(t, err, "Unlock on a string key: want a Redis error")
	assert.NotErrorIs(t, err, rlock.ErrNotHeld, "Unlock on a string key: want a Redis error")
}
