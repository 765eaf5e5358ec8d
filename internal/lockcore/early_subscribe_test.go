package lockcore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/pubsub"
)

// TestEarlySubscribeDoesNotWaitForPending: a waiter whose subscription is
// not made yet (the Client's pub/sub connection stalled) keeps the lock's
// channel registered in the Client's hub. A second call on the lock, of
// the same Client, made after the lock was released unheard, does not
// wait for that subscription before its first attempt (the hub has the
// channel, but it is not subscribed: subscribing early would not cost "no
// round trip"): it takes the free lock at once.
func TestEarlySubscribeDoesNotWaitForPending(t *testing.T) {
	srv := redistest.Shared(t)
	raw := srv.Client(t)
	proxy, err := relocktest.NewProxy(srv.Addr)
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

	c, err := lockcore.NewCore(lockcore.Config{RDB: raw, ReplicasSet: true})
	if err != nil {
		t.Fatal(err)
	}
	// The Client's commands go straight to the server, its pub/sub
	// through the proxy.
	_ = c.Hub.Close()
	c.Hub = pubsub.New(subRDB, pubsub.Options{})
	t.Cleanup(func() { _ = c.Close() })
	other, err := lockcore.NewCore(lockcore.Config{RDB: srv.Client(t), ReplicasSet: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close() })

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
