package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

func TestUnlockForce(t *testing.T) {
	srv := server(t)
	c := relocktest.Client(t)
	name := relocktest.Name(t)
	stuck := rlock.WithOwner(t.Context(), "stuck")
	l := c.GetLock(name)
	if err := l.Lock(stuck); err != nil {
		t.Fatal(err)
	}

	r := relock(t, "unlock", "--redis", srv.Addr, name)
	wantCode(t, r, exitUsage)
	if !strings.Contains(r.stderr, "--force") {
		t.Errorf("stderr = %q, want it to mention --force", r.stderr)
	}
	if locked, err := l.IsLocked(t.Context()); err != nil || !locked {
		t.Fatalf("after unlock without --force: IsLocked = %v, %v; want true", locked, err)
	}

	r = relock(t, "unlock", "--force", "--redis", srv.Addr, name)
	wantCode(t, r, 0)
	if want := "was held by " + c.ID() + ":stuck"; !strings.Contains(r.stdout, want) {
		t.Errorf("stdout = %q, want it to contain %q", r.stdout, want)
	}
	if locked, err := l.IsLocked(t.Context()); err != nil || locked {
		t.Errorf("after unlock --force: IsLocked = %v, %v; want false", locked, err)
	}

	r = relock(t, "unlock", "--force", "--redis", srv.Addr, name)
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, "was not held") {
		t.Errorf("stdout = %q, want it to say the lock was not held", r.stdout)
	}
}

// TestUnlockForceWakesFairWaiter: force-unlocking a fair lock hands it to
// the head of its queue.
func TestUnlockForceWakesFairWaiter(t *testing.T) {
	srv := server(t)
	c1, c2 := relocktest.Client(t), relocktest.Client(t)
	name := relocktest.Name(t)
	if err := c1.GetFairLock(name).Lock(rlock.WithOwner(t.Context(), "stuck")); err != nil {
		t.Fatal(err)
	}
	waiter := rlock.WithOwner(t.Context(), "waiter")
	wl := c2.GetFairLock(name)
	waitCtx, cancel := context.WithCancel(waiter)
	defer cancel()
	got := make(chan error, 1)
	go func() { got <- wl.Lock(waitCtx) }()
	rdb := relocktest.Raw(t)
	relocktest.Eventually(t, 10*time.Second, "the waiter to queue", func() bool {
		n, err := rdb.Do(t.Context(), rdb.B().Llen().Key(lockcore.Derived(lockcore.QueuePrefix, name)).Build()).AsInt64()
		return err == nil && n == 1
	})

	r := relock(t, "unlock", "--force", "--redis", srv.Addr, name)
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, "woke the head of its fair queue: "+c2.ID()+":waiter") {
		t.Errorf("stdout = %q, want it to name the woken waiter", r.stdout)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("the waiter's Lock = %v", err)
		}
	case <-time.After(5 * time.Second):
		cancel()
		<-got
		t.Fatal("the waiter did not get the lock within 5s of the force-unlock")
	}
	if err := wl.Unlock(waiter); err != nil {
		t.Error(err)
	}
}
