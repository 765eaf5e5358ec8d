package pubsub_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/pubsub"
)

// The tests in this file run the hub against pubsub.FakeServer on a fake
// clock (a synctest bubble): they check its timing exactly, which a real
// server cannot. A time.Sleep here advances the fake clock in no real
// time: it is the scenario's time passing, and synctest.Wait, or
// relocktest.Eventually on the fake clock, waits for what the hub does.

func wantLog(t *testing.T, f *pubsub.FakeServer, want ...string) {
	t.Helper()
	assert.Equal(t, want, f.Log(), "commands")
}

func isWoken(w *pubsub.Waiter) bool {
	select {
	case <-w.C():
		return true
	default:
		return false
	}
}

// TestFakeLinger: a channel stays subscribed for exactly the linger after
// its last waiter left, and a waiter arriving meanwhile costs no command.
func TestFakeLinger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const linger = 200 * time.Millisecond
		h, f := pubsub.NewFake(pubsub.Options{Linger: linger})
		defer h.Close()

		subscribe(t, h, "a").Leave(false)
		wantLog(t, f, "SUBSCRIBE a")
		time.Sleep(linger / 2) // fake clock: half the linger passes
		synctest.Wait()
		wantLog(t, f)

		// Back within the linger: no command, and the linger starts again
		// from the second Leave.
		subscribe(t, h, "a").Leave(false)
		wantLog(t, f)
		left := time.Now()
		time.Sleep(linger - time.Nanosecond) // fake clock: to just before the linger ends
		synctest.Wait()
		wantLog(t, f)
		time.Sleep(time.Nanosecond) // fake clock: to the end of the linger
		synctest.Wait()
		wantLog(t, f, "UNSUBSCRIBE a")
		assert.Equal(t, linger, time.Since(left), "time from the last Leave to UNSUBSCRIBE")
		assert.Zero(t, h.Subscribed(), "Subscribed() after the linger")
		assert.False(t, h.Has("a"), "Has after the linger")
	})
}

// TestFakeNoLinger: a negative linger unsubscribes as soon as the last
// waiter leaves.
func TestFakeNoLinger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, f := pubsub.NewFake(pubsub.Options{Linger: -1})
		defer h.Close()
		w1 := subscribe(t, h, "a")
		w2 := subscribe(t, h, "a")
		w1.Leave(false)
		synctest.Wait()
		wantLog(t, f, "SUBSCRIBE a")
		w2.Leave(false)
		synctest.Wait()
		wantLog(t, f, "UNSUBSCRIBE a")
	})
}

// TestFakeBatching: Subscribe calls made while a SUBSCRIBE is in flight go
// out together in the next one, at most 1000 channels per command, and
// channels whose lingers end together are unsubscribed together.
func TestFakeBatching(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 1500
		h, f := pubsub.NewFake(pubsub.Options{Linger: time.Second})
		defer h.Close()

		release := f.Hold()
		var wg sync.WaitGroup
		waiters := make([]*pubsub.Waiter, n+1)
		wg.Go(func() { waiters[0] = subscribe(t, h, "first") })
		synctest.Wait() // SUBSCRIBE first is in flight
		for i := 1; i <= n; i++ {
			wg.Go(func() { waiters[i] = subscribe(t, h, fmt.Sprintf("c%d", i)) })
		}
		synctest.Wait()
		release()
		wg.Wait()

		log := f.Log()
		require.Len(t, log, 3, "commands: SUBSCRIBE first and two batches")
		require.Equal(t, "SUBSCRIBE first", log[0], "the first command")
		sizes := []int{len(strings.Fields(log[1])) - 1, len(strings.Fields(log[2])) - 1}
		assert.Equal(t, []int{1000, n - 1000}, sizes, "batch sizes")
		assert.Equal(t, n+1, h.Subscribed(), "Subscribed()")

		for _, w := range waiters {
			w.Leave(false)
		}
		time.Sleep(time.Second) // fake clock: the linger passes
		synctest.Wait()
		log = f.Log()
		require.Len(t, log, 2, "commands after the linger: two UNSUBSCRIBE batches")
		require.True(t, strings.HasPrefix(log[0], "UNSUBSCRIBE "), "commands after the linger = %.40q..., want UNSUBSCRIBE batches", log)
		assert.Equal(t, n+1, len(strings.Fields(log[0]))+len(strings.Fields(log[1]))-2, "channels unsubscribed")
		sizes = []int{len(strings.Fields(log[0])) - 1, len(strings.Fields(log[1])) - 1}
		assert.Equal(t, []int{1000, n + 1 - 1000}, sizes, "UNSUBSCRIBE batch sizes")
	})
}

// TestFakeHas: Has is true from the moment a waiter registers, while its
// SUBSCRIBE is still in flight, through the linger after it left, and
// false once the channel is unsubscribed.
func TestFakeHas(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const linger = 200 * time.Millisecond
		h, f := pubsub.NewFake(pubsub.Options{Linger: linger})
		defer h.Close()
		if h.Has("a") {
			t.Error("Has of a channel nobody asked for")
		}
		release := f.Hold()
		var w *pubsub.Waiter
		var wg sync.WaitGroup
		wg.Go(func() { w = subscribeGo(t, h, "a") })
		synctest.Wait() // SUBSCRIBE a is in flight
		if !h.Has("a") {
			t.Error("Has = false while the first waiter's SUBSCRIBE is in flight")
		}
		release()
		wg.Wait()
		w.Leave(false)
		if !h.Has("a") {
			t.Error("Has = false while the channel lingers")
		}
		time.Sleep(linger)
		synctest.Wait()
		wantLog(t, f, "SUBSCRIBE a", "UNSUBSCRIBE a")
		if h.Has("a") {
			t.Error("Has = true after the channel was unsubscribed")
		}
	})
}

// TestFakeReconnectBackoff: a broken connection wakes every waiter; the
// hub reconnects at once, then, while connecting fails, after 10ms, 20ms,
// 40ms ... up to 1s; once connected it subscribes the channels again,
// wakes their waiters once more and calls their listeners.
func TestFakeReconnectBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, f := pubsub.NewFake(pubsub.Options{})
		defer h.Close()
		w := subscribe(t, h, "a")
		defer w.Leave(false)
		calls := 0
		l, err := h.ListenAndWait(t.Context(), "b", func() { calls++ })
		require.NoError(t, err)
		defer l.Leave(false)
		f.Log()

		down := errors.New("connection refused")
		f.FailDials(down)
		broke := time.Now()
		f.Break()
		synctest.Wait()
		require.True(t, isWoken(w), "the waiter was not woken when the connection broke")

		// Let ten attempts fail, then let the server answer again.
		relocktest.Eventually(t, time.Minute, "ten failed connection attempts", func() bool {
			synctest.Wait()
			return len(f.Dials()) >= 1+10
		})
		f.FailDials(nil)
		dials := f.Dials()[1:] // the first is the original connection
		want := []time.Duration{0, 10, 20, 40, 80, 160, 320, 640, 1000, 1000}
		prev := broke
		for i, d := range dials[:len(want)] {
			assert.Equal(t, want[i]*time.Millisecond, d.Sub(prev), "gap before connection attempt %d", i+1)
			prev = d
		}
		relocktest.Eventually(t, time.Minute, "the channels subscribed again", func() bool {
			synctest.Wait()
			return h.Subscribed() == 2
		})
		got := f.Log()
		slices.Sort(got)
		assert.Contains(t, [][]string{{"SUBSCRIBE a b"}, {"SUBSCRIBE a", "SUBSCRIBE b"}, {"SUBSCRIBE b a"}}, got,
			"commands after reconnecting: both channels subscribed again")
		assert.True(t, isWoken(w), "the waiter was not woken again once resubscribed")
		assert.Equal(t, 1, calls, "listener calls after the reconnection")
		assert.True(t, f.Publish("a", "x"), "a message after the reconnection was not delivered")
		assert.True(t, isWoken(w), "a message after the reconnection did not wake the waiter")
	})
}

// TestFakeSubscribeFailsAfterTwoConnections: a Subscribe call whose
// SUBSCRIBE was lost with its connection is retried once on a new
// connection, then fails with the connection's error, and leaves nothing
// registered.
func TestFakeSubscribeFailsAfterTwoConnections(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, f := pubsub.NewFake(pubsub.Options{})
		defer h.Close()
		release := f.Hold()
		var err error
		var wg sync.WaitGroup
		wg.Go(func() { _, err = h.Subscribe(t.Context(), "a") })
		for i := range 2 {
			relocktest.Eventually(t, time.Minute, "SUBSCRIBE in flight", func() bool {
				synctest.Wait()
				return len(f.Dials()) == i+1 && pubsub.State(h, "a") == "subscribing"
			})
			f.Break()
		}
		release()
		wg.Wait()
		assert.ErrorContains(t, err, "broken", "Subscribe must fail with the connection's error")
		// The loop drops the channel when it next looks at its queue.
		relocktest.Eventually(t, time.Minute, "no waiter and no channel left registered", func() bool {
			synctest.Wait()
			w, c := pubsub.Registered(h)
			return w == 0 && c == 0
		})
	})
}

// TestFakeRefusedBatch: when the server refuses a batch, each channel is
// tried alone, and only the refused one fails.
func TestFakeRefusedBatch(t *testing.T) {
	// The refusal must be a Redis error reply, which only a server makes.
	srv := redistest.Shared(t)
	refusal := relocktest.ErrorReply(t, srv.Client(t), "NOPERM no permissions to access the 'b' channel").Error()
	synctest.Test(t, func(t *testing.T) {
		h, f := pubsub.NewFake(pubsub.Options{})
		defer h.Close()
		f.Refuse("b", refusal)
		release := f.Hold()
		var wg sync.WaitGroup
		wg.Go(func() { subscribe(t, h, "first").Leave(false) })
		synctest.Wait()
		errs := map[string]error{}
		var mu sync.Mutex
		for _, ch := range []string{"a", "b", "c"} {
			wg.Go(func() {
				w, err := h.Subscribe(context.Background(), ch)
				if err == nil {
					w.Leave(false)
				}
				mu.Lock()
				errs[ch] = err
				mu.Unlock()
			})
		}
		synctest.Wait()
		release()
		wg.Wait()
		assert.NoError(t, errs["a"], "Subscribe(a)")
		assert.NoError(t, errs["c"], "Subscribe(c)")
		assert.ErrorIs(t, errs["b"], refusal, "Subscribe(b)")
		log := f.Log()
		require.Len(t, log, 5, "commands: the batch then each channel alone")
		assert.ElementsMatch(t, []string{"a", "b", "c"}, strings.Fields(log[1])[1:], "the batch")
	})
}
