package lockcore

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/redistest"
)

// TestWaitingCallSizes guards what a waiting acquisition keeps while it
// sleeps (issue 35, waiting memory: the bench's waiters10k): the pooled
// acquisition (with its Wait and grant offer), the owner's hold record and
// the wait record each fit the allocation size class they were brought
// down to. A field added to one of them must find room, or be kept
// elsewhere than in a sleeping call's values.
func TestWaitingCallSizes(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the sizes are a 64-bit platform's")
	}
	for _, c := range []struct {
		name      string
		size, max uintptr
	}{
		// 512 and 416 before the grants across Clients added the
		// attempt's stamp and call slot count (acquisition, offer) and the
		// slot counter (hold).
		{"acquisition", unsafe.Sizeof(acquisition{}), 576},
		{"hold", unsafe.Sizeof(hold{}), 448},
		{"waitRecord", unsafe.Sizeof(waitRecord{}), 128},
	} {
		if c.size > c.max {
			t.Errorf("%s is %d bytes, more than %d", c.name, c.size, c.max)
		}
	}
}

// BenchmarkWaitingCallHeap reports the heap that a Lock call waiting for
// a lock held by another Client keeps, as the bench's waiters10k measures
// it (less an idle goroutine's): 10,000 anonymous waiters on as many locks,
// each asleep with its record written. b.N is not used: run it with
// -benchtime 1x.
func BenchmarkWaitingCallHeap(b *testing.B) {
	const n = 10000
	srv := redistest.Shared(b)
	rdb := srv.Client(b)
	ctx := context.Background()
	names := make([]string, n)
	for i := range names {
		names[i] = "bench:waiting-heap:" + strconv.Itoa(i)
		if err := rdb.Do(ctx, rdb.B().Hset().Key(names[i]).FieldValue().FieldValue("other:holder", "1").Build()).Error(); err != nil {
			b.Fatal(err)
		}
		if err := rdb.Do(ctx, rdb.B().Pexpire().Key(names[i]).Milliseconds(60000).Build()).Error(); err != nil {
			b.Fatal(err)
		}
	}
	b.Cleanup(func() {
		for _, name := range names {
			rdb.Do(context.Background(), rdb.B().Del().Key(name).Build())
		}
	})
	heap := func() float64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return float64(m.HeapAlloc)
	}
	// An idle goroutine's cost, measured the same way.
	stop := make(chan struct{})
	var idle sync.WaitGroup
	h0 := heap()
	for range n {
		idle.Go(func() { <-stop })
	}
	time.Sleep(100 * time.Millisecond)
	perGoroutine := (heap() - h0) / n
	close(stop)
	idle.Wait()

	// One pipelined connection, as rlock.NewClient makes.
	opt := srv.ClientOption()
	opt.PipelineMultiplex = -1
	crdb, err := rueidis.NewClient(opt)
	if err != nil {
		b.Fatal(err)
	}
	defer crdb.Close()
	c, err := NewCore(Config{RDB: crdb, ReplicasSet: true, DeadlockAfterSet: true})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	// A first wait makes the Client's connections, which are not the
	// waiters'.
	short, stopShort := context.WithTimeout(ctx, 300*time.Millisecond)
	_ = NewMutex(c, names[0], Reentrant{}).Lock(short)
	stopShort()
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	b.ResetTimer()
	h0 = heap()
	for _, name := range names {
		wg.Go(func() {
			_ = NewMutex(c, name, Reentrant{}).Lock(wctx)
		})
	}
	time.Sleep(RecordAfter + time.Second) // every call asleep, its record written
	perCall := (heap() - h0) / n
	b.StopTimer()
	cancel()
	wg.Wait()
	b.ReportMetric(perCall-perGoroutine, "heap-B/waiter")
}
