package rlock_test

import (
	"context"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/internal/waitrec"
	"github.com/relock-go/relock/rlock"
)

// maxWaiterHeap is the most heap a parked Lock call may keep, besides its
// goroutine (the handle it waits on included): its call state, its hold
// record, its subscription, its wait record and its timer. Measured at
// 2.7-3.4 KB with and without -race, up to 3.7 KB with both cores busy
// (the attempts of the waiters that look again at the count's moment,
// at most 5% of them, are counted in): the bound is a guard against a
// regression, not the goal (under 1 KiB, docs/benchmarks.md).
const maxWaiterHeap = 4608

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
	wait := func(batch []string) {
		for _, name := range batch {
			wg.Go(func() { _ = c.GetLock(name).Lock(ctx) })
		}
		parked += len(batch)
		// Every call waits: its lock's channel is subscribed and its
		// wait record written, and nothing it sends for them is still in
		// flight. Calls do not all sleep at one moment: a waiter of a
		// plain lock looks again every 1-2s (lockcore.QuietHolderCap),
		// and with thousands of them, on a busy machine, some attempt at
		// any time: the count waits for all but 5% of them to sleep
		// (what the others' attempts hold is counted with the waiters).
		relocktest.Eventually(t, time.Minute, "the waiters to subscribe and record their waits", func() bool {
			return waitsSettled(t, raw, c.ID(), names[:parked])
		})
		// A look at every goroutine's stack stops the world, for tens of
		// milliseconds with thousands of goroutines under -race: the
		// looks are spaced by twenty times what the last one took.
		deadline := time.Now().Add(time.Minute)
		for {
			start := time.Now()
			if inRun, asleep, busy := waitsInLoop(); inRun == parked && asleep >= parked-parked/20 && !busy {
				break
			}
			took := time.Since(start)
			if time.Now().After(deadline) {
				t.Fatalf("timed out after 1m waiting for %d waiters to be in their wait loop", parked)
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

// waitsSettled reports whether the Client clientID has a wait record for
// each of names and each of their channels is subscribed.
func waitsSettled(t *testing.T, raw rueidis.Client, clientID string, names []string) bool {
	n, err := raw.Do(t.Context(), raw.B().Hlen().Key(waitrec.Key("", clientID)).Build()).AsInt64()
	if err != nil || n != int64(len(names)) {
		return false
	}
	for chunk := range slices.Chunk(names, 500) {
		chans := make([]string, len(chunk))
		for i, name := range chunk {
			chans[i] = layout.Channel(name)
		}
		subs, err := raw.Do(t.Context(), raw.B().PubsubNumsub().Channel(chans...).Build()).AsIntMap()
		if err != nil {
			return false
		}
		for _, ch := range chans {
			if subs[ch] < 1 {
				return false
			}
		}
	}
	return true
}

// waitsInLoop is the number of goroutines in a wait loop, the number of
// those asleep in its sleep, and whether some goroutine still writes a
// wait record or subscribes.
func waitsInLoop() (inRun, asleep int, busy bool) {
	buf := make([]byte, 1<<20)
	for {
		if n := runtime.Stack(buf, true); n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	const loop = "github.com/relock-go/relock/internal/lockcore.(*Wait).run("
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "writeRecord(") || strings.Contains(g, "lockcore.(*Wait).subscribe(") {
			busy = true
		}
		if strings.Contains(g, "\n"+loop) {
			inRun++
		}
		// The goroutine's header, then its top frame.
		if lines := strings.SplitN(g, "\n", 3); len(lines) > 1 && strings.Contains(lines[0], "[select") &&
			strings.HasPrefix(lines[1], loop) {
			asleep++
		}
	}
	return inRun, asleep, busy
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
