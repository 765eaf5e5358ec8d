package rwlock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redissontest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
	"github.com/relock-go/relock/rwlock"
)

// These tests put relock's read-write lock beside a stand-in for a
// Redisson client (internal/redissontest): RedissonReadLock's and
// RedissonWriteLock's scripts (fields <uuid>:<threadId> and
// <uuid>:<threadId>:write, "mode", the per-level lease keys, unlock
// latches) and Redisson's waiting on redisson_rwlock:{name}.
//
// Messages: both sides publish "0" when a read release frees the lock
// (Redisson's LockPubSub lets one waiter per Client go on; relock wakes
// one waiter per Client) and "1" when a write release does (every waiter
// goes on, on both sides). One difference: a writer that still holds read
// levels turns the lock to read mode on its write release; relock then
// publishes "1" so that waiting readers come in, Redisson publishes
// nothing (its waiting readers sleep until the hash's TTL or another
// message).

func lockAsyncR(ctx context.Context, l *rwlock.Lock) <-chan redissontest.Result {
	return redissontest.Async(func() error { return l.Lock(ctx) })
}

// TestInteropRedissonWriterWakesRelockReaders: a Redisson writer keeps
// relock's readers and writers out; its release ("1") lets the waiting
// readers of two Clients in at once, within the hand-off bound.
func TestInteropRedissonWriterWakesRelockReaders(t *testing.T) {
	c1, c2 := relocktest.Client(t), relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	j := redissontest.New(t, relocktest.Raw(t))
	rw := j.ReadWriteLock(name)
	ctx := t.Context()
	require.NoError(t, rw.WriteLock().Lock(ctx, 1, 0))
	require.NoError(t, rw.WriteLock().Lock(ctx, 1, 0), "Redisson write re-entry")
	x := rlock.WithOwner(ctx, "x")
	ok, err := c1.GetReadWriteLock(name).ReadLock().TryLock(x, 0, 0)
	require.NoError(t, err)
	require.False(t, ok, "relock read beside a Redisson writer")
	ok, err = c1.GetReadWriteLock(name).WriteLock().TryLock(x, 0, 0)
	require.NoError(t, err)
	require.False(t, ok, "relock write beside a Redisson writer")

	msgs := redissontest.Listen(t, raw, rwlock.Channel(name))
	var readers []<-chan redissontest.Result
	for i, c := range []*rlock.Client{c1, c1, c2} {
		readers = append(readers, lockAsyncR(rlock.WithOwner(ctx, fmt.Sprint("r", i)), c.GetReadWriteLock(name).ReadLock()))
	}
	redissontest.WaitSubscribers(t, raw, rwlock.Channel(name), 3)
	n, err := rw.WriteLock().UnlockResult(ctx, 1)
	require.NoError(t, err)
	require.EqualValues(t, 0, n, "Redisson write unlock of one of two levels")
	for i, got := range readers {
		redissontest.Pending(t, got, fmt.Sprint("reader ", i))
	}
	start := time.Now()
	n, err = rw.WriteLock().UnlockResult(ctx, 1)
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "Redisson write unlock")
	redissontest.Message(t, msgs, "1", "Redisson's write release")
	for i, got := range readers {
		redissontest.Handoff(t, got, start, fmt.Sprint("relock reader ", i))
	}
	// Redisson reads beside them, and cannot write.
	ok, err = rw.ReadLock().TryLockOnce(ctx, 2)
	require.NoError(t, err)
	assert.True(t, ok, "Redisson read beside relock readers")
	ok, err = rw.WriteLock().TryLockOnce(ctx, 3)
	require.NoError(t, err)
	assert.False(t, ok, "Redisson write beside readers")
}

// TestInteropRelockWriterWakesRedissonReaders: relock's write hold keeps
// Redisson's readers out; its release publishes "1", on which every
// waiting Redisson reader of a Redisson client comes in at once.
func TestInteropRelockWriterWakesRedissonReaders(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	j := redissontest.New(t, relocktest.Raw(t))
	rw := j.ReadWriteLock(name)
	w := rlock.WithOwner(t.Context(), "w")
	writer := c.GetReadWriteLock(name).WriteLock()
	require.NoError(t, writer.Lock(w))
	ok, err := rw.ReadLock().TryLockOnce(t.Context(), 1)
	require.NoError(t, err)
	require.False(t, ok, "Redisson read beside relock's writer")
	ok, err = rw.WriteLock().TryLockOnce(t.Context(), 2)
	require.NoError(t, err)
	require.False(t, ok, "Redisson write beside relock's writer")

	msgs := redissontest.Listen(t, raw, rwlock.Channel(name))
	var readers []<-chan redissontest.Result
	for tid := range int64(3) {
		readers = append(readers, redissontest.Async(func() error { return rw.ReadLock().Lock(t.Context(), tid, 0) }))
	}
	redissontest.WaitSubscribers(t, raw, rwlock.Channel(name), 2)
	redissontest.WaitSleeping(t, j, rwlock.Channel(name), 3)
	start := time.Now()
	require.NoError(t, writer.Unlock(w))
	redissontest.Message(t, msgs, "1", "relock's write release")
	for i, got := range readers {
		redissontest.Handoff(t, got, start, fmt.Sprint("Redisson reader ", i))
	}
	for tid := range int64(3) {
		require.NoError(t, rw.ReadLock().Unlock(t.Context(), tid))
	}
	redissontest.Message(t, msgs, "0", "Redisson's last read release")
}

// TestInteropReadReleaseWakesWriter: a read release that frees the lock
// publishes "0", which wakes a writer on the other side, in both
// directions.
func TestInteropReadReleaseWakesWriter(t *testing.T) {
	t.Run("redisson reader, relock writer", func(t *testing.T) {
		c := relocktest.Client(t)
		raw := relocktest.Raw(t)
		name := relocktest.Name(t)
		j := redissontest.New(t, relocktest.Raw(t))
		rw := j.ReadWriteLock(name)
		msgs := redissontest.Listen(t, raw, rwlock.Channel(name))
		require.NoError(t, rw.ReadLock().Lock(t.Context(), 1, 0))
		w := rlock.WithOwner(t.Context(), "w")
		got := lockAsyncR(w, c.GetReadWriteLock(name).WriteLock())
		redissontest.WaitSubscribers(t, raw, rwlock.Channel(name), 2)
		redissontest.Pending(t, got, "relock's writer beside a Redisson reader")
		start := time.Now()
		n, err := rw.ReadLock().UnlockResult(t.Context(), 1)
		require.NoError(t, err)
		require.EqualValues(t, 1, n, "Redisson read unlock frees the lock")
		redissontest.Message(t, msgs, "0", "Redisson's read release")
		redissontest.Handoff(t, got, start, "relock's writer")
		require.NoError(t, c.GetReadWriteLock(name).WriteLock().Unlock(w))
	})
	t.Run("relock reader, redisson writer", func(t *testing.T) {
		c := relocktest.Client(t)
		raw := relocktest.Raw(t)
		name := relocktest.Name(t)
		j := redissontest.New(t, relocktest.Raw(t))
		rw := j.ReadWriteLock(name)
		msgs := redissontest.Listen(t, raw, rwlock.Channel(name))
		r := rlock.WithOwner(t.Context(), "r")
		reader := c.GetReadWriteLock(name).ReadLock()
		require.NoError(t, reader.Lock(r))
		got := redissontest.Async(func() error { return rw.WriteLock().Lock(t.Context(), 1, 0) })
		redissontest.WaitSubscribers(t, raw, rwlock.Channel(name), 2)
		redissontest.WaitSleeping(t, j, rwlock.Channel(name), 1)
		redissontest.Pending(t, got, "Redisson's writer beside a relock reader")
		start := time.Now()
		require.NoError(t, reader.Unlock(r))
		redissontest.Message(t, msgs, "0", "relock's read release")
		redissontest.Handoff(t, got, start, "Redisson's writer")
		require.NoError(t, rw.WriteLock().Unlock(t.Context(), 1))
	})
}

// TestInteropSharedReaders: relock's and Redisson's readers weigh each
// other's lease keys: whichever leaves first keeps the hash alive for the
// other, and the last one frees it.
func TestInteropSharedReaders(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	j := redissontest.New(t, relocktest.Raw(t))
	jr := j.ReadWriteLock(name).ReadLock()
	ctx := t.Context()
	a := rlock.WithOwner(ctx, "a")
	r := c.GetReadWriteLock(name).ReadLock()
	require.NoError(t, jr.Lock(ctx, 1, 0))
	require.NoError(t, r.LockLease(a, time.Minute))
	// Redisson leaves first: relock's lease key (a minute) sets the hash's.
	n, err := jr.UnlockResult(ctx, 1)
	require.NoError(t, err)
	require.EqualValues(t, 0, n, "Redisson read unlock beside a relock reader")
	assert.Greater(t, pttl(t, raw, name), int64(50_000), "hash PTTL after Redisson left: relock's minute")
	held, err := r.HoldCount(a)
	require.NoError(t, err)
	require.Equal(t, 1, held, "relock reader after Redisson left")
	// Now relock leaves first.
	require.NoError(t, jr.Lock(ctx, 1, 0))
	require.NoError(t, jr.Lock(ctx, 1, 0))
	require.NoError(t, r.Unlock(a))
	wantHash(t, raw, name, map[string]string{"mode": "read", jr.Field(1): "2"})
	left := pttl(t, raw, name)
	assert.True(t, left > 0 && left <= 30_000, "hash PTTL %d after relock left, want Redisson's 30s lease", left)
	n, err = jr.UnlockResult(ctx, 1)
	require.NoError(t, err)
	require.EqualValues(t, 0, n)
	n, err = jr.UnlockResult(ctx, 1)
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "Redisson's last read unlock frees the lock")
	assert.False(t, exists(t, raw, name), "hash left")
}

// TestInteropDowngrade: a Redisson writer that reads, then releases its
// write hold, leaves the lock in read mode: relock reads beside it.
// relock's own writer does the same, and Redisson reads beside it; a
// Redisson reader that waited comes in on relock's "1", which Redisson's
// own downgrade does not publish.
func TestInteropDowngrade(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	j := redissontest.New(t, relocktest.Raw(t))
	jrw := j.ReadWriteLock(name)
	ctx := t.Context()
	o := rlock.WithOwner(ctx, "o")
	rw := c.GetReadWriteLock(name)
	msgs := redissontest.Listen(t, raw, rwlock.Channel(name))

	require.NoError(t, jrw.WriteLock().Lock(ctx, 1, 0))
	require.NoError(t, jrw.ReadLock().Lock(ctx, 1, 0), "Redisson writer reads")
	ok, err := rw.ReadLock().TryLock(o, 0, 0)
	require.NoError(t, err)
	require.False(t, ok, "relock read beside a Redisson writer")
	n, err := jrw.WriteLock().UnlockResult(ctx, 1)
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "Redisson write unlock")
	redissontest.NoMessage(t, msgs, "Redisson's downgrade")
	ok, err = rw.ReadLock().TryLock(o, 0, 0)
	require.NoError(t, err)
	require.True(t, ok, "relock read after Redisson's downgrade")
	n, err = jrw.ReadLock().UnlockResult(ctx, 1)
	require.NoError(t, err)
	require.EqualValues(t, 0, n, "Redisson read unlock beside relock's reader")
	require.NoError(t, rw.ReadLock().Unlock(o))
	redissontest.Message(t, msgs, "0", "relock's last read release")

	require.NoError(t, rw.WriteLock().Lock(o))
	require.NoError(t, rw.ReadLock().Lock(o), "relock writer reads")
	ok, err = jrw.ReadLock().TryLockOnce(ctx, 2)
	require.NoError(t, err)
	require.False(t, ok, "Redisson read beside relock's writer")
	got := redissontest.Async(func() error { return jrw.ReadLock().Lock(ctx, 2, 0) })
	redissontest.WaitSubscribers(t, raw, rwlock.Channel(name), 2)
	redissontest.WaitSleeping(t, j, rwlock.Channel(name), 1)
	start := time.Now()
	require.NoError(t, rw.WriteLock().Unlock(o))
	redissontest.Message(t, msgs, "1", "relock's downgrade")
	redissontest.Handoff(t, got, start, "Redisson's reader after relock's downgrade")
	ok, err = jrw.WriteLock().TryLockOnce(ctx, 3)
	require.NoError(t, err)
	assert.False(t, ok, "Redisson write beside readers")
	require.NoError(t, rw.ReadLock().Unlock(o))
	n, err = jrw.ReadLock().UnlockResult(ctx, 2)
	require.NoError(t, err)
	assert.EqualValues(t, 1, n, "the last Redisson read unlock frees the lock")
}

// TestInteropRWContention: relock's and Redisson's readers and writers
// on one read-write lock: every party finishes, writers hold alone,
// readers only beside readers.
func TestInteropRWContention(t *testing.T) {
	name := relocktest.Name(t)
	var parties []redissontest.Party
	c := relocktest.Client(t)
	for o := range 3 {
		owner := fmt.Sprintf("o%d", o)
		octx := func(ctx context.Context) context.Context { return rlock.WithOwner(ctx, owner) }
		l := c.GetReadWriteLock(name).ReadLock()
		shared := o > 0
		if !shared {
			l = c.GetReadWriteLock(name).WriteLock()
		}
		parties = append(parties, redissontest.Party{Side: redissontest.SideRelock, Name: "relock " + owner, Shared: shared,
			Lock:   func(ctx context.Context) error { return l.Lock(octx(ctx)) },
			Unlock: func(ctx context.Context) error { return l.Unlock(octx(ctx)) }})
	}
	j := redissontest.New(t, relocktest.Raw(t))
	rw := j.ReadWriteLock(name)
	for tid := range int64(3) {
		shared := tid > 0
		lock, unlock := rw.ReadLock().Lock, rw.ReadLock().Unlock
		if !shared {
			lock, unlock = rw.WriteLock().Lock, rw.WriteLock().Unlock
		}
		parties = append(parties, redissontest.Party{Side: redissontest.SideRedisson, Name: fmt.Sprintf("redisson t%d", tid), Shared: shared,
			Lock:   func(ctx context.Context) error { return lock(ctx, tid, 0) },
			Unlock: func(ctx context.Context) error { return unlock(ctx, tid) }})
	}
	sec := &redissontest.Section{}
	redissontest.Contend(t, sec, parties, 6, 5*time.Millisecond)
	t.Logf("at most %d inside at once; readers of both sides together: %v", sec.MaxInside(), sec.SharedAcrossSides())
}
