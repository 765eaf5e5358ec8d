package pubsub_test

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/pubsub"
)

// BenchmarkWaiterMemory measures the heap the hub holds per waiter with
// 10,000 waiters on 10,000 channels (the channel's own state included).
func BenchmarkWaiterMemory(b *testing.B) {
	srv := redistest.Shared(b)
	h := newHub(b, srv.Client(b), pubsub.Options{Linger: -1})
	const n = 10000
	names := make([]string, n)
	for i := range names {
		names[i] = "mem:" + strconv.Itoa(i)
	}
	ws := make([]*pubsub.Waiter, n)
	var (
		ms    runtime.MemStats
		bytes float64
		runs  int
	)
	for b.Loop() {
		runtime.GC()
		runtime.ReadMemStats(&ms)
		before := ms.HeapAlloc
		var wg sync.WaitGroup
		for g := range 64 {
			wg.Go(func() {
				for i := g; i < n; i += 64 {
					ws[i] = subscribeGo(b, h, names[i])
				}
			})
		}
		wg.Wait()
		if b.Failed() {
			b.FailNow()
		}
		runtime.GC()
		runtime.ReadMemStats(&ms)
		bytes += float64(ms.HeapAlloc) - float64(before)
		runs++

		b.StopTimer()
		for i, w := range ws {
			w.Leave(false)
			ws[i] = nil
		}
		relocktest.Eventually(b, eventTimeout, "every channel unsubscribed", func() bool {
			_, channels := pubsub.Registered(h)
			return channels == 0
		})
		b.StartTimer()
	}
	b.ReportMetric(bytes/float64(runs)/n, "B/waiter")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(runs)/n, "ns/waiter")
}

// BenchmarkSubscribeLeave measures one Subscribe and Leave.
func BenchmarkSubscribeLeave(b *testing.B) {
	srv := redistest.Shared(b)
	ctx := context.Background()

	// The channel is subscribed already: no I/O at all.
	b.Run("subscribed", func(b *testing.B) {
		h := newHub(b, srv.Client(b), pubsub.Options{})
		hold := subscribe(b, h, "bench:hot")
		defer hold.Leave(false)
		for b.Loop() {
			w, err := h.Subscribe(ctx, "bench:hot")
			require.NoError(b, err)
			w.Leave(false)
		}
	})
	// The channel lingers between calls: no I/O either.
	b.Run("lingering", func(b *testing.B) {
		h := newHub(b, srv.Client(b), pubsub.Options{})
		for b.Loop() {
			w, err := h.Subscribe(ctx, "bench:linger")
			require.NoError(b, err)
			w.Leave(false)
		}
	})
	// A new channel every time: every call waits for its SUBSCRIBE; the
	// UNSUBSCRIBE (no linger) runs in the background.
	b.Run("cold", func(b *testing.B) {
		h := newHub(b, srv.Client(b), pubsub.Options{Linger: -1})
		i := 0
		for b.Loop() {
			i++
			w, err := h.Subscribe(ctx, "bench:cold:"+strconv.Itoa(i))
			require.NoError(b, err)
			w.Leave(false)
		}
	})
	// Many goroutines, one channel each, channels lingering.
	b.Run("parallel", func(b *testing.B) {
		h := newHub(b, srv.Client(b), pubsub.Options{})
		var next atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			ch := "bench:par:" + strconv.FormatInt(next.Add(1), 10)
			for pb.Next() {
				w, err := h.Subscribe(ctx, ch)
				if !assert.NoError(b, err) {
					return
				}
				w.Leave(false)
			}
		})
	})
}
