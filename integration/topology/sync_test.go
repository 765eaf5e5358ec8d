package topology_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/latch"
	"github.com/relock-go/relock/rlock"
	"github.com/relock-go/relock/rwlock"
	"github.com/relock-go/relock/semaphore"
	"github.com/relock-go/relock/watchdog"
)

// TestClusterSync runs the read-write lock, the semaphore and the
// count-down latch on a cluster, with names served by every node and one
// with a hash tag of its own, under classic and sharded pub/sub: every key
// of one object shares a slot, every script runs on its node, and every
// wake-up arrives.
//
// The renewals are watched on a Client with a 300ms watchdog timeout (a
// renewal every 100ms, so that several are seen at once): a process that
// does not run for 200ms (a machine with every core busy) cannot renew
// that lease, and the library's promise is then the loss's report, with
// no error from Redis (a renewal sent to the wrong node would have one).
// The wake-ups are judged on holds of Clients with the default watchdog
// timeout, which such a stall does not end: a hold that lasts while a
// waiter subscribes is not what a short lease tests.
func TestClusterSync(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	raw := newRaw(t, cl.ClientOption())
	for _, sharded := range []bool{false, true} {
		var opts []rlock.Option
		mode := "classic pub/sub"
		if sharded {
			opts = append(opts, rlock.WithShardedPubSub())
			mode = "sharded pub/sub"
		}
		t.Run(mode, func(t *testing.T) {
			if sharded {
				needShardedPubSub(t, cl)
			}
			c1 := newClient(t, cl.ClientOption(), opts...)
			c2 := newClient(t, cl.ClientOption(), opts...)
			lost := make(chan error, 16)
			short := newClient(t, cl.ClientOption(), append(slices.Clone(opts), rlock.WithWatchdogTimeout(syncLease),
				rlock.WithLostHandler(func(_, _ string, cause error) {
					select {
					case lost <- cause:
					default:
					}
				}))...)
			rn := renewals{c: short, lost: lost, seen: new(int)}
			defer func() {
				// Not every renewal may be late: some are seen, on some node.
				assert.Positive(t, *rn.seen, "renewals seen")
			}()
			t.Run("WriteLock", func(t *testing.T) {
				k := kind{"WriteLock", func(c *rlock.Client, name string) locker { return c.GetReadWriteLock(name).WriteLock() },
					func(name, _ string) string { return rwlock.Channel(name) }}
				for _, name := range namesOnEveryNode(t, cl, "cl:"+mode+":write") {
					behave(t, cl.Nodes, c1, c2, k, name)
				}
			})
			t.Run("ReadWriteLock", func(t *testing.T) {
				for _, name := range namesOnEveryNode(t, cl, "cl:"+mode+":rw") {
					readersAndWriter(t, cl.Nodes, raw, rn, c1, c2, name)
				}
			})
			t.Run("Semaphore", func(t *testing.T) {
				for _, name := range namesOnEveryNode(t, cl, "cl:"+mode+":sem") {
					permitHandoff(t, cl.Nodes, raw, rn, c1, c2, name)
				}
			})
			t.Run("CountDownLatch", func(t *testing.T) {
				for _, name := range namesOnEveryNode(t, cl, "cl:"+mode+":latch") {
					if sharded && strings.ContainsAny(name, "{}") {
						continue // Redisson's latch channel leaves the slot of a tagged name
					}
					latchOpens(t, cl.Nodes, c1, c2, name)
				}
			})
		})
	}
}

// pttlOf is the PTTL of key, or -3 when the cluster does not answer: it
// never fails the test, so conditions of relocktest.Eventually use it.
func pttlOf(raw rueidis.Client, key string) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	n, err := raw.Do(ctx, raw.B().Pttl().Key(key).Build()).AsInt64()
	if err != nil {
		return -3
	}
	return n
}

// syncLease is the watchdog timeout of the Client whose renewals
// TestClusterSync watches.
const syncLease = 300 * time.Millisecond

// renewals is the Client whose renewals TestClusterSync watches, and the
// causes of the losses it reported.
type renewals struct {
	c    *rlock.Client
	lost chan error
	seen *int // renewals seen
}

// starved reports whether the Client reported a loss, which must be one
// of a starved process: no renewal succeeded in time, and none had an
// error from Redis (the last one sent, if any, had no reply before the
// lease ran out).
func (r renewals) starved(t *testing.T, what string) bool {
	t.Helper()
	select {
	case cause := <-r.lost:
		require.ErrorIs(t, cause, watchdog.ErrExpired, "%s: lost", what)
		if _, last, ok := strings.Cut(cause.Error(), "last renewal error: "); ok {
			require.Contains(t, last, context.DeadlineExceeded.Error(), "%s: lost after a renewal error", what)
		}
		t.Logf("%s: lost, its renewals late (a starved process): %v", what, cause)
		return true
	default:
		return false
	}
}

// readersAndWriter: a read hold is renewed by the watchdog (its lease key
// outlives several leases); readers of two Clients share the lock; a
// writer waits for both and gets in when the last leaves; its release
// wakes a waiting reader.
func readersAndWriter(t *testing.T, nodes []*redistest.Server, raw rueidis.Client, rn renewals, c1, c2 *rlock.Client, name string) {
	t.Helper()
	ctx := t.Context()
	a, b, w := rlock.WithOwner(ctx, "a"), rlock.WithOwner(ctx, "b"), rlock.WithOwner(ctx, "w")
	rs := rn.c.GetReadWriteLock(name).ReadLock()
	s := rlock.WithOwner(ctx, "s")
	require.NoError(t, rs.Lock(s), "%s: read to renew", name)
	leaseKey := rwlock.LeaseKey(name, layout.Field(rn.c.ID(), "s"), 1)
	lost := false
	for i := 0; i < 3 && !lost; i++ { // renewals: the lease key's PTTL runs down and comes back
		relocktest.Eventually(t, 10*time.Second, fmt.Sprint(name, ": lease running down ", i), func() bool {
			n := pttlOf(raw, leaseKey)
			lost = rn.starved(t, name)
			return lost || n >= 0 && n < syncLease.Milliseconds()*4/5
		})
		relocktest.Eventually(t, 10*time.Second, fmt.Sprint(name, ": renewal ", i), func() bool {
			lost = lost || rn.starved(t, name)
			return lost || pttlOf(raw, leaseKey) > syncLease.Milliseconds()*13/15
		})
		if !lost {
			*rn.seen++
		}
	}
	if err := rs.Unlock(s); err != nil {
		lost = lost || rn.starved(t, name)
		require.True(t, lost, "%s: unlock of the read renewed: %v", name, err)
	}
	r1, r2 := c1.GetReadWriteLock(name).ReadLock(), c2.GetReadWriteLock(name).ReadLock()
	require.NoError(t, r1.Lock(a), "%s: read", name)
	require.NoError(t, r2.Lock(b), "%s: second read", name)
	writer := c2.GetReadWriteLock(name).WriteLock()
	got := make(chan error, 1)
	go func() { got <- writer.Lock(w) }()
	relocktest.Eventually(t, 10*time.Second, "the writer to subscribe", func() bool { return subscribers(nodes, rwlock.Channel(name)) == 1 })
	_ = r1.Unlock(a)
	_ = r2.Unlock(b)
	require.NoError(t, relocktest.Receive(t, got, 10*time.Second, name+": the writer to be woken by the last read release"), "%s: writer", name)
	go func() { got <- r1.Lock(a) }()
	relocktest.Eventually(t, 10*time.Second, "the reader to subscribe", func() bool { return subscribers(nodes, rwlock.Channel(name)) == 1 })
	require.NoError(t, writer.Unlock(w))
	require.NoError(t, relocktest.Receive(t, got, 10*time.Second, name+": the reader to be woken by the write release"), "%s: reader", name)
	require.NoError(t, r1.Unlock(a))
	locked, err := writer.IsLocked(ctx)
	require.NoError(t, err)
	assert.False(t, locked, "%s: locked after every release", name)
}

// permitHandoff: a permit renewed by the watchdog outlives several leases;
// a permit's release hands it to another Client's waiter at once.
func permitHandoff(t *testing.T, nodes []*redistest.Server, raw rueidis.Client, rn renewals, c1, c2 *rlock.Client, name string) {
	t.Helper()
	ctx := t.Context()
	s1, s2 := c1.GetSemaphore(name), c2.GetSemaphore(name)
	ok, err := s1.TrySetPermits(ctx, 1)
	require.NoError(t, err, "%s: TrySetPermits", name)
	require.True(t, ok, "%s: TrySetPermits", name)
	ss := rn.c.GetSemaphore(name)
	id, err := ss.Acquire(ctx, 0)
	require.NoError(t, err, "%s: Acquire", name)
	leases := semaphore.KeysOf(name).Leases
	// score is the end of the one permit's lease, or -1 when it cannot be
	// read: it is a condition of relocktest.Eventually, and must not fail
	// the test.
	score := func() float64 {
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		zs, err := raw.Do(qctx, raw.B().Zrange().Key(leases).Min("0").Max("-1").Withscores().Build()).AsZScores()
		if err != nil || len(zs) != 1 {
			return -1
		}
		return zs[0].Score
	}
	last := score()
	require.Positive(t, last, "%s: the permit's lease", name)
	lost := false
	for i := 0; i < 3 && !lost; i++ {
		relocktest.Eventually(t, 10*time.Second, fmt.Sprint(name, ": permit renewal ", i), func() bool {
			if lost = rn.starved(t, name); lost {
				return true
			}
			if s := score(); s > last {
				last = s
				*rn.seen++
				return true
			}
			return false
		})
	}
	if err := ss.Release(ctx, id); err != nil {
		lost = lost || rn.starved(t, name)
		require.True(t, lost, "%s: release of the permit renewed: %v", name, err)
	}
	id, err = s1.Acquire(ctx, 0)
	require.NoError(t, err, "%s: Acquire", name)
	got := make(chan error, 1)
	go func() {
		id2, err := s2.Acquire(ctx, 10*time.Second)
		if err == nil {
			err = s2.Release(ctx, id2)
		}
		got <- err
	}()
	relocktest.Eventually(t, 10*time.Second, "the waiter to subscribe", func() bool {
		return subscribers(nodes, semaphore.KeysOf(name).Channel) == 1
	})
	require.NoError(t, s1.Release(ctx, id))
	require.NoError(t, relocktest.Receive(t, got, 15*time.Second, name+": the waiter to be woken by the release"), "%s: waiter", name)
	n, err := s1.AvailablePermits(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "%s: AvailablePermits", name)
	_, err = s1.Delete(ctx)
	require.NoError(t, err)
}

// latchOpens: a waiter of one Client is woken when another counts the
// latch down to 0.
func latchOpens(t *testing.T, nodes []*redistest.Server, c1, c2 *rlock.Client, name string) {
	t.Helper()
	ctx := t.Context()
	l1, l2 := c1.GetCountDownLatch(name), c2.GetCountDownLatch(name)
	ok, err := l1.TrySetCount(ctx, 2)
	require.NoError(t, err, "%s: TrySetCount", name)
	require.True(t, ok, "%s: TrySetCount", name)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	got := make(chan error, 1)
	go func() { got <- l2.Await(wctx) }()
	relocktest.Eventually(t, 10*time.Second, "the latch waiter to subscribe", func() bool { return subscribers(nodes, latch.Channel(name)) == 1 })
	for range 2 {
		require.NoError(t, l1.CountDown(ctx))
	}
	require.NoError(t, relocktest.Receive(t, got, 15*time.Second, name+": the latch waiter to go on"), "%s: Await", name)
}
