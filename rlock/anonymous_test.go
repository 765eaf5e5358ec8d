package rlock_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/relocktest"
)

// TestAnonymousHandleRandomCalls: goroutines without owners share one
// handle and call it at random (Lock and Unlock, TryLock with and without
// a wait, Do, TryDo), all on the watchdog lease. Nothing may overlap,
// every call must succeed (a goroutine stops at its first failure) (a TryLock or TryDo may find the lock busy),
// and no hold may be reported lost: none was.
func TestAnonymousHandleRandomCalls(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	lost := &lostCounter{t: t}
	c := relocktest.Client(t, lost.option())
	l := c.GetLock(relocktest.Name(t))
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var calls atomic.Int32
	var x exclusion
	enter := x.enter
	fn := func(context.Context) error { enter(); return nil }
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(g)))
			for range 40 {
				calls.Add(1)
				switch rng.IntN(5) {
				case 0:
					if !assert.NoError(t, l.Lock(ctx), "Lock") {
						return
					}
					enter()
					if !assert.NoError(t, l.Unlock(ctx), "Unlock after Lock") {
						return
					}
				case 1:
					wait := time.Duration(rng.IntN(2)) * 20 * time.Millisecond
					ok, err := l.TryLock(ctx, wait, 0)
					if !assert.NoError(t, err, "TryLock(%v)", wait) {
						return
					}
					if ok {
						enter()
						if !assert.NoError(t, l.Unlock(ctx), "Unlock after TryLock") {
							return
						}
					}
				case 2, 3:
					if !assert.NoError(t, l.Do(ctx, fn), "Do") {
						return
					}
				case 4:
					if _, err := l.TryDo(ctx, 20*time.Millisecond, fn); !assert.NoError(t, err, "TryDo") {
						return
					}
				}
			}
		})
	}
	wg.Wait()
	assert.Zero(t, x.overlaps.Load(), "overlapping holds")
	assert.Zero(t, lost.n.Load(), "holds reported lost")
	assert.EqualValues(t, 240, calls.Load(), "calls made")
	held, err := l.IsLocked(ctx)
	require.NoError(t, err)
	assert.False(t, held, "the lock after every call returned")
}
