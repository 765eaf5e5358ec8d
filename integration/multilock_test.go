package integration_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/multilock"
	"github.com/relock-go/relock/rlock"
)

// spread returns one lock per master, each with its own name.
func (m *masters) spread(names ...string) []*rlock.Lock {
	ls := make([]*rlock.Lock, len(names))
	for i, n := range names {
		ls[i] = m.clients[i%len(m.clients)].GetLock(n)
	}
	return ls
}

func TestMultiLockAllOrNothing(t *testing.T) {
	m := startMasters(t, 3)
	ls := m.spread("ml:a", "ml:b", "ml:c")
	ml := multilock.New(lockers(ls)...)

	// Another owner, on another Client, holds b.
	other := relocktest.ClientOn(t, m.srvs[1]).GetLock("ml:b")
	otherCtx := rlock.WithOwner(t.Context(), "other")
	if err := other.LockLease(otherCtx, time.Minute); err != nil {
		t.Fatal(err)
	}

	ctx := rlock.WithOwner(t.Context(), "o")
	for _, wait := range []time.Duration{0, 100 * time.Millisecond} {
		ok, err := ml.TryLock(ctx, wait, 0)
		if ok || err != nil {
			t.Fatalf("wait %v: TryLock = %v, %v; want false, nil", wait, ok, err)
		}
		for i, name := range []string{"ml:a", "ml:b", "ml:c"} {
			if own := m.ownFields(t, i, name); len(own) != 0 {
				t.Errorf("wait %v: %s left held by us: %v", wait, name, own)
			}
		}
		if n := len(m.fields(t, 1, "ml:b")); n != 1 {
			t.Errorf("wait %v: ml:b has %d fields, want the other owner's only", wait, n)
		}
	}

	// Once b is free, the MultiLock gets all three.
	if err := other.Unlock(otherCtx); err != nil {
		t.Fatal(err)
	}
	if ok, err := ml.TryLock(ctx, 5*time.Second, 0); !ok || err != nil {
		t.Fatalf("TryLock after b was freed = %v, %v", ok, err)
	}
	for i, name := range []string{"ml:a", "ml:b", "ml:c"} {
		if got := m.fields(t, i, name)[m.clients[i].ID()+":o"]; got != "1" {
			t.Errorf("%s: hold count %q, want 1", name, got)
		}
	}
	if err := ml.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"ml:a", "ml:b", "ml:c"} {
		if m.exists(t, i, name) {
			t.Errorf("%s left after Unlock", name)
		}
	}
}

// A failed TryLock releases exactly the levels it took: a lock the owner
// already held keeps its earlier level, and a lock held by someone else is
// left alone.
func TestMultiLockReleasesExactlyWhatItTook(t *testing.T) {
	m := startMasters(t, 3)
	ls := m.spread("ml:x", "ml:y", "ml:z")
	ctx := rlock.WithOwner(t.Context(), "o")
	if err := ls[0].Lock(ctx); err != nil { // o holds x already
		t.Fatal(err)
	}
	other := relocktest.ClientOn(t, m.srvs[2]).GetLock("ml:z")
	otherCtx := rlock.WithOwner(t.Context(), "other")
	if err := other.LockLease(otherCtx, time.Minute); err != nil {
		t.Fatal(err)
	}

	ml := multilock.New(ls[2], ls[1], ls[0])
	if ok, err := ml.TryLock(ctx, 50*time.Millisecond, 0); ok || err != nil {
		t.Fatalf("TryLock = %v, %v; want false, nil", ok, err)
	}
	if n, err := ls[0].HoldCount(ctx); n != 1 || err != nil {
		t.Errorf("x: HoldCount = %d, %v; want 1 (the level held before)", n, err)
	}
	if m.exists(t, 1, "ml:y") {
		t.Error("y left held")
	}
	if held, err := other.IsHeldByOwner(otherCtx); !held || err != nil {
		t.Errorf("z: held by the other owner = %v, %v; want true", held, err)
	}
	if err := ls[0].Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// Two MultiLocks over the same locks, given in opposite orders, contend
// from several goroutines without deadlock, and exclude each other.
func TestMultiLockNoDeadlock(t *testing.T) {
	m := startMasters(t, 3)
	ls := lockers(m.spread("ml:p", "ml:q", "ml:r"))
	forward := multilock.New(ls...)
	backward := multilock.New(ls[2], ls[1], ls[0])

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var inside atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		ml := forward
		if g%2 == 1 {
			ml = backward
		}
		wg.Go(func() {
			for range 15 {
				err := ml.Do(ctx, func(context.Context) error {
					if n := inside.Add(1); n != 1 {
						return errors.New("two holders at once")
					}
					inside.Add(-1)
					return nil
				})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A MultiLock of a RedLock and a Lock, and the RedLock as a Locker.
func TestMultiLockComposition(t *testing.T) {
	m := startMasters(t, 4)
	red := multilock.NewRedLock(
		m.clients[0].GetLock("ml:red"), m.clients[1].GetLock("ml:red"), m.clients[2].GetLock("ml:red"))
	plain := m.clients[3].GetLock("ml:plain")
	ml := multilock.New(plain, red)
	if got, want := ml.Name(), "multilock[ml:plain,ml:red]"; got != want {
		t.Errorf("Name = %q, want %q", got, want)
	}
	var owner string
	err := ml.Do(t.Context(), func(ctx context.Context) error {
		owner, _ = rlock.OwnerFrom(ctx)
		if held, err := plain.IsHeldByOwner(ctx); !held || err != nil {
			return errors.Join(errors.New("plain lock not held"), err)
		}
		held := 0
		for i := range 3 {
			if m.fields(t, i, "ml:red")[m.clients[i].ID()+":"+owner] == "1" {
				held++
			}
		}
		if held < 2 {
			return errors.New("RedLock not held on a majority")
		}
		select {
		case <-red.Done(ctx):
			return errors.New("RedLock.Done closed while held")
		default:
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if owner == "" {
		t.Fatal("Do gave fn no owner")
	}
	for i, name := range []string{"ml:red", "ml:red", "ml:red", "ml:plain"} {
		if m.exists(t, i, name) {
			t.Errorf("master %d: %s left after Do", i, name)
		}
	}

	// The RedLock as a Locker held by someone else makes the MultiLock
	// fail, and leaves plain free.
	otherCtx := rlock.WithOwner(t.Context(), "other")
	if ok, err := red.TryLock(otherCtx, time.Second, time.Minute); !ok || err != nil {
		t.Fatalf("RedLock TryLock = %v, %v", ok, err)
	}
	if ok, err := ml.TryLock(t.Context(), 0, 0); ok || err != nil {
		t.Errorf("MultiLock TryLock = %v, %v; want false, nil", ok, err)
	}
	if m.exists(t, 3, "ml:plain") {
		t.Error("plain left held after the MultiLock failed")
	}
	if err := red.Unlock(otherCtx); err != nil {
		t.Fatal(err)
	}
}

func TestMultiLockUnlockCancelledContext(t *testing.T) {
	m := startMasters(t, 2)
	ls := m.spread("ml:u", "ml:v")
	ml := multilock.New(lockers(ls)...)
	ctx, cancel := context.WithCancel(rlock.WithOwner(t.Context(), "o"))
	if err := ml.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := ml.Unlock(ctx); err != nil {
		t.Fatalf("Unlock with a cancelled context: %v", err)
	}
	for i, name := range []string{"ml:u", "ml:v"} {
		if m.exists(t, i, name) {
			t.Errorf("%s left after Unlock", name)
		}
	}
}

// A lock of the set lost while held (here force-unlocked by an operator)
// cancels Do's context with ErrLockLost.
func TestMultiLockLoss(t *testing.T) {
	m := startMasters(t, 2)
	ls := m.spread("ml:s", "ml:t")
	ml := multilock.New(lockers(ls)...)
	err := ml.Do(t.Context(), func(ctx context.Context) error {
		if _, err := ls[1].ForceUnlock(ctx); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(20 * time.Second):
			return errors.New("fn's context not cancelled")
		}
	})
	if !errors.Is(err, rlock.ErrLockLost) {
		t.Errorf("Do = %v, want ErrLockLost", err)
	}
	if m.exists(t, 0, "ml:s") {
		t.Error("ml:s left after Do")
	}
}
