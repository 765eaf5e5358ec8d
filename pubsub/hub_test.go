package pubsub_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/pubsub"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// eventTimeout bounds every wait for something that must happen.
const eventTimeout = 10 * time.Second

// policy wakes by payload: "one" wakes the oldest waiter, "ignore" nobody,
// "mute" nobody, now or at the next "one", anything else every waiter. Tests use "all" on a barrier channel to know
// that every earlier message has been handled: messages reach the hub in
// the order they were published by one client.
func policy(_, payload string) pubsub.Wake {
	switch payload {
	case "one":
		return pubsub.WakeOne
	case "ignore":
		return pubsub.Ignore
	case "mute":
		return pubsub.Mute
	}
	return pubsub.WakeAll
}

// The helpers below fail the test with require, so they must run on the
// test's goroutine. Other goroutines use these, which report with assert.

func subscribeGo(t testing.TB, h *pubsub.Hub, ch string) *pubsub.Waiter {
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	w, err := h.Subscribe(ctx, ch)
	assert.NoError(t, err, "Subscribe(%q)", ch)
	return w
}

func publishGo(t testing.TB, c rueidis.Client, ch, payload string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	return assert.NoError(t, c.Do(ctx, c.B().Publish().Channel(ch).Message(payload).Build()).Error(), "PUBLISH %s", ch)
}

func wokenGo(t testing.TB, w *pubsub.Waiter, name string) bool {
	select {
	case <-w.C():
		return true
	case <-time.After(eventTimeout):
		return assert.Failf(t, "not woken", "waiter %s was not woken within %v", name, eventTimeout)
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
	require.NoError(t, err, "Subscribe(%q)", ch)
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
	require.NoError(t, do(t, c, "PUBLISH", ch, payload).Error(), "PUBLISH %s", ch)
}

// numsub returns the server's subscriber count of ch, or -1 when the
// server could not be asked (a client reconnecting after a restart). It
// never fails the test, so conditions of relocktest.Eventually use it.
func numsub(c rueidis.Client, ch string) int64 { return relocktest.Subscribers(c, ch) }

// ping reports whether the server of c answers, for conditions.
func ping(c rueidis.Client) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return c.Do(ctx, c.B().Ping().Build()).Error() == nil
}

// commandCalls returns how many times the server ran cmd (lower case).
func commandCalls(t testing.TB, c rueidis.Client, cmd string) int {
	t.Helper()
	info, err := do(t, c, "INFO", "commandstats").ToString()
	require.NoError(t, err, "INFO commandstats")
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
	require.NoError(t, err, "CLIENT LIST")
	return strings.Count(strings.TrimSpace(s), "\n") + min(1, len(strings.TrimSpace(s)))
}

func woken(t testing.TB, w *pubsub.Waiter, name string) {
	t.Helper()
	relocktest.Receive(t, w.C(), eventTimeout, "waiter "+name+" to be woken")
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
	require.EqualValues(t, 1, numsub(c, ch), "NUMSUB with 100 waiters")
	require.Equal(t, 1, h.Subscribed(), "Subscribed()")
	for _, w := range ws[:99] {
		w.Leave(false)
	}
	require.EqualValues(t, 1, numsub(c, ch), "NUMSUB with 1 waiter left")
	ws[99].Leave(false)
	ws[99].Leave(false) // idempotent
	relocktest.Eventually(t, eventTimeout, "NUMSUB 0 after the linger", func() bool { return numsub(c, ch) == 0 })
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
	require.Equal(t, 1, commandCalls(t, c, "subscribe")-before, "SUBSCRIBE commands for 50 concurrent Subscribe calls")
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
		got := []bool{pending(a), pending(b), pending(d)}
		require.Equal(t, []bool{wa, wb, wd}, got, "%s: which of a, b, d were woken", step)
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

// TestMuteNext: a Mute message wakes nobody, nor does the WakeOne message
// that follows it on its channel; only that one: the next wakes as
// always, a WakeAll message after a Mute wakes every waiter, a Mute on
// another channel changes nothing here, and a lost connection ends a
// mute (the message it was for may be lost with it).
func TestMuteNext(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	h := newHub(t, srv.Client(t), pubsub.Options{Policy: policy})
	const ch = "mute"
	a := subscribe(t, h, ch)
	b := subscribe(t, h, ch)
	other := subscribe(t, h, "mute:other")
	defer a.Leave(false)
	defer b.Leave(false)
	defer other.Leave(false)
	check := func(step string, wa, wb bool) {
		t.Helper()
		barrier(t, h, c)
		got := []bool{pending(a), pending(b)}
		require.Equal(t, []bool{wa, wb}, got, "%s: which of a, b were woken", step)
	}

	publish(t, c, ch, "mute")
	check("the mute", false, false)
	publish(t, c, ch, "one")
	check("the message after the mute", false, false)
	publish(t, c, ch, "one")
	check("the message after that", true, false)

	publish(t, c, ch, "mute")
	publish(t, c, ch, "all")
	check("wake-all after a mute", true, true)
	publish(t, c, ch, "one")
	check("wake-one after a mute and a wake-all", true, false)

	publish(t, c, "mute:other", "mute")
	publish(t, c, ch, "one")
	check("a mute on another channel", true, false)
	publish(t, c, "mute:other", "one")
	barrier(t, h, c)
	assert.False(t, pending(other), "the other channel's message after its mute")

	// The connection is lost after a mute: the waiters are woken (and
	// again once subscribed), and the mute is over.
	publish(t, c, ch, "mute")
	barrier(t, h, c)
	require.NoError(t, do(t, c, "CLIENT", "KILL", "TYPE", "pubsub").Error())
	relocktest.Eventually(t, eventTimeout, "resubscribed", func() bool {
		return numsub(c, ch) == 1
	})
	barrier(t, h, c)
	pending(a)
	pending(b)
	publish(t, c, ch, "one")
	check("wake-one after a lost connection", true, false)
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
		require.True(t, pending(w), "waiter %d not woken", i)
		require.False(t, pending(w), "waiter %d woken twice", i)
	}
	require.False(t, pending(other), "waiter of another channel woken")
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
		require.True(t, pending(b), "Leave(true) did not hand the wake-up to b")
	})
	t.Run("pending", func(t *testing.T) {
		a := subscribe(t, h, ch)
		b := subscribe(t, h, ch)
		defer b.Leave(false)
		publish(t, c, ch, "one")
		barrier(t, h, c)
		require.False(t, pending(b), "b woken by a WakeOne message while a waited longer")
		a.Leave(false) // a's unconsumed wake-up goes to b
		require.True(t, pending(b), "Leave with a pending wake-up did not hand it to b")
	})
	t.Run("nothing", func(t *testing.T) {
		a := subscribe(t, h, ch)
		b := subscribe(t, h, ch)
		defer b.Leave(false)
		a.Leave(false)
		a.Leave(true) // already left: no effect
		require.False(t, pending(b), "b woken although a had nothing to hand on")
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
		require.True(t, pending(d), "wake-up not handed to d")
		require.True(t, pending(b), "b lost its wake-up")
		b.Leave(false)
	})
}

// TestSubscribeDuringLinger: a waiter that comes while its channel lingers
// after the last Leave reuses the subscription (no command), and keeps it
// past the end of that linger. (TestFakeLinger checks the timing exactly,
// on a fake clock; this checks it against a real server.)
func TestSubscribeDuringLinger(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	const linger = 300 * time.Millisecond
	h := newHub(t, srv.Client(t), pubsub.Options{Linger: linger})

	// The scenario needs the second Subscribe to come well within the
	// linger of the first Leave. It takes microseconds, but a pause of
	// the process (a loaded machine) can delay it: then the linger may
	// have ended, which proves nothing, and the scenario is run again on
	// a new channel. A machine that delays it every time fails the test.
	var (
		w     *pubsub.Waiter
		ch    string
		start time.Time
	)
	for attempt := range 5 {
		ch = fmt.Sprintf("linger:%d", attempt)
		subscribe(t, h, ch).Leave(false)
		start = time.Now()
		w = subscribe(t, h, ch)
		if time.Since(start) < linger/2 {
			break
		}
		t.Logf("attempt %d: the second Subscribe came %v after the Leave, too late for a %v linger", attempt, time.Since(start), linger)
		w.Leave(false)
		w = nil
		relocktest.Eventually(t, eventTimeout, "the channel of a failed attempt to go", func() bool { return numsub(c, ch) == 0 })
	}
	require.NotNil(t, w, "the second Subscribe never came within half the linger: the scenario could not be run")
	unsubscribes, subscribes := commandCalls(t, c, "unsubscribe"), commandCalls(t, c, "subscribe")

	// The scenario: let the first Leave's linger end on purpose while the
	// second waiter is registered. Had it unsubscribed the channel, the
	// counts below would show it.
	time.Sleep(time.Until(start.Add(2 * linger)))
	assert.EqualValues(t, 1, numsub(c, ch), "NUMSUB while a waiter is registered, after the first linger ended")
	assert.Equal(t, "subscribed", pubsub.State(h, ch), "the hub's state of the channel")
	assert.Equal(t, unsubscribes, commandCalls(t, c, "unsubscribe"), "UNSUBSCRIBE commands while a waiter is registered")
	assert.Equal(t, subscribes, commandCalls(t, c, "subscribe"), "SUBSCRIBE commands: the second waiter must reuse the subscription")
	publish(t, c, ch, "x")
	woken(t, w, "w")
	w.Leave(false)
	relocktest.Eventually(t, eventTimeout, "NUMSUB 0", func() bool { return numsub(c, ch) == 0 })
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
	require.Equal(t, 1, pubsubClients(t, c), "pubsub connections")

	require.NoError(t, do(t, c, "CLIENT", "KILL", "TYPE", "pubsub").Error())
	for i, w := range ws {
		woken(t, w, strconv.Itoa(i))
	}
	relocktest.Eventually(t, eventTimeout, "resubscribed", func() bool {
		return h.Subscribed() == 2 && numsub(c, "kill:a") == 1 && numsub(c, "kill:b") == 1
	})
	require.Equal(t, 1, pubsubClients(t, c), "pubsub connections after reconnecting")
	// Waiters were woken again once resubscribed; clear that.
	for _, w := range ws {
		pending(w)
	}
	publish(t, c, "kill:a", "all")
	barrier(t, h, c)
	for i, w := range ws {
		require.Equal(t, i%2 == 0, pending(w), "waiter %d woken after PUBLISH", i)
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
	}
	require.Error(t, err, "Subscribe with the server down")
	t.Logf("Subscribe with the server down failed after %v: %v", time.Since(start).Round(time.Millisecond), err)
	waiters, _ := pubsub.Registered(h)
	require.Equal(t, 1, waiters, "waiters registered")

	require.NoError(t, srv.Restart())
	relocktest.Eventually(t, eventTimeout, "resubscribed after restart", func() bool {
		return h.Subscribed() == 1 && numsub(c, "killed") == 1
	})
	pending(w)
	publish(t, c, "killed", "x")
	woken(t, w, "w")
}

func TestSubscribeAfterClose(t *testing.T) {
	srv := redistest.Shared(t)
	h := pubsub.New(srv.Client(t), pubsub.Options{})
	require.NoError(t, h.Close())
	require.NoError(t, h.Close())
	_, err := h.Subscribe(context.Background(), "closed")
	require.ErrorIs(t, err, pubsub.ErrClosed, "Subscribe after Close")
}

func TestCloseWakesWaitersAndLeavesNoGoroutines(t *testing.T) {
	srv := redistest.Shared(t) // started before the goroutine snapshot
	ignore := goleak.IgnoreCurrent()
	rdb, err := rueidis.NewClient(srv.ClientOption())
	require.NoError(t, err)
	h := pubsub.New(rdb, pubsub.Options{})
	var ws []*pubsub.Waiter
	for i := range 10 {
		ws = append(ws, subscribe(t, h, fmt.Sprintf("close:%d", i%3)))
	}
	require.NoError(t, h.Close())
	for i, w := range ws {
		require.True(t, pending(w), "waiter %d not woken by Close", i)
		w.Leave(false)
	}
	rdb.Close()
	goleak.VerifyNone(t, ignore)
}

func TestCloseDuringSubscribe(t *testing.T) {
	srv := redistest.Start(t)
	h := newHub(t, srv.Client(t), pubsub.Options{})
	subscribe(t, h, "warm").Leave(false) // connect first
	require.NoError(t, srv.Pause())
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
	err := relocktest.Receive(t, errc, eventTimeout, "Subscribe to return after Close")
	require.ErrorIs(t, err, pubsub.ErrClosed, "Subscribe during Close")
}

func TestSubscribeCancelled(t *testing.T) {
	t.Run("before", func(t *testing.T) {
		srv := redistest.Shared(t)
		c := srv.Client(t)
		h := newHub(t, srv.Client(t), pubsub.Options{})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := h.Subscribe(ctx, "cancelled")
		require.ErrorIs(t, err, context.Canceled, "Subscribe with a cancelled ctx")
		waiters, channels := pubsub.Registered(h)
		require.Zero(t, waiters, "waiters left")
		require.Zero(t, channels, "channels left")
		require.Zero(t, numsub(c, "cancelled"), "NUMSUB")
	})
	t.Run("inFlight", func(t *testing.T) {
		srv := redistest.Start(t)
		c := srv.Client(t)
		h := newHub(t, srv.Client(t), pubsub.Options{Linger: 20 * time.Millisecond})
		subscribe(t, h, "warm").Leave(false)
		require.NoError(t, srv.Pause())
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_, err := h.Subscribe(ctx, "inflight")
		_ = srv.Resume()
		require.ErrorIs(t, err, context.DeadlineExceeded, "Subscribe against a paused server")
		waiters, _ := pubsub.Registered(h)
		require.Zero(t, waiters, "waiters left")
		// The SUBSCRIBE that was sent is answered, lingers, and goes.
		relocktest.Eventually(t, eventTimeout, "nothing subscribed", func() bool {
			_, channels := pubsub.Registered(h)
			return channels == 0 && h.Subscribed() == 0 && numsub(c, "inflight") == 0
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
	require.Equal(t, n, h.Subscribed(), "Subscribed()")
	require.Equal(t, 1, pubsubClients(t, c), "pubsub connections")
	numpat, err := do(t, c, "PUBSUB", "NUMPAT").AsInt64()
	require.NoError(t, err, "PUBSUB NUMPAT")
	require.Zero(t, numpat, "PUBSUB NUMPAT")
	chans, err := do(t, c, "PUBSUB", "CHANNELS", "many:*").AsStrSlice()
	require.NoError(t, err, "PUBSUB CHANNELS")
	require.Len(t, chans, n, "PUBSUB CHANNELS")
	t.Logf("%d SUBSCRIBE commands for %d channels", commandCalls(t, c, "subscribe"), n)
	publish(t, c, "many:4242", "x")
	woken(t, ws[4242], "4242")
	for _, w := range ws {
		w.Leave(false)
	}
	relocktest.Eventually(t, eventTimeout, "every channel unsubscribed", func() bool {
		return h.Subscribed() == 0 && numsub(c, "many:9999") == 0
	})
}

func TestRefusedChannelFailsAlone(t *testing.T) {
	c, h := limitedHub(t, "&allowed:*")

	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			<-start
			ch := fmt.Sprintf("allowed:%d", i)
			if i%2 == 1 {
				ch = fmt.Sprintf("denied:%d", i)
			}
			ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
			defer cancel()
			w, err := h.Subscribe(ctx, ch)
			if i%2 == 1 {
				assert.ErrorContains(t, err, "NOPERM", "Subscribe(%s)", ch)
				return
			}
			if !assert.NoError(t, err, "Subscribe(%s)", ch) {
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
	waiters, _ := pubsub.Registered(h)
	require.Zero(t, waiters, "waiters left")
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
					assert.Failf(t, "token lost", "waiter %d: no wake-up for %v", i, eventTimeout)
					return
				}
				mu.Lock()
				holders++
				assert.Equal(t, 1, holders, "holders of the token at once")
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
	require.NoError(t, srv.Pause())
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
		require.FailNowf(t, "returned early", "Subscribe returned while UNSUBSCRIBE was in flight: %v", r.err)
	default:
	}
	require.NoError(t, srv.Resume())
	r := relocktest.Receive(t, res, 2*eventTimeout, "Subscribe to return after the server resumed")
	require.NoError(t, r.err)
	defer r.w.Leave(false)
	require.EqualValues(t, 1, numsub(c, ch), "NUMSUB")
	publish(t, c, ch, "x")
	woken(t, r.w, "w")
}

func TestServerKilledDuringSubscribe(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	h := newHub(t, srv.Client(t), pubsub.Options{})
	subscribe(t, h, "warm").Leave(false)
	require.NoError(t, srv.Pause())
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
	err := relocktest.Receive(t, errc, 2*eventTimeout, "Subscribe to return after the server died")
	require.NotErrorIs(t, err, context.DeadlineExceeded, "Subscribe while the server died: want the connection error or success")
	t.Logf("Subscribe while the server died: %v", err)
	require.NoError(t, srv.Restart())
	w := subscribe(t, h, "mid")
	defer w.Leave(false)
	relocktest.Eventually(t, eventTimeout, "the admin client to reconnect", func() bool { return ping(c) })
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
	require.NoError(t, err)
	relocktest.Eventually(t, eventTimeout, "the listener's channel to be subscribed", func() bool { return numsub(c, "listen") == 1 })
	// Once confirmed: something may have come before.
	relocktest.Receive(t, heard, eventTimeout, "the listener to be told that its subscription was confirmed")
	w := subscribe(t, h, "listen")
	publish(t, c, "listen", "one")
	woken(t, w, "waiter")
	relocktest.Receive(t, heard, eventTimeout, "the listener to hear the message")
	w.Leave(false)

	require.NoError(t, do(t, c, "CLIENT", "KILL", "TYPE", "pubsub").Error())
	relocktest.Receive(t, heard, eventTimeout, "the listener to hear that messages may have been lost")
	relocktest.Eventually(t, eventTimeout, "resubscribed", func() bool { return numsub(c, "listen") == 1 })

	l.Leave(false)
	relocktest.Eventually(t, eventTimeout, "the channel to be unsubscribed after the linger", func() bool { return numsub(c, "listen") == 0 })
}

// TestListenMissed: a listener with two functions hears the confirmation
// of its subscription, and a subscription made again after a lost
// connection, on the one for messages that may have been missed, and the
// messages on the other.
func TestListenMissed(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	h := newHub(t, srv.Client(t), pubsub.Options{Policy: policy})
	heard := make(chan struct{}, 16)
	missed := make(chan struct{}, 16)
	l, err := h.ListenMissed("listen", func() { heard <- struct{}{} }, func() { missed <- struct{}{} })
	require.NoError(t, err)
	relocktest.Receive(t, missed, eventTimeout, "the listener to be told that its subscription was confirmed")
	publish(t, c, "listen", "one")
	relocktest.Receive(t, heard, eventTimeout, "the listener to hear the message")
	require.NoError(t, do(t, c, "CLIENT", "KILL", "TYPE", "pubsub").Error())
	relocktest.Receive(t, missed, eventTimeout, "the listener to hear that messages may have been lost")
	relocktest.Eventually(t, eventTimeout, "resubscribed", func() bool { return numsub(c, "listen") == 1 })
	assert.Empty(t, heard, "a message heard that was not published")
	assert.Empty(t, missed, "a message missed twice")
	l.Leave(false)
}

// TestBegin: Begin registers at once and tells when the subscription is
// made; a message published after that wakes the waiter; a second Begin
// on the subscribed channel is made already; after Close it fails with
// ErrClosed.
func TestBegin(t *testing.T) {
	srv := redistest.Shared(t)
	c := srv.Client(t)
	h := pubsub.New(srv.Client(t), pubsub.Options{})
	w, p, err := h.Begin("begin")
	require.NoError(t, err)
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the subscription begun was not made within 10s")
	}
	require.NoError(t, p.Err())
	publish(t, c, "begin", "x")
	woken(t, w, "begin")
	w2, p2, err := h.Begin("begin")
	require.NoError(t, err)
	select {
	case <-p2.Done():
	default:
		t.Error("Begin on a subscribed channel is not done at once")
	}
	require.NoError(t, p2.Err())
	w.Leave(false)
	w2.Leave(false)
	require.NoError(t, h.Close())
	_, _, err = h.Begin("begin")
	require.ErrorIs(t, err, pubsub.ErrClosed, "Begin after Close")
}

// TestResubscribeRefusedTellsWaiters: a waiter's channel, subscribed
// again after the connection was lost, is refused by the server (its ACL
// changed meanwhile): the waiter is woken and its Err says so, instead of
// sleeping on a channel that is no longer subscribed. A new Subscribe on
// the channel tries it again and gets the refusal.
func TestResubscribeRefusedTellsWaiters(t *testing.T) {
	c, h := limitedHub(t, "&*")
	w := subscribe(t, h, "gated:1")
	defer w.Leave(false)
	require.NoError(t, w.Err())

	require.NoError(t, do(t, c, "ACL", "SETUSER", "limited", "resetchannels", "&allowed:*").Error())
	// (Redis 7 drops the connection of a client whose channels its ACL
	// no longer allows; 6.2 does not: drop it here.)
	_ = do(t, c, "CLIENT", "KILL", "TYPE", "pubsub").Error()
	woken(t, w, "gated:1")
	relocktest.Eventually(t, eventTimeout, "the refusal told to the waiter", func() bool { return w.Err() != nil })
	require.ErrorContains(t, w.Err(), "NOPERM")

	ctx, cancel := context.WithTimeout(t.Context(), eventTimeout)
	defer cancel()
	_, err := h.Subscribe(ctx, "gated:1")
	require.ErrorContains(t, err, "NOPERM", "a new Subscribe")
}

// limitedHub starts a server of its own with an ACL user "limited" that
// may use the channels channels allows (an ACL channel rule), and returns
// an admin client of it and a hub connected as that user; both are
// closed when t ends.
func limitedHub(t *testing.T, channels string) (rueidis.Client, *pubsub.Hub) {
	t.Helper()
	srv := redistest.Start(t)
	c := srv.Client(t)
	require.NoError(t, do(t, c, "ACL", "SETUSER", "limited", "on", "nopass", "resetchannels", channels, "+@all").Error())
	opt := srv.ClientOption()
	opt.Username, opt.Password = "limited", "any"
	rdb, err := rueidis.NewClient(opt)
	require.NoError(t, err)
	h := pubsub.New(rdb, pubsub.Options{})
	t.Cleanup(func() {
		_ = h.Close()
		rdb.Close()
	})
	return c, h
}
