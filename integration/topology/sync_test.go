package topology_test

import (
	"context"
	"fmt"
	"github.com/relock-go/relock/internal/layout"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/latch"
	"github.com/relock-go/relock/rlock"
	"github.com/relock-go/relock/rwlock"
	"github.com/relock-go/relock/semaphore"
)

// TestClusterSync runs the read-write lock, the semaphore and the
// count-down latch on a cluster, with names served by every node and one
// with a hash tag of its own, under classic and sharded pub/sub: every key
// of one object shares a slot, every script runs on its node, and every
// wake-up arrives.
func TestClusterSync(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	raw := newRaw(t, cl.ClientOption())
	for _, sharded := range []bool{false, true} {
		opts := []rlock.Option{rlock.WithWatchdogTimeout(300 * time.Millisecond)}
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
			t.Run("WriteLock", func(t *testing.T) {
				k := kind{"WriteLock", func(c *rlock.Client, name string) locker { return c.GetReadWriteLock(name).WriteLock() },
					func(name, _ string) string { return rwlock.Channel(name) }}
				for _, name := range namesOnEveryNode(t, cl, "cl:"+mode+":write") {
					behave(t, cl.Nodes, c1, c2, k, name)
				}
			})
			t.Run("ReadWriteLock", func(t *testing.T) {
				for _, name := range namesOnEveryNode(t, cl, "cl:"+mode+":rw") {
					readersAndWriter(t, cl.Nodes, raw, c1, c2, name)
				}
			})
			t.Run("Semaphore", func(t *testing.T) {
				for _, name := range namesOnEveryNode(t, cl, "cl:"+mode+":sem") {
					permitHandoff(t, cl.Nodes, raw, c1, c2, name)
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

func pttlOf(t *testing.T, raw rueidis.Client, key string) int64 {
	t.Helper()
	n, err := raw.Do(t.Context(), raw.B().Pttl().Key(key).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// readersAndWriter: readers of two Clients share the lock, renewed by the
// watchdog (their lease keys outlive several leases); a writer waits for
// both and gets in when the last leaves; its release wakes a waiting
// reader.
func readersAndWriter(t *testing.T, nodes []*redistest.Server, raw rueidis.Client, c1, c2 *rlock.Client, name string) {
	t.Helper()
	ctx := t.Context()
	a, b, w := rlock.WithOwner(ctx, "a"), rlock.WithOwner(ctx, "b"), rlock.WithOwner(ctx, "w")
	r1, r2 := c1.GetReadWriteLock(name).ReadLock(), c2.GetReadWriteLock(name).ReadLock()
	if err := r1.Lock(a); err != nil {
		t.Fatalf("%s: read: %v", name, err)
	}
	if err := r2.Lock(b); err != nil {
		t.Fatalf("%s: second read: %v", name, err)
	}
	leaseKey := rwlock.LeaseKey(name, layout.Field(c1.ID(), "a"), 1)
	for i := range 3 { // renewals: the lease key's PTTL runs down and comes back
		relocktest.Eventually(t, 10*time.Second, fmt.Sprint(name, ": lease running down ", i), func() bool { return pttlOf(t, raw, leaseKey) < 240 })
		relocktest.Eventually(t, 10*time.Second, fmt.Sprint(name, ": renewal ", i), func() bool { return pttlOf(t, raw, leaseKey) > 260 })
	}
	writer := c2.GetReadWriteLock(name).WriteLock()
	got := make(chan error, 1)
	go func() { got <- writer.Lock(w) }()
	relocktest.Eventually(t, 10*time.Second, "the writer to subscribe", func() bool { return subscribers(t, nodes, rwlock.Channel(name)) == 1 })
	_ = r1.Unlock(a)
	_ = r2.Unlock(b)
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("%s: writer: %v", name, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: the writer was not woken by the last read release", name)
	}
	go func() { got <- r1.Lock(a) }()
	relocktest.Eventually(t, 10*time.Second, "the reader to subscribe", func() bool { return subscribers(t, nodes, rwlock.Channel(name)) == 1 })
	if err := writer.Unlock(w); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("%s: reader: %v", name, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: the reader was not woken by the write release", name)
	}
	if err := r1.Unlock(a); err != nil {
		t.Fatal(err)
	}
	if locked, err := writer.IsLocked(ctx); locked || err != nil {
		t.Errorf("%s: locked after every release: %v, %v", name, locked, err)
	}
}

// permitHandoff: a permit renewed by the watchdog outlives several leases;
// its release hands it to another Client's waiter at once.
func permitHandoff(t *testing.T, nodes []*redistest.Server, raw rueidis.Client, c1, c2 *rlock.Client, name string) {
	t.Helper()
	ctx := t.Context()
	s1, s2 := c1.GetSemaphore(name), c2.GetSemaphore(name)
	if ok, err := s1.TrySetPermits(ctx, 1); !ok || err != nil {
		t.Fatalf("%s: TrySetPermits = %v, %v", name, ok, err)
	}
	id, err := s1.Acquire(ctx, 0)
	if err != nil {
		t.Fatalf("%s: Acquire: %v", name, err)
	}
	leases := semaphore.KeysOf(name).Leases
	score := func() float64 {
		zs, err := raw.Do(ctx, raw.B().Zrange().Key(leases).Min("0").Max("-1").Withscores().Build()).AsZScores()
		if err != nil || len(zs) != 1 {
			t.Fatalf("%s: leases %v, %v", name, zs, err)
		}
		return zs[0].Score
	}
	last := score()
	for i := range 3 {
		relocktest.Eventually(t, 10*time.Second, fmt.Sprint(name, ": permit renewal ", i), func() bool {
			if s := score(); s > last {
				last = s
				return true
			}
			return false
		})
	}
	got := make(chan error, 1)
	go func() {
		id2, err := s2.Acquire(ctx, 10*time.Second)
		if err == nil {
			err = s2.Release(ctx, id2)
		}
		got <- err
	}()
	relocktest.Eventually(t, 10*time.Second, "the waiter to subscribe", func() bool {
		return subscribers(t, nodes, semaphore.KeysOf(name).Channel) == 1
	})
	if err := s1.Release(ctx, id); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("%s: waiter: %v", name, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: the waiter was not woken by the release", name)
	}
	if n, err := s1.AvailablePermits(ctx); n != 1 || err != nil {
		t.Errorf("%s: AvailablePermits = %d, %v", name, n, err)
	}
	if _, err := s1.Delete(ctx); err != nil {
		t.Fatal(err)
	}
}

// latchOpens: a waiter of one Client is woken when another counts the
// latch down to 0.
func latchOpens(t *testing.T, nodes []*redistest.Server, c1, c2 *rlock.Client, name string) {
	t.Helper()
	ctx := t.Context()
	l1, l2 := c1.GetCountDownLatch(name), c2.GetCountDownLatch(name)
	if ok, err := l1.TrySetCount(ctx, 2); !ok || err != nil {
		t.Fatalf("%s: TrySetCount = %v, %v", name, ok, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	got := make(chan error, 1)
	go func() { got <- l2.Await(wctx) }()
	relocktest.Eventually(t, 10*time.Second, "the latch waiter to subscribe", func() bool { return subscribers(t, nodes, latch.Channel(name)) == 1 })
	for range 2 {
		if err := l1.CountDown(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-got; err != nil {
		t.Fatalf("%s: Await: %v", name, err)
	}
}
