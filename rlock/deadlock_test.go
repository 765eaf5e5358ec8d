package rlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/internal/waitrec"
	"github.com/relock-go/relock/rlock"
)

// waitRecords returns the wait records of the Client c (its hash), by
// field; none when the hash is gone.
func waitRecords(t testing.TB, raw rueidis.Client, c *rlock.Client) map[string]waitrec.Record {
	t.Helper()
	m, err := raw.Do(context.Background(), raw.B().Hgetall().Key(waitrec.Key("", c.ID())).Build()).AsStrMap()
	require.NoError(t, err)
	out := make(map[string]waitrec.Record, len(m))
	for f, v := range m {
		r, err := waitrec.Decode(v)
		require.NoError(t, err)
		out[f] = r
	}
	return out
}

// waitRecordsOf returns the records of c whose name is name.
func waitRecordsOf(t testing.TB, raw rueidis.Client, c *rlock.Client, name string) []waitrec.Record {
	var out []waitrec.Record
	for _, r := range waitRecords(t, raw, c) {
		if r.Name == name {
			out = append(out, r)
		}
	}
	return out
}

// awaitRecords waits until c has n records for name.
func awaitRecords(t testing.TB, raw rueidis.Client, c *rlock.Client, name string, n int) []waitrec.Record {
	t.Helper()
	var got []waitrec.Record
	relocktest.Eventually(t, 5*time.Second, fmt.Sprintf("%d wait records for %q", n, name), func() bool {
		got = waitRecordsOf(t, raw, c, name)
		return len(got) == n
	})
	return got
}

// TestWaitRecorded: a waiting Lock records who waits for what since when
// (the server's time), with the hash's expiry the watchdog timeout, and
// the record goes when the wait ends: acquired, given up (wait limit),
// context ended, Close.
func TestWaitRecorded(t *testing.T) {
	raw := relocktest.Raw(t)
	c := relocktest.Client(t, rlock.WithWatchdogTimeout(5*time.Second))
	holder := relocktest.Client(t)
	name := relocktest.Name(t)
	h := rlock.WithOwner(t.Context(), "h")
	require.NoError(t, holder.GetLock(name).Lock(h))
	l := c.GetLock(name)

	before, err := raw.Do(t.Context(), raw.B().Time().Build()).AsStrSlice()
	require.NoError(t, err)

	t.Run("acquired", func(t *testing.T) {
		got := lockAsync(l, rlock.WithOwner(t.Context(), "w"))
		recs := awaitRecords(t, raw, c, name, 1)
		assert.Equal(t, layout.Field(c.ID(), "w"), recs[0].Owner)
		assert.Equal(t, "lock", recs[0].Kind)
		assert.Greater(t, recs[0].Since, int64(0))
		assert.GreaterOrEqual(t, recs[0].Since/1000, mustInt(t, before[0]), "since is the server's time")
		pttl, err := raw.Do(t.Context(), raw.B().Pttl().Key(waitrec.Key("", c.ID())).Build()).AsInt64()
		require.NoError(t, err)
		assert.InDelta(t, 5000, pttl, 1000, "the hash expires with the watchdog timeout")
		require.NoError(t, holder.GetLock(name).Unlock(h))
		require.NoError(t, relocktest.Receive(t, got, 5*time.Second, "the waiter to acquire"))
		assert.Empty(t, waitRecords(t, raw, c), "the record is deleted when the wait ended")
		require.NoError(t, l.Unlock(rlock.WithOwner(t.Context(), "w")))
		require.NoError(t, holder.GetLock(name).Lock(h))
	})
	t.Run("wait limit", func(t *testing.T) {
		ok, err := l.TryLock(rlock.WithOwner(t.Context(), "w"), 300*time.Millisecond, 0)
		require.NoError(t, err)
		require.False(t, ok)
		assert.Empty(t, waitRecords(t, raw, c))
	})
	t.Run("context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(rlock.WithOwner(t.Context(), "w"))
		got := lockAsync(l, ctx)
		awaitRecords(t, raw, c, name, 1)
		cancel()
		require.ErrorIs(t, relocktest.Receive(t, got, 5*time.Second, "the wait to end"), context.Canceled)
		assert.Empty(t, waitRecords(t, raw, c))
	})
	t.Run("close", func(t *testing.T) {
		c2 := relocktest.Client(t)
		got := lockAsync(c2.GetLock(name), rlock.WithOwner(t.Context(), "w"))
		awaitRecords(t, raw, c2, name, 1)
		require.NoError(t, c2.Close())
		require.ErrorIs(t, relocktest.Receive(t, got, 5*time.Second, "the wait to end"), rlock.ErrClosed)
		assert.Empty(t, waitRecords(t, raw, c2))
	})
	t.Run("single attempt", func(t *testing.T) {
		ok, err := l.TryLock(rlock.WithOwner(t.Context(), "w"), 0, 0)
		require.NoError(t, err)
		require.False(t, ok)
		n, err := raw.Do(t.Context(), raw.B().Exists().Key(waitrec.Key("", c.ID())).Build()).AsInt64()
		require.NoError(t, err)
		assert.Zero(t, n, "a single attempt records nothing")
	})
}

func mustInt(t testing.TB, s string) int64 {
	t.Helper()
	var n int64
	_, err := fmt.Sscan(s, &n)
	require.NoError(t, err)
	return n
}

// cycleMember is one owner of a cycle: it holds hold and then waits for
// wait.
type cycleMember struct {
	c          *rlock.Client
	owner      string
	hold, wait string
}

// runCycle makes each member hold its lock, then wait for the next one's,
// and returns the results of the waits, by owner; each member releases
// its hold after its wait returned.
func runCycle(t *testing.T, members []cycleMember, limit time.Duration) map[string]error {
	t.Helper()
	for _, m := range members {
		require.NoError(t, m.c.GetLock(m.hold).Lock(rlock.WithOwner(t.Context(), m.owner)))
	}
	var mu sync.Mutex
	errs := make(map[string]error)
	var wg sync.WaitGroup
	for _, m := range members {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(rlock.WithOwner(t.Context(), m.owner), limit)
			defer cancel()
			err := m.c.GetLock(m.wait).Lock(ctx)
			mu.Lock()
			errs[m.owner] = err
			mu.Unlock()
			if err == nil {
				_ = m.c.GetLock(m.wait).Unlock(ctx)
			}
			_ = m.c.GetLock(m.hold).Unlock(rlock.WithOwner(context.Background(), m.owner))
		})
	}
	wg.Wait()
	return errs
}

// TestDeadlockTwoOwners: A holds L1 and waits for L2, B holds L2 and
// waits for L1, on two Clients: one of them (the one that began to wait
// last) ends with ErrDeadlock within the detection delay and a second,
// naming the cycle; the other then gets its lock.
func TestDeadlockTwoOwners(t *testing.T) {
	testDeadlock(t, 2)
}

// TestDeadlockThreeOwners: a cycle of three owners on three Clients ends
// one wait.
func TestDeadlockThreeOwners(t *testing.T) {
	testDeadlock(t, 3)
}

func testDeadlock(t *testing.T, n int) {
	const after = 300 * time.Millisecond
	names := make([]string, n)
	for i := range names {
		names[i] = relocktest.Name(t)
	}
	members := make([]cycleMember, n)
	for i := range members {
		members[i] = cycleMember{c: relocktest.Client(t, rlock.WithDeadlockDetection(after)),
			owner: fmt.Sprintf("o%d", i), hold: names[i], wait: names[(i+1)%n]}
	}
	start := time.Now()
	errs := runCycle(t, members, 10*time.Second)
	var victims []string
	for owner, err := range errs {
		if err != nil {
			require.ErrorIs(t, err, rlock.ErrDeadlock, owner)
			require.ErrorIs(t, err, rlock.ErrNotAcquired, owner)
			victims = append(victims, owner)
			for _, name := range names {
				assert.Contains(t, err.Error(), name, "the error names the cycle")
			}
			t.Log(err)
		}
	}
	require.Len(t, victims, 1, "one victim: %v", errs)
	assert.Less(t, time.Since(start), after+time.Second+time.Second, "ended within the delay and a second (and the others' take-over)")
}

// TestDeadlockMixedKinds: A holds a read-write lock's read side and waits
// for a plain lock that B holds, B waits for the write side: one ends.
func TestDeadlockMixedKinds(t *testing.T) {
	const after = 300 * time.Millisecond
	ca := relocktest.Client(t, rlock.WithDeadlockDetection(after))
	cb := relocktest.Client(t, rlock.WithDeadlockDetection(after))
	rw, plain := relocktest.Name(t), relocktest.Name(t)
	a, b := rlock.WithOwner(t.Context(), "a"), rlock.WithOwner(t.Context(), "b")
	require.NoError(t, ca.GetReadWriteLock(rw).ReadLock().Lock(a))
	require.NoError(t, cb.GetLock(plain).Lock(b))
	ea := make(chan error, 1)
	eb := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(a, 10*time.Second)
		defer cancel()
		err := ca.GetLock(plain).Lock(ctx)
		if err == nil {
			_ = ca.GetLock(plain).Unlock(a)
		}
		_ = ca.GetReadWriteLock(rw).ReadLock().Unlock(a)
		ea <- err
	}()
	go func() {
		ctx, cancel := context.WithTimeout(b, 10*time.Second)
		defer cancel()
		err := cb.GetReadWriteLock(rw).WriteLock().Lock(ctx)
		if err == nil {
			_ = cb.GetReadWriteLock(rw).WriteLock().Unlock(b)
		}
		_ = cb.GetLock(plain).Unlock(b)
		eb <- err
	}()
	errA, errB := <-ea, <-eb
	if (errA == nil) == (errB == nil) {
		t.Fatalf("want one victim: a: %v, b: %v", errA, errB)
	}
	err := errors.Join(errA, errB)
	require.ErrorIs(t, err, rlock.ErrDeadlock)
	assert.True(t, strings.Contains(err.Error(), "write") || strings.Contains(err.Error(), "lock"), err.Error())
}
