package rlock_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/observe"
	"github.com/relock-go/relock/rlock"
)

// BenchmarkLockUnlock is the uncontended hot path: one acquire script and
// one release script per op.
func BenchmarkLockUnlock(b *testing.B) {
	c := relocktest.Client(b)
	l := c.GetLock(relocktest.Name(b))
	ctx := rlock.WithOwner(b.Context(), "bench")
	b.ReportAllocs()
	for b.Loop() {
		require.NoError(b, l.Lock(ctx))
		require.NoError(b, l.Unlock(ctx))
	}
}

// BenchmarkLockUnlockParallel runs the hot path on distinct locks from
// every goroutine, so rueidis pipelines the scripts.
func BenchmarkLockUnlockParallel(b *testing.B) {
	c := relocktest.Client(b)
	base := relocktest.Name(b)
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		l := c.GetLock(base + ":" + strconv.FormatInt(next.Add(1), 10))
		ctx := b.Context()
		for pb.Next() {
			if !assert.NoError(b, l.Lock(ctx)) || !assert.NoError(b, l.Unlock(ctx)) {
				return
			}
		}
	})
}

// BenchmarkReentry re-enters a held lock and releases the level.
func BenchmarkReentry(b *testing.B) {
	c := relocktest.Client(b)
	l := c.GetLock(relocktest.Name(b))
	ctx := rlock.WithOwner(b.Context(), "bench")
	require.NoError(b, l.Lock(ctx))
	defer l.Unlock(ctx)
	b.ReportAllocs()
	for b.Loop() {
		require.NoError(b, l.Lock(ctx))
		require.NoError(b, l.Unlock(ctx))
	}
}

// BenchmarkContendedHandoff has every goroutine take turns on one lock:
// each op is a hand-off through an unlock notification.
func BenchmarkContendedHandoff(b *testing.B) {
	c := relocktest.Client(b)
	name := relocktest.Name(b)
	b.ReportAllocs()
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		l := c.GetLock(name)
		ctx := b.Context()
		for pb.Next() {
			if !assert.NoError(b, l.Lock(ctx)) || !assert.NoError(b, l.Unlock(ctx)) {
				return
			}
		}
	})
}

// BenchmarkGrantHandoff is the hand-off among 4 goroutines (owners) of
// one Client that hold the lock 1ms each (the workload: 1,000
// acquisitions a second at most), before and after the grant on release:
// "publish" with WithoutGrantOnRelease (a release, a message and the
// woken waiter's acquisition per hand-off), "grant" with the default (the
// release writes the next waiter's hold). It reports the hand-off's p50
// and p99 (from the start of an Unlock to the return of the next
// holder's Lock) and the scripts the server ran per acquisition.
func BenchmarkGrantHandoff(b *testing.B) {
	for _, tc := range []struct {
		name string
		opts []rlock.Option
	}{{"publish", []rlock.Option{rlock.WithoutGrantOnRelease()}}, {"grant", nil}} {
		b.Run(tc.name, func(b *testing.B) {
			c := relocktest.Client(b, tc.opts...)
			l := c.GetLock(relocktest.Name(b))
			raw := relocktest.Raw(b)
			before := scriptCalls(b, raw)
			var left atomic.Int64
			left.Store(int64(b.N))
			var released atomic.Int64 // UnixNano of the last Unlock's start
			var mu sync.Mutex
			var lat []time.Duration
			var wg sync.WaitGroup
			b.ReportAllocs()
			b.ResetTimer()
			for i := range 4 {
				wg.Go(func() {
					ctx := rlock.WithOwner(b.Context(), "w"+strconv.Itoa(i))
					for left.Add(-1) >= 0 {
						if !assert.NoError(b, l.Lock(ctx)) {
							return
						}
						if r := released.Load(); r != 0 {
							d := time.Since(time.Unix(0, r))
							mu.Lock()
							lat = append(lat, d)
							mu.Unlock()
						}
						time.Sleep(time.Millisecond)
						released.Store(time.Now().UnixNano())
						if !assert.NoError(b, l.Unlock(ctx)) {
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(scriptCalls(b, raw)-before)/float64(b.N), "scripts/op")
			if len(lat) > 0 {
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "handoff-p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "handoff-p99-µs")
			}
		})
	}
}

// BenchmarkDo is the uncontended Do: a hold watched for a force-unlock
// (HoldContext), which costs the lock channel's subscription while the
// hold lasts (shared with its waiters; here there are none), and one
// renewal when the subscription is confirmed. It reports the commands the
// server ran per Do beside allocations.
func BenchmarkDo(b *testing.B) {
	c := relocktest.Client(b)
	raw := relocktest.Raw(b)
	l := c.GetLock(relocktest.Name(b))
	ctx := rlock.WithOwner(b.Context(), "bench")
	fn := func(context.Context) error { return nil }
	before := commandCalls(b, raw)
	b.ReportAllocs()
	for b.Loop() {
		require.NoError(b, l.Do(ctx, fn))
	}
	b.StopTimer()
	after := commandCalls(b, raw)
	for _, cmd := range []string{"evalsha", "subscribe", "unsubscribe"} {
		b.ReportMetric(float64(after[cmd]-before[cmd])/float64(b.N), cmd+"/op")
	}
}

// commandCalls reads the server's count of calls per command.
func commandCalls(tb testing.TB, raw rueidis.Client) map[string]int {
	tb.Helper()
	info, err := raw.Do(tb.Context(), raw.B().Info().Section("commandstats").Build()).ToString()
	require.NoError(tb, err)
	calls := make(map[string]int)
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":calls=")
		if !ok {
			continue
		}
		n, _, _ := strings.Cut(rest, ",")
		calls[name], _ = strconv.Atoi(n)
	}
	return calls
}

// BenchmarkLockUnlockObserved is BenchmarkLockUnlock with an observer that
// does nothing: the cost of building and handing over the events.
func BenchmarkLockUnlockObserved(b *testing.B) {
	c := relocktest.Client(b, rlock.WithObserver(observe.Base{}))
	l := c.GetLock(relocktest.Name(b))
	ctx := rlock.WithOwner(b.Context(), "bench")
	b.ReportAllocs()
	for b.Loop() {
		require.NoError(b, l.Lock(ctx))
		require.NoError(b, l.Unlock(ctx))
	}
}
