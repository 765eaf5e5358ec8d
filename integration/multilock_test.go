package integration_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	require.NoError(t, other.LockLease(otherCtx, time.Minute))

	ctx := rlock.WithOwner(t.Context(), "o")
	for _, wait := range []time.Duration{0, 100 * time.Millisecond} {
		ok, err := ml.TryLock(ctx, wait, 0)
		require.NoError(t, err, "wait %v: TryLock", wait)
		require.False(t, ok, "wait %v: TryLock", wait)
		for i, name := range []string{"ml:a", "ml:b", "ml:c"} {
			own, err := m.ownFields(i, name)
			require.NoError(t, err, "HGETALL %s", name)
			assert.Empty(t, own, "wait %v: %s left held by us", wait, name)
		}
		assert.Len(t, m.fields(t, 1, "ml:b"), 1, "wait %v: ml:b's fields, the other owner's only", wait)
	}

	// Once b is free, the MultiLock gets all three.
	require.NoError(t, other.Unlock(otherCtx))
	ok, err := ml.TryLock(ctx, 5*time.Second, 0)
	require.NoError(t, err, "TryLock after b was freed")
	require.True(t, ok, "TryLock after b was freed")
	for i, name := range []string{"ml:a", "ml:b", "ml:c"} {
		assert.Equal(t, "1", m.fields(t, i, name)[m.clients[i].ID()+":o"], "%s: the hold count", name)
	}
	require.NoError(t, ml.Unlock(ctx))
	for i, name := range []string{"ml:a", "ml:b", "ml:c"} {
		assert.False(t, m.exists(t, i, name), "%s left after Unlock", name)
	}
}

// A failed TryLock releases exactly the levels it took: a lock the owner
// already held keeps its earlier level, and a lock held by someone else is
// left alone.
func TestMultiLockReleasesExactlyWhatItTook(t *testing.T) {
	m := startMasters(t, 3)
	ls := m.spread("ml:x", "ml:y", "ml:z")
	ctx := rlock.WithOwner(t.Context(), "o")
	require.NoError(t, ls[0].Lock(ctx)) // o holds x already
	other := relocktest.ClientOn(t, m.srvs[2]).GetLock("ml:z")
	otherCtx := rlock.WithOwner(t.Context(), "other")
	require.NoError(t, other.LockLease(otherCtx, time.Minute))

	ml := multilock.New(ls[2], ls[1], ls[0])
	ok, err := ml.TryLock(ctx, 50*time.Millisecond, 0)
	require.NoError(t, err, "TryLock")
	require.False(t, ok, "TryLock")
	n, err := ls[0].HoldCount(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "x: HoldCount, the level held before")
	assert.False(t, m.exists(t, 1, "ml:y"), "y left held")
	held, err := other.IsHeldByOwner(otherCtx)
	require.NoError(t, err)
	assert.True(t, held, "z: held by the other owner")
	require.NoError(t, ls[0].Unlock(ctx))
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
		assert.NoError(t, err, "Do")
	}
}

// A MultiLock of a RedLock and a Lock, and the RedLock as a Locker.
func TestMultiLockComposition(t *testing.T) {
	m := startMasters(t, 4)
	red := multilock.NewRedLock(
		m.clients[0].GetLock("ml:red"), m.clients[1].GetLock("ml:red"), m.clients[2].GetLock("ml:red"))
	plain := m.clients[3].GetLock("ml:plain")
	ml := multilock.New(plain, red)
	assert.Equal(t, "multilock[ml:plain,ml:red]", ml.Name(), "Name")
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
	require.NoError(t, err)
	require.NotEmpty(t, owner, "Do gave fn no owner")
	for i, name := range []string{"ml:red", "ml:red", "ml:red", "ml:plain"} {
		assert.False(t, m.exists(t, i, name), "master %d: %s left after Do", i, name)
	}

	// The RedLock as a Locker held by someone else makes the MultiLock
	// fail, and leaves plain free.
	otherCtx := rlock.WithOwner(t.Context(), "other")
	ok, err := red.TryLock(otherCtx, time.Second, time.Minute)
	require.NoError(t, err, "RedLock TryLock")
	require.True(t, ok, "RedLock TryLock")
	ok, err = ml.TryLock(t.Context(), 0, 0)
	assert.NoError(t, err, "MultiLock TryLock")
	assert.False(t, ok, "MultiLock TryLock")
	assert.False(t, m.exists(t, 3, "ml:plain"), "plain left held after the MultiLock failed")
	require.NoError(t, red.Unlock(otherCtx))
}

func TestMultiLockUnlockCancelledContext(t *testing.T) {
	m := startMasters(t, 2)
	ls := m.spread("ml:u", "ml:v")
	ml := multilock.New(lockers(ls)...)
	ctx, cancel := context.WithCancel(rlock.WithOwner(t.Context(), "o"))
	require.NoError(t, ml.Lock(ctx))
	cancel()
	require.NoError(t, ml.Unlock(ctx), "Unlock with a cancelled context")
	for i, name := range []string{"ml:u", "ml:v"} {
		assert.False(t, m.exists(t, i, name), "%s left after Unlock", name)
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
	assert.ErrorIs(t, err, rlock.ErrLockLost, "Do")
	assert.False(t, m.exists(t, 0, "ml:s"), "ml:s left after Do")
}
