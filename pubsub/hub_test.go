package pubsub_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/pubsub"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// eventTimeout bounds every wait for something that must happen.
const eventTimeout = 10 * time.Second

// policy wakes by payload: "one" wakes the oldest waiter, "ignore" nobody,
// anything else every waiter. Tests use "all" on a barrier channel to know
// that every earlier message has been handled: messages reach the hub in
// the order they were published by one client.
func policy(_, payload string) pubsub.Wake {
	switch payload {
	case "one":
		return pubsub.WakeOne
	case "ignore":
		return pubsub.Ignore
	}
	return pubsub.WakeAll
}

// The helpers below fail the test with Fatalf, so they must run on the
// test's goroutine. Other goroutines use these, which report with Errorf.

func subscribeGo(t testing.TB, h *pubsub.Hub, ch string) *pubsub.Waiter {
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	w, err := h.Subscribe(ctx, ch)
	if err != nil {
		t.Errorf("Subscribe(%q): %v", ch, err)
	}
	return w
}

func publishGo(t testing.TB, c rueidis.Client, ch, payload string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	if err := c.Do(ctx, c.B().Publish().Channel(ch).Message(payload).Build()).Error(); err != nil {
		t.Errorf("PUBLISH %s: %v", ch, err)
		return false
	}
	return true
}

func wokenGo(t testing.TB, w *pubsub.Waiter, name string) bool {
	select {
	case <-w.C():
		return true
	case <-time.After(eventTimeout):
		t.Errorf("waiter %s was not woken", name)
		return false
	}
}

func newHub(t testing.TB, rdb rueidis.Client, opt pubsub.Options) *pubsub.Hub {
	t.Helper()
	h := pubsub.New(rdb, opt)
	t.Cleanup(func() { _ = h.Close() })
	return h
}

func subscribe(t testing.TB, h *pubsub.Hub, ch string) *pubsub.Waiter {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	w, err := h.Subscribe(ctx, ch)
	if err != nil {
		t.Fatalf("Subscribe(%q): %v", ch, err)
	}
	return w
}

func do(t testing.TB, c rueidis.Client, args ...string) rueidis.RedisResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	return c.Do(ctx, c.B().Arbitrary(args...).Build())
}

func publish(t testing.TB, c rueidis.Client, ch, payload string) {
	t.Helper()
	if err := do(t, c, "PUBLISH", ch, payload).Error(); err != nil {
		t.Fatalf("PUBLISH %s: %v", ch, err)
	}
}

// numsub returns the server's subscriber count of ch, or -1 when the
// server could not be asked (a client reconnecting after a restart).
func numsub(t testing.TB, c rueidis.Client, ch string) int64 {
	t.Helper()
	m, err := do(t, c, "PUBSUB", "NUMSUB", ch).AsIntMap()
	if err != nil {
		t.Logf("PUBSUB NUMSUB: %v", err)
		return -1
	}
	return m[ch]
}

// commandCalls returns how many times the server ran cmd (lower case).
func commandCalls(t testing.TB, c rueidis.Client, cmd string) int {
	t.Helper()
	info, err := do(t, c, "INFO", "commandstats").ToString()
	if err != nil {
		t.Fatalf("INFO commandstats: %v", err)
	}
	m := regexp.MustCompile(`cmdstat_` + cmd + `:calls=(\d+)`).FindStringSubmatch(info)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

func pubsubClients(t testing.TB, c rueidis.Client) int {
	t.Helper()
	s, err := do(t, c, "CLIENT", "LIST", "TYPE", "pubsub").ToString()
	if err != nil {
		t.Fatalf("CLIENT LIST: %v", err)
	}
	return strings.Count(strings.TrimSpace(s), "\n") + min(1, len(strings.TrimSpace(s)))
}

func woken(t testing.TB, w *pubsub.Waiter, name string) {
	t.Helper()
	select {
	case <-w.C():
	case <-time.After(eventTimeout):
		t.Fatalf("waiter %s was not woken", name)
	}
}

// pending reports, without waiting, whether w has a wake-up pending, and
// consumes it.
func pending(w *pubsub.Waiter) bool {
	select {
	case <-w.C():
		return true
	default:
		return false
	}
}

// barrier makes sure the hub has handled every message published before it.
func barrier(t testing.TB, h *pubsub.Hub, c rueidis.Client) {
	t.Helper()
	b := subscribe(t, h, "barrier")
	defer b.Leave(false)
	publish(t, c, "barrier", "all")
	woken(t, b, "barrier")
}

func TestPublishAfterSubscribeWakes(t *testing.T) {
	srv := redistest.Shared(t)
	c := srv.Client(t)
	h := newHub(t, srv.Client(t), pubsub.Options{})
	for i := range 20 {
		ch := fmt.Sprintf("wake:%d", i)
		w := subscribe(t, h, ch)
		publish(t, c, ch, "x")
		woken(t, w, ch)
		w.Leave(false)
	}
}

func TestRefcountAndLinger(t *testing.T) {
	srv := redistest.Shared(t)
	c := srv.Client(t)
	h := newHub(t, srv.Client(t), pubsub.Options{Linger: 50 * time.Millisecond})
	const ch = "refcount"

	ws := make([]*pubsub.Waiter, 100)
	var wg sync.WaitGroup
	for i := range ws {
		wg.Go(func() { ws[i] = subscribeGo(t, h, ch) })
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if n := numsub(t, c, ch); n != 1 {
		t.Fatalf("NUMSUB with 100 waiters = %d, want 1", n)
	}
	if n := h.Subscribed(); n != 1 {
		t.Fatalf("Subscribed() = %d, want 1", n)
	}
	for _, w := range ws[:99] {
		w.Leave(false)
	}
	if n := numsub(t, c, ch); n != 1 {
		t.Fatalf("NUMSUB with 1 waiter left = %d, want 1", n)
	}
	ws[99].Leave(false)
	ws[99].Leave(false) // idempotent
	relocktest.Eventually(t, eventTimeout, "NUMSUB 0 after the linger", func() bool { return numsub(t, c, ch) == 0 })
	relocktest.Eventually(t, eventTimeout, "Subscribed() 0", func() bool { return h.Subscribed() == 0 })
	relocktest.Eventually(t, eventTimeout, "no channel left", func() bool {
		waiters, channels := pubsub.Registered(h)
		return waiters == 0 && channels == 0
	})
}

func TestConcurrentSubscribeSharesOneCommand(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	h := newHub(t, srv.Client(t), pubsub.Options{})
	before := commandCalls(t, c, "subscribe")

	start := make(chan struct{})
	ws := make([]*pubsub.Waiter, 50)
	var wg sync.WaitGroup
	for i := range ws {
		wg.Go(func() {
			<-start
			ws[i] = subscribeGo(t, h, "shared")
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if n := commandCalls(t, c, "subscribe") - before; n != 1 {
		t.Fatalf("SUBSCRIBE ran %d times for 50 concurrent Subscribe calls, want 1", n)
	}
	publish(t, c, "shared", "all")
	for i, w := range ws {
		woken(t, w, strconv.Itoa(i))
		w.Leave(false)
	}
}

func TestWakeOneOldestFirst(t *testing.T) {
	srv := redistest.Shared(t)
	c := srv.Client(t)
	h := newHub(t, srv.Client(t), pubsub.Options{Policy: policy})
	const ch = "wakeone"
	a := subscribe(t, h, ch)
	b := subscribe(t, h, ch)
	d := subscribe(t, h, ch)
	defer a.Leave(false)
	defer b.Leave(false)
	defer d.Leave(false)

	check := func(step string, wa, wb, wd bool) {
		t.Helper()
		barrier(t, h, c)
		ga, gb, gd := pending(a), pending(b), pending(d)
		if ga != wa || gb != wb || gd != wd {
			t.Fatalf("%s: woken a=%v b=%v d=%v, want a=%v b=%v d=%v", step, ga, gb, gd, wa, wb, wd)
		}
	}

	publish(t, c, ch, "one")
	check("one message", true, false, false)

	publish(t, c, ch, "one")
	publish(t, c, ch, "one")
	check("two messages", true, true, false)

	// a keeps its wake-up unconsumed: the next message goes to b.
	publish(t, c, ch, "one")
	barrier(t, h, c)
	publish(t, c, ch, "one")
	check("a pending", true, true, false)

	// Every waiter already has a wake-up: the extra message is dropped.
	for range 4 {
		publish(t, c, ch, "one")
	}
	check("all pending", true, true, true)

	publish(t, c, ch, "ignore")
	check("ignored", false, false, false)
}

func TestWakeAll(t *testing.T) {
	srv := redistest.Shared(t)
	c := srv.Client(t)
	h := newHub(t, srv.Client(t), pubsub.Options{Policy: policy})
	ws := make([]*pubsub.Waiter, 10)
	for i := range ws {
		ws[i] = subscribe(t, h, "wakeall")
		defer ws[i].Leave(false)
	}
	other := subscribe(t, h, "wakeall:other")
	defer other.Leave(false)

	publish(t, c, "wakeall", "all")
	publish(t, c, "wakeall", "all") // merges into the first
	barrier(t, h, c)
	for i, w := range ws {
		if !pending(w) {
			t.Fatalf("waiter %d not woken", i)
		}
		if pending(w) {
			t.Fatalf("waiter %d woken twice", i)
		}
	}
	if pending(other) {
		t.Fatal("waiter of another channel woken")
	}
}

func TestDefaultPolicyWakesAll(t *testing.T) {
	srv := redistest.Shared(t)
	c := srv.Client(t)
	h := newHub(t, srv.Client(t), pubsub.Options{})
	a := subscribe(t, h, "default")
	b := subscribe(t, h, "default")
	defer a.Leave(false)
	defer b.Leave(false)
	publish(t, c, "default", "one")
	woken(t, a, "a")
	woken(t, b, "b")
}

func TestLeaveHandsOnWakeUp(t *testing.T) {
	srv := redistest.Shared(t)
	c := srv.Client(t)
	h := newHub(t, srv.Client(t), pubsub.Options{Policy: policy})
	const ch = "handon"

	t.Run("passOn", func(t *testing.T) {
		a := subscribe(t, h, ch)
		b := subscribe(t, h, ch)
		defer b.Leave(false)
		publish(t, c, ch, "one")
		woken(t, a, "a")
		a.Leave(true)
		if !pending(b) {
			t.Fatal("Leave(true) did not hand the wake-up to b")
		}
	})
	t.Run("pending", func(t *testing.T) {
		a := subscribe(t, h, ch)
		b := subscribe(t, h, ch)
		defer b.Leave(false)
		publish(t, c, ch, "one")
		barrier(t, h, c)
		if pending(b) {
			t.Fatal("b woken by a WakeOne message while a waited longer")
		}
		a.Leave(false) // a's unconsumed wake-up goes to b
		if !pending(b) {
			t.Fatal("Leave with a pending wake-up did not hand it to b")
		}
	})
	t.Run("nothing", func(t *testing.T) {
		a := subscribe(t, h, ch)
		b := subscribe(t, h, ch)
		defer b.Leave(false)
		a.Leave(false)
		a.Leave(true) // already left: no effect
		if pending(b) {
			t.Fatal("b woken although a had nothing to hand on")
		}
	})
	t.Run("skipsPending", func(t *testing.T) {
		a := subscribe(t, h, ch)
		b := subscribe(t, h, ch)
		d := subscribe(t, h, ch)
		defer d.Leave(false)
		publish(t, c, ch, "one")
		publish(t, c, ch, "one")
		barrier(t, h, c) // a and b have a wake-up
		a.Leave(false)   // hands it to d, b has one already
		if !pending(d) {
			t.Fatal("wake-up not handed to d")
		}
		if !pending(b) {
			t.Fatal("b lost its wake-up")
		}
		b.Leave(false)
	})
}

func TestSubscribeDuringLinger(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	const linger = 300 * time.Millisecond
	h := newHub(t, srv.Client(t), pubsub.Options{Linger: linger})
	const ch = "linger"

	w := subscribe(t, h, ch)
	w.Leave(false)
	start := time.Now()
	w = subscribe(t, h, ch)
	if time.Since(start) > linger/2 {
		t.Skip("machine too slow to test the linger")
	}
	if n := commandCalls(t, c, "subscribe"); n != 1 {
		t.Fatalf("SUBSCRIBE ran %d times, want 1", n)
	}
	// The subscription must outlive the first linger deadline.
	for time.Since(start) < 3*linger {
		if n := numsub(t, c, ch); n != 1 {
			t.Fatalf("NUMSUB = %d while a waiter is registered", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := commandCalls(t, c, "unsubscribe"); n != 0 {
		t.Fatalf("UNSUBSCRIBE ran %d times, want 0", n)
	}
	publish(t, c, ch, "x")
	woken(t, w, "w")
	w.Leave(false)
	relocktest.Eventually(t, eventTimeout, "NUMSUB 0", func() bool { return numsub(t, c, ch) == 0 })
}

func TestClientKillWakesAndResubscribes(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	h := newHub(t, srv.Client(t), pubsub.Options{Policy: policy})
	chans := []string{"kill:a", "kill:b"}
	var ws []*pubsub.Waiter
	for i := range 6 {
		ws = append(ws, subscribe(t, h, chans[i%2]))
	}
	defer func() {
		for _, w := range ws {
			w.Leave(false)
		}
	}()
	if n := pubsubClients(t, c); n != 1 {
		t.Fatalf("%d pubsub connections, want 1", n)
	}

	if err := do(t, c, "CLIENT", "KILL", "TYPE", "pubsub").Error(); err != nil {
		t.Fatal(err)
	}
	for i, w := range ws {
		woken(t, w, strconv.Itoa(i))
	}
	relocktest.Eventually(t, eventTimeout, "resubscribed", func() bool {
		return h.Subscribed() == 2 && numsub(t, c, "kill:a") == 1 && numsub(t, c, "kill:b") == 1
	})
	if n := pubsubClients(t, c); n != 1 {
		t.Fatalf("%d pubsub connections after reconnecting, want 1", n)
	}
	// Waiters were woken again once resubscribed; clear that.
	for _, w := range ws {
		pending(w)
	}
	publish(t, c, "kill:a", "all")
	barrier(t, h, c)
	for i, w := range ws {
		if got, want := pending(w), i%2 == 0; got != want {
			t.Fatalf("waiter %d woken=%v after PUBLISH, want %v", i, got, want)
		}
	}
}

func TestServerKilled(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	h := newHub(t, srv.Client(t), pubsub.Options{})
	w := subscribe(t, h, "killed")
	defer w.Leave(false)

	srv.Kill()
	woken(t, w, "w") // the drop wakes it

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	w2, err := h.Subscribe(ctx, "killed:other")
	if err == nil {
		w2.Leave(false)
		t.Fatal("Subscribe succeeded with the server down")
	}
	t.Logf("Subscribe with the server down failed after %v: %v", time.Since(start).Round(time.Millisecond), err)
	if waiters, _ := pubsub.Registered(h); waiters != 1 {
		t.Fatalf("%d waiters registered, want 1", waiters)
	}

	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	relocktest.Eventually(t, eventTimeout, "resubscribed after restart", func() bool {
		return h.Subscribed() == 1 && numsub(t, c, "killed") == 1
	})
	pending(w)
	publish(t, c, "killed", "x")
	woken(t, w, "w")
}

func TestSubscribeAfterClose(t *testing.T) {
	srv := redistest.Shared(t)
	h := pubsub.New(srv.Client(t), pubsub.Options{})
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Subscribe(context.Background(), "closed"); !errors.Is(err, pubsub.ErrClosed) {
		t.Fatalf("Subscribe after Close: %v, want ErrClosed", err)
	}
}

func TestCloseWakesWaitersAndLeavesNoGoroutines(t *testing.T) {
	srv := redistest.Shared(t) // started before the goroutine snapshot
	ignore := goleak.IgnoreCurrent()
	rdb, err := rueidis.NewClient(srv.ClientOption())
	if err != nil {
		t.Fatal(err)
	}
	h := pubsub.New(rdb, pubsub.Options{})
	var ws []*pubsub.Waiter
	for i := range 10 {
		ws = append(ws, subscribe(t, h, fmt.Sprintf("close:%d", i%3)))
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	for i, w := range ws {
		if !pending(w) {
			t.Fatalf("waiter %d not woken by Close", i)
		}
		w.Leave(false)
	}
	rdb.Close()
	goleak.VerifyNone(t, ignore)
}

func TestCloseDuringSubscribe(t *testing.T) {
	srv := redistest.Start(t)
	h := newHub(t, srv.Client(t), pubsub.Options{})
	subscribe(t, h, "warm").Leave(false) // connect first
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Resume() }()

	errc := make(chan error, 1)
	go func() {
		_, err := h.Subscribe(context.Background(), "paused")
		errc <- err
	}()
	relocktest.Eventually(t, eventTimeout, "the Subscribe call to register", func() bool {
		waiters, _ := pubsub.Registered(h)
		return waiters == 1
	})
	_ = h.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, pubsub.ErrClosed) {
			t.Fatalf("Subscribe during Close: %v, want ErrClosed", err)
		}
	case <-time.After(eventTimeout):
		t.Fatal("Subscribe did not return after Close")
	}
}

func TestSubscribeCancelled(t *testing.T) {
	t.Run("before", func(t *testing.T) {
		srv := redistest.Shared(t)
		c := srv.Client(t)
		h := newHub(t, srv.Client(t), pubsub.Options{})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := h.Subscribe(ctx, "cancelled"); !errors.Is(err, context.Canceled) {
			t.Fatalf("Subscribe with a cancelled ctx: %v", err)
		}
		if waiters, channels := pubsub.Registered(h); waiters != 0 || channels != 0 {
			t.Fatalf("%d waiters and %d channels left", waiters, channels)
		}
		if n := numsub(t, c, "cancelled"); n != 0 {
			t.Fatalf("NUMSUB = %d, want 0", n)
		}
	})
	t.Run("inFlight", func(t *testing.T) {
		srv := redistest.Start(t)
		c := srv.Client(t)
		h := newHub(t, srv.Client(t), pubsub.Options{Linger: 20 * time.Millisecond})
		subscribe(t, h, "warm").Leave(false)
		if err := srv.Pause(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_, err := h.Subscribe(ctx, "inflight")
		_ = srv.Resume()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Subscribe against a paused server: %v", err)
		}
		if waiters, _ := pubsub.Registered(h); waiters != 0 {
			t.Fatalf("%d waiters left", waiters)
		}
		// The SUBSCRIBE that was sent is answered, lingers, and goes.
		relocktest.Eventually(t, eventTimeout, "nothing subscribed", func() bool {
			_, channels := pubsub.Registered(h)
			return channels == 0 && h.Subscribed() == 0 && numsub(t, c, "inflight") == 0
		})
	})
}

func TestManyChannelsOneConnection(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	h := newHub(t, srv.Client(t), pubsub.Options{Linger: 10 * time.Millisecond})
	const n = 10000
	ws := make([]*pubsub.Waiter, n)
	var wg sync.WaitGroup
	for g := range 100 {
		wg.Go(func() {
			for i := g; i < n; i += 100 {
				ws[i] = subscribeGo(t, h, "many:"+strconv.Itoa(i))
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if got := h.Subscribed(); got != n {
		t.Fatalf("Subscribed() = %d, want %d", got, n)
	}
	if got := pubsubClients(t, c); got != 1 {
		t.Fatalf("%d pubsub connections, want 1", got)
	}
	if got, err := do(t, c, "PUBSUB", "NUMPAT").AsInt64(); err != nil || got != 0 {
		t.Fatalf("PUBSUB NUMPAT = %d, %v", got, err)
	}
	chans, err := do(t, c, "PUBSUB", "CHANNELS", "many:*").AsStrSlice()
	if err != nil || len(chans) != n {
		t.Fatalf("PUBSUB CHANNELS: %d, %v; want %d", len(chans), err, n)
	}
	t.Logf("%d SUBSCRIBE commands for %d channels", commandCalls(t, c, "subscribe"), n)
	publish(t, c, "many:4242", "x")
	woken(t, ws[4242], "4242")
	for _, w := range ws {
		w.Leave(false)
	}
	relocktest.Eventually(t, eventTimeout, "every channel unsubscribed", func() bool {
		return h.Subscribed() == 0 && numsub(t, c, "many:9999") == 0
	})
}

func TestRefusedChannelFailsAlone(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	if err := do(t, c, "ACL", "SETUSER", "limited", "on", "nopass", "resetchannels", "&allowed:*", "+@all").Error(); err != nil {
		t.Fatal(err)
	}
	opt := srv.ClientOption()
	opt.Username, opt.Password = "limited", "any"
	rdb, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	h := pubsub.New(rdb, pubsub.Options{})
	defer h.Close()

	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			<-start
			ch := fmt.Sprintf("allowed:%d", i)
			if i%2 == 1 {
				ch = fmt.Sprintf("denied:%d", i)
			}
			w, err := h.Subscribe(context.Background(), ch)
			if i%2 == 1 {
				if err == nil || !strings.Contains(err.Error(), "NOPERM") {
					t.Errorf("Subscribe(%s): %v, want NOPERM", ch, err)
				}
				return
			}
			if err != nil {
				t.Errorf("Subscribe(%s): %v", ch, err)
				return
			}
			publishGo(t, c, ch, "x")
			wokenGo(t, w, ch)
			w.Leave(false)
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if waiters, _ := pubsub.Registered(h); waiters != 0 {
		t.Fatalf("%d waiters left", waiters)
	}
}

// TestWakeOneTokenNeverLost passes one wake-up around many waiters, as lock
// hand-offs do: each holder either publishes a WakeOne message or leaves
// with passOn and joins again. The token must never be lost or doubled.
func TestWakeOneTokenNeverLost(t *testing.T) {
	srv := redistest.Shared(t)
	c := srv.Client(t)
	h := newHub(t, srv.Client(t), pubsub.Options{Policy: policy})
	const (
		ch       = "token"
		waiters  = 16
		handoffs = 600
	)
	ws := make([]*pubsub.Waiter, waiters)
	for i := range ws {
		ws[i] = subscribe(t, h, ch)
	}
	var (
		mu      sync.Mutex
		holders int // goroutines holding the token right now
		passes  int
		done    = make(chan struct{})
		wg      sync.WaitGroup
	)
	for i := range ws {
		wg.Go(func() {
			w := ws[i]
			defer func() {
				if w != nil {
					w.Leave(false)
				}
			}()
			for {
				select {
				case <-done:
					return
				case <-w.C():
				case <-time.After(eventTimeout):
					t.Errorf("waiter %d: token lost", i)
					return
				}
				mu.Lock()
				holders++
				if holders != 1 {
					t.Errorf("%d holders at once", holders)
				}
				passes++
				n := passes
				holders--
				mu.Unlock()
				if n == handoffs {
					close(done)
					return
				}
				if n%3 == 0 {
					w.Leave(true)
					if w = subscribeGo(t, h, ch); w == nil {
						return
					}
				} else if !publishGo(t, c, ch, "one") {
					return
				}
			}
		})
	}
	publish(t, c, ch, "one")
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

func TestSubscribeDuringUnsubscribe(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	h := newHub(t, srv.Client(t), pubsub.Options{Linger: -1})
	const ch = "unsubscribing"
	w := subscribe(t, h, ch)
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	w.Leave(false)
	relocktest.Eventually(t, eventTimeout, "UNSUBSCRIBE in flight", func() bool { return pubsub.State(h, ch) == "unsubscribing" })

	type result struct {
		w   *pubsub.Waiter
		err error
	}
	res := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
		defer cancel()
		w, err := h.Subscribe(ctx, ch)
		res <- result{w, err}
	}()
	relocktest.Eventually(t, eventTimeout, "the waiter to register", func() bool {
		waiters, _ := pubsub.Registered(h)
		return waiters == 1
	})
	select {
	case r := <-res:
		t.Fatalf("Subscribe returned while UNSUBSCRIBE was in flight: %v", r.err)
	default:
	}
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	r := <-res
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.w.Leave(false)
	if n := numsub(t, c, ch); n != 1 {
		t.Fatalf("NUMSUB = %d, want 1", n)
	}
	publish(t, c, ch, "x")
	woken(t, r.w, "w")
}

func TestServerKilledDuringSubscribe(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	h := newHub(t, srv.Client(t), pubsub.Options{})
	subscribe(t, h, "warm").Leave(false)
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
		defer cancel()
		w, err := h.Subscribe(ctx, "mid")
		if err == nil {
			w.Leave(false)
		}
		errc <- err
	}()
	relocktest.Eventually(t, eventTimeout, "SUBSCRIBE in flight", func() bool { return pubsub.State(h, "mid") == "subscribing" })
	srv.Kill() // SIGCONT then SIGKILL: the server may still answer first
	if err := <-errc; errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Subscribe while the server died: %v, want the connection error or success", err)
	} else {
		t.Logf("Subscribe while the server died: %v", err)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	w := subscribe(t, h, "mid")
	defer w.Leave(false)
	relocktest.Eventually(t, eventTimeout, "the admin client to reconnect", func() bool { return do(t, c, "PING").Error() == nil })
	publish(t, c, "mid", "x")
	woken(t, w, "w")
}

// TestListener: a listener hears when its channel's subscription is
// confirmed, sees every message of the channel without taking a wake-up
// from the waiters, keeps the channel subscribed, hears of a lost
// connection once the channel is subscribed again, and leaves like a
// waiter.
func TestListener(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	h := newHub(t, srv.Client(t), pubsub.Options{Policy: policy})
	heard := make(chan struct{}, 16)
	l, err := h.Listen("listen", func() { heard <- struct{}{} })
	if err != nil {
		t.Fatal(err)
	}
	relocktest.Eventually(t, eventTimeout, "the listener's channel to be subscribed", func() bool { return numsub(t, c, "listen") == 1 })
	select {
	case <-heard: // once confirmed: something may have come before
	case <-time.After(eventTimeout):
		t.Fatal("the listener was not told that its subscription was confirmed")
	}
	w := subscribe(t, h, "listen")
	publish(t, c, "listen", "one")
	woken(t, w, "waiter")
	select {
	case <-heard:
	case <-time.After(eventTimeout):
		t.Fatal("the listener did not hear the message")
	}
	w.Leave(false)

	if err := do(t, c, "CLIENT", "KILL", "TYPE", "pubsub").Error(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-heard:
	case <-time.After(eventTimeout):
		t.Fatal("the listener did not hear that messages may have been lost")
	}
	relocktest.Eventually(t, eventTimeout, "resubscribed", func() bool { return numsub(t, c, "listen") == 1 })

	l.Leave(false)
	relocktest.Eventually(t, eventTimeout, "the channel to be unsubscribed after the linger", func() bool { return numsub(t, c, "listen") == 0 })
}
