package rlock_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// TestShardedSharedRdbLeave: two Clients made by New on one rueidis
// client, with sharded pub/sub, wait for one lock: their SSUBSCRIBEs ride
// the same connection, where the server keeps one subscription. When one
// waiter gives up, its Client's SUNSUBSCRIBE ends that subscription for
// both; the other Client's receiver ends with it, its hub subscribes
// again, and its waiter hears the release.
func TestShardedSharedRdbLeave(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	if !relocktest.Knows(t, raw, "ssubscribe") {
		t.Skip("the server has no sharded pub/sub")
	}
	rdb := srv.Client(t)
	var clients [2]*rlock.Client
	for i := range clients {
		c, err := rlock.New(rdb, rlock.WithShardedPubSub())
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		clients[i] = c
	}
	a, b := clients[0], clients[1]
	holder := relocktest.ClientOn(t, srv, rlock.WithShardedPubSub())
	name := relocktest.Name(t)
	h := rlock.WithOwner(t.Context(), "h")
	require.NoError(t, holder.GetLock(name).Lock(h))

	actx, acancel := context.WithCancel(t.Context())
	defer acancel()
	agot, bgot := make(chan error, 1), make(chan error, 1)
	go func() { agot <- a.GetLock(name).Lock(rlock.WithOwner(actx, "a")) }()
	go func() { bgot <- b.GetLock(name).Lock(rlock.WithOwner(t.Context(), "b")) }()
	awaitRecords(t, raw, a, name, 1)
	awaitRecords(t, raw, b, name, 1)

	before := commandCalls(t, raw)["sunsubscribe"]
	acancel()
	require.Error(t, relocktest.Receive(t, agot, 3*time.Second, "a's Lock to give up"))
	relocktest.Eventually(t, 5*time.Second, "a's Client to unsubscribe (after its linger)", func() bool {
		return commandCalls(t, raw)["sunsubscribe"] > before
	})
	relocktest.Eventually(t, 5*time.Second, "b's Client to subscribe to the lock's channel again", func() bool {
		chans, err := raw.Do(t.Context(), raw.B().PubsubShardchannels().Build()).AsStrSlice()
		require.NoError(t, err)
		return slices.Contains(chans, layout.Channel(name))
	})
	start := time.Now()
	require.NoError(t, holder.GetLock(name).Unlock(h))
	require.NoError(t, relocktest.Receive(t, bgot, 3*time.Second, "b's Lock to take the released lock"))
	t.Logf("b held the lock %v after the release", time.Since(start).Round(time.Millisecond))
	require.NoError(t, b.GetLock(name).Unlock(rlock.WithOwner(t.Context(), "b")))
}
