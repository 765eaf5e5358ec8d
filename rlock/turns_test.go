package rlock_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// takeTurns starts n goroutines that take l in turn again and again
// (owners w0, w1, ..., 1ms holds: each release may grant the lock to the
// next of them) and returns once they have taken it atLeast times. turns
// reads how many times so far; stop ends the goroutines and waits for
// them (a goroutine also ends at its first failed Lock, logged).
func takeTurns(t *testing.T, l *rlock.Lock, n, atLeast int) (turns func() int, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var mu sync.Mutex
	count := 0
	for i := range n {
		wg.Go(func() {
			o := rlock.WithOwner(ctx, "w"+strconv.Itoa(i))
			for ctx.Err() == nil {
				if err := l.Lock(o); err != nil {
					if ctx.Err() == nil {
						t.Logf("goroutine %d: Lock: %v", i, err)
					}
					return
				}
				mu.Lock()
				count++
				mu.Unlock()
				time.Sleep(time.Millisecond)
				_ = l.Unlock(o)
			}
		})
	}
	turns = func() int {
		mu.Lock()
		defer mu.Unlock()
		return count
	}
	stop = func() {
		cancel()
		wg.Wait()
	}
	relocktest.Eventually(t, 10*time.Second, "the goroutines to take turns", func() bool { return turns() >= atLeast })
	return turns, stop
}
