package rwlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/rlock"
)

// sleepingWriter starts a writer of name on a Client of its own, and
// returns once its attempts have failed twice (it then sleeps until a
// message or the lease its attempt saw), with a channel that gets the
// writer's Lock error.
func sleepingWriter(t *testing.T, name string) <-chan error {
	t.Helper()
	faulty := relocktest.NewFaulty(redistest.Shared(t).Client(t))
	attempts := faulty.Inject(&relocktest.Rule{SHA1s: []string{lua.RWWriteAcquire.SHA1}, N: -1, Run: true, Keep: true})
	c, err := rlock.New(faulty)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- c.GetReadWriteLock(name).WriteLock().Lock(ctx) }()
	relocktest.Eventually(t, handoff, "the writer to sleep", func() bool { return attempts.Hits() >= 2 })
	return done
}

// TestWriterWokenWhenReadLeaseShortens: readers A (watchdog lease) and B
// (a fixed 500ms lease) hold; a writer waits, its attempt having seen the
// hash's 30s lease. A's release leaves the hash to B's lease: the writer
// is told, and gets the lock when B's lease ends (nobody publishes then),
// not 30s later.
func TestWriterWokenWhenReadLeaseShortens(t *testing.T) {
	c := relocktest.Client(t)
	name := relocktest.Name(t)
	read := c.GetReadWriteLock(name).ReadLock()
	a, b := rlock.WithOwner(t.Context(), "a"), rlock.WithOwner(t.Context(), "b")
	require.NoError(t, read.Lock(a))
	require.NoError(t, read.LockLease(b, 500*time.Millisecond))
	got := sleepingWriter(t, name)
	start := time.Now()
	require.NoError(t, read.Unlock(a))
	require.NoError(t, relocktest.Receive(t, got, 5*time.Second, "the writer to get the lock when the last read lease ended"))
	assert.Less(t, time.Since(start), 2*time.Second, "the writer's wait after the longer read hold was released")
}

// TestReadReentryShortensLease: a read re-entry with a shorter fixed lease
// gives the hash that lease (the longest among the read holds), as a plain
// lock's re-entry does, and the writer waiting on the old lease is told.
func TestReadReentryShortensLease(t *testing.T) {
	c := relocktest.Client(t)
	name := relocktest.Name(t)
	read := c.GetReadWriteLock(name).ReadLock()
	a := rlock.WithOwner(t.Context(), "a")
	require.NoError(t, read.Lock(a))
	got := sleepingWriter(t, name)
	start := time.Now()
	require.NoError(t, read.LockLease(a, 200*time.Millisecond))
	left, err := read.RemainingLease(t.Context())
	require.NoError(t, err)
	assert.LessOrEqual(t, left, 200*time.Millisecond, "RemainingLease after the re-entry")
	require.NoError(t, relocktest.Receive(t, got, 5*time.Second, "the writer to get the lock when the re-entered read lease ended"))
	assert.Less(t, time.Since(start), 2*time.Second, "the writer's wait after the read re-entry")
}

// TestLostWriteLockSettled: an owner holds the write lock and a read lock
// on the watchdog lease; the write hold's renewals get no reply, so it is
// reported lost, while the read hold's renewals keep the hash alive. The
// Client removes the write field as soon as Redis answers (the owner was
// told the write lock is gone), so a reader elsewhere gets in while the
// owner still reads, instead of waiting for the owner's read to end.
func TestLostWriteLockSettled(t *testing.T) {
	const lease = 300 * time.Millisecond
	raw := relocktest.Raw(t)
	faulty := relocktest.NewFaulty(redistest.Shared(t).Client(t))
	lost := make(chan string, 4)
	c, err := rlock.New(faulty, rlock.WithWatchdogTimeout(lease),
		rlock.WithLostHandler(func(name, owner string, err error) { lost <- err.Error() }))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	name := relocktest.Name(t)
	rw := c.GetReadWriteLock(name)
	a := rlock.WithOwner(t.Context(), "a")
	require.NoError(t, rw.WriteLock().Lock(a))
	require.NoError(t, rw.ReadLock().Lock(a))
	renewals := faulty.Inject(&relocktest.Rule{SHA1s: []string{lua.RWWriteRenew.SHA1}, N: -1, Reply: relocktest.LostReply()})
	assert.Contains(t, relocktest.Receive(t, lost, 10*lease, "the write hold's loss report"), "write lock")
	assert.Positive(t, renewals.Hits(), "write renewals answered by the fault")
	// The read hold lives on, and keeps the hash alive.
	select {
	case <-rw.ReadLock().Done(a):
		require.FailNow(t, "the read hold ended")
	default:
	}
	other := relocktest.Client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*lease)
	defer cancel()
	b := rlock.WithOwner(ctx, "b")
	require.NoError(t, other.GetReadWriteLock(name).ReadLock().Lock(b), "a reader of another Client, while the owner of the lost write lock still reads")
	n, err := raw.Do(t.Context(), raw.B().Hexists().Key(name).Field(layout.Field(c.ID(), "a")+":write").Build()).AsInt64()
	require.NoError(t, err)
	assert.Zero(t, n, "the lost write hold's field in the hash")
	require.NoError(t, other.GetReadWriteLock(name).ReadLock().Unlock(b))
	require.NoError(t, rw.ReadLock().Unlock(a))
}
