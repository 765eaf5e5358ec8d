package rlock_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// TestReview35CancelCrossesGrant: a waiter's context ends at a random
// moment around the release that may grant it the lock. A call that
// returns an error must hold nothing afterwards (its field is gone from
// Redis and the lock is free); a call that returns nil holds the lock in
// Redis (count 1, a lease) until its Unlock, which must succeed.
func TestReview35CancelCrossesGrant(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	l := c.GetLock(name)
	fieldB := c.ID() + ":b"
	g0 := lockcore.GrantsMade()
	var oks, errs int
	deadline := time.Now().Add(3 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		a := rlock.WithOwner(t.Context(), "a")
		require.NoError(t, l.Lock(a))
		bctx, cancel := context.WithCancel(t.Context())
		res := make(chan error, 1)
		go func() { res <- l.Lock(rlock.WithOwner(bctx, "b")) }()
		d1 := time.Duration(rand.IntN(3000)) * time.Microsecond
		d2 := time.Duration(rand.IntN(3000)) * time.Microsecond
		go func() { time.Sleep(d1); cancel() }()
		time.Sleep(d2)
		require.NoError(t, l.Unlock(a), "iteration %d: a's Unlock", i)
		err := relocktest.Receive(t, res, 10*time.Second, "b's Lock")
		cancel()
		v, herr := raw.Do(t.Context(), raw.B().Hget().Key(name).Field(fieldB).Build()).ToString()
		if err != nil {
			errs++
			require.ErrorIs(t, err, context.Canceled, "iteration %d", i)
			require.Error(t, herr, "iteration %d (d1 %v, d2 %v): b's call failed (%v) and b's field is in Redis (%q)", i, d1, d2, err, v)
			n, _ := raw.Do(t.Context(), raw.B().Exists().Key(name).Build()).AsInt64()
			require.Zero(t, n, "iteration %d: b's call failed and the lock is not free", i)
			held, _ := l.IsHeldByOwner(rlock.WithOwner(t.Context(), "b"))
			require.False(t, held, "iteration %d", i)
			continue
		}
		oks++
		require.NoError(t, herr, "iteration %d: b's call succeeded, and b's field is not in Redis", i)
		require.Equal(t, "1", v, "iteration %d", i)
		pt, _ := raw.Do(t.Context(), raw.B().Pttl().Key(name).Build()).AsInt64()
		require.Positive(t, pt, "iteration %d", i)
		require.NoError(t, l.Unlock(rlock.WithOwner(t.Context(), "b")), "iteration %d: b's Unlock", i)
	}
	t.Logf("ok %d, cancelled %d, grants %d", oks, errs, lockcore.GrantsMade()-g0)
}
