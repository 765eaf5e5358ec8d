package semaphore_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redissontest"
	"github.com/relock-go/relock/internal/relocktest"
)

// TestMixedPermitWaiters: waiters for two permits and for one, of two
// Clients and of Redisson, on a semaphore of three: never more than three
// out, and every waiter gets its turns.
func TestMixedPermitWaiters(t *testing.T) {
	name := relocktest.Name(t)
	c1, c2 := relocktest.Client(t), relocktest.Client(t)
	j := redissontest.New(t, relocktest.Raw(t))
	setPermits(t, c1.GetSemaphore(name), 3)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var out, most atomic.Int64
	use := func(n int64) {
		now := out.Add(n)
		for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
		}
		time.Sleep(time.Millisecond)
		out.Add(-n)
	}
	const rounds = 15
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i, s := range []int{2, 1, 2, 1} {
		c := c1
		if i%2 == 1 {
			c = c2
		}
		n := s
		wg.Go(func() {
			sem := c.GetSemaphore(name)
			for range rounds {
				ps, err := sem.AcquirePermits(ctx, n, 5*time.Second)
				if err != nil {
					errs <- err
					return
				}
				use(int64(n))
				for _, p := range ps {
					if err := p.Release(context.Background()); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	for _, n := range []int{2, 1} {
		wg.Go(func() {
			js := j.Semaphore(name)
			for range rounds {
				ids, err := js.AcquireN(ctx, n, 5*time.Second)
				if err != nil {
					errs <- err
					return
				}
				use(int64(n))
				for _, id := range ids {
					if err := js.Release(context.Background(), id); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.LessOrEqual(t, most.Load(), int64(3))
	n, err := c1.GetSemaphore(name).AvailablePermits(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 3, n)
}
