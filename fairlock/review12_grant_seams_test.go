package fairlock_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/fairlock"
	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/internal/redissontest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/rlock"
)

// grantArg is ARGV[6] of a fair_unlock.lua call (EVALSHA sha numkeys
// keys... args...): the field its release grants the lock to, "" for none.
func grantArg(args []string) string {
	if len(args) < 3 {
		return ""
	}
	nk, err := strconv.Atoi(args[2])
	if err != nil {
		return ""
	}
	if i := 3 + nk + 5; i < len(args) {
		return args[i]
	}
	return ""
}

// grantFixture is a fair lock on a Client whose commands go through a
// Faulty wrapper (the releasing and the waiting Client), and a second
// Client for a waiter queued behind.
type grantFixture struct {
	f     *relocktest.Faulty
	c     *rlock.Client
	other *rlock.Client
	raw   rueidis.Client
	name  string
	l     *fairlock.Lock
}

func newGrantFixture(t *testing.T, opts ...rlock.Option) *grantFixture {
	t.Helper()
	raw := relocktest.Raw(t)
	f := relocktest.NewFaulty(raw)
	c, err := rlock.New(f, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	name := relocktest.Name(t)
	return &grantFixture{f: f, c: c, other: relocktest.Client(t), raw: raw, name: name, l: c.GetFairLock(name)}
}

// start runs lock in the background and waits until the queue is want.
func (g *grantFixture) start(t *testing.T, lock func() error, want ...string) <-chan error {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- lock() }()
	relocktest.Eventually(t, 5*time.Second, "queue "+strconv.Itoa(len(want)), func() bool {
		return slices.Equal(queue(t, g.raw, g.name), want)
	})
	return errc
}

// grantRule answers the release that grants to field (running it), with
// after called once it ran.
func (g *grantFixture) grantRule(field string, r *relocktest.Rule) *relocktest.Rule {
	r.SHA1s = []string{lua.FairUnlock.SHA1}
	r.N = 1
	r.Match = func(args []string) bool { return grantArg(args) == field }
	return g.f.Inject(r)
}

// pttl is the lock's remaining lease in ms.
func (g *grantFixture) pttl(t *testing.T) int64 {
	t.Helper()
	n, err := g.raw.Do(t.Context(), g.raw.B().Pttl().Key(g.name).Build()).AsInt64()
	require.NoError(t, err)
	return n
}

// clean checks that the lock is free with an empty queue and no
// deadlines or heartbeats.
func (g *grantFixture) clean(t *testing.T) {
	t.Helper()
	relocktest.Eventually(t, 5*time.Second, "the lock free, its queue empty", func() bool {
		return len(relocktest.HGetAll(t, g.raw, g.name)) == 0 && len(queue(t, g.raw, g.name)) == 0
	})
}

const grantTries = 20

// TestReview12CancelWhileGrantInFlight: the waiter's context ends after
// the release wrote its grant and before its reply came back. The waiter
// returns not acquired, the grant is given back, and the waiter of
// another Client queued behind it takes the lock at once (well inside
// the window), holding it alone.
func TestReview12CancelWhileGrantInFlight(t *testing.T) {
	g := newGrantFixture(t)
	h := rlock.WithOwner(t.Context(), "holder")
	wField, xField := fairField(g.c, "w"), fairField(g.other, "x")
	xCtx := rlock.WithOwner(t.Context(), "x")
	for try := range grantTries {
		require.NoError(t, g.l.Lock(h))
		wctx, cancel := context.WithCancel(rlock.WithOwner(t.Context(), "w"))
		werr := g.start(t, func() error { return g.l.Lock(wctx) }, wField)
		xerr := g.start(t, func() error { return g.other.GetFairLock(g.name).Lock(xCtx) }, wField, xField)
		var got error
		returned := false
		rule := g.grantRule(wField, &relocktest.Rule{Run: true, Keep: true, After: func([]string) {
			cancel()
			select {
			case got = <-werr:
				returned = true
			case <-time.After(5 * time.Second):
			}
		}})
		require.NoError(t, g.l.Unlock(h))
		g.f.Clear()
		if rule.Hits() == 0 {
			// The waiter was between two attempts: woken, not granted.
			require.NoError(t, relocktest.Receive(t, werr, 5*time.Second, "w's Lock"))
			require.NoError(t, g.l.Unlock(rlock.WithOwner(t.Context(), "w")))
			cancel()
			require.NoError(t, relocktest.Receive(t, xerr, 5*time.Second, "x's Lock"))
			require.NoError(t, g.other.GetFairLock(g.name).Unlock(xCtx))
			g.clean(t)
			continue
		}
		require.True(t, returned, "w's Lock did not return at once when its context ended with the grant in flight")
		assert.ErrorIs(t, got, rlock.ErrNotAcquired)
		assert.ErrorIs(t, got, context.Canceled)
		start := time.Now()
		require.NoError(t, relocktest.Receive(t, xerr, 5*time.Second, "x's Lock"))
		assert.Less(t, time.Since(start), time.Second, "x waited for the grant's window: the grant was not given back")
		assert.Equal(t, map[string]string{xField: "1"}, relocktest.HGetAll(t, g.raw, g.name))
		require.NoError(t, g.other.GetFairLock(g.name).Unlock(xCtx))
		g.clean(t)
		t.Logf("granted on try %d", try+1)
		return
	}
	t.Skipf("no release carried a grant in %d tries", grantTries)
}

// TestReview12WaitLimitEndsWhileGrantInFlight: a TryLock whose wait runs
// out while the release that grants it the lock is on its way takes the
// lock (true, holding it), and its Client confirms the hold.
func TestReview12WaitLimitEndsWhileGrantInFlight(t *testing.T) {
	g := newGrantFixture(t)
	h := rlock.WithOwner(t.Context(), "holder")
	w := rlock.WithOwner(t.Context(), "w")
	wField := fairField(g.c, "w")
	const wait = 1500 * time.Millisecond
	for range grantTries {
		require.NoError(t, g.l.Lock(h))
		type result struct {
			ok  bool
			err error
		}
		res := make(chan result, 1)
		began := time.Now()
		go func() {
			ok, err := g.l.TryLock(w, wait, 0)
			res <- result{ok, err}
		}()
		relocktest.Eventually(t, 5*time.Second, "w queued", func() bool {
			return slices.Equal(queue(t, g.raw, g.name), []string{wField})
		})
		rule := g.grantRule(wField, &relocktest.Rule{Run: true, Keep: true, After: func([]string) {
			// The wait limit passes with the grant written, its reply
			// not yet back.
			time.Sleep(time.Until(began.Add(wait + 100*time.Millisecond)))
		}})
		require.NoError(t, g.l.Unlock(h))
		g.f.Clear()
		r := relocktest.Receive(t, res, 5*time.Second, "w's TryLock")
		require.NoError(t, r.err)
		if rule.Hits() == 0 {
			if r.ok {
				require.NoError(t, g.l.Unlock(w))
			}
			g.clean(t)
			continue
		}
		require.True(t, r.ok, "a TryLock whose wait ran out with its grant in flight returned false")
		assert.Equal(t, map[string]string{wField: "1"}, relocktest.HGetAll(t, g.raw, g.name))
		relocktest.Eventually(t, 5*time.Second, "the granted hold confirmed", func() bool { return g.pttl(t) > 3000 })
		require.NoError(t, g.l.Unlock(w))
		g.clean(t)
		return
	}
	t.Skipf("no release carried a grant in %d tries", grantTries)
}

// TestReview12CloseWhileGrantInFlight: the waiting Client is closed
// while the release that grants its waiter the lock is on its way. The
// waiter returns ErrClosed, and the waiter of another Client behind it
// takes the lock within the window.
func TestReview12CloseWhileGrantInFlight(t *testing.T) {
	for range grantTries {
		g := newGrantFixture(t)
		h := rlock.WithOwner(t.Context(), "holder")
		wField, xField := fairField(g.c, "w"), fairField(g.other, "x")
		xCtx := rlock.WithOwner(t.Context(), "x")
		require.NoError(t, g.l.Lock(h))
		werr := g.start(t, func() error { return g.l.Lock(rlock.WithOwner(t.Context(), "w")) }, wField)
		xerr := g.start(t, func() error { return g.other.GetFairLock(g.name).Lock(xCtx) }, wField, xField)
		closed := make(chan error, 1)
		rule := g.grantRule(wField, &relocktest.Rule{Run: true, Keep: true, After: func([]string) {
			go func() { closed <- g.c.Close() }()
			relocktest.Eventually(t, 5*time.Second, "the Client closed", func() bool {
				_, err := g.c.GetFairLock(g.name + ":probe").IsLocked(t.Context())
				return errors.Is(err, rlock.ErrClosed)
			})
		}})
		uerr := g.l.Unlock(h)
		g.f.Clear()
		if rule.Hits() == 0 {
			require.NoError(t, uerr)
			require.NoError(t, relocktest.Receive(t, werr, 5*time.Second, "w's Lock"))
			require.NoError(t, g.l.Unlock(rlock.WithOwner(t.Context(), "w")))
			require.NoError(t, relocktest.Receive(t, xerr, 5*time.Second, "x's Lock"))
			require.NoError(t, g.other.GetFairLock(g.name).Unlock(xCtx))
			g.clean(t)
			continue
		}
		t.Logf("the releasing Unlock returned %v", uerr)
		err := relocktest.Receive(t, werr, 5*time.Second, "w's Lock")
		assert.ErrorIs(t, err, rlock.ErrClosed)
		assert.ErrorIs(t, err, rlock.ErrNotAcquired)
		start := time.Now()
		require.NoError(t, relocktest.Receive(t, xerr, 5*time.Second, "x's Lock"))
		assert.Less(t, time.Since(start), 3*time.Second+fairlock.RefreshInterval+time.Second,
			"x waited longer than the window")
		t.Logf("x took the lock %v after w's Lock returned", time.Since(start))
		assert.Equal(t, map[string]string{xField: "1"}, relocktest.HGetAll(t, g.raw, g.name))
		require.NoError(t, relocktest.Receive(t, closed, 5*time.Second, "Close"))
		require.NoError(t, g.other.GetFairLock(g.name).Unlock(xCtx))
		g.clean(t)
		return
	}
	t.Skipf("no release carried a grant in %d tries", grantTries)
}

// grantedOnce runs hold, a waiter (lock, queued as want), and the
// holder's release until a release grants the waiter the lock; it
// returns with the waiter holding it (granted), the pttl read at once.
func grantedOnce(t *testing.T, g *grantFixture, h context.Context, lock func() error, unlock func(), want ...string) (pttl int64) {
	t.Helper()
	for range grantTries {
		require.NoError(t, g.l.Lock(h))
		errc := g.start(t, lock, want...)
		g0 := lockcore.GrantsMade()
		require.NoError(t, g.l.Unlock(h))
		require.NoError(t, relocktest.Receive(t, errc, 5*time.Second, "the waiter's Lock"))
		pttl = g.pttl(t)
		if lockcore.GrantsMade()-g0 == 1 {
			return pttl
		}
		unlock()
		g.clean(t)
	}
	t.Skipf("no release granted the lock in %d tries", grantTries)
	return 0
}

// TestReview12GranteeClientDies: a granted hold whose Client is closed
// before it confirms the hold costs the waiter behind at most the
// window: its lease in Redis is the window, and the next head takes the
// lock when it ends.
func TestReview12GranteeClientDies(t *testing.T) {
	g := newGrantFixture(t)
	h := rlock.WithOwner(t.Context(), "holder")
	w := rlock.WithOwner(t.Context(), "w")
	wField := fairField(g.c, "w")
	pttl := grantedOnce(t, g, h, func() error { return g.l.Lock(w) }, func() { require.NoError(t, g.l.Unlock(w)) }, wField)
	require.NoError(t, g.c.Close())
	assert.LessOrEqual(t, pttl, int64(3000), "the granted hold's lease before its confirmation")
	x := rlock.WithOwner(t.Context(), "x")
	start := time.Now()
	require.NoError(t, g.other.GetFairLock(g.name).Lock(x))
	assert.Less(t, time.Since(start), time.Duration(pttl)*time.Millisecond+fairlock.RefreshInterval+time.Second)
	assert.Equal(t, map[string]string{fairField(g.other, "x"): "1"}, relocktest.HGetAll(t, g.raw, g.name))
	require.NoError(t, g.other.GetFairLock(g.name).Unlock(x))
	g.clean(t)
}

// TestReview12GrantedFixedLeases: a grant to LockLease keeps the lease
// the caller asked for: a lease shorter than the window is the granted
// hold's lease in Redis (and it ends then, the waiter behind taking the
// lock), a longer one is set once the Client confirms the hold.
func TestReview12GrantedFixedLeases(t *testing.T) {
	t.Run("shorter than the window", func(t *testing.T) {
		g := newGrantFixture(t)
		h := rlock.WithOwner(t.Context(), "holder")
		w := rlock.WithOwner(t.Context(), "w")
		const lease = 800 * time.Millisecond
		pttl := grantedOnce(t, g, h, func() error { return g.l.LockLease(w, lease) },
			func() { require.NoError(t, g.l.Unlock(w)) }, fairField(g.c, "w"))
		assert.LessOrEqual(t, pttl, lease.Milliseconds(), "a granted fixed lease under the window")
		assert.Positive(t, pttl)
		x := rlock.WithOwner(t.Context(), "x")
		start := time.Now()
		require.NoError(t, g.other.GetFairLock(g.name).Lock(x))
		assert.Less(t, time.Since(start), lease+fairlock.RefreshInterval+time.Second)
		require.NoError(t, g.other.GetFairLock(g.name).Unlock(x))
		g.clean(t)
	})
	t.Run("longer than the window", func(t *testing.T) {
		g := newGrantFixture(t)
		h := rlock.WithOwner(t.Context(), "holder")
		w := rlock.WithOwner(t.Context(), "w")
		const lease = 8 * time.Second
		pttl := grantedOnce(t, g, h, func() error { return g.l.LockLease(w, lease) },
			func() { require.NoError(t, g.l.Unlock(w)) }, fairField(g.c, "w"))
		assert.LessOrEqual(t, pttl, int64(3000), "the window, before the confirmation")
		relocktest.Eventually(t, 5*time.Second, "the lease set by the confirmation", func() bool { return g.pttl(t) > 3000 })
		assert.LessOrEqual(t, g.pttl(t), lease.Milliseconds())
		require.NoError(t, g.l.Unlock(w))
		g.clean(t)
	})
}

// TestReview12GrantReentrant: a holder that holds two levels grants
// only at its last Unlock; the granted waiter re-enters its grant and
// frees the lock with its own two Unlocks.
func TestReview12GrantReentrant(t *testing.T) {
	g := newGrantFixture(t)
	h := rlock.WithOwner(t.Context(), "holder")
	w := rlock.WithOwner(t.Context(), "w")
	wField := fairField(g.c, "w")
	for try := range grantTries {
		require.NoError(t, g.l.Lock(h))
		require.NoError(t, g.l.Lock(h))
		errc := g.start(t, func() error { return g.l.Lock(w) }, wField)
		g0 := lockcore.GrantsMade()
		require.NoError(t, g.l.Unlock(h))
		assert.Equal(t, int64(0), lockcore.GrantsMade()-g0, "a release that leaves a level granted")
		assert.Equal(t, map[string]string{fairField(g.c, "holder"): "1"}, relocktest.HGetAll(t, g.raw, g.name))
		assert.Equal(t, []string{wField}, queue(t, g.raw, g.name))
		require.NoError(t, g.l.Unlock(h))
		require.NoError(t, relocktest.Receive(t, errc, 5*time.Second, "w's Lock"))
		granted := lockcore.GrantsMade()-g0 == 1
		require.NoError(t, g.l.Lock(w))
		n, err := g.l.HoldCount(w)
		require.NoError(t, err)
		assert.Equal(t, 2, n)
		assert.Equal(t, map[string]string{wField: "2"}, relocktest.HGetAll(t, g.raw, g.name))
		require.NoError(t, g.l.Unlock(w))
		require.NoError(t, g.l.Unlock(w))
		assert.ErrorIs(t, g.l.Unlock(w), rlock.ErrNotHeld)
		g.clean(t)
		if granted {
			t.Logf("granted on try %d", try+1)
			return
		}
	}
	t.Skipf("no release granted the lock in %d tries", grantTries)
}

// TestReview12SharedOwnerWaiters: two goroutines of one owner wait for
// the fair lock (one place in the queue). Both return holding it (the
// second re-enters), the count is 2, and two Unlocks free it.
func TestReview12SharedOwnerWaiters(t *testing.T) {
	g := newGrantFixture(t)
	h := rlock.WithOwner(t.Context(), "holder")
	w := rlock.WithOwner(t.Context(), "w")
	wField := fairField(g.c, "w")
	grants := int64(0)
	for range 5 {
		require.NoError(t, g.l.Lock(h))
		e1 := g.start(t, func() error { return g.l.Lock(w) }, wField)
		attempts := g.f.Inject(&relocktest.Rule{SHA1s: []string{lua.FairAcquire.SHA1}, N: -1, Run: true, Keep: true})
		e2 := make(chan error, 1)
		go func() { e2 <- g.l.Lock(w) }()
		// The second call's attempts keep the one place (the first's
		// refresh every RefreshInterval is among them).
		relocktest.Eventually(t, 5*time.Second, "both calls attempted", func() bool { return attempts.Hits() >= 3 })
		g.f.Clear()
		assert.Equal(t, []string{wField}, queue(t, g.raw, g.name))
		g0 := lockcore.GrantsMade()
		require.NoError(t, g.l.Unlock(h))
		require.NoError(t, relocktest.Receive(t, e1, 5*time.Second, "first Lock"))
		require.NoError(t, relocktest.Receive(t, e2, 5*time.Second, "second Lock"))
		grants += lockcore.GrantsMade() - g0
		assert.Equal(t, map[string]string{wField: "2"}, relocktest.HGetAll(t, g.raw, g.name))
		require.NoError(t, g.l.Unlock(w))
		require.NoError(t, g.l.Unlock(w))
		g.clean(t)
	}
	t.Logf("%d of 5 hand-offs granted", grants)
}

// TestReview12LostGrantReply: the reply of the release that granted the
// lock is lost (once, or never comes). The waiter returns holding the
// lock, alone, and frees it with its Unlock; the releasing Unlock
// succeeds.
func TestReview12LostGrantReply(t *testing.T) {
	for _, tc := range []struct {
		name string
		rule func() *relocktest.Rule
	}{
		{"lost", func() *relocktest.Rule { return &relocktest.Rule{Run: true, Reply: relocktest.LostReply()} }},
		{"never", func() *relocktest.Rule { return &relocktest.Rule{Run: true, Hang: true} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGrantFixture(t)
			h := rlock.WithOwner(t.Context(), "holder")
			w := rlock.WithOwner(t.Context(), "w")
			wField := fairField(g.c, "w")
			for try := range grantTries {
				require.NoError(t, g.l.Lock(h))
				errc := g.start(t, func() error { return g.l.Lock(w) }, wField)
				rule := g.grantRule(wField, tc.rule())
				uerr := g.l.Unlock(h)
				g.f.Clear()
				require.NoError(t, relocktest.Receive(t, errc, 10*time.Second, "w's Lock"))
				assert.Equal(t, map[string]string{wField: "1"}, relocktest.HGetAll(t, g.raw, g.name))
				assert.Empty(t, queue(t, g.raw, g.name))
				require.NoError(t, g.l.Unlock(w))
				g.clean(t)
				if rule.Hits() == 1 {
					assert.NoError(t, uerr, "the releasing Unlock")
					t.Logf("grant's reply lost on try %d", try+1)
					return
				}
				require.NoError(t, uerr)
			}
			t.Skipf("no release carried a grant in %d tries", grantTries)
		})
	}
}

// TestReview12WithoutGrantOnRelease: with grants off no fair release
// carries a grant, and the waiters still take the lock in turn.
func TestReview12WithoutGrantOnRelease(t *testing.T) {
	g := newGrantFixture(t, rlock.WithoutGrantOnRelease())
	carried := g.f.Inject(&relocktest.Rule{SHA1s: []string{lua.FairUnlock.SHA1}, N: -1, Run: true, Keep: true,
		Match: func(args []string) bool { return grantArg(args) != "" }})
	h := rlock.WithOwner(t.Context(), "holder")
	w := rlock.WithOwner(t.Context(), "w")
	for range 3 {
		require.NoError(t, g.l.Lock(h))
		errc := g.start(t, func() error { return g.l.Lock(w) }, fairField(g.c, "w"))
		require.NoError(t, g.l.Unlock(h))
		require.NoError(t, relocktest.Receive(t, errc, 5*time.Second, "w's Lock"))
		require.NoError(t, g.l.Unlock(w))
		g.clean(t)
	}
	assert.Zero(t, carried.Hits(), "releases that carried a grant with grants off")
}

// TestReview12RedissonBesideGrants: Redisson's waiter at the head is
// woken, not passed by the releasing Client's own waiter behind it; and
// Redisson's waiter behind a granted head takes the lock at the head's
// release, its deadline as Redisson's rule has it.
func TestReview12RedissonBesideGrants(t *testing.T) {
	t.Run("redisson at the head", func(t *testing.T) {
		g := newGrantFixture(t)
		j := redissontest.New(t, relocktest.Raw(t))
		jl := j.FairLock(g.name)
		h := rlock.WithOwner(t.Context(), "holder")
		w := rlock.WithOwner(t.Context(), "w")
		require.NoError(t, g.l.Lock(h))
		jerr := redissontest.Async(func() error { return jl.Lock(t.Context(), 1, 0) })
		relocktest.Eventually(t, 5*time.Second, "redisson queued", func() bool {
			return slices.Equal(queue(t, g.raw, g.name), []string{jl.Field(1)})
		})
		redissontest.WaitSleeping(t, j, jl.Channel(1), 1)
		werr := g.start(t, func() error { return g.l.Lock(w) }, jl.Field(1), fairField(g.c, "w"))
		g0 := lockcore.GrantsMade()
		require.NoError(t, g.l.Unlock(h))
		require.NoError(t, relocktest.Receive(t, jerr, 5*time.Second, "Redisson's Lock").Err)
		assert.Equal(t, int64(0), lockcore.GrantsMade()-g0, "a grant past Redisson's head")
		assert.Equal(t, map[string]string{jl.Field(1): "1"}, relocktest.HGetAll(t, g.raw, g.name))
		require.NoError(t, jl.Unlock(t.Context(), 1))
		require.NoError(t, relocktest.Receive(t, werr, 5*time.Second, "w's Lock"))
		require.NoError(t, g.l.Unlock(w))
		g.clean(t)
	})
	t.Run("redisson behind", func(t *testing.T) {
		g := newGrantFixture(t)
		j := redissontest.New(t, relocktest.Raw(t))
		jl := j.FairLock(g.name)
		h := rlock.WithOwner(t.Context(), "holder")
		w := rlock.WithOwner(t.Context(), "w")
		wField := fairField(g.c, "w")
		for try := range grantTries {
			require.NoError(t, g.l.Lock(h))
			werr := g.start(t, func() error { return g.l.Lock(w) }, wField)
			jerr := redissontest.Async(func() error { return jl.Lock(t.Context(), 1, 0) })
			relocktest.Eventually(t, 5*time.Second, "redisson queued", func() bool {
				return slices.Equal(queue(t, g.raw, g.name), []string{wField, jl.Field(1)})
			})
			redissontest.WaitSleeping(t, j, jl.Channel(1), 1)
			before, err := g.raw.Do(t.Context(), g.raw.B().Zscore().Key(jl.Timeouts()).Member(jl.Field(1)).Build()).AsFloat64()
			require.NoError(t, err)
			g0 := lockcore.GrantsMade()
			require.NoError(t, g.l.Unlock(h))
			require.NoError(t, relocktest.Receive(t, werr, 5*time.Second, "w's Lock"))
			granted := lockcore.GrantsMade()-g0 == 1
			after, err := g.raw.Do(t.Context(), g.raw.B().Zscore().Key(jl.Timeouts()).Member(jl.Field(1)).Build()).AsFloat64()
			require.NoError(t, err)
			wait := lockcore.DefaultFairLockWaitTimeout.Milliseconds()
			assert.Equal(t, before-float64(wait), after, "Redisson's deadline after the head took the lock")
			require.NoError(t, g.l.Unlock(w))
			require.NoError(t, relocktest.Receive(t, jerr, 5*time.Second, "Redisson's Lock").Err)
			require.NoError(t, jl.Unlock(t.Context(), 1))
			g.clean(t)
			if granted {
				t.Logf("granted on try %d", try+1)
				return
			}
		}
		t.Skipf("no release granted the lock in %d tries", grantTries)
	})
}

// TestReview12CancelWithGrantReplyLost: the waiter's context ends while
// the release that granted it the lock is on its way, and that release's
// reply is lost (or never comes). The waiter returns at once, not
// acquired; the grant is settled (given back) or ends with its window,
// and the waiter of another Client queued behind takes the lock, alone,
// within the window's bound.
func TestReview12CancelWithGrantReplyLost(t *testing.T) {
	for _, tc := range []struct {
		name string
		rule func(after func([]string)) *relocktest.Rule
	}{
		{"lost", func(after func([]string)) *relocktest.Rule {
			return &relocktest.Rule{Run: true, Reply: relocktest.LostReply(), After: after}
		}},
		{"never", func(after func([]string)) *relocktest.Rule {
			return &relocktest.Rule{Run: true, Hang: true, After: after}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGrantFixture(t)
			h := rlock.WithOwner(t.Context(), "holder")
			wField, xField := fairField(g.c, "w"), fairField(g.other, "x")
			xCtx := rlock.WithOwner(t.Context(), "x")
			for try := range grantTries {
				require.NoError(t, g.l.Lock(h))
				wctx, cancel := context.WithCancel(rlock.WithOwner(t.Context(), "w"))
				werr := g.start(t, func() error { return g.l.Lock(wctx) }, wField)
				var xAt atomic.Pointer[time.Time]
				xerr := g.start(t, func() error {
					err := g.other.GetFairLock(g.name).Lock(xCtx)
					now := time.Now()
					xAt.Store(&now)
					return err
				}, wField, xField)
				var got error
				returned := false
				var wEnded time.Time
				rule := g.grantRule(wField, tc.rule(func([]string) {
					cancel()
					select {
					case got = <-werr:
						returned = true
						wEnded = time.Now()
					case <-time.After(5 * time.Second):
					}
				}))
				uerr := g.l.Unlock(h)
				g.f.Clear()
				if rule.Hits() == 0 {
					require.NoError(t, uerr)
					require.NoError(t, relocktest.Receive(t, werr, 5*time.Second, "w's Lock"))
					require.NoError(t, g.l.Unlock(rlock.WithOwner(t.Context(), "w")))
					cancel()
					require.NoError(t, relocktest.Receive(t, xerr, 5*time.Second, "x's Lock"))
					require.NoError(t, g.other.GetFairLock(g.name).Unlock(xCtx))
					g.clean(t)
					continue
				}
				t.Logf("the releasing Unlock returned %v", uerr)
				require.True(t, returned, "w's Lock did not return at once")
				assert.ErrorIs(t, got, rlock.ErrNotAcquired)
				assert.ErrorIs(t, got, context.Canceled)
				require.NoError(t, relocktest.Receive(t, xerr, 10*time.Second, "x's Lock"))
				waited := xAt.Load().Sub(wEnded)
				t.Logf("x took the lock %v after w's Lock returned", waited)
				assert.Less(t, waited, 3*time.Second+fairlock.RefreshInterval+time.Second, "x waited past the window")
				assert.Equal(t, map[string]string{xField: "1"}, relocktest.HGetAll(t, g.raw, g.name))
				require.NoError(t, g.other.GetFairLock(g.name).Unlock(xCtx))
				g.clean(t)
				t.Logf("granted on try %d", try+1)
				return
			}
			t.Skipf("no release carried a grant in %d tries", grantTries)
		})
	}
}

// TestReview12ClaimedHeadPrunedFirst: the head's heartbeat has passed
// when the release that carries a grant to it runs (the waiter's Client
// claimed its offer, so its refresh waits for the claim). The release
// prunes it and wakes the waiter of another Client behind, which takes
// the lock; the pruned waiter, alive, queues again and takes the lock
// after.
func TestReview12ClaimedHeadPrunedFirst(t *testing.T) {
	g := newGrantFixture(t)
	h := rlock.WithOwner(t.Context(), "holder")
	w := rlock.WithOwner(t.Context(), "w")
	wField, xField := fairField(g.c, "w"), fairField(g.other, "x")
	x := rlock.WithOwner(t.Context(), "x")
	for try := range grantTries {
		require.NoError(t, g.l.Lock(h))
		werr := g.start(t, func() error { return g.l.Lock(w) }, wField)
		xerr := g.start(t, func() error { return g.other.GetFairLock(g.name).Lock(x) }, wField, xField)
		rule := g.grantRule(wField, &relocktest.Rule{Run: true, Keep: true, Before: func([]string) {
			// The head's heartbeat, as if its refresh had not come.
			_ = g.raw.Do(context.WithoutCancel(t.Context()),
				g.raw.B().Zadd().Key(aliveKey(g.name)).ScoreMember().ScoreMember(1, wField).Build()).Error()
		}})
		require.NoError(t, g.l.Unlock(h))
		g.f.Clear()
		if rule.Hits() == 0 {
			require.NoError(t, relocktest.Receive(t, werr, 5*time.Second, "w's Lock"))
			require.NoError(t, g.l.Unlock(w))
			require.NoError(t, relocktest.Receive(t, xerr, 5*time.Second, "x's Lock"))
			require.NoError(t, g.other.GetFairLock(g.name).Unlock(x))
			g.clean(t)
			continue
		}
		require.NoError(t, relocktest.Receive(t, xerr, 5*time.Second, "x's Lock"))
		assert.Equal(t, map[string]string{xField: "1"}, relocktest.HGetAll(t, g.raw, g.name), "x holds the lock alone")
		relocktest.Eventually(t, 5*time.Second, "w queued again", func() bool {
			return slices.Equal(queue(t, g.raw, g.name), []string{wField})
		})
		select {
		case err := <-werr:
			t.Fatalf("w's Lock returned %v while x holds the lock", err)
		default:
		}
		require.NoError(t, g.other.GetFairLock(g.name).Unlock(x))
		require.NoError(t, relocktest.Receive(t, werr, 5*time.Second, "w's Lock"))
		assert.Equal(t, map[string]string{wField: "1"}, relocktest.HGetAll(t, g.raw, g.name))
		require.NoError(t, g.l.Unlock(w))
		g.clean(t)
		t.Logf("pruned at the claim on try %d", try+1)
		return
	}
	t.Skipf("no release carried a grant in %d tries", grantTries)
}
