package rwlock_test

import (
	"context"
	"fmt"
	"sync"
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
	"github.com/relock-go/relock/rwlock"
)

// handoff bounds a wake-up that a notification brings: far under the
// 30s lease a waiter would otherwise sleep for.
const handoff = 5 * time.Second

func pttl(t *testing.T, raw rueidis.Client, key string) int64 {
	t.Helper()
	n, err := raw.Do(t.Context(), raw.B().Pttl().Key(key).Build()).AsInt64()
	require.NoError(t, err, "PTTL %s", key)
	return n
}

// pttlNow is pttl for conditions of relocktest.Eventually, which must not
// fail the test: -3 when the server does not answer.
func pttlNow(raw rueidis.Client, key string) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	n, err := raw.Do(ctx, raw.B().Pttl().Key(key).Build()).AsInt64()
	if err != nil {
		return -3
	}
	return n
}

func exists(t *testing.T, raw rueidis.Client, key string) bool {
	t.Helper()
	n, err := raw.Do(t.Context(), raw.B().Exists().Key(key).Build()).AsInt64()
	require.NoError(t, err, "EXISTS %s", key)
	return n == 1
}

// keysOf returns the keys whose name contains name.
func keysOf(t *testing.T, raw rueidis.Client, name string) []string {
	t.Helper()
	keys, err := raw.Do(t.Context(), raw.B().Keys().Pattern("*"+name+"*").Build()).AsStrSlice()
	require.NoError(t, err)
	return keys
}

// wantHash checks the lock hash against want (nil: no hash).
func wantHash(t *testing.T, raw rueidis.Client, name string, want map[string]string) {
	t.Helper()
	if want == nil {
		want = map[string]string{}
	}
	require.Equal(t, want, relocktest.HGetAll(t, raw, name), "hash %s", name)
}

// wait returns the result of l.Lock(ctx) run on a goroutine, as a channel.
func lockAsync(ctx context.Context, l *rwlock.Lock) <-chan error {
	got := make(chan error, 1)
	go func() { got <- l.Lock(ctx) }()
	return got
}

func within(t *testing.T, got <-chan error, d time.Duration, what string) {
	t.Helper()
	require.NoError(t, relocktest.Receive(t, got, d, what+" to be done"), "%s", what)
}

func notYet(t *testing.T, got <-chan error, what string) {
	t.Helper()
	select {
	case err := <-got:
		require.FailNowf(t, "did not wait", "%s returned %v while it should wait", what, err)
	default:
	}
}

// subscribed waits until n Clients listen on the lock's channel.
func subscribed(t *testing.T, raw rueidis.Client, name string, n int64) {
	t.Helper()
	relocktest.Eventually(t, handoff, fmt.Sprintf("%d subscribers on %s", n, rwlock.Channel(name)), func() bool {
		return relocktest.Subscribers(raw, rwlock.Channel(name)) == n
	})
}

// hashLen is the number of fields of the lock hash, for conditions of
// relocktest.Eventually: -1 when the server does not answer.
func hashLen(raw rueidis.Client, name string) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	n, err := raw.Do(ctx, raw.B().Hlen().Key(name).Build()).AsInt64()
	if err != nil {
		return -1
	}
	return n
}

func TestReadersShareInRedissonLayout(t *testing.T) {
	c1, c2 := relocktest.Client(t), relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	a := rlock.WithOwner(t.Context(), "a")
	b := rlock.WithOwner(t.Context(), "b")
	r1, r2 := c1.GetReadWriteLock(name).ReadLock(), c2.GetReadWriteLock(name).ReadLock()
	require.NoError(t, r1.Lock(a))
	require.NoError(t, r1.Lock(a), "re-entry")
	ok, err := r2.TryLock(b, 0, 10*time.Second)
	require.NoError(t, err)
	require.True(t, ok, "a second reader's TryLock")
	fa, fb := layout.Field(c1.ID(), "a"), layout.Field(c2.ID(), "b")
	wantHash(t, raw, name, map[string]string{"mode": "read", fa: "2", fb: "1"})
	for _, k := range []string{rwlock.LeaseKey(name, fa, 1), rwlock.LeaseKey(name, fa, 2), rwlock.LeaseKey(name, fb, 1)} {
		ms := pttl(t, raw, k)
		assert.Positive(t, ms, "PTTL %s", k)
		assert.LessOrEqual(t, ms, int64(30_000), "PTTL %s: a lease of at most 30s", k)
	}
	assert.False(t, exists(t, raw, rwlock.LeaseKey(name, fa, 3)), "a lease key for a level a does not hold")
	assert.GreaterOrEqual(t, pttl(t, raw, name), int64(25_000), "hash PTTL: at least the longest read lease")
	for _, l := range []*rwlock.Lock{r1, r2} {
		locked, err := l.IsLocked(t.Context())
		require.NoError(t, err)
		assert.True(t, locked, "read IsLocked")
	}
	locked, err := c1.GetReadWriteLock(name).WriteLock().IsLocked(t.Context())
	require.NoError(t, err)
	assert.False(t, locked, "write IsLocked while only readers hold")
	n, err := r1.HoldCount(a)
	require.NoError(t, err)
	assert.Equal(t, 2, n, "HoldCount(a)")
	require.NoError(t, r1.Unlock(a))
	assert.False(t, exists(t, raw, rwlock.LeaseKey(name, fa, 2)), "the released level's lease key is still there")
	// A writer waits for the readers, and gets in when the last leaves.
	got := lockAsync(rlock.WithOwner(t.Context(), "w"), c2.GetReadWriteLock(name).WriteLock())
	subscribed(t, raw, name, 1)
	require.NoError(t, r1.Unlock(a))
	notYet(t, got, "the writer, with b still reading")
	require.NoError(t, r2.Unlock(b))
	within(t, got, handoff, "the writer after the last reader left")
	wantHash(t, raw, name, map[string]string{"mode": "write", layout.Field(c2.ID(), "w") + ":write": "1"})
	for _, k := range []string{rwlock.LeaseKey(name, fa, 1), rwlock.LeaseKey(name, fb, 1)} {
		assert.False(t, exists(t, raw, k), "lease key %s left after its hold was released", k)
	}
	require.NoError(t, c2.GetReadWriteLock(name).WriteLock().Unlock(rlock.WithOwner(t.Context(), "w")))
	assert.False(t, exists(t, raw, name), "the hash is left after every hold was released")
}

func TestWriterExcludes(t *testing.T) {
	c1, c2 := relocktest.Client(t), relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	w := rlock.WithOwner(t.Context(), "w")
	o := rlock.WithOwner(t.Context(), "o")
	rw1, rw2 := c1.GetReadWriteLock(name), c2.GetReadWriteLock(name)
	require.NoError(t, rw1.WriteLock().Lock(w))
	for _, l := range []*rwlock.Lock{rw2.ReadLock(), rw2.WriteLock(), rw1.ReadLock(), rw1.WriteLock()} {
		ok, err := l.TryLock(o, 0, 0)
		require.NoError(t, err)
		assert.False(t, ok, "TryLock by another owner while a writer holds")
	}
	locked, err := rw2.WriteLock().IsLocked(t.Context())
	require.NoError(t, err)
	assert.True(t, locked, "write IsLocked")
	locked, err = rw2.ReadLock().IsLocked(t.Context())
	require.NoError(t, err)
	assert.False(t, locked, "read IsLocked while only the writer holds")
	require.NoError(t, rw1.WriteLock().Unlock(w))
	// A reader keeps writers out, even its own owner's write: no upgrade.
	require.NoError(t, rw1.ReadLock().Lock(o))
	for _, ctx := range []context.Context{w, o} {
		ok, err := rw2.WriteLock().TryLock(ctx, 0, 0)
		require.NoError(t, err)
		assert.False(t, ok, "write TryLock while a reader holds")
	}
	require.NoError(t, rw1.ReadLock().Unlock(o))
	assert.Empty(t, keysOf(t, raw, name), "keys left")
}

// TestWriterReadsItsOwn: the writer's owner takes read holds beside its
// write hold; releasing the write hold leaves the lock in read mode,
// which lets waiting readers in at once.
func TestWriterReadsItsOwn(t *testing.T) {
	c1, c2 := relocktest.Client(t), relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	w := rlock.WithOwner(t.Context(), "w")
	rw := c1.GetReadWriteLock(name)
	require.NoError(t, rw.WriteLock().Lock(w))
	ok, err := rw.ReadLock().TryLock(w, 0, 0)
	require.NoError(t, err)
	require.True(t, ok, "the writer's read TryLock")
	fw := layout.Field(c1.ID(), "w")
	wantHash(t, raw, name, map[string]string{"mode": "write", fw + ":write": "1", fw: "1"})
	locked, err := rw.ReadLock().IsLocked(t.Context())
	require.NoError(t, err)
	assert.True(t, locked, "read IsLocked while the writer reads")
	got := lockAsync(rlock.WithOwner(t.Context(), "r"), c2.GetReadWriteLock(name).ReadLock())
	subscribed(t, raw, name, 1)
	notYet(t, got, "another owner's read while the writer holds")
	require.NoError(t, rw.WriteLock().Unlock(w))
	within(t, got, handoff, "a reader after the writer went down to a read hold")
	wantHash(t, raw, name, map[string]string{"mode": "read", fw: "1", layout.Field(c2.ID(), "r"): "1"})
	assert.Positive(t, pttl(t, raw, name), "hash PTTL after the downgrade: the readers' lease")
	_ = rw.ReadLock().Unlock(w)
	_ = c2.GetReadWriteLock(name).ReadLock().Unlock(rlock.WithOwner(t.Context(), "r"))
	assert.False(t, exists(t, raw, name), "hash left")
}

// TestWriteReleaseWakesEveryReader: readers of two Clients wait for a
// writer; its release lets all of them in at once (not one by one, at
// their leases' ends).
func TestWriteReleaseWakesEveryReader(t *testing.T) {
	c1, c2, c3 := relocktest.Client(t), relocktest.Client(t), relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	w := rlock.WithOwner(t.Context(), "w")
	writer := c1.GetReadWriteLock(name).WriteLock()
	require.NoError(t, writer.Lock(w))
	var readers []<-chan error
	for i, c := range []*rlock.Client{c2, c2, c2, c3, c3, c3} {
		readers = append(readers, lockAsync(rlock.WithOwner(t.Context(), fmt.Sprint("r", i)), c.GetReadWriteLock(name).ReadLock()))
	}
	subscribed(t, raw, name, 2)
	// Every reader has made its attempts and sleeps (its wait hint is the
	// writer's 30s lease).
	relocktest.Eventually(t, handoff, "the readers to sleep", func() bool { return hashLen(raw, name) == 2 })
	start := time.Now()
	require.NoError(t, writer.Unlock(w))
	for i, got := range readers {
		within(t, got, handoff, fmt.Sprint("reader ", i))
	}
	assert.LessOrEqual(t, time.Since(start), 2*time.Second, "time the readers took to get in after the release: want at once")
	assert.Len(t, relocktest.HGetAll(t, raw, name), 7, "hash fields: mode and 6 readers")
}

// TestReadHoldsRenewed: read holds on the watchdog lease keep their lease
// keys and the hash alive through many leases, and the renewal stops at
// the final Unlock.
func TestReadHoldsRenewed(t *testing.T) {
	const lease = 300 * time.Millisecond
	c := relocktest.Client(t, rlock.WithWatchdogTimeout(lease))
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	a := rlock.WithOwner(t.Context(), "a")
	rw := c.GetReadWriteLock(name)
	for range 2 {
		require.NoError(t, rw.ReadLock().Lock(a))
	}
	fa := layout.Field(c.ID(), "a")
	keys := []string{name, rwlock.LeaseKey(name, fa, 1), rwlock.LeaseKey(name, fa, 2)}
	start := time.Now()
	// Renewals, every third of the lease, put every key's PTTL back up
	// after it ran down; wait for 4 of them (well over a lease's length).
	low, high := (lease * 5 / 6).Milliseconds(), (lease * 17 / 20).Milliseconds()
	for i := range 4 {
		relocktest.Eventually(t, 5*lease, fmt.Sprint("the lease to run down before renewal ", i), func() bool {
			return pttlNow(raw, keys[1]) < low
		})
		relocktest.Eventually(t, 5*lease, fmt.Sprint("renewal ", i), func() bool {
			for _, k := range keys {
				if pttlNow(raw, k) < high {
					return false
				}
			}
			return true
		})
	}
	require.GreaterOrEqual(t, time.Since(start), lease, "time 4 renewals took: at least one lease")
	select {
	case <-rw.ReadLock().Done(a):
		require.FailNow(t, "the hold ended")
	default:
	}
	for range 2 {
		require.NoError(t, rw.ReadLock().Unlock(a))
	}
	for _, k := range keys {
		assert.False(t, exists(t, raw, k), "%s left after the final Unlock", k)
	}
}

// TestReadHoldLostWhenItsLeaseKeyGoes: a renewal that finds a level's lease
// key gone (the hold ran out) reports the hold lost.
func TestReadHoldLostWhenItsLeaseKeyGoes(t *testing.T) {
	const lease = 300 * time.Millisecond
	c := relocktest.Client(t, rlock.WithWatchdogTimeout(lease))
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	a := rlock.WithOwner(t.Context(), "a")
	r := c.GetReadWriteLock(name).ReadLock()
	require.NoError(t, r.Lock(a))
	hold := r.HoldContext(a)
	require.NoError(t, raw.Do(t.Context(), raw.B().Del().Key(rwlock.LeaseKey(name, layout.Field(c.ID(), "a"), 1)).Build()).Error())
	relocktest.Receive(t, hold.Done(), 5*lease, "the hold to be reported lost")
	assert.ErrorIs(t, context.Cause(hold), rlock.ErrLockLost, "the hold's cause")
}

// TestAnonymousReaders: without owners, read holds work like
// sync.RWMutex's RLock and RUnlock: several at once on one Client, each
// ownerless Unlock releasing one of them, also concurrently.
func TestAnonymousReaders(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	ctx := t.Context()
	const n = 8
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			assert.NoError(t, c.GetReadWriteLock(name).ReadLock().Lock(ctx))
		})
	}
	wg.Wait()
	require.Len(t, relocktest.HGetAll(t, raw, name), n+1, "hash fields: mode and %d readers", n)
	ok, err := c.GetReadWriteLock(name).WriteLock().TryLock(ctx, 0, 0)
	require.NoError(t, err)
	require.False(t, ok, "write TryLock among readers")
	for range n {
		wg.Go(func() {
			assert.NoError(t, c.GetReadWriteLock(name).ReadLock().Unlock(ctx))
		})
	}
	wg.Wait()
	assert.Empty(t, relocktest.HGetAll(t, raw, name), "hash left after %d ownerless Unlocks", n)
	assert.ErrorIs(t, c.GetReadWriteLock(name).ReadLock().Unlock(ctx), rlock.ErrNotHeld, "one Unlock too many")
	// The write side's anonymous hold is its own.
	require.NoError(t, c.GetReadWriteLock(name).WriteLock().Lock(ctx))
	assert.ErrorIs(t, c.GetReadWriteLock(name).ReadLock().Unlock(ctx), rlock.ErrNotHeld, "read Unlock with only an anonymous write hold")
	require.NoError(t, c.GetReadWriteLock(name).WriteLock().Unlock(ctx))
}

func TestBadInputWritesNothing(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	ctx := t.Context()
	rw := c.GetReadWriteLock(name)
	bad := []struct {
		what string
		call func() error
	}{
		{"empty name", func() error { return c.GetReadWriteLock("").ReadLock().Lock(ctx) }},
		{"broken hash tag", func() error { return c.GetReadWriteLock("a{b").WriteLock().Lock(ctx) }},
		{"owner ending in :write", func() error { return rw.ReadLock().Lock(rlock.WithOwner(ctx, "x:write")) }},
		{"owner ending in :write, unlock", func() error { return rw.ReadLock().Unlock(rlock.WithOwner(ctx, "x:write")) }},
		{"empty owner", func() error { return rw.WriteLock().Lock(rlock.WithOwner(ctx, "")) }},
		{"negative wait", func() error { _, err := rw.ReadLock().TryLock(ctx, -time.Second, 0); return err }},
		{"lease under 1ms", func() error { return rw.WriteLock().LockLease(ctx, time.Microsecond) }},
		{"zero lease", func() error { return rw.ReadLock().LockLease(ctx, 0) }},
		{"nil function", func() error { return rw.ReadLock().Do(ctx, nil) }},
	}
	for _, b := range bad {
		assert.ErrorIs(t, b.call(), rlock.ErrInvalidArgument, b.what)
	}
	assert.Empty(t, keysOf(t, raw, name), "keys the bad calls wrote")
}

func TestCloseEndsWait(t *testing.T) {
	c1 := relocktest.Client(t)
	// c2 counts its acquire scripts: the first waiter sleeps after two of
	// them (before and after subscribing); the second, which finds the
	// channel subscribed, after one.
	faulty := relocktest.NewFaulty(redistest.Shared(t).Client(t))
	attempts := faulty.Inject(&relocktest.Rule{SHA1s: []string{lua.RWReadAcquire.SHA1, lua.RWWriteAcquire.SHA1},
		N: -1, Run: true, Keep: true})
	c2, err := rlock.New(faulty)
	require.NoError(t, err)
	name := relocktest.Name(t)
	w := rlock.WithOwner(t.Context(), "w")
	require.NoError(t, c1.GetReadWriteLock(name).WriteLock().Lock(w))
	got := make(chan error, 2)
	go func() { got <- c2.GetReadWriteLock(name).ReadLock().Lock(t.Context()) }()
	relocktest.Eventually(t, handoff, "the reader to sleep", func() bool { return attempts.Hits() == 2 })
	go func() { got <- c2.GetReadWriteLock(name).WriteLock().Lock(t.Context()) }()
	relocktest.Eventually(t, handoff, "the writer to sleep", func() bool { return attempts.Hits() == 3 })
	require.NoError(t, c2.Close())
	for range 2 {
		err := relocktest.Receive(t, got, handoff, "Close to end the wait")
		assert.ErrorIs(t, err, rlock.ErrNotAcquired, "wait ended by Close")
		assert.ErrorIs(t, err, rlock.ErrClosed, "wait ended by Close")
	}
	require.NoError(t, c1.GetReadWriteLock(name).WriteLock().Unlock(w))
}

func TestForceUnlockBySide(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	a := rlock.WithOwner(t.Context(), "a")
	rw := c.GetReadWriteLock(name)
	require.NoError(t, rw.ReadLock().Lock(a))
	ok, err := rw.WriteLock().ForceUnlock(t.Context())
	require.NoError(t, err)
	assert.False(t, ok, "write ForceUnlock in read mode")
	hold := rw.ReadLock().HoldContext(a)
	ok, err = rw.ReadLock().ForceUnlock(t.Context())
	require.NoError(t, err)
	assert.True(t, ok, "read ForceUnlock")
	assert.False(t, exists(t, raw, name), "hash left")
	assert.ErrorIs(t, context.Cause(hold), rlock.ErrLockLost, "the forced read hold's cause")
	require.NoError(t, rw.WriteLock().Lock(a))
	ok, err = rw.WriteLock().ForceUnlock(t.Context())
	require.NoError(t, err)
	assert.True(t, ok, "write ForceUnlock")
	d, err := rw.ReadLock().RemainingLease(t.Context())
	require.NoError(t, err)
	assert.Zero(t, d, "RemainingLease of a free lock")
}

// TestDoOnReadSide: Do runs under a read hold, with its owner in fn's
// context, and releases it.
func TestDoOnReadSide(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	r := c.GetReadWriteLock(name).ReadLock()
	err := r.Do(t.Context(), func(ctx context.Context) error {
		n, err := r.HoldCount(ctx)
		assert.NoError(t, err)
		assert.Equal(t, 1, n, "HoldCount in Do")
		d, err := r.RemainingLease(ctx)
		assert.NoError(t, err)
		assert.Positive(t, d, "RemainingLease in Do")
		return nil
	})
	require.NoError(t, err)
	assert.False(t, exists(t, raw, name), "hash left after Do")
}
