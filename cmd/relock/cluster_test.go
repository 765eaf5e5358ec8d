package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/waitrec"
	"github.com/relock-go/relock/rlock"
)

// TestOnCluster runs run, status, unlock and demo against a Redis Cluster,
// given the address of one node only, on names served by every node.
func TestOnCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	c, err := rlock.NewClient(cl.ClientOption())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	addr := cl.Nodes[0].Addr

	// One name per node, and one with a hash tag.
	var names []string
	seen := map[string]bool{}
	for i := 0; len(seen) < len(cl.Nodes) && i < 1000; i++ {
		name := fmt.Sprintf("cluster-%d", i)
		node, err := cl.NodeFor(t.Context(), name)
		require.NoError(t, err)
		if !seen[node.Addr] {
			seen[node.Addr] = true
			names = append(names, name)
		}
	}
	names = append(names, "tagged{x}lock")

	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			wantCode(t, relock(t, "run", "--redis", addr, name, "--", "true"), 0)
			holder := rlock.WithOwner(t.Context(), "holder")
			l := c.GetFairLock(name)
			require.NoError(t, l.Lock(holder))
			st := status(t, addr, name)
			if assert.Len(t, st.Holders, 1, "holders") {
				assert.Equal(t, c.ID()+":holder", st.Holders[0].Field, "holder")
			}
			wantCode(t, relock(t, "unlock", "--force", "--redis", addr, name), 0)
			locked, err := l.IsLocked(t.Context())
			require.NoError(t, err)
			assert.False(t, locked, "IsLocked after unlock --force")
		})
	}

	// The whole seed list, before the subcommand.
	t.Run("seed list", func(t *testing.T) {
		seeds := strings.Join(cl.Addrs(), ",")
		r := relock(t, "--redis", seeds, "run", names[0], "--", "echo", "ran")
		wantCode(t, r, 0)
		assert.Equal(t, "ran\n", r.stdout, "stdout")
	})

	t.Run("demo", func(t *testing.T) {
		r := relock(t, "demo", "--duration", "1s", "--workers", "2", "--redis", addr)
		wantCode(t, r, 0)
		assert.Contains(t, r.stdout, "violations: 0", "demo output")
		assert.NotContains(t, r.stdout, "failed", "demo output")
	})

	// Two owners that wait for each other's lock, on two nodes, the
	// records on a third slot: waits reads each where it is.
	t.Run("waits", func(t *testing.T) {
		raw, err := rueidis.NewClient(cl.ClientOption())
		require.NoError(t, err)
		defer raw.Close()
		x, y := names[0], names[1]
		a, b := rlock.WithOwner(t.Context(), "a"), rlock.WithOwner(t.Context(), "b")
		require.NoError(t, c.GetLock(x).Lock(a))
		require.NoError(t, c.GetLock(y).Lock(b))
		t.Cleanup(func() {
			_ = c.GetLock(x).Unlock(rlock.WithOwner(context.Background(), "a"))
			_ = c.GetLock(y).Unlock(rlock.WithOwner(context.Background(), "b"))
		})
		m, err := raw.Do(t.Context(), raw.B().Time().Build()).ToMessage()
		require.NoError(t, err)
		now, err := serverTime(m)
		require.NoError(t, err)
		key := waitrec.Key("", c.ID())
		require.NoError(t, raw.Do(t.Context(), raw.B().Hset().Key(key).FieldValue().
			FieldValue("1", waitrec.Record{Owner: c.ID() + ":a", Name: y, Kind: "lock", Since: now - 1000}.Encode()).
			FieldValue("2", waitrec.Record{Owner: c.ID() + ":b", Name: x, Kind: "lock", Since: now - 2000}.Encode()).Build()).Error())
		t.Cleanup(func() { _ = raw.Do(context.Background(), raw.B().Del().Key(key).Build()).Error() })

		r := relock(t, "waits", "--redis", addr)
		wantCode(t, r, exitCycle)
		assert.Contains(t, r.stdout, c.ID()+":a waits (lock) for "+y+", held by "+c.ID()+":b\n")
		assert.Contains(t, r.stdout, c.ID()+":b waits (lock) for "+x+", held by "+c.ID()+":a\n")
		assert.Contains(t, r.stdout, "on 3 node(s)")

		r = relock(t, "top", "--once", "--interval", "100ms", "--redis", addr)
		wantCode(t, r, exitOK)
		assert.Contains(t, r.stdout, x+" ")
		assert.Contains(t, r.stdout, y+" ")
		assert.Contains(t, r.stdout, "1 cycle among them")
	})
}
