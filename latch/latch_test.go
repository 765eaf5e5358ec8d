package latch_test

import (
	"context"
	"crypto/tls"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/latch"
	"github.com/relock-go/relock/rlock"
)

const handoff = 5 * time.Second

// reads is a rueidis client that counts the GETs of one key, and may run
// a function after the first.
type reads struct {
	rueidis.Client
	key   string
	n     atomic.Int64
	after func()
}

func (r *reads) isGet(cmd rueidis.Completed) bool {
	args := cmd.Commands()
	return len(args) == 2 && args[0] == "GET" && args[1] == r.key
}

func (r *reads) got() {
	if r.n.Add(1) == 1 && r.after != nil {
		r.after()
	}
}

func (r *reads) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	get := r.isGet(cmd)
	res := r.Client.Do(ctx, cmd)
	if get {
		r.got()
	}
	return res
}

// DoMulti counts a GET of the key among cmds once their replies came.
func (r *reads) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	get := slices.ContainsFunc(cmds, r.isGet)
	res := r.Client.DoMulti(ctx, cmds...)
	if get {
		r.got()
	}
	return res
}

// countingClient returns a Client whose reads of name's count are counted.
func countingClient(t *testing.T, name string, after func()) (*rlock.Client, *atomic.Int64) {
	t.Helper()
	r := &reads{Client: redistest.Shared(t).Client(t), key: name, after: after}
	c, err := rlock.New(r)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c, &r.n
}

func TestRedissonLayout(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	l := c.GetCountDownLatch(name)
	assert.Equal(t, "redisson_countdownlatch__channel__{"+name+"}", latch.Channel(name), "Channel")
	assert.Equal(t, "redisson_countdownlatch__channel__{a{b}c}", latch.Channel("a{b}c"), "Channel of a tagged name")
	msgs := make(chan string, 8)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = raw.Receive(ctx, raw.B().Subscribe().Channel(latch.Channel(name)).Build(), func(m rueidis.PubSubMessage) { msgs <- m.Message })
	}()
	defer func() { cancel(); <-done }()
	relocktest.Eventually(t, handoff, "the listener", func() bool { return relocktest.Subscribers(raw, latch.Channel(name)) == 1 })
	ok, err := l.TrySetCount(t.Context(), 2)
	require.NoError(t, err)
	require.True(t, ok, "TrySetCount")
	ok, err = l.TrySetCount(t.Context(), 5)
	require.NoError(t, err)
	assert.False(t, ok, "second TrySetCount")
	v, err := raw.Do(t.Context(), raw.B().Get().Key(name).Build()).ToString()
	require.NoError(t, err)
	assert.Equal(t, "2", v, "the count key")
	for _, step := range []struct {
		count int
		msg   string
	}{{2, "1"}, {1, ""}, {0, "0"}} {
		if step.msg != "" {
			m := relocktest.Receive(t, msgs, handoff, "the message "+step.msg)
			assert.Equal(t, step.msg, m, "the message published")
		}
		n, err := l.Count(t.Context())
		require.NoError(t, err)
		assert.Equal(t, step.count, n, "Count")
		if step.count > 0 {
			require.NoError(t, l.CountDown(t.Context()))
		}
	}
	n, err := raw.Do(t.Context(), raw.B().Exists().Key(name).Build()).AsInt64()
	require.NoError(t, err)
	assert.Zero(t, n, "the count key is left at 0")
	require.NoError(t, l.CountDown(t.Context()))
	n, err = raw.Do(t.Context(), raw.B().Exists().Key(name).Build()).AsInt64()
	require.NoError(t, err)
	assert.Zero(t, n, "CountDown of an open latch left a key")
}

// TestAwaitWokenAtZero: waiters of two Clients sleep on the channel (each
// reads the count when it starts, or once subscribed, and not again); the
// count going down wakes none of them; the message that it reached 0 lets
// all of them go on, without reading the count again.
func TestAwaitWokenAtZero(t *testing.T) {
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	c1, reads1 := countingClient(t, name, nil)
	c2, reads2 := countingClient(t, name, nil)
	setter := relocktest.Client(t)
	l := setter.GetCountDownLatch(name)
	ok, err := l.TrySetCount(t.Context(), 3)
	require.NoError(t, err)
	require.True(t, ok)
	const perClient = 4
	// A waiter that the opening does not wake gives up after 2*handoff:
	// the test then fails on its error instead of blocking in wg.Wait.
	ctx, cancel := context.WithTimeout(t.Context(), 2*handoff)
	defer cancel()
	var wg sync.WaitGroup
	done := make(chan error, 2*perClient)
	for _, c := range []*rlock.Client{c1, c2} {
		for range perClient {
			wg.Go(func() { done <- c.GetCountDownLatch(name).Await(ctx) })
		}
	}
	relocktest.Eventually(t, handoff, "the waiters to read the count", func() bool {
		return reads1.Load() >= perClient && reads2.Load() >= perClient && relocktest.Subscribers(raw, latch.Channel(name)) == 2
	})
	for range 3 {
		require.NoError(t, l.CountDown(t.Context()))
	}
	// Every waiter goes on at the opening's message: bounded, so that a
	// waiter that was not woken fails the test instead of hanging it.
	timeout := time.After(handoff)
	for i := range 2 * perClient {
		select {
		case err := <-done:
			assert.NoError(t, err, "Await")
		case <-timeout:
			t.Fatalf("%d of %d waiters still waiting %v after the latch opened", 2*perClient-i, 2*perClient, handoff)
		}
	}
	wg.Wait()
	assert.LessOrEqual(t, reads1.Load(), int64(2*perClient), "reads of the first Client's waiters: at most two each, none when woken")
	assert.LessOrEqual(t, reads2.Load(), int64(2*perClient), "reads of the second Client's waiters: at most two each, none when woken")
	relocktest.Eventually(t, handoff, "the subscriptions to end", func() bool { return relocktest.Subscribers(raw, latch.Channel(name)) == 0 })
}

// TestAwaitOpeningThenNewCount: a waiter sleeps; the count reaches 0 and a
// new count is set at once (the next batch starts). The opening is the
// message: the waiter goes on, although the count it would read is 1.
func TestAwaitOpeningThenNewCount(t *testing.T) {
	name := relocktest.Name(t)
	c, reads := countingClient(t, name, nil)
	ok, err := c.GetCountDownLatch(name).TrySetCount(t.Context(), 1)
	require.NoError(t, err)
	require.True(t, ok)
	got := make(chan error, 1)
	go func() { got <- c.GetCountDownLatch(name).Await(t.Context()) }()
	// The first waiter of a Client reads, subscribes and reads again.
	relocktest.Eventually(t, handoff, "the waiter to sleep", func() bool { return reads.Load() == 2 })
	// The last CountDown and the next batch's TrySetCount, in one step
	// (as two calls that land back to back), so that every read after the
	// opening sees the new count.
	raw := relocktest.Raw(t)
	require.NoError(t, raw.Do(t.Context(), raw.B().Eval().Script(`
redis.call('del', KEYS[1])
redis.call('publish', ARGV[1], '0')
redis.call('set', KEYS[1], 1)
redis.call('publish', ARGV[1], '1')
return 1`).Numkeys(1).Key(name).Arg(latch.Channel(name)).Build()).Error())
	err = relocktest.Receive(t, got, handoff, "the waiter to go on at the latch's opening")
	assert.NoError(t, err, "Await across the opening")
}

// TestAwaitOpenLatch: Await of an open or unset latch returns after one
// read (one round trip), without subscribing, also when relock's mark of
// an opening is there.
func TestAwaitOpenLatch(t *testing.T) {
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	c, reads := countingClient(t, name, nil)
	l := c.GetCountDownLatch(name)
	ctx, cancel := context.WithTimeout(t.Context(), handoff)
	defer cancel()
	assert.NoError(t, l.Await(ctx), "Await of an unset latch")
	ok, err := l.TrySetCount(t.Context(), 1)
	require.NoError(t, err)
	require.True(t, ok, "TrySetCount")
	require.NoError(t, l.CountDown(t.Context()))
	assert.NoError(t, l.Await(ctx), "Await of an open latch")
	assert.Equal(t, int64(2), reads.Load(), "reads of the count")
	// A subscription would still be there: the hub lingers on a channel.
	assert.Zero(t, relocktest.Subscribers(raw, latch.Channel(name)), "subscriptions to the latch's channel")
}

// latencyClient returns a Client whose connections add delay each way
// (the network between it and Redis), and which calls dialed, if set, as
// it makes a connection, before anything is sent on it.
func latencyClient(t *testing.T, delay time.Duration, dialed func()) *rlock.Client {
	t.Helper()
	opt := redistest.Shared(t).ClientOption()
	opt.DialCtxFn = func(ctx context.Context, dst string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
		conn, err := d.DialContext(ctx, "tcp", dst)
		if err != nil {
			return nil, err
		}
		if dialed != nil {
			dialed()
		}
		return slowConn{Conn: conn, delay: delay}, nil
	}
	c, err := rlock.NewClient(opt)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// slowConn delays what it writes, and what it read, by delay.
type slowConn struct {
	net.Conn
	delay time.Duration
}

func (c slowConn) Write(b []byte) (int, error) {
	time.Sleep(c.delay)
	return c.Conn.Write(b)
}

func (c slowConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		time.Sleep(c.delay)
	}
	return n, err
}

// TestAwaitOpeningWhileSubscribing (issue 32, item 6): a brand-new Client
// reaches Redis with 50ms each way; it waits on a latch at count 1, and
// the latch opens and is set again (by another Client, directly) while the
// waiter's Client makes its pub/sub connection: its first read found the
// count at 1, the opening's message goes out before the subscription
// exists, and the waiter's read once subscribed finds the new count. The
// mark the opening left tells it that the latch opened in between.
func TestAwaitOpeningWhileSubscribing(t *testing.T) {
	name := relocktest.Name(t)
	setter := relocktest.Client(t)
	l := setter.GetCountDownLatch(name)
	ok, err := l.TrySetCount(t.Context(), 1)
	require.NoError(t, err)
	require.True(t, ok, "TrySetCount")
	var armed atomic.Bool
	var openings atomic.Int32
	c := latencyClient(t, 50*time.Millisecond, func() {
		// The one connection made once Await runs is its pub/sub
		// connection.
		if !armed.Load() || openings.Add(1) != 1 {
			return
		}
		assert.NoError(t, l.CountDown(context.Background()), "CountDown")
		ok, err := l.TrySetCount(context.Background(), 1)
		assert.NoError(t, err, "TrySetCount again")
		assert.True(t, ok, "TrySetCount again")
	})
	armed.Store(true)
	// A waiter that missed the opening gives up after handoff: the test
	// then fails on its error instead of hanging.
	ctx, cancel := context.WithTimeout(t.Context(), handoff)
	defer cancel()
	assert.NoError(t, c.GetCountDownLatch(name).Await(ctx), "Await across an opening while it subscribed")
	assert.Equal(t, int32(1), openings.Load(), "connections made by Await")
}

// TestAwaitEarlierOpeningIgnored: the mark of an opening that came before
// the waiter's first read does not end its wait.
func TestAwaitEarlierOpeningIgnored(t *testing.T) {
	name := relocktest.Name(t)
	raw := relocktest.Raw(t)
	c, reads := countingClient(t, name, nil)
	l := c.GetCountDownLatch(name)
	// Set, opened, set again: the next batch.
	ok, err := l.TrySetCount(t.Context(), 1)
	require.NoError(t, err)
	require.True(t, ok, "TrySetCount")
	require.NoError(t, l.CountDown(t.Context()))
	ok, err = l.TrySetCount(t.Context(), 1)
	require.NoError(t, err)
	require.True(t, ok, "TrySetCount again")
	n, err := raw.Do(t.Context(), raw.B().Exists().Key(layout.LatchOpened(name)).Build()).AsInt64()
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "the mark of the openings")
	ctx, cancel := context.WithCancel(t.Context())
	got := make(chan error, 1)
	go func() { got <- l.Await(ctx) }()
	// The waiter reads, subscribes and reads again: then it sleeps.
	relocktest.Eventually(t, handoff, "the waiter to read twice", func() bool { return reads.Load() == 2 })
	cancel()
	err = relocktest.Receive(t, got, handoff, "Await to end with its context")
	assert.ErrorIs(t, err, latch.ErrNotAcquired, "Await of a latch set since its last opening")
}

// TestAwaitSeesZeroReachedWhileSubscribing: the count reaches 0 between
// the waiter's first read and its subscription; its read after
// subscribing sees it.
func TestAwaitSeesZeroReachedWhileSubscribing(t *testing.T) {
	name := relocktest.Name(t)
	setter := relocktest.Client(t)
	l := setter.GetCountDownLatch(name)
	ok, err := l.TrySetCount(t.Context(), 1)
	require.NoError(t, err)
	require.True(t, ok, "TrySetCount")
	// After the waiter's first read, count down: the message goes out
	// before the waiter listens.
	c, _ := countingClient(t, name, func() {
		assert.NoError(t, l.CountDown(context.Background()))
	})
	ctx, cancel := context.WithTimeout(t.Context(), handoff)
	defer cancel()
	assert.NoError(t, c.GetCountDownLatch(name).Await(ctx), "Await")
}

// TestAwaitOpeningRightAfterFirstRead (issue 32, item 6): the latch opens
// and is set again the moment the waiter's first read was answered, as
// when the waiter's Client reaches Redis slower than the workers' do. The
// opening's message goes out before the waiter listens, and its read once
// subscribed finds the new count; the mark the opening left tells it that
// the latch opened in between.
func TestAwaitOpeningRightAfterFirstRead(t *testing.T) {
	name := relocktest.Name(t)
	setter := relocktest.Client(t)
	l := setter.GetCountDownLatch(name)
	ok, err := l.TrySetCount(t.Context(), 1)
	require.NoError(t, err)
	require.True(t, ok, "TrySetCount")
	// Once the waiter's first read is answered, the last CountDown and
	// the next batch's TrySetCount, before the waiter does anything else.
	c, _ := countingClient(t, name, func() {
		assert.NoError(t, l.CountDown(context.Background()), "CountDown")
		ok, err := l.TrySetCount(context.Background(), 1)
		assert.NoError(t, err, "TrySetCount again")
		assert.True(t, ok, "TrySetCount again")
	})
	// A waiter that missed the opening gives up after handoff: the test
	// then fails on its error instead of hanging.
	ctx, cancel := context.WithTimeout(t.Context(), handoff)
	defer cancel()
	assert.NoError(t, c.GetCountDownLatch(name).Await(ctx), "Await across an opening right after its first read")
}

func TestAwaitEnds(t *testing.T) {
	name := relocktest.Name(t)
	c, reads := countingClient(t, name, nil)
	l := c.GetCountDownLatch(name)
	ok, err := l.TrySetCount(t.Context(), 1)
	require.NoError(t, err)
	require.True(t, ok, "TrySetCount")
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	err = l.Await(ctx)
	assert.ErrorIs(t, err, latch.ErrNotAcquired, "Await until a deadline")
	assert.ErrorIs(t, err, context.DeadlineExceeded, "Await until a deadline")
	got := make(chan error, 1)
	before := reads.Load()
	go func() { got <- l.Await(t.Context()) }()
	relocktest.Eventually(t, handoff, "the waiter to read the count", func() bool { return reads.Load() > before })
	require.NoError(t, c.Close())
	err = relocktest.Receive(t, got, handoff, "Close to end Await")
	assert.ErrorIs(t, err, latch.ErrNotAcquired, "Await ended by Close")
	assert.ErrorIs(t, err, latch.ErrClosed, "Await ended by Close")
}

func TestBadInputWritesNothing(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	ctx := t.Context()
	bad := []struct {
		what string
		call func() error
	}{
		{"empty name", func() error { return c.GetCountDownLatch("").CountDown(ctx) }},
		{"broken hash tag", func() error { _, err := c.GetCountDownLatch("x{").TrySetCount(ctx, 1); return err }},
		{"zero count", func() error { _, err := c.GetCountDownLatch(name).TrySetCount(ctx, 0); return err }},
		{"negative count", func() error { _, err := c.GetCountDownLatch(name).TrySetCount(ctx, -3); return err }},
		{"control character", func() error { return c.GetCountDownLatch("a\nb").Await(ctx) }},
	}
	for _, b := range bad {
		assert.ErrorIs(t, b.call(), latch.ErrInvalidArgument, b.what)
	}
	keys, err := raw.Do(ctx, raw.B().Keys().Pattern("*"+name+"*").Build()).AsStrSlice()
	require.NoError(t, err)
	assert.Empty(t, keys, "keys the bad calls wrote")
	sharded := relocktest.Client(t, rlock.WithShardedPubSub())
	_, err = sharded.GetCountDownLatch("jobs:{tag}").TrySetCount(ctx, 1)
	assert.ErrorIs(t, err, latch.ErrInvalidArgument, "a name with braces under sharded pub/sub")
}
