package topology_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// failover kills the master and waits until the sentinels promote the
// replica.
func failover(t *testing.T, st *redistest.Sentinel) {
	t.Helper()
	old := st.Master.Addr
	st.Master.Kill()
	// A sentinel is asked to fail over at once: the promotion then waits
	// for no vote. (Left to their election, the sentinels on a loaded
	// machine may split a vote, and the next comes two failover timeouts,
	// 10s, later.) Until the replica is known as one to promote, it
	// answers an error, and is asked again.
	asked := false
	relocktest.Eventually(t, 10*time.Second, "the sentinels to promote the replica", func() bool {
		if !asked {
			_, err := st.Sentinels[0].Do(t.Context(), "SENTINEL", "FAILOVER", st.MasterSet)
			asked = err == nil
		}
		addr, err := st.MasterAddr(t.Context())
		return err == nil && addr != old
	})
}

// TestSentinelLostWriteReportedLost loses a hold's write in a failover (the
// replica is made to miss it) and checks that the watchdog reports the
// hold lost instead of keeping it, and that a waiter recovers and takes
// the lock on the new master.
func TestSentinelLostWriteReportedLost(t *testing.T) {
	st := redistest.StartSentinel(t)
	ctx := t.Context()
	holderClient := newClient(t, st.ClientOption(), rlock.WithWatchdogTimeout(900*time.Millisecond))
	waiterClient := newClient(t, st.ClientOption())
	name := "sentinel:lost"
	a := rlock.WithOwner(ctx, "a")
	b := rlock.WithOwner(ctx, "b")

	holder := holderClient.GetLock(name)
	require.NoError(t, holder.Lock(a))
	done := holder.Done(a)
	got := make(chan error, 1)
	go func() { got <- waiterClient.GetLock(name).Lock(b) }()
	// Two subscribers: the waiter, and the holder, which listens for a
	// force-unlock while someone watches its hold (Done).
	relocktest.Eventually(t, 10*time.Second, "the waiter to subscribe", func() bool {
		msg, err := st.Master.Do(ctx, "PUBSUB", "NUMSUB", "redisson_lock__channel:{"+name+"}")
		vals, _ := msg.ToArray()
		n := int64(0)
		if err == nil && len(vals) == 2 {
			n, _ = vals[1].AsInt64()
		}
		return n == 2
	})
	// The replica misses the write: delete the hold there directly, as if
	// replication had not carried it before the master died.
	relocktest.Eventually(t, 10*time.Second, "the hold to reach the replica", func() bool {
		msg, err := st.Replica.Do(ctx, "EXISTS", name)
		n, _ := msg.AsInt64()
		return err == nil && n == 1
	})
	_, err := st.Replica.Do(ctx, "CONFIG", "SET", "replica-read-only", "no")
	require.NoError(t, err)
	_, err = st.Replica.Do(ctx, "DEL", name)
	require.NoError(t, err)
	failover(t, st)

	relocktest.Receive(t, done, 15*time.Second, "the lost hold to be reported")
	require.NoError(t, relocktest.Receive(t, got, 15*time.Second, "the waiter to recover after the failover"), "waiter after failover")
	held, err := waiterClient.GetLock(name).IsHeldByOwner(b)
	require.NoError(t, err)
	assert.True(t, held, "the waiter holds the lock")
	_ = waiterClient.GetLock(name).Unlock(b)
}

// TestSentinelWaiterResubscribes keeps a hold across a failover (its write
// reached the replica) and checks that a waiter, whose subscription was on
// the old master, is woken by the unlock on the new one.
func TestSentinelWaiterResubscribes(t *testing.T) {
	st := redistest.StartSentinel(t)
	ctx := t.Context()
	c1 := newClient(t, st.ClientOption())
	c2 := newClient(t, st.ClientOption())
	name := "sentinel:resubscribe"
	a := rlock.WithOwner(ctx, "a")
	b := rlock.WithOwner(ctx, "b")
	require.NoError(t, c1.GetLock(name).Lock(a))
	relocktest.Eventually(t, 10*time.Second, "the hold to reach the replica", func() bool {
		msg, err := st.Replica.Do(ctx, "EXISTS", name)
		n, _ := msg.AsInt64()
		return err == nil && n == 1
	})
	got := make(chan error, 1)
	go func() { got <- c2.GetLock(name).Lock(b) }()
	failover(t, st)
	// The holder still holds on the new master; its unlock must wake the
	// waiter there. The first command on a dead connection may fail: the
	// unlock is latched, so retrying it is safe.
	var err error
	relocktest.Eventually(t, 5*time.Second, "the unlock to reach the new master", func() bool {
		uctx, cancel := context.WithTimeout(a, time.Second)
		defer cancel()
		err = c1.GetLock(name).Unlock(uctx)
		return err == nil || errors.Is(err, rlock.ErrNotHeld)
	})
	require.NoError(t, err, "unlock after failover")
	require.NoError(t, relocktest.Receive(t, got, 15*time.Second, "the waiter to be woken after the failover"), "waiter")
	_ = c2.GetLock(name).Unlock(b)
}

func TestReplicaSync(t *testing.T) {
	st := redistest.StartSentinel(t)
	ctx := t.Context()
	a := rlock.WithOwner(ctx, "a")

	ok1 := newClient(t, st.ClientOption(), rlock.WithReplicaSync(1, time.Second))
	l := ok1.GetLock("sync:one")
	require.NoError(t, l.Lock(a), "Lock with one replica required")
	_ = l.Unlock(a)

	tooMany := newClient(t, st.ClientOption(), rlock.WithReplicaSync(2, 50*time.Millisecond))
	l = tooMany.GetLock("sync:two")
	err := l.Lock(a)
	assert.ErrorIs(t, err, rlock.ErrReplicaSync, "Lock with two replicas required")
	assert.ErrorIs(t, err, rlock.ErrNotAcquired, "Lock with two replicas required")
	locked, err := l.IsLocked(context.WithoutCancel(ctx))
	require.NoError(t, err)
	assert.False(t, locked, "IsLocked after a failed replica check")
	_, err = rlock.NewClient(st.ClientOption(), rlock.WithReplicaSync(-1, time.Second))
	assert.ErrorIs(t, err, rlock.ErrInvalidArgument, "WithReplicaSync(-1)")
}
