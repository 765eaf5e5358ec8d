package rlock_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// TestReview35SharedRueidisClientFair (holds): two Clients built with rlock.New on one
// rueidis client (a use the API allows: New says only that the caller
// owns rdb). Their subscriptions to the lock's channel ride one
// connection, so PUBSUB NUMSUB counts 1 however many of them wait, and
// Client A's releases grant the lock to A's own goroutines while B's
// waiter is subscribed: B never gets the lock. With grants off B gets it
// (the control).
func TestReview35SharedRueidisClientFair(t *testing.T) {
	for _, grants := range []bool{false, true} {
		t.Run("grants="+strconv.FormatBool(grants), func(t *testing.T) {
			rdb := redistest.Shared(t).Client(t)
			var opts []rlock.Option
			if !grants {
				opts = append(opts, rlock.WithoutGrantOnRelease())
			}
			ca, err := rlock.New(rdb, opts...)
			require.NoError(t, err)
			defer ca.Close()
			cb, err := rlock.New(rdb, opts...)
			require.NoError(t, err)
			defer cb.Close()
			name := relocktest.Name(t)
			la, lb := ca.GetLock(name), cb.GetLock(name)
			g00 := lockcore.GrantsMade()
			_, stop := takeTurns(t, la, 3, 200)
			t.Logf("A alone: 200 turns, %d grants", lockcore.GrantsMade()-g00)
			bctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
			defer cancel()
			g0, t0 := lockcore.GrantsMade(), time.Now()
			err = lb.Lock(rlock.WithOwner(bctx, "b"))
			t.Logf("B waited %v; grants meanwhile %d", time.Since(t0), lockcore.GrantsMade()-g0)
			stop()
			require.NoError(t, err, "Client B's waiter did not get the lock in 3s while Client A's goroutines took turns")
			require.NoError(t, lb.Unlock(rlock.WithOwner(t.Context(), "b")))
		})
	}
}
