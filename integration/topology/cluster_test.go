// Package topology_test runs the lock kinds on a local Redis Cluster and
// behind Sentinel, with servers the tests start themselves.
package topology_test

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
	"github.com/relock-go/relock/multilock"
	"github.com/relock-go/relock/rlock"
)

// TestMain ignores the goroutines a closed rueidis cluster client leaves
// for a few seconds (redistest.ClusterLeftovers).
func TestMain(m *testing.M) {
	redistest.Main(m, redistest.ClusterLeftovers...)
}

// locker is what the behaviour checks need of every lock kind.
type locker interface {
	Name() string
	Lock(ctx context.Context) error
	TryLock(ctx context.Context, wait, lease time.Duration) (bool, error)
	Unlock(ctx context.Context) error
	HoldCount(ctx context.Context) (int, error)
	IsLocked(ctx context.Context) (bool, error)
}

type kind struct {
	name string
	get  func(c *rlock.Client, name string) locker
	// channel is where a waiter with the given hash field listens.
	channel func(name, field string) string
}

func lockChannel(name, _ string) string { return layout.Channel(name) }

var kinds = []kind{
	{"Lock", func(c *rlock.Client, name string) locker { return c.GetLock(name) }, lockChannel},
	{"FairLock", func(c *rlock.Client, name string) locker { return c.GetFairLock(name) },
		func(name, field string) string { return layout.Channel(name) + ":" + field }},
	{"FencedLock", func(c *rlock.Client, name string) locker { return c.GetFencedLock(name) }, lockChannel},
}

// subscribers counts the subscribers of channel on every node, classic
// and sharded. It never fails the test (a node that does not answer counts
// none), so conditions of relocktest.Eventually use it.
func subscribers(nodes []*redistest.Server, channel string) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var total int64
	for _, s := range nodes {
		for _, sub := range []string{"NUMSUB", "SHARDNUMSUB"} {
			msg, err := s.Do(ctx, "PUBSUB", sub, channel)
			if err != nil {
				continue
			}
			if vals, _ := msg.ToArray(); len(vals) == 2 {
				n, _ := vals[1].AsInt64()
				total += n
			}
		}
	}
	return total
}

func newClient(t *testing.T, opt rueidis.ClientOption, opts ...rlock.Option) *rlock.Client {
	t.Helper()
	c, err := rlock.NewClient(opt, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// behave checks exclusion, re-entry and a prompt hand-off to a waiter on
// the lock name, between two Clients.
func behave(t *testing.T, nodes []*redistest.Server, c1, c2 *rlock.Client, k kind, name string) {
	t.Helper()
	get := k.get
	ctx := t.Context()
	a := rlock.WithOwner(ctx, "a")
	b := rlock.WithOwner(ctx, "b")
	l1, l2 := get(c1, name), get(c2, name)
	require.NoError(t, l1.Lock(a), "%s: Lock", name)
	require.NoError(t, l1.Lock(a), "%s: re-entry", name)
	n, err := l1.HoldCount(a)
	require.NoError(t, err, "%s: HoldCount", name)
	assert.Equal(t, 2, n, "%s: HoldCount", name)
	ok, err := l2.TryLock(b, 0, 0)
	require.NoError(t, err, "%s: TryLock by another owner", name)
	assert.False(t, ok, "%s: TryLock by another owner", name)
	got := make(chan error, 1)
	go func() { got <- l2.Lock(b) }()
	channel := k.channel(name, c2.ID()+":b")
	relocktest.Eventually(t, 10*time.Second, "the waiter to subscribe", func() bool { return subscribers(nodes, channel) == 1 })
	require.NoError(t, l1.Unlock(a))
	start := time.Now()
	require.NoError(t, l1.Unlock(a))
	require.NoError(t, relocktest.Receive(t, got, 10*time.Second, name+": the waiter to be woken by the unlock"), "%s: waiter", name)
	assert.LessOrEqual(t, time.Since(start), 2*time.Second, "%s: the hand-off, well under the 30s lease", name)
	require.NoError(t, l2.Unlock(b))
	locked, err := l2.IsLocked(ctx)
	require.NoError(t, err)
	assert.False(t, locked, "%s: IsLocked after release", name)
}

// namesOnEveryNode returns lock names whose slots are served by every node
// of the cluster, plus one with the user's own hash tag.
func namesOnEveryNode(t *testing.T, cl *redistest.Cluster, prefix string) []string {
	t.Helper()
	seen := map[int]bool{}
	var names []string
	for i := 0; len(seen) < len(cl.Nodes) && i < 100; i++ {
		name := fmt.Sprintf("%s:%d", prefix, i)
		node, err := cl.NodeFor(t.Context(), name)
		require.NoError(t, err)
		if !seen[node.Port] {
			seen[node.Port] = true
			names = append(names, name)
		}
	}
	require.Len(t, seen, len(cl.Nodes), "the nodes the names reach")
	return append(names, prefix+":{user:7}:orders")
}

func TestCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
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
			for _, k := range kinds {
				t.Run(k.name, func(t *testing.T) {
					for _, name := range namesOnEveryNode(t, cl, "cl:"+mode+":"+k.name) {
						behave(t, cl.Nodes, c1, c2, k, name)
					}
				})
			}
		})
	}
}

func TestClusterFairOrderAndTokens(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	c1 := newClient(t, cl.ClientOption())
	c2 := newClient(t, cl.ClientOption())
	raw := newRaw(t, cl.ClientOption())
	ctx := t.Context()
	name := "cl:fair"
	holder := rlock.WithOwner(ctx, "holder")
	require.NoError(t, c1.GetFairLock(name).Lock(holder))
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	queue := layout.Queue(name)
	// The waiters give up after 20s: a release that wakes nobody fails the
	// test then, instead of leaving wg.Wait blocked.
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for i := range 4 {
		c := []*rlock.Client{c1, c2}[i%2]
		wg.Go(func() {
			o := rlock.WithOwner(wctx, fmt.Sprint("w", i))
			l := c.GetFairLock(name)
			if !assert.NoError(t, l.Lock(o), "waiter %d", i) {
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			_ = l.Unlock(o)
		})
		relocktest.Eventually(t, 10*time.Second, "waiter queued", func() bool {
			n, err := raw.Do(ctx, raw.B().Llen().Key(queue).Build()).AsInt64()
			return err == nil && n == int64(i+1)
		})
	}
	require.NoError(t, c1.GetFairLock(name).Unlock(holder))
	wg.Wait()
	assert.Equal(t, []int{0, 1, 2, 3}, order, "the fair order on the cluster")

	var last int64
	for i := range 3 {
		c := []*rlock.Client{c1, c2}[i%2]
		l := c.GetFencedLock("cl:fenced")
		tok, err := l.LockAndGetToken(holder)
		require.NoError(t, err)
		assert.Greater(t, tok, last, "the token")
		last = tok
		_ = l.Unlock(holder)
	}
}

func TestClusterShardedSubscriptionEnds(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	needShardedPubSub(t, cl)
	c := newClient(t, cl.ClientOption(), rlock.WithShardedPubSub())
	ctx := t.Context()
	name := "cl:sharded:numsub"
	node, err := cl.NodeFor(ctx, name)
	require.NoError(t, err)
	// shardnumsub is -1 when the node does not answer: it is a condition
	// of relocktest.Eventually, and must not fail the test.
	shardnumsub := func() int64 {
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		msg, err := node.Do(qctx, "PUBSUB", "SHARDNUMSUB", layout.Channel(name))
		if err != nil {
			return -1
		}
		vals, _ := msg.ToArray()
		if len(vals) != 2 {
			return -1
		}
		n, _ := vals[1].AsInt64()
		return n
	}
	a := rlock.WithOwner(ctx, "a")
	l := c.GetLock(name)
	require.NoError(t, l.Lock(a))
	wctx, cancel := context.WithCancel(rlock.WithOwner(ctx, "b"))
	got := make(chan error, 1)
	go func() { got <- l.Lock(wctx) }()
	relocktest.Eventually(t, 10*time.Second, "SSUBSCRIBE on the lock's node", func() bool { return shardnumsub() == 1 })
	cancel()
	assert.ErrorIs(t, relocktest.Receive(t, got, 10*time.Second, "the cancelled waiter to return"), context.Canceled, "the cancelled waiter")
	relocktest.Eventually(t, 10*time.Second, "the sharded subscription to end", func() bool { return shardnumsub() == 0 })
	_ = l.Unlock(a)
}

// needShardedPubSub skips t on a cluster whose servers have no sharded
// pub/sub (before Redis 7).
func needShardedPubSub(t *testing.T, cl *redistest.Cluster) {
	t.Helper()
	if !relocktest.Knows(t, newRaw(t, cl.ClientOption()), "SSUBSCRIBE") {
		t.Skip("the servers have no sharded pub/sub (SSUBSCRIBE came with Redis 7)")
	}
}

func newRaw(t *testing.T, opt rueidis.ClientOption) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(opt)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// TestClusterMultiLock takes a MultiLock over locks served by every node:
// each lock's keys stay in its own slot, so nothing crosses slots.
func TestClusterMultiLock(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	c1 := newClient(t, cl.ClientOption())
	c2 := newClient(t, cl.ClientOption())
	ctx := t.Context()
	names := namesOnEveryNode(t, cl, "cl:multi")
	set := func(c *rlock.Client) *multilock.MultiLock {
		var locks []multilock.Locker
		for _, n := range names {
			locks = append(locks, c.GetLock(n))
		}
		return multilock.New(locks...)
	}
	a := rlock.WithOwner(ctx, "a")
	b := rlock.WithOwner(ctx, "b")
	m1, m2 := set(c1), set(c2)
	require.NoError(t, m1.Lock(a))
	ok, err := m2.TryLock(b, 0, 0)
	require.NoError(t, err, "second MultiLock")
	assert.False(t, ok, "second MultiLock")
	for _, n := range names {
		held, err := c2.GetLock(n).IsHeldByOwner(b)
		require.NoError(t, err)
		assert.False(t, held, "%s held by b after a failed MultiLock", n)
	}
	got := make(chan error, 1)
	go func() { got <- m2.Lock(b) }()
	require.NoError(t, m1.Unlock(a))
	require.NoError(t, relocktest.Receive(t, got, 10*time.Second, "the waiting MultiLock to be woken"))
	require.NoError(t, m2.Unlock(b))
}
