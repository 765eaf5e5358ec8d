package lockcore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/rlock"
)

// TestDeadlockOnCluster: a cycle of two owners on two Clients, whose
// names (and the Clients' record hashes) are on different nodes of a
// Redis Cluster, ends one wait with ErrDeadlock: the detector reads each
// key on its own.
func TestDeadlockOnCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	ctx := t.Context()
	var l1, l2 string
	for i := 0; l2 == ""; i++ {
		a, b := fmt.Sprintf("dl-cluster:%d:a", i), fmt.Sprintf("dl-cluster:%d:b", i)
		na, err := cl.NodeFor(ctx, a)
		require.NoError(t, err)
		nb, err := cl.NodeFor(ctx, b)
		require.NoError(t, err)
		if na != nb {
			l1, l2 = a, b
		}
	}
	clients := make([]*rlock.Client, 2)
	for i := range clients {
		c, err := rlock.NewClient(cl.ClientOption(), rlock.WithDeadlockDetection(200*time.Millisecond))
		require.NoError(t, err)
		defer c.Close()
		clients[i] = c
	}
	a, b := rlock.WithOwner(ctx, "a"), rlock.WithOwner(ctx, "b")
	require.NoError(t, clients[0].GetLock(l1).Lock(a))
	require.NoError(t, clients[1].GetLock(l2).Lock(b))
	errs := make(chan error, 2)
	run := func(c *rlock.Client, owner context.Context, hold, wait string) {
		wctx, cancel := context.WithTimeout(owner, 10*time.Second)
		defer cancel()
		err := c.GetLock(wait).Lock(wctx)
		if err == nil {
			_ = c.GetLock(wait).Unlock(owner)
		}
		_ = c.GetLock(hold).Unlock(owner)
		errs <- err
	}
	go run(clients[0], a, l1, l2)
	go run(clients[1], b, l2, l1)
	e1, e2 := <-errs, <-errs
	if (e1 == nil) == (e2 == nil) {
		t.Fatalf("want one victim: %v, %v", e1, e2)
	}
	if e1 == nil {
		e1 = e2
	}
	require.ErrorIs(t, e1, rlock.ErrDeadlock)
}
