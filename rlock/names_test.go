package rlock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/rlock"
)

// namePair returns a fresh name without braces and its other form, the
// same name in braces: the two derive the same keys. Both forms' keys are
// deleted when t ends.
func namePair(t *testing.T) (plain, braced string) {
	t.Helper()
	plain = relocktest.Name(t)
	braced = "{" + plain + "}"
	srv := redistest.Shared(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = srv.Do(ctx, "DEL", braced)
	})
	return plain, braced
}

// requireConflict checks that err is a refusal of asked because its other
// form inUse is in use, naming both.
func requireConflict(t *testing.T, err error, asked, inUse, what string) {
	t.Helper()
	require.ErrorIs(t, err, rlock.ErrNameConflict, what)
	assert.Contains(t, err.Error(), `"`+asked+`"`, "%s: the error names the name asked for", what)
	assert.Contains(t, err.Error(), `"`+inUse+`"`, "%s: the error names the form in use", what)
	assert.NotErrorIs(t, err, rlock.ErrNotAcquired, "%s: a refusal, not a wait that ended", what)
}

// TestNameFormsFencedToken (issue 32, item 1c): a hold of "{x}" has
// token 1; "x" derives the same token counter, so an acquisition of "x"
// would take token 2 and the re-entry of "{x}" and its Token would then
// say 2. The acquisition of "x" is refused while "{x}" is held, and the
// hold of "{x}" keeps its token.
func TestNameFormsFencedToken(t *testing.T) {
	c := relocktest.Client(t)
	plain, braced := namePair(t)
	a := rlock.WithOwner(t.Context(), "a")
	b := rlock.WithOwner(t.Context(), "b")
	held := c.GetFencedLock(braced)
	tok, err := held.LockAndGetToken(a)
	require.NoError(t, err)
	_, ok, err := c.GetFencedLock(plain).TryLockAndGetToken(b, 0, 0)
	assert.False(t, ok, "the other form taken while %q is held", braced)
	requireConflict(t, err, plain, braced, "fenced acquisition of the other form")
	again, err := held.LockAndGetToken(a)
	require.NoError(t, err)
	assert.Equal(t, tok, again, "the re-entry's token")
	cur, err := held.Token(a)
	require.NoError(t, err)
	assert.Equal(t, tok, cur, "Token")
	require.NoError(t, held.Unlock(a))
	require.NoError(t, held.Unlock(a))

	// Free, the other form is taken, and its tokens go on from the shared
	// counter: still new ones.
	tok2, err := c.GetFencedLock(plain).LockAndGetToken(b)
	require.NoError(t, err)
	assert.Greater(t, tok2, tok, "the other form's token once the first is free")
	_, ok, err = held.TryLockAndGetToken(a, 0, 0)
	assert.False(t, ok)
	requireConflict(t, err, braced, plain, "the first form while the other is held")
	require.NoError(t, c.GetFencedLock(plain).Unlock(b))
}

// TestNameFormsWaitersKeepTheirWakeUps (issue 32, item 1b): "a" and "{a}"
// share their unlock channel, so a Client waiting on both had one
// release's wake-up taken by the waiter of the other form, which found
// its own lock held and slept on: the waiter of the released form got the
// lock only at its lease's end. Neither form can now be taken while the
// other is held: an acquisition of it, waiting or not, ends at once with
// ErrNameConflict, and a release wakes the waiters of the form released.
func TestNameFormsWaitersKeepTheirWakeUps(t *testing.T) {
	c := relocktest.Client(t)
	holders := relocktest.Client(t)
	raw := relocktest.Raw(t)
	plain, braced := namePair(t)
	h := rlock.WithOwner(t.Context(), "h")
	w := rlock.WithOwner(t.Context(), "w")
	require.NoError(t, holders.GetLock(braced).Lock(h))
	waiter := lockAsync(c.GetLock(braced), w)
	relocktest.Eventually(t, 5*time.Second, "the waiter of the braced form to subscribe", func() bool {
		return numsub(raw, layout.Channel(braced)) == 1
	})

	// A holder of the other form is refused at once, and so is a waiter.
	ok, err := holders.GetLock(plain).TryLock(rlock.WithOwner(t.Context(), "h2"), 0, 0)
	assert.False(t, ok, "the other form taken while the first is held")
	requireConflict(t, err, plain, braced, "TryLock of the other form")
	ctx, cancel := context.WithTimeout(rlock.WithOwner(t.Context(), "w2"), 5*time.Second)
	defer cancel()
	start := time.Now()
	err = c.GetLock(plain).Lock(ctx)
	requireConflict(t, err, plain, braced, "Lock of the other form")
	assert.Less(t, time.Since(start), 2*time.Second, "a refused Lock ends at once, it does not wait")

	// The release wakes the waiter of the form released.
	start = time.Now()
	require.NoError(t, holders.GetLock(braced).Unlock(h))
	require.NoError(t, relocktest.Receive(t, waiter, 5*time.Second, "the waiter of the braced form after its release"))
	assert.Less(t, time.Since(start), 2*time.Second, "the waiter's take-over after the release: well under the 30s lease")
	require.NoError(t, c.GetLock(braced).Unlock(w))
}

// TestNameFormsAcrossKinds: a name and its other form are one key space,
// whatever the kinds: while a lock holds "a", a semaphore, a latch, a
// read-write lock, a fair lock, a counting semaphore and a rate limiter
// named "{a}" are refused, and the semaphore's calls that would reclaim
// the shared permits too.
func TestNameFormsAcrossKinds(t *testing.T) {
	c := relocktest.Client(t)
	plain, braced := namePair(t)
	a := rlock.WithOwner(t.Context(), "a")
	require.NoError(t, c.GetLock(plain).Lock(a))
	defer c.GetLock(plain).Unlock(a)

	_, err := c.GetSemaphore(braced).TrySetPermits(t.Context(), 1)
	requireConflict(t, err, braced, plain, "semaphore TrySetPermits")
	requireConflict(t, c.GetSemaphore(braced).AddPermits(t.Context(), 1), braced, plain, "semaphore AddPermits")
	_, err = c.GetSemaphore(braced).AvailablePermits(t.Context())
	requireConflict(t, err, braced, plain, "semaphore AvailablePermits")
	_, _, err = c.GetSemaphore(braced).TryAcquire(t.Context(), time.Second, 0)
	requireConflict(t, err, braced, plain, "semaphore TryAcquire")
	_, err = c.GetCountDownLatch(braced).TrySetCount(t.Context(), 1)
	requireConflict(t, err, braced, plain, "latch TrySetCount")
	_, err = c.GetReadWriteLock(braced).ReadLock().TryLock(t.Context(), time.Second, 0)
	requireConflict(t, err, braced, plain, "read lock")
	_, err = c.GetReadWriteLock(braced).WriteLock().TryLock(t.Context(), time.Second, 0)
	requireConflict(t, err, braced, plain, "write lock")
	_, err = c.GetFairLock(braced).TryLock(t.Context(), time.Second, 0)
	requireConflict(t, err, braced, plain, "fair lock")
	_, err = c.GetCountingSemaphore(braced).TrySetPermits(t.Context(), 1)
	requireConflict(t, err, braced, plain, "counting semaphore TrySetPermits")
	requireConflict(t, c.GetCountingSemaphore(braced).Release(t.Context(), 1), braced, plain, "counting semaphore Release")
	_, err = c.GetCountingSemaphore(braced).TryAcquire(t.Context(), 1, time.Second)
	requireConflict(t, err, braced, plain, "counting semaphore TryAcquire")
	_, err = c.GetRateLimiter(braced).TrySetRate(t.Context(), 1, time.Second)
	requireConflict(t, err, braced, plain, "rate limiter TrySetRate")
	_, err = c.GetRateLimiter(braced).TryAcquire(t.Context(), 1, time.Second)
	requireConflict(t, err, braced, plain, "rate limiter TryAcquire")
	exists, err := relocktest.Raw(t).Do(t.Context(), relocktest.Raw(t).B().Exists().Key(braced).Build()).AsInt64()
	require.NoError(t, err)
	assert.Zero(t, exists, "a refused call wrote the braced form's key")
}

// TestReadHoldThenPlainLock (issue 32, item 7): owner a holds the read
// side of k; a plain Lock of k by a would re-enter a's read field, and
// owner b could then take the read side while a held the "exclusive"
// lock. A plain, fenced or fair acquisition that finds a read-write
// lock's hash is refused with ErrWrongKind, naming the kind found, and
// changes nothing; a waiting one ends at once.
func TestReadHoldThenPlainLock(t *testing.T) {
	c := relocktest.Client(t)
	other := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	a := rlock.WithOwner(t.Context(), "a")
	b := rlock.WithOwner(t.Context(), "b")
	require.NoError(t, c.GetReadWriteLock(name).ReadLock().Lock(a))
	before := relocktest.HGetAll(t, raw, name)

	wrongKind := func(err error, what string) {
		t.Helper()
		require.ErrorIs(t, err, rlock.ErrWrongKind, what)
		assert.Contains(t, err.Error(), "read-write lock", "%s: the error names the kind found", what)
		assert.Contains(t, err.Error(), `"`+name+`"`, "%s: the error names the lock", what)
	}
	ok, err := c.GetLock(name).TryLock(a, 0, 0) // the same owner (a record of its own: see TestRefusedKindThenHoldRenews)
	assert.False(t, ok)
	wrongKind(err, "plain TryLock by the reader")
	ok, err = other.GetLock(name).TryLock(b, time.Second, 0)
	assert.False(t, ok)
	wrongKind(err, "plain TryLock by another owner")
	_, ok, err = other.GetFencedLock(name).TryLockAndGetToken(b, 0, 0)
	assert.False(t, ok)
	wrongKind(err, "fenced TryLock")
	ok, err = other.GetFairLock(name).TryLock(b, 0, 0)
	assert.False(t, ok)
	wrongKind(err, "fair TryLock")
	ctx, cancel := context.WithTimeout(b, 5*time.Second)
	defer cancel()
	start := time.Now()
	wrongKind(other.GetLock(name).Lock(ctx), "plain Lock")
	assert.Less(t, time.Since(start), 2*time.Second, "a refused Lock ends at once, it does not wait")
	assert.Equal(t, before, relocktest.HGetAll(t, raw, name), "the refusals changed the hash")

	// The read side is still a read lock: shared, and released as one.
	require.NoError(t, other.GetReadWriteLock(name).ReadLock().Lock(b))
	require.NoError(t, other.GetReadWriteLock(name).ReadLock().Unlock(b))
	require.NoError(t, c.GetReadWriteLock(name).ReadLock().Unlock(a))
	ok, err = c.GetLock(name).TryLock(a, 0, 0)
	requireTry(t, true, ok, err, "the plain lock once the read hold ended")
	require.NoError(t, c.GetLock(name).Unlock(a))
}

// TestPlainHoldThenReadWrite (issue 32, item 7): the other way round, a
// read-write lock that finds a lock's hash without "mode" (plain, fenced
// or fair) is refused, on both sides, for the holder's own owner (a
// re-entry of its hold record) and for others.
func TestPlainHoldThenReadWrite(t *testing.T) {
	c := relocktest.Client(t)
	other := relocktest.Client(t)
	name := relocktest.Name(t)
	a := rlock.WithOwner(t.Context(), "a")
	b := rlock.WithOwner(t.Context(), "b")
	require.NoError(t, c.GetLock(name).Lock(a))
	defer c.GetLock(name).Unlock(a)
	rw := other.GetReadWriteLock(name)
	for what, try := range map[string]func() (bool, error){
		"read by the holder":   func() (bool, error) { return c.GetReadWriteLock(name).ReadLock().TryLock(a, 0, 0) },
		"write by the holder":  func() (bool, error) { return c.GetReadWriteLock(name).WriteLock().TryLock(a, 0, 0) },
		"read by another":      func() (bool, error) { return rw.ReadLock().TryLock(b, time.Second, 0) },
		"write by another":     func() (bool, error) { return rw.WriteLock().TryLock(b, time.Second, 0) },
		"read without a owner": func() (bool, error) { return rw.ReadLock().TryLock(t.Context(), 0, 0) },
	} {
		ok, err := try()
		assert.False(t, ok, what)
		require.ErrorIs(t, err, rlock.ErrWrongKind, what)
		assert.Contains(t, err.Error(), "plain, fenced or fair lock", "%s: the error names the kind found", what)
	}
}

// TestPlainLockBesideFairQueue (issue 32, item 7): a plain or fenced
// acquisition of a name with a fair lock's queue of waiters is refused
// (it would take the lock past the queue, and its release would not wake
// the queue's head); the fair lock's waiter still gets the lock.
func TestPlainLockBesideFairQueue(t *testing.T) {
	c := relocktest.Client(t)
	other := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	a := rlock.WithOwner(t.Context(), "a")
	b := rlock.WithOwner(t.Context(), "b")
	fair := c.GetFairLock(name)
	require.NoError(t, fair.Lock(a))
	waiter := make(chan error, 1)
	go func() { waiter <- other.GetFairLock(name).Lock(b) }()
	relocktest.Eventually(t, 5*time.Second, "the fair waiter to queue", func() bool {
		n, err := raw.Do(t.Context(), raw.B().Llen().Key(layout.Queue(name)).Build()).AsInt64()
		return err == nil && n == 1
	})
	for what, try := range map[string]func() (bool, error){
		"plain": func() (bool, error) { return c.GetLock(name).TryLock(rlock.WithOwner(t.Context(), "p"), 0, 0) },
		"fenced": func() (bool, error) {
			_, ok, err := c.GetFencedLock(name).TryLockAndGetToken(rlock.WithOwner(t.Context(), "p"), 0, 0)
			return ok, err
		},
	} {
		ok, err := try()
		assert.False(t, ok, what)
		require.ErrorIs(t, err, rlock.ErrWrongKind, what)
		assert.Contains(t, err.Error(), "fair lock's queue", "%s: the error names the kind found", what)
	}
	require.NoError(t, fair.Unlock(a))
	require.NoError(t, relocktest.Receive(t, waiter, 5*time.Second, "the fair waiter after the release"))
	require.NoError(t, other.GetFairLock(name).Unlock(b))
}

// TestNameRefusalsAreTyped: the two refusals are distinct sentinels of
// package relock, neither a wait that ended.
func TestNameRefusalsAreTyped(t *testing.T) {
	assert.False(t, errors.Is(rlock.ErrNameConflict, rlock.ErrWrongKind))
	assert.Equal(t, "relock: name conflict", rlock.ErrNameConflict.Error())
	assert.Equal(t, "relock: wrong kind", rlock.ErrWrongKind.Error())
}

// renewalTap returns a Client on the shared server, with a watchdog
// lease of 300ms, that sends each renewal's script and reply (1: the hold
// was there) on the channel it returns (a NOSCRIPT reply, to a script
// that did not run and is sent again, is not).
func renewalTap(t *testing.T) (*rlock.Client, <-chan string) {
	t.Helper()
	renewals := make(chan string, 64)
	names := map[string]string{lua.LockRenew.SHA1: "lock_renew", lua.RWReadRenew.SHA1: "rw_read_renew",
		lua.RWWriteRenew.SHA1: "rw_write_renew"}
	tap := relocktest.NewTap(redistest.Shared(t).Client(t), func(args []string) func(rueidis.RedisResult) {
		script, ok := names[relocktest.ScriptSHA1(args)]
		if !ok {
			return nil
		}
		return func(res rueidis.RedisResult) {
			if re, ok := rueidis.IsRedisErr(res.Error()); ok && re.IsNoScript() {
				return // not run: sent again with its body
			}
			n, err := res.AsInt64()
			select {
			case renewals <- fmt.Sprintf("%s %d %v", script, n, err):
			default:
			}
		}
	})
	c, err := rlock.New(tap, rlock.WithWatchdogTimeout(300*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c, renewals
}

// firstRenewal waits for the next renewal of renewals.
func firstRenewal(t *testing.T, renewals <-chan string) string {
	t.Helper()
	select {
	case r := <-renewals:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no renewal within 10s")
		return ""
	}
}

// TestRefusedKindThenHoldRenews: a Client keeps one record per lock,
// role and owner. A read lock and a plain lock of one name have the same
// field ("<clientID>:<owner>"), and their records were one: a read
// TryLock refused on a plain lock's hash (ErrWrongKind) left a record of
// the read lock's kind, which the owner's next plain Lock took over, so
// the hold was renewed with the read lock's renewal, which found no read
// lock and reported the hold lost while Redis held it (and the other way
// round, a read hold renewed as a plain lock, its lease keys left to
// expire). Each kind's hold is renewed with its own script.
func TestRefusedKindThenHoldRenews(t *testing.T) {
	other := relocktest.Client(t)
	a := rlock.WithOwner(t.Context(), "a")
	b := rlock.WithOwner(t.Context(), "b")

	t.Run("read refused, then plain", func(t *testing.T) {
		c, renewals := renewalTap(t)
		name := relocktest.Name(t)
		require.NoError(t, other.GetLock(name).Lock(b))
		ok, err := c.GetReadWriteLock(name).ReadLock().TryLock(a, 0, 0)
		assert.False(t, ok)
		require.ErrorIs(t, err, rlock.ErrWrongKind)
		require.NoError(t, other.GetLock(name).Unlock(b))
		l := c.GetLock(name)
		require.NoError(t, l.Lock(a))
		assert.Equal(t, "lock_renew 1 <nil>", firstRenewal(t, renewals), "the plain hold's renewal")
		require.NoError(t, l.Unlock(a))
	})
	t.Run("plain refused, then read", func(t *testing.T) {
		c, renewals := renewalTap(t)
		name := relocktest.Name(t)
		require.NoError(t, other.GetReadWriteLock(name).ReadLock().Lock(b))
		ok, err := c.GetLock(name).TryLock(a, 0, 0)
		assert.False(t, ok)
		require.ErrorIs(t, err, rlock.ErrWrongKind)
		require.NoError(t, other.GetReadWriteLock(name).ReadLock().Unlock(b))
		r := c.GetReadWriteLock(name).ReadLock()
		require.NoError(t, r.Lock(a))
		assert.Equal(t, "rw_read_renew 1 <nil>", firstRenewal(t, renewals), "the read hold's renewal")
		require.NoError(t, r.Unlock(a))
	})
}
