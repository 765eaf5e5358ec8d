package rlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// TestReview9bRingUnderChurn: rings of two owners on two Clients, with a
// 50ms detection delay (shared reads fresh for 5ms), while other calls of
// both Clients wait for the other Client's owner and give up after a
// short limit (their looks' reads end with their calls): each ring ends
// exactly one wait, and does end one.
func TestReview9bRingUnderChurn(t *testing.T) {
	const after = 50 * time.Millisecond
	a := relocktest.Client(t, rlock.WithDeadlockDetection(after))
	b := relocktest.Client(t, rlock.WithDeadlockDetection(after))
	base := relocktest.Name(t)
	heldA, heldB := base+":heldA", base+":heldB"
	ha, hb := rlock.WithOwner(t.Context(), "ha"), rlock.WithOwner(t.Context(), "hb")
	require.NoError(t, a.GetLock(heldA).Lock(ha))
	require.NoError(t, b.GetLock(heldB).Lock(hb))
	defer a.GetLock(heldA).Unlock(ha)
	defer b.GetLock(heldB).Unlock(hb)
	churn, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for i := range 6 {
		c, name := a, heldB
		if i%2 == 1 {
			c, name = b, heldA
		}
		wg.Go(func() {
			for k := 0; churn.Err() == nil; k++ {
				ctx := rlock.WithOwner(churn, fmt.Sprintf("churn%d-%d", i, k))
				wait := after + time.Duration(k%7)*time.Millisecond
				_, _ = c.GetLock(name).TryLock(ctx, wait, 0)
			}
		})
	}
	defer func() { stop(); wg.Wait() }()
	for round := range 15 {
		n1, n2 := fmt.Sprintf("%s:r%d:1", base, round), fmt.Sprintf("%s:r%d:2", base, round)
		oa, ob := rlock.WithOwner(t.Context(), "ra"), rlock.WithOwner(t.Context(), "rb")
		require.NoError(t, a.GetLock(n1).Lock(oa))
		require.NoError(t, b.GetLock(n2).Lock(ob))
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		errs := make(chan error, 2)
		run := func(c *rlock.Client, owner context.Context, want, held string) {
			name, _ := rlock.OwnerFrom(owner)
			err := c.GetLock(want).Lock(rlock.WithOwner(ctx, name))
			if err == nil {
				_ = c.GetLock(want).Unlock(owner)
			}
			_ = c.GetLock(held).Unlock(owner)
			errs <- err
		}
		go run(a, oa, n2, n1)
		go run(b, ob, n1, n2)
		var dead, other int
		for range 2 {
			err := <-errs
			switch {
			case errors.Is(err, relock.ErrDeadlock):
				dead++
			case err != nil:
				other++
				t.Errorf("round %d: %v", round, err)
			}
		}
		cancel()
		if dead != 1 {
			t.Errorf("round %d: %d waits ended by a deadlock, want 1", round, dead)
		}
	}
}
