package rlock_test

import (
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/relock-go/relock/internal/relocktest"
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
		if err := l.Lock(ctx); err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
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
			if err := l.Lock(ctx); err != nil {
				b.Error(err)
				return
			}
			if err := l.Unlock(ctx); err != nil {
				b.Error(err)
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
	if err := l.Lock(ctx); err != nil {
		b.Fatal(err)
	}
	defer l.Unlock(ctx)
	b.ReportAllocs()
	for b.Loop() {
		if err := l.Lock(ctx); err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
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
			if err := l.Lock(ctx); err != nil {
				b.Error(err)
				return
			}
			if err := l.Unlock(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
