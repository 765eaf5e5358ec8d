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

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/pubsub"
)

// The tests in this file run the hub against pubsub.FakeServer on a fake
// clock: they check its timing exactly, which a real server cannot.

func wantLog(t *testing.T, f *pubsub.FakeServer, want ...string) {
	t.Helper()
	if got := f.Log(); !slices.Equal(got, want) {
		t.Errorf("commands = %q, want %q", got, want)
	}
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
		time.Sleep(linger / 2)
		synctest.Wait()
		wantLog(t, f)

		// Back within the linger: no command, and the linger starts again
		// from the second Leave.
		subscribe(t, h, "a").Leave(false)
		wantLog(t, f)
		left := time.Now()
		time.Sleep(linger - time.Nanosecond)
		synctest.Wait()
		wantLog(t, f)
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		wantLog(t, f, "UNSUBSCRIBE a")
		if d := time.Since(left); d != linger {
			t.Errorf("unsubscribed %v after the last Leave, want %v", d, linger)
		}
		if h.Subscribed() != 0 || h.Has("a") {
			t.Errorf("Subscribed() = %d, Has = %v after the linger; want 0, false", h.Subscribed(), h.Has("a"))
		}
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
		if len(log) != 3 || log[0] != "SUBSCRIBE first" {
			t.Fatalf("commands = %d (%.40q...), want SUBSCRIBE first and two batches", len(log), log)
		}
		sizes := []int{len(strings.Fields(log[1])) - 1, len(strings.Fields(log[2])) - 1}
		if sizes[0] != 1000 || sizes[1] != n-1000 {
			t.Errorf("batch sizes = %v, want [1000 %d]", sizes, n-1000)
		}
		if got := h.Subscribed(); got != n+1 {
			t.Errorf("Subscribed() = %d, want %d", got, n+1)
		}

		for _, w := range waiters {
			w.Leave(false)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		log = f.Log()
		if len(log) != 2 || !strings.HasPrefix(log[0], "UNSUBSCRIBE ") {
			t.Fatalf("commands after the linger = %d, want two UNSUBSCRIBE batches", len(log))
		}
		if got := len(strings.Fields(log[0])) + len(strings.Fields(log[1])) - 2; got != n+1 {
			t.Errorf("unsubscribed %d channels, want %d", got, n+1)
		}
		sizes = []int{len(strings.Fields(log[0])) - 1, len(strings.Fields(log[1])) - 1}
		if sizes[0] != 1000 || sizes[1] != n+1-1000 {
			t.Errorf("UNSUBSCRIBE batch sizes = %v, want [1000 %d]", sizes, n+1-1000)
		}
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
		if err != nil {
			t.Fatal(err)
		}
		defer l.Leave(false)
		f.Log()

		down := errors.New("connection refused")
		f.FailDials(down)
		broke := time.Now()
		f.Break()
		synctest.Wait()
		if !isWoken(w) {
			t.Fatal("the waiter was not woken when the connection broke")
		}

		// Let ten attempts fail, then let the server answer again.
		for len(f.Dials()) < 1+10 {
			time.Sleep(time.Millisecond)
			synctest.Wait()
		}
		f.FailDials(nil)
		dials := f.Dials()[1:] // the first is the original connection
		want := []time.Duration{0, 10, 20, 40, 80, 160, 320, 640, 1000, 1000}
		prev := broke
		for i, d := range dials[:len(want)] {
			if gap := d.Sub(prev); gap != want[i]*time.Millisecond {
				t.Errorf("attempt %d came %v after the previous one, want %v", i+1, gap, want[i]*time.Millisecond)
			}
			prev = d
		}
		relocktest.Eventually(t, time.Minute, "the channels subscribed again", func() bool {
			synctest.Wait()
			return h.Subscribed() == 2
		})
		got := f.Log()
		slices.Sort(got)
		if !slices.Equal(got, []string{"SUBSCRIBE a b"}) && !slices.Equal(got, []string{"SUBSCRIBE a", "SUBSCRIBE b"}) && !slices.Equal(got, []string{"SUBSCRIBE b a"}) {
			t.Errorf("commands after reconnecting = %q, want both channels subscribed again", got)
		}
		if !isWoken(w) {
			t.Error("the waiter was not woken again once resubscribed")
		}
		if calls != 1 {
			t.Errorf("listener called %d times after the reconnection, want 1", calls)
		}
		if !f.Publish("a", "x") || !isWoken(w) {
			t.Error("a message after the reconnection did not wake the waiter")
		}
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
		if err == nil || !strings.Contains(err.Error(), "broken") {
			t.Errorf("Subscribe = %v, want the connection's error", err)
		}
		// The loop drops the channel when it next looks at its queue.
		time.Sleep(time.Second)
		synctest.Wait()
		if w, c := pubsub.Registered(h); w != 0 || c != 0 {
			t.Errorf("%d waiters on %d channels left registered", w, c)
		}
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
		if errs["a"] != nil || errs["c"] != nil || !errors.Is(errs["b"], refusal) {
			t.Errorf("errors = %v, want only b refused", errs)
		}
		log := f.Log()
		batch := strings.Fields(log[1])[1:]
		slices.Sort(batch)
		if len(log) != 5 || !slices.Equal(batch, []string{"a", "b", "c"}) {
			t.Errorf("commands = %q, want the batch then each channel alone", log)
		}
	})
}
