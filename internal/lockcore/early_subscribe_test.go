package lockcore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/pubsub"
)

// stalledSubCores returns a Core whose commands go straight to the
// server and whose pub/sub goes through proxy, another Core on the
// server, and the server's raw client; all closed when t ends.
func stalledSubCores(t *testing.T) (c, other *lockcore.Core, proxy *relocktest.Proxy, raw rueidis.Client) {
	t.Helper()
	srv := redistest.Shared(t)
	raw = srv.Client(t)
	var err error
	proxy, err = relocktest.NewProxy(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	opt := srv.ClientOption()
	opt.InitAddress = []string{proxy.Addr()}
	subRDB, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(subRDB.Close)

	c, err = lockcore.NewCore(lockcore.Config{RDB: raw, ReplicasSet: true})
	if err != nil {
		t.Fatal(err)
	}
	// The Client's commands go straight to the server, its pub/sub
	// through the proxy.
	_ = c.Hub.Close()
	c.Hub = pubsub.New(subRDB, pubsub.Options{})
	t.Cleanup(func() { _ = c.Close() })
	other, err = lockcore.NewCore(lockcore.Config{RDB: srv.Client(t), ReplicasSet: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close() })

	return c, other, proxy, raw
}

// TestEarlySubscribeDoesNotWaitForPending: a waiter whose subscription is
// not made yet (the Client's pub/sub connection stalled) keeps the lock's
// channel registered in the Client's hub. A second call on the lock, of
// the same Client, made after the lock was released unheard, does not
// wait for that subscription before its first attempt (the hub has the
// channel, but it is not subscribed: subscribing early would not cost "no
// round trip"): it takes the free lock at once.
func TestEarlySubscribeDoesNotWaitForPending(t *testing.T) {
	c, other, proxy, raw := stalledSubCores(t)

	name := "early-subscribe:" + t.Name()
	t.Cleanup(func() { raw.Do(context.Background(), raw.B().Del().Key(name).Build()) })
	holder := lockcore.WithOwner(t.Context(), "holder")
	if err := lockcore.NewMutex(other, name, lockcore.Reentrant{}).Lock(holder); err != nil {
		t.Fatal(err)
	}
	proxy.Stall()
	t.Cleanup(proxy.Resume)

	m := lockcore.NewMutex(c, name, lockcore.Reentrant{})
	actx, stopA := context.WithCancel(t.Context())
	aDone := make(chan error, 1)
	go func() { aDone <- m.Lock(lockcore.WithOwner(actx, "a")) }()
	t.Cleanup(func() {
		stopA()
		<-aDone
	})
	// a waits, its subscription begun and stalled.
	relocktest.Eventually(t, 10*time.Second, "a's subscription to be begun", func() bool {
		return c.Hub.Has(layout.Channel(name))
	})
	if err := lockcore.NewMutex(other, name, lockcore.Reentrant{}).Unlock(holder); err != nil {
		t.Fatal(err)
	}

	b := lockcore.WithOwner(t.Context(), "b")
	bDone := make(chan error, 1)
	go func() {
		_, ok, err := m.Acquire(b, 30*time.Second, 0)
		if err == nil && !ok {
			err = context.DeadlineExceeded
		}
		bDone <- err
	}()
	select {
	case err := <-bDone:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("b did not take the free lock within 10s: it waits for a's stalled subscription before its first attempt")
	}
	if err := m.Unlock(b); err != nil {
		t.Fatal(err)
	}
}

// TestPendingSubscriptionEnds: a waiter whose subscription is stalled
// (the Client's pub/sub connection forwards nothing) leaves nothing
// behind when its context ends (no waiter left on the lock's channel in
// the hub), and one that waits so when the Client closes returns
// ErrClosed (Close itself may wait for the hub's dial of
// its pub/sub connection, which the stall holds up to the dial timeout;
// goleak, in TestMain, checks that no goroutine is left).
func TestPendingSubscriptionEnds(t *testing.T) {
	c, other, proxy, raw := stalledSubCores(t)
	name := "pending-ends:" + t.Name()
	t.Cleanup(func() { raw.Do(context.Background(), raw.B().Del().Key(name).Build()) })
	holder := lockcore.WithOwner(t.Context(), "holder")
	if err := lockcore.NewMutex(other, name, lockcore.Reentrant{}).Lock(holder); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lockcore.NewMutex(other, name, lockcore.Reentrant{}).Unlock(holder) })
	proxy.Stall()
	t.Cleanup(proxy.Resume)
	m := lockcore.NewMutex(c, name, lockcore.Reentrant{})
	ch := layout.Channel(name)

	// The context ends while the subscription is pending.
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- m.Lock(lockcore.WithOwner(ctx, "a")) }()
	relocktest.Eventually(t, 10*time.Second, "a's subscription to be begun", func() bool { return c.Hub.Has(ch) })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock = %v, want context.Canceled", err)
	}
	if c.Hub.Has(ch) {
		t.Error("the hub still has a waiter on the lock's channel after the call ended")
	}

	// The Client closes while the subscription is pending.
	go func() { done <- m.Lock(lockcore.WithOwner(t.Context(), "b")) }()
	relocktest.Eventually(t, 10*time.Second, "b's subscription to be begun", func() bool { return c.Hub.Has(ch) })
	go func() { _ = c.Close() }()
	err := <-done
	if !errors.Is(err, relock.ErrClosed) {
		t.Fatalf("Lock = %v, want ErrClosed", err)
	}
}
