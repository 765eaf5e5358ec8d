package rlock_test

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// maxWaiterHeap is the most heap a parked Lock call may keep, besides its
// goroutine (the handle it waits on included): its call state, its hold
// record, its subscription, its wait record and its timer. Measured at
// about 2.7 KB under -race and 3.2-3.4 KB without it (the race detector
// keeps less in pools): the bound holds for both.
const maxWaiterHeap = 4096

// TestWaiterMemory pins the heap a waiting Lock call keeps while it
// sleeps: n calls wait, each on a lock of its own held by another Client,
// with deadlock detection armed (its look is far off), and the heap they
// add, less that of as many goroutines blocked on a channel, is divided
// by n. What the Client makes once (its pub/sub connection) is made
// before the count begins.
func TestWaiterMemory(t *testing.T) {
	const n = 2000
	raw := relocktest.Raw(t)
	c := relocktest.Client(t, rlock.WithDeadlockDetection(time.Hour))
	base := relocktest.Name(t)
	names := make([]string, n+1)
	var cmds rueidis.Commands
	for i := range names {
		names[i] = base + ":" + strconv.Itoa(i)
		cmds = append(cmds,
			raw.B().Hset().Key(names[i]).FieldValue().FieldValue("other-client:holder", "1").Build(),
			raw.B().Pexpire().Key(names[i]).Milliseconds(time.Minute.Milliseconds()).Build())
	}
	for _, r := range raw.DoMulti(t.Context(), cmds...) {
		require.NoError(t, r.Error())
	}
	t.Cleanup(func() {
		var del rueidis.Commands
		for _, name := range names {
			del = append(del, raw.B().Del().Key(name).Build())
		}
		raw.DoMulti(context.Background(), del...)
	})

	idle := idleGoroutinesHeap(n)

	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	parked := 0
	wait := func(names []string) {
		for _, name := range names {
			wg.Go(func() { _ = c.GetLock(name).Lock(ctx) })
		}
		parked += len(names)
		// Every call sleeps (after its second attempt, once subscribed),
		// and nothing it sent is still in flight (its record's write).
		// A look at every goroutine's stack stops the world, for tens of
		// milliseconds with thousands of goroutines under -race: the
		// looks are spaced by twenty times what the last one took, so
		// that they leave the waiters most of the time to go to sleep.
		deadline := time.Now().Add(time.Minute)
		for {
			start := time.Now()
			if sleepingWaits() == parked {
				break
			}
			took := time.Since(start)
			if time.Now().After(deadline) {
				t.Fatalf("timed out after 1m waiting for %d waiters to sleep", parked)
			}
			time.Sleep(max(2*time.Millisecond, 20*took))
		}
	}
	wait(names[:1]) // the Client's pub/sub connection
	h0 := heapNow()
	wait(names[1:])
	h1 := heapNow()
	perWaiter := float64(int64(h1)-int64(h0))/n - idle
	t.Logf("a parked Lock call keeps %.0f B of heap besides its goroutine (%.0f B)", perWaiter, idle)
	assert.Less(t, perWaiter, float64(maxWaiterHeap), "heap per parked waiter, its goroutine's excluded")
}

// sleepingWaits is the number of goroutines asleep in a wait loop's
// sleep, or -1 while some goroutine still writes a wait record.
func sleepingWaits() int {
	buf := make([]byte, 1<<20)
	for {
		if n := runtime.Stack(buf, true); n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	const loop = "github.com/relock-go/relock/internal/lockcore.(*Wait).run("
	n := 0
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "writeRecord(") {
			return -1
		}
		// The goroutine's header, then its top frame.
		if lines := strings.SplitN(g, "\n", 3); len(lines) > 1 && strings.Contains(lines[0], "[select") &&
			strings.HasPrefix(lines[1], loop) {
			n++
		}
	}
	return n
}

// idleGoroutinesHeap is the heap, per goroutine, of n goroutines blocked
// on a channel.
func idleGoroutinesHeap(n int) float64 {
	unblock := make(chan struct{})
	var started, wg sync.WaitGroup
	started.Add(n)
	h0 := heapNow()
	for range n {
		wg.Go(func() {
			started.Done()
			<-unblock
		})
	}
	started.Wait()
	h1 := heapNow()
	close(unblock)
	wg.Wait()
	return float64(int64(h1)-int64(h0)) / float64(n)
}

// heapNow is the live heap after a full collection.
func heapNow() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
