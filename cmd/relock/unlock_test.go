package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

func TestUnlockForce(t *testing.T) {
	srv := server(t)
	c := relocktest.Client(t)
	name := relocktest.Name(t)
	stuck := rlock.WithOwner(t.Context(), "stuck")
	l := c.GetLock(name)
	require.NoError(t, l.Lock(stuck))

	r := relock(t, "unlock", "--redis", srv.Addr, name)
	wantCode(t, r, exitUsage)
	assert.Contains(t, r.stderr, "--force", "stderr")
	locked, err := l.IsLocked(t.Context())
	require.NoError(t, err)
	require.True(t, locked, "IsLocked after unlock without --force")

	r = relock(t, "unlock", "--force", "--redis", srv.Addr, name)
	wantCode(t, r, 0)
	assert.Contains(t, r.stdout, "was held by "+c.ID()+":stuck", "stdout")
	locked, err = l.IsLocked(t.Context())
	require.NoError(t, err)
	assert.False(t, locked, "IsLocked after unlock --force")

	r = relock(t, "unlock", "--force", "--redis", srv.Addr, name)
	wantCode(t, r, 0)
	assert.Contains(t, r.stdout, "was not held", "stdout")
}

// TestUnlockForceWakesFairWaiter: force-unlocking a fair lock hands it to
// the head of its queue.
func TestUnlockForceWakesFairWaiter(t *testing.T) {
	srv := server(t)
	c1, c2 := relocktest.Client(t), relocktest.Client(t)
	name := relocktest.Name(t)
	require.NoError(t, c1.GetFairLock(name).Lock(rlock.WithOwner(t.Context(), "stuck")))
	waiter := rlock.WithOwner(t.Context(), "waiter")
	wl := c2.GetFairLock(name)
	waitCtx, cancel := context.WithCancel(waiter)
	defer cancel()
	got := make(chan error, 1)
	go func() { got <- wl.Lock(waitCtx) }()
	rdb := relocktest.Raw(t)
	waitUntil(t, 10*time.Second, "the waiter to queue", func() (bool, error) {
		n, err := rdb.Do(t.Context(), rdb.B().Llen().Key(layout.Queue(name)).Build()).AsInt64()
		return n == 1, err
	})

	r := relock(t, "unlock", "--force", "--redis", srv.Addr, name)
	wantCode(t, r, 0)
	assert.Contains(t, r.stdout, "woke the head of its fair queue: "+c2.ID()+":waiter", "stdout")
	select {
	case err := <-got:
		require.NoError(t, err, "the waiter's Lock")
	case <-time.After(5 * time.Second):
		cancel()
		<-got
		require.Fail(t, "the waiter did not get the lock within 5s of the force-unlock")
	}
	assert.NoError(t, wl.Unlock(waiter))
}
