package topology_test

import (
	"context"
	"errors"
	"testing"
	"time"

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
	relocktest.Eventually(t, 10*time.Second, "the sentinels to promote the replica", func() bool {
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
	if err := holder.Lock(a); err != nil {
		t.Fatal(err)
	}
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
	if _, err := st.Replica.Do(ctx, "CONFIG", "SET", "replica-read-only", "no"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Replica.Do(ctx, "DEL", name); err != nil {
		t.Fatal(err)
	}
	failover(t, st)

	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("the lost hold was not reported")
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("waiter after failover: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the waiter did not recover after the failover")
	}
	if held, err := waiterClient.GetLock(name).IsHeldByOwner(b); err != nil || !held {
		t.Errorf("waiter holds = %v, %v", held, err)
	}
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
	if err := c1.GetLock(name).Lock(a); err != nil {
		t.Fatal(err)
	}
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
	for range 50 {
		if err = c1.GetLock(name).Unlock(a); err == nil || errors.Is(err, rlock.ErrNotHeld) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("unlock after failover: %v", err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("waiter: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("waiter not woken after the failover")
	}
	_ = c2.GetLock(name).Unlock(b)
}

func TestReplicaSync(t *testing.T) {
	st := redistest.StartSentinel(t)
	ctx := t.Context()
	a := rlock.WithOwner(ctx, "a")

	ok1 := newClient(t, st.ClientOption(), rlock.WithReplicaSync(1, time.Second))
	l := ok1.GetLock("sync:one")
	if err := l.Lock(a); err != nil {
		t.Fatalf("Lock with one replica required: %v", err)
	}
	_ = l.Unlock(a)

	tooMany := newClient(t, st.ClientOption(), rlock.WithReplicaSync(2, 50*time.Millisecond))
	l = tooMany.GetLock("sync:two")
	err := l.Lock(a)
	if !errors.Is(err, rlock.ErrReplicaSync) || !errors.Is(err, rlock.ErrNotAcquired) {
		t.Errorf("Lock with two replicas required = %v, want ErrReplicaSync and ErrNotAcquired", err)
	}
	if locked, err := l.IsLocked(context.WithoutCancel(ctx)); err != nil || locked {
		t.Errorf("IsLocked after a failed replica check = %v, %v, want false", locked, err)
	}
	if _, err := rlock.NewClient(st.ClientOption(), rlock.WithReplicaSync(-1, time.Second)); !errors.Is(err, rlock.ErrInvalidArgument) {
		t.Errorf("WithReplicaSync(-1) = %v, want ErrInvalidArgument", err)
	}
}
