package fairlock_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// BenchmarkFairHandoff100 keeps 100 waiters queued on one fair lock and
// measures each FIFO hand-off: from just before the holder's Unlock to
// the next holder's Lock returning. It reports the p50 and p99.
func BenchmarkFairHandoff100(b *testing.B) {
	const waiters = 100
	c := relocktest.Client(b)
	name := relocktest.Name(b)
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()

	var (
		mu        sync.Mutex
		released  time.Time
		latencies []time.Duration
		remaining = b.N
	)
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for i := range waiters {
		wg.Go(func() {
			octx := rlock.WithOwner(ctx, fmt.Sprint("w", i))
			l := c.GetFairLock(name)
			for {
				if err := l.Lock(octx); err != nil {
					return // the benchmark is over
				}
				mu.Lock()
				if !released.IsZero() {
					latencies = append(latencies, time.Since(released))
				}
				remaining--
				done := remaining <= 0
				released = time.Now()
				mu.Unlock()
				_ = l.Unlock(octx)
				if done {
					cancel()
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if len(latencies) == 0 {
		return
	}
	slices.Sort(latencies)
	b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds()), "p99-µs")
}
