package rlock_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/internal/redissontest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/observe"
	"github.com/relock-go/relock/rlock"
)

// The spin lock (Redisson's RSpinLock): the plain lock's hash, waiting on
// a backoff without pub/sub.

// TestSpinLockExcludes: three Clients, two goroutines each, take one spin
// lock in turn; never two inside at once.
func TestSpinLockExcludes(t *testing.T) {
	name := relocktest.Name(t)
	var parties []redissontest.Party
	for i := range 3 {
		c := relocktest.Client(t)
		for g := range 2 {
			owner := string(rune('a'+i)) + string(rune('0'+g))
			l := c.GetSpinLock(name)
			parties = append(parties, redissontest.Party{Side: redissontest.SideRelock, Name: owner,
				Lock:   func(ctx context.Context) error { return l.Lock(rlock.WithOwner(ctx, owner)) },
				Unlock: func(ctx context.Context) error { return l.Unlock(rlock.WithOwner(ctx, owner)) }})
		}
	}
	sec := &redissontest.Section{Limit: 1}
	redissontest.Contend(t, sec, parties, 10, time.Millisecond)
}

// TestSpinLockReentry: an owner re-enters its spin lock; the hash is the
// plain lock's (one field <clientID>:<owner> -> count); another owner is
// kept out until the last level goes.
func TestSpinLockReentry(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	a, b := rlock.WithOwner(t.Context(), "a"), rlock.WithOwner(t.Context(), "b")
	l := c.GetSpinLock(name)
	assert.Equal(t, name, l.Name())

	require.NoError(t, l.Lock(a))
	require.NoError(t, l.Lock(a), "re-entry")
	n, err := l.HoldCount(a)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.Equal(t, map[string]string{layout.Field(c.ID(), "a"): "2"}, relocktest.HGetAll(t, raw, name), "the plain lock's hash")
	held, err := l.IsHeldByOwner(a)
	require.NoError(t, err)
	assert.True(t, held)

	ok, err := l.TryLock(b, 0, 0)
	require.NoError(t, err)
	assert.False(t, ok, "another owner beside two levels")
	require.NoError(t, l.Unlock(a))
	ok, err = l.TryLock(b, 0, 0)
	require.NoError(t, err)
	assert.False(t, ok, "another owner beside one level")
	require.NoError(t, l.Unlock(a))
	assert.ErrorIs(t, l.Unlock(a), rlock.ErrNotHeld, "a third unlock")
	ok, err = l.TryLock(b, 0, 0)
	require.NoError(t, err)
	assert.True(t, ok, "another owner once the lock is free")
	forced, err := l.ForceUnlock(t.Context())
	require.NoError(t, err)
	assert.True(t, forced)
	locked, err := l.IsLocked(t.Context())
	require.NoError(t, err)
	assert.False(t, locked)
}

// TestSpinLockLease: a hold on a fixed lease ends with it, and a spinner
// takes the lock at the lease's end, not a backoff step later.
func TestSpinLockLease(t *testing.T) {
	c := relocktest.Client(t)
	name := relocktest.Name(t)
	a, b := rlock.WithOwner(t.Context(), "a"), rlock.WithOwner(t.Context(), "b")
	l := c.GetSpinLock(name)
	const lease = 300 * time.Millisecond
	require.NoError(t, l.LockLease(a, lease))
	start := time.Now()
	left, err := l.RemainingLease(a)
	require.NoError(t, err)
	assert.InDelta(t, lease.Seconds(), left.Seconds(), 0.1)
	ok, err := l.TryLock(b, 5*time.Second, 0)
	require.NoError(t, err)
	require.True(t, ok)
	took := time.Since(start)
	assert.GreaterOrEqual(t, took, lease-50*time.Millisecond, "taken before the lease ended")
	// The spinner's last sleep ends at the holder's lease end (the bound
	// the attempt returned), not after a whole backoff step past it.
	assert.Less(t, took, lease+lockcore.SpinMax, "taken late after the lease ended")
	require.NoError(t, l.Unlock(b))
}

// TestSpinLockWatchdog: a hold without a lease is renewed past the
// watchdog timeout, and ends when unlocked.
func TestSpinLockWatchdog(t *testing.T) {
	const timeout = 150 * time.Millisecond
	c := relocktest.Client(t, rlock.WithWatchdogTimeout(timeout))
	name := relocktest.Name(t)
	a := rlock.WithOwner(t.Context(), "a")
	l := c.GetSpinLock(name)
	require.NoError(t, l.Lock(a))
	done := l.Done(a)
	deadline := time.Now().Add(4 * timeout)
	relocktest.Eventually(t, 5*time.Second, "four watchdog timeouts to pass", func() bool { return time.Now().After(deadline) })
	held, err := l.IsHeldByOwner(a)
	require.NoError(t, err)
	assert.True(t, held, "held past four watchdog timeouts")
	left, err := l.RemainingLease(a)
	require.NoError(t, err)
	assert.Greater(t, left, timeout/3, "the lease was renewed")
	require.NoError(t, l.Unlock(a))
	relocktest.Receive(t, done, 5*time.Second, "Done to close at unlock")
}

// TestSpinLockInvalidArguments: bad input is refused with
// ErrInvalidArgument and writes nothing.
func TestSpinLockInvalidArguments(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	good := relocktest.Name(t)
	ctx := t.Context()
	before := relocktest.DBSize(t, raw)
	for _, tc := range []struct {
		desc string
		call func() error
	}{
		{"empty name", func() error { return c.GetSpinLock("").Lock(ctx) }},
		{"control character in name", func() error { return c.GetSpinLock("a\nb").Lock(ctx) }},
		{"oversized name", func() error { return c.GetSpinLock(strings.Repeat("x", 1025)).Lock(ctx) }},
		{"negative wait", func() error { _, err := c.GetSpinLock(good).TryLock(ctx, -time.Second, 0); return err }},
		{"negative lease", func() error { _, err := c.GetSpinLock(good).TryLock(ctx, 0, -time.Second); return err }},
		{"LockLease zero", func() error { return c.GetSpinLock(good).LockLease(ctx, 0) }},
		{"empty owner", func() error { return c.GetSpinLock(good).Lock(rlock.WithOwner(ctx, "")) }},
		{"nil Do function", func() error { return c.GetSpinLock(good).Do(ctx, nil) }},
	} {
		assert.ErrorIs(t, tc.call(), rlock.ErrInvalidArgument, tc.desc)
	}
	assert.Equal(t, before, relocktest.DBSize(t, raw), "DBSIZE after invalid calls")
}

// counting is a rueidis client that counts the acquire scripts sent for
// one key and the subscriptions opened.
type counting struct {
	rueidis.Client
	key      string
	attempts atomic.Int64
	subs     atomic.Int64
}

func (c *counting) count(cmd rueidis.Completed) {
	args := cmd.Commands()
	if len(args) > 3 && (args[0] == "EVALSHA" || args[0] == "EVAL") && args[3] == c.key {
		c.attempts.Add(1)
	}
}

func (c *counting) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.count(cmd)
	return c.Client.Do(ctx, cmd)
}

func (c *counting) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	for _, cmd := range cmds {
		c.count(cmd)
	}
	return c.Client.DoMulti(ctx, cmds...)
}

func (c *counting) Receive(ctx context.Context, cmd rueidis.Completed, fn func(rueidis.PubSubMessage)) error {
	c.subs.Add(1)
	return c.Client.Receive(ctx, cmd, fn)
}

func (c *counting) Dedicate() (rueidis.DedicatedClient, func()) {
	c.subs.Add(1)
	return c.Client.Dedicate()
}

// TestSpinLockBackoffWithoutPubSub: a spinner beside a held lock makes
// the attempts of its backoff (about 8 in the first quarter second, then
// one every 128ms: never a hammering of Redis), and never subscribes.
func TestSpinLockBackoffWithoutPubSub(t *testing.T) {
	holder := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	cnt := &counting{Client: relocktest.Raw(t), key: name}
	c, err := rlock.New(cnt)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, holder.GetLock(name).Lock(rlock.WithOwner(t.Context(), "h")))

	const wait = time.Second
	start := time.Now()
	got := redissontest.Async(func() error {
		ok, err := c.GetSpinLock(name).TryLock(rlock.WithOwner(t.Context(), "s"), wait, 0)
		if err == nil && ok {
			t.Error("the spinner took a held lock")
		}
		return err
	})
	relocktest.Eventually(t, 5*time.Second, "the spinner to make 4 attempts", func() bool { return cnt.attempts.Load() >= 4 })
	assert.Zero(t, relocktest.Subscribers(raw, layout.Channel(name)), "subscribers of the lock's channel while spinning")
	require.NoError(t, relocktest.Receive(t, got, 5*time.Second, "the spinner's TryLock to end").Err)
	took := time.Since(start)
	n := cnt.attempts.Load()
	// Sleeps of 1, 2, 4-5, 8-11, ... ms up to 128ms: 8 attempts in the
	// first ~255ms, then one per 128ms (up to 6 more in a second).
	most := 9 + int64((took-255*time.Millisecond)/lockcore.SpinMax) + 1
	t.Logf("%d attempts in %v", n, took)
	assert.GreaterOrEqual(t, n, int64(8), "attempts in a %v wait", wait)
	assert.LessOrEqual(t, n, most, "attempts in %v: more than the backoff makes", took)
	assert.Zero(t, cnt.subs.Load(), "subscriptions the spinner's Client opened")
}

// TestSpinLockReleasePublishes: relock's spin lock, unlike Redisson's,
// publishes when its release frees the lock, so a plain lock's waiter on
// the name goes on at once (within the hand-off bound, far under the 1s
// a quiet release would cost it).
func TestSpinLockReleasePublishes(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	msgs := redissontest.Listen(t, raw, layout.Channel(name))
	s := rlock.WithOwner(t.Context(), "s")
	require.NoError(t, c.GetSpinLock(name).Lock(s))
	a := rlock.WithOwner(t.Context(), "a")
	got := redissontest.Async(func() error { return c.GetLock(name).Lock(a) })
	redissontest.WaitSubscribers(t, raw, layout.Channel(name), 2)
	redissontest.Pending(t, got, "the plain waiter beside a spin hold")
	start := time.Now()
	require.NoError(t, c.GetSpinLock(name).Unlock(s))
	redissontest.Message(t, msgs, layout.UnlockMessage, "the spin lock's release")
	redissontest.Handoff(t, got, start, "the plain waiter")
	require.NoError(t, c.GetLock(name).Unlock(a))
}

// quietBound is how soon a waiter of a Lock or a FencedLock goes on after
// a release that publishes nothing: it looks again within 2s
// (QuietHolderCap plus a random part of it), whatever the holder's lease.
const quietBound = 2 * lockcore.QuietHolderCap

// TestPlainWaiterBesideQuietSpinRelease: a Redisson spin lock releases
// without publishing; relock's Lock and FencedLock waiters on the name,
// asleep on the holder's 30s lease, go on within 2s.
func TestPlainWaiterBesideQuietSpinRelease(t *testing.T) {
	for _, kind := range []string{"lock", "fenced"} {
		t.Run(kind, func(t *testing.T) {
			c := relocktest.Client(t)
			raw := relocktest.Raw(t)
			j := redissontest.New(t, relocktest.Raw(t))
			name := relocktest.Name(t)
			msgs := redissontest.Listen(t, raw, layout.Channel(name))
			js := j.SpinLock(name)
			require.NoError(t, js.Lock(t.Context(), 1, 0))
			a := rlock.WithOwner(t.Context(), "a")
			var l interface {
				Lock(context.Context) error
				Unlock(context.Context) error
			} = c.GetLock(name)
			if kind == "fenced" {
				l = c.GetFencedLock(name)
			}
			got := redissontest.Async(func() error { return l.Lock(a) })
			redissontest.WaitSubscribers(t, raw, layout.Channel(name), 2)
			redissontest.Pending(t, got, "relock's waiter beside a Redisson spin hold")
			start := time.Now()
			require.NoError(t, js.Unlock(t.Context(), 1))
			r := relocktest.Receive(t, got, 10*time.Second, "relock's waiter to go on after a quiet release")
			require.NoError(t, r.Err)
			assert.LessOrEqual(t, r.At.Sub(start), quietBound+250*time.Millisecond,
				"how long after a quiet release relock's waiter went on")
			redissontest.NoMessage(t, msgs, "Redisson's spin unlock")
			require.NoError(t, l.Unlock(a))
		})
	}
}

// TestInteropSpinLock: Redisson's spin lock and relock's exclude each
// other, re-entered or not, and each side's spinner takes the lock within
// a backoff step of the other side's release (neither uses pub/sub).
func TestInteropSpinLock(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	j := redissontest.New(t, relocktest.Raw(t))
	name := relocktest.Name(t)
	ctx := t.Context()
	a := rlock.WithOwner(ctx, "a")
	l, js := c.GetSpinLock(name), j.SpinLock(name)

	require.NoError(t, js.Lock(ctx, 1, 0))
	require.NoError(t, js.Lock(ctx, 1, 0), "Redisson re-entry")
	ok, err := l.TryLock(a, 0, 0)
	require.NoError(t, err)
	assert.False(t, ok, "relock spin TryLock beside a Redisson spin hold")
	left, err := l.RemainingLease(a)
	require.NoError(t, err)
	assert.InDelta(t, redissontest.DefaultWatchdogTimeout.Seconds(), left.Seconds(), 2, "relock sees Redisson's watchdog lease")
	got := redissontest.Async(func() error { return l.Lock(a) })
	require.NoError(t, js.Unlock(ctx, 1))
	redissontest.Pending(t, got, "relock's spinner beside one Redisson level")
	start := time.Now()
	require.NoError(t, js.Unlock(ctx, 1))
	redissontest.Handoff(t, got, start, "relock's spinner")
	assert.Zero(t, relocktest.Subscribers(raw, layout.Channel(name)), "subscribers of the lock's channel")

	require.NoError(t, l.Lock(a), "relock re-entry")
	took, ttl, err := js.Attempt(ctx, 2, 0)
	require.NoError(t, err)
	assert.False(t, took, "Redisson spin attempt beside a relock spin hold")
	assert.InDelta(t, lockcore.DefaultWatchdogTimeout.Milliseconds(), ttl, 2000, "Redisson sees relock's lease as the TTL")
	assert.ErrorIs(t, js.Unlock(ctx, 2), redissontest.ErrIllegalMonitorState, "Redisson unlock of relock's hold")
	jgot := redissontest.Async(func() error { return js.Lock(ctx, 2, 0) })
	require.NoError(t, l.Unlock(a))
	redissontest.Pending(t, jgot, "Redisson's spinner beside one relock level")
	start = time.Now()
	require.NoError(t, l.Unlock(a))
	redissontest.Handoff(t, jgot, start, "Redisson's spinner")
	assert.ErrorIs(t, l.Unlock(a), rlock.ErrNotHeld, "relock unlock of Redisson's hold")
	require.NoError(t, js.Unlock(ctx, 2))
	locked, err := l.IsLocked(ctx)
	require.NoError(t, err)
	assert.False(t, locked)
}

// TestInteropSpinLockBesidePlainLock: Redisson's plain RLock and relock's
// spin lock exclude each other; relock's spin release wakes Redisson's
// plain waiter at once (it publishes), and relock's spinner takes the lock
// within a backoff step of Redisson's plain release.
func TestInteropSpinLockBesidePlainLock(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	j := redissontest.New(t, relocktest.Raw(t))
	name := relocktest.Name(t)
	ctx := t.Context()
	a := rlock.WithOwner(ctx, "a")
	l, jl := c.GetSpinLock(name), j.Lock(name)

	require.NoError(t, jl.Lock(ctx, 1, 0))
	ok, err := l.TryLock(a, 0, 0)
	require.NoError(t, err)
	assert.False(t, ok, "relock spin TryLock beside a Redisson RLock hold")
	got := redissontest.Async(func() error { return l.Lock(a) })
	start := time.Now()
	require.NoError(t, jl.Unlock(ctx, 1))
	redissontest.Handoff(t, got, start, "relock's spinner")

	took, _, err := jl.Attempt(ctx, 2, 0)
	require.NoError(t, err)
	assert.False(t, took, "Redisson RLock attempt beside a relock spin hold")
	jgot := redissontest.Async(func() error { return jl.Lock(ctx, 2, 0) })
	redissontest.WaitSubscribers(t, raw, layout.Channel(name), 1)
	redissontest.WaitSleeping(t, j, layout.Channel(name), 1)
	redissontest.Pending(t, jgot, "Redisson's RLock waiter beside a relock spin hold")
	start = time.Now()
	require.NoError(t, l.Unlock(a))
	redissontest.Handoff(t, jgot, start, "Redisson's RLock waiter")
	require.NoError(t, jl.Unlock(ctx, 2))
}

// TestInteropSpinLockContention: relock's spin lock, Redisson's spin lock
// and Redisson's RLock, on one name, never overlap. Redisson's spin lock
// takes a fixed lease of 1s: its release publishes nothing, so Redisson's
// RLock waiter that it passes over sleeps until the lease it last read
// ends (Redisson's own limit, not relock's); on the watchdog's 30s, one
// such sleep near the end, when no relock release wakes it, outlasted
// the test's 20s.
func TestInteropSpinLockContention(t *testing.T) {
	c := relocktest.Client(t)
	j := redissontest.New(t, relocktest.Raw(t))
	name := relocktest.Name(t)
	var parties []redissontest.Party
	for i := range 2 {
		owner := string(rune('a' + i))
		l := c.GetSpinLock(name)
		parties = append(parties, redissontest.Party{Side: redissontest.SideRelock, Name: "relock spin " + owner,
			Lock:   func(ctx context.Context) error { return l.Lock(rlock.WithOwner(ctx, owner)) },
			Unlock: func(ctx context.Context) error { return l.Unlock(rlock.WithOwner(ctx, owner)) }})
	}
	js, jl := j.SpinLock(name), j.Lock(name)
	parties = append(parties,
		redissontest.Party{Side: redissontest.SideRedisson, Name: "redisson spin",
			Lock:   func(ctx context.Context) error { return js.Lock(ctx, 1, time.Second) },
			Unlock: func(ctx context.Context) error { return js.Unlock(ctx, 1) }},
		redissontest.Party{Side: redissontest.SideRedisson, Name: "redisson lock",
			Lock:   func(ctx context.Context) error { return jl.Lock(ctx, 2, 0) },
			Unlock: func(ctx context.Context) error { return jl.Unlock(ctx, 2) }})
	sec := &redissontest.Section{Limit: 1}
	redissontest.Contend(t, sec, parties, 8, time.Millisecond)
}

// TestObserverSpinKind: a spin lock's events name its kind, and its
// hold is a hold.
func TestObserverSpinKind(t *testing.T) {
	rec := &recorder{}
	c := relocktest.Client(t, rlock.WithObserver(rec))
	a := rlock.WithOwner(t.Context(), "a")
	l := c.GetSpinLock(relocktest.Name(t))
	require.NoError(t, l.Lock(a))
	require.NoError(t, l.Unlock(a))
	k := observe.KindSpin
	wantEvents(t, rec.take(t),
		"AcquireStart "+k, "HoldStart "+k, "AcquireEnd "+k+" acquired",
		"ReleaseStart "+k, "HoldEnd "+k+" released", "ReleaseEnd "+k+" released")
}
