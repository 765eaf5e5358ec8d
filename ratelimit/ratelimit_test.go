package ratelimit_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/redissontest"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/ratelimit"
	"github.com/relock-go/relock/rlock"
)

func TestMain(m *testing.M) { redistest.Main(m) }

func setRate(t *testing.T, l *ratelimit.Limiter, rate int, interval time.Duration) {
	t.Helper()
	ok, err := l.TrySetRate(t.Context(), rate, interval)
	require.NoError(t, err, "TrySetRate(%d, %v)", rate, interval)
	require.True(t, ok, "TrySetRate(%d, %v)", rate, interval)
}

func available(t *testing.T, l *ratelimit.Limiter) int {
	t.Helper()
	n, err := l.AvailablePermits(t.Context())
	require.NoError(t, err)
	return n
}

// grant is one grant in the window, as Redis keeps it.
type grant struct {
	id      string
	permits int
	at      int64 // its score: when it was made, ms
}

// grants reads the grants of the rate limiter name (type OVERALL),
// unpacking each member as Redisson packs it.
func grants(raw rueidis.Client, name string) ([]grant, error) {
	zs, err := raw.Do(context.Background(), raw.B().Zrange().Key(layout.RateLimiter(name).Permits).Min("0").Max("-1").
		Withscores().Build()).AsZScores()
	if err != nil {
		return nil, err
	}
	var out []grant
	for _, z := range zs {
		m := []byte(z.Member)
		if len(m) < 5 || int(m[0]) != len(m)-5 {
			return nil, fmt.Errorf("member %x is not a packed grant", m)
		}
		out = append(out, grant{id: string(m[1 : 1+m[0]]), permits: int(binary.LittleEndian.Uint32(m[1+m[0]:])), at: int64(z.Score)})
	}
	return out, nil
}

// TestRateWindow: the rate is set once; permits are taken n at a time,
// all or none, until the window is full; SetRate starts an empty one.
func TestRateWindow(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	ctx := t.Context()
	name := relocktest.Name(t)
	l := c.GetRateLimiter(name)
	setRate(t, l, 3, time.Minute)
	ok, err := l.TrySetRate(ctx, 10, time.Second)
	require.NoError(t, err)
	assert.False(t, ok, "TrySetRate on a rate already set")
	assert.Equal(t, 3, available(t, l))

	ok, err = l.TryAcquire(ctx, 2, 0)
	require.NoError(t, err)
	require.True(t, ok, "TryAcquire(2) of 3")
	ok, err = l.TryAcquire(ctx, 2, 0)
	require.NoError(t, err)
	assert.False(t, ok, "TryAcquire(2) with 1 left: all or none")
	require.NoError(t, l.Acquire(ctx, 1))
	assert.Equal(t, 0, available(t, l))
	g, err := grants(raw, name)
	require.NoError(t, err)
	require.Len(t, g, 2, "grants in the window")
	assert.Equal(t, 3, g[0].permits+g[1].permits, "the grants' permits (2 and 1)")
	assert.Len(t, g[0].id, 16, "a grant's ID: 16 bytes, as Redisson's")

	require.NoError(t, l.SetRate(ctx, 5, time.Minute))
	assert.Equal(t, 5, available(t, l), "a rate set anew starts an empty window")
	cfg, err := raw.Do(ctx, raw.B().Hgetall().Key(name).Build()).AsStrMap()
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"rate": "5", "interval": "60000", "type": "0", "keepAliveTime": "0"}, cfg)
}

// TestRateInvalidArguments: bad input gets ErrInvalidArgument and changes
// nothing in Redis; a limiter without a rate gets ErrNoRate.
func TestRateInvalidArguments(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	ctx := t.Context()
	unset := c.GetRateLimiter(relocktest.Name(t))
	_, err := unset.TryAcquire(ctx, 1, 0)
	assert.ErrorIs(t, err, ratelimit.ErrNoRate, "TryAcquire without a rate")
	assert.ErrorIs(t, unset.Acquire(ctx, 1), ratelimit.ErrNoRate, "Acquire without a rate")
	_, err = unset.AvailablePermits(ctx)
	assert.ErrorIs(t, err, ratelimit.ErrNoRate, "AvailablePermits without a rate")

	name := relocktest.Name(t)
	l := c.GetRateLimiter(name)
	setRate(t, l, 2, time.Minute)
	require.NoError(t, l.Acquire(ctx, 1))
	empty := c.GetRateLimiter("")
	tests := []struct {
		what string
		call func() error
	}{
		{"TrySetRate(0)", func() error { _, err := l.TrySetRate(ctx, 0, time.Second); return err }},
		{"SetRate(-1)", func() error { return l.SetRate(ctx, -1, time.Second) }},
		{"SetRate interval 0", func() error { return l.SetRate(ctx, 1, 0) }},
		{"SetRate interval 500µs", func() error { return l.SetRate(ctx, 1, 500*time.Microsecond) }},
		{"SetRate negative interval", func() error { return l.SetRate(ctx, 1, -time.Second) }},
		{"Acquire(0)", func() error { return l.Acquire(ctx, 0) }},
		{"TryAcquire(-1)", func() error { _, err := l.TryAcquire(ctx, -1, 0); return err }},
		{"TryAcquire negative wait", func() error { _, err := l.TryAcquire(ctx, 1, -time.Second); return err }},
		{"Acquire(3) of rate 2", func() error { return l.Acquire(ctx, 3) }},
		{"TryAcquire(3) of rate 2", func() error { _, err := l.TryAcquire(ctx, 3, time.Second); return err }},
		{"empty name TrySetRate", func() error { _, err := empty.TrySetRate(ctx, 1, time.Second); return err }},
		{"empty name SetRate", func() error { return empty.SetRate(ctx, 1, time.Second) }},
		{"empty name Acquire", func() error { return empty.Acquire(ctx, 1) }},
		{"empty name AvailablePermits", func() error { _, err := empty.AvailablePermits(ctx); return err }},
	}
	before, err := grants(raw, name)
	require.NoError(t, err)
	keys := relocktest.DBSize(t, raw)
	for _, tt := range tests {
		assert.ErrorIs(t, tt.call(), ratelimit.ErrInvalidArgument, tt.what)
		after, err := grants(raw, name)
		require.NoError(t, err)
		assert.Equal(t, before, after, "%s: the grants", tt.what)
		assert.Equal(t, keys, relocktest.DBSize(t, raw), "%s: keys on the server", tt.what)
	}
	assert.Equal(t, 1, available(t, l))

}

// attemptsClient returns a Client whose rate-limiter acquisitions are
// counted in n once answered (a NOSCRIPT reply is not counted).
func attemptsClient(t *testing.T, n *atomic.Int64) *rlock.Client {
	t.Helper()
	tap := relocktest.NewTap(redistest.Shared(t).Client(t), func(args []string) func(rueidis.RedisResult) {
		if relocktest.ScriptSHA1(args) != lua.RateAcquire.SHA1 {
			return nil
		}
		return func(res rueidis.RedisResult) {
			if re, ok := rueidis.IsRedisErr(res.Error()); !ok || !re.IsNoScript() {
				n.Add(1)
			}
		}
	})
	c, err := rlock.New(tap)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestRateWaiterSleepsUntilGrantLeaves: a waiter for two permits of a
// full window sleeps until the grants that make room for it leave the
// window, on the time the script returned: it tries once, subscribes,
// tries again, and tries a third time when the room is there; its grant
// is made no sooner than the interval after the one whose leaving made
// room.
func TestRateWaiterSleepsUntilGrantLeaves(t *testing.T) {
	var attempts atomic.Int64
	c := attemptsClient(t, &attempts)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	l := c.GetRateLimiter(name)
	const interval = time.Second
	setRate(t, l, 3, interval)
	ctx := t.Context()
	require.NoError(t, l.Acquire(ctx, 1))
	require.NoError(t, l.Acquire(ctx, 1))
	require.NoError(t, l.Acquire(ctx, 1))
	before, err := grants(raw, name)
	require.NoError(t, err)
	require.Len(t, before, 3)
	attempts.Store(0)
	require.NoError(t, l.Acquire(ctx, 2))
	after, err := grants(raw, name)
	require.NoError(t, err)
	var mine grant
	for _, g := range after {
		if g.permits == 2 {
			mine = g
		}
	}
	require.Equal(t, 2, mine.permits, "the waiter's grant in %v", after)
	assert.GreaterOrEqual(t, mine.at, before[1].at+interval.Milliseconds(),
		"granted at %d, before the second grant (%d) left the window", mine.at, before[1].at)
	assert.EqualValues(t, 3, attempts.Load(), "attempts: refused, after subscribing, when the room was there (no polling)")
}

// TestRateNeverBeyondRate: callers of two Clients take one or two permits
// at a time from a window of 4 per 100ms; a watcher collects every grant
// from Redis, and no window of the interval, on the grants' own
// timestamps, holds more than 4 permits.
func TestRateNeverBeyondRate(t *testing.T) {
	name := relocktest.Name(t)
	raw := relocktest.Raw(t)
	ls := []*ratelimit.Limiter{relocktest.Client(t).GetRateLimiter(name), relocktest.Client(t).GetRateLimiter(name)}
	const rate, interval = 4, 100 * time.Millisecond
	setRate(t, ls[0], rate, interval)
	ctx, cancel := context.WithTimeout(t.Context(), 700*time.Millisecond)
	defer cancel()
	seen := map[string]grant{}
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for ctx.Err() == nil {
			if g, err := grants(raw, name); err == nil {
				for _, x := range g {
					seen[x.id] = x
				}
			}
			time.Sleep(2 * time.Millisecond) // the watcher's poll: grants stay 100ms
		}
	}()
	var wg sync.WaitGroup
	var granted atomic.Int64
	for i := range 6 {
		l, n := ls[i%2], 1+i%2
		wg.Go(func() {
			for l.Acquire(ctx, n) == nil {
				granted.Add(int64(n))
			}
		})
	}
	wg.Wait()
	<-watched
	if g, err := grants(raw, name); err == nil {
		for _, x := range g {
			seen[x.id] = x
		}
	}
	all := make([]grant, 0, len(seen))
	for _, g := range seen {
		all = append(all, g)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].at < all[j].at })
	for i, g := range all {
		in := 0
		for _, h := range all[:i+1] {
			if h.at > g.at-interval.Milliseconds() {
				in += h.permits
			}
		}
		assert.LessOrEqual(t, in, rate, "permits granted in the window ending at %d", g.at)
	}
	assert.Greater(t, granted.Load(), int64(2*rate), "permits granted in 700ms")
	t.Logf("%d permits granted in %d grants seen", granted.Load(), len(all))
}

// TestRateSetRateWakesWaiter: a waiter of a window full for a minute goes
// on within the hand-off bound when the rate is set anew.
func TestRateSetRateWakesWaiter(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	l := c.GetRateLimiter(name)
	setRate(t, l, 1, time.Minute)
	require.NoError(t, l.Acquire(t.Context(), 1))
	got := redissontest.Async(func() error { return l.Acquire(t.Context(), 1) })
	redissontest.WaitSubscribers(t, raw, layout.RateLimiter(name).Channel, 1)
	redissontest.Pending(t, got, "the waiter of a full window")
	start := time.Now()
	require.NoError(t, relocktest.Client(t).GetRateLimiter(name).SetRate(t.Context(), 1, time.Minute))
	redissontest.Handoff(t, got, start, "the waiter")
}

// TestRateLostReply: an attempt whose reply was lost (the script ran)
// fails, and the call gives its grant back; a waiting call whose
// attempt's reply was lost tries again and is granted once.
func TestRateLostReply(t *testing.T) {
	f := relocktest.NewFaulty(redistest.Shared(t).Client(t))
	c, err := rlock.New(f)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	l := c.GetRateLimiter(relocktest.Name(t))
	setRate(t, l, 3, time.Minute)

	f.Inject(&relocktest.Rule{SHA1s: []string{lua.RateAcquire.SHA1}, N: 1, Run: true, Reply: relocktest.LostReply()})
	ok, err := l.TryAcquire(t.Context(), 2, 0)
	require.Error(t, err, "TryAcquire with its reply lost")
	assert.False(t, ok)
	assert.Equal(t, 3, available(t, l), "the grant made unseen was not given back")

	r := f.Inject(&relocktest.Rule{SHA1s: []string{lua.RateAcquire.SHA1}, N: 1, Run: true, Reply: relocktest.LostReply()})
	ok, err = l.TryAcquire(t.Context(), 2, 5*time.Second)
	require.NoError(t, err, "a waiting TryAcquire through a lost reply")
	assert.True(t, ok)
	assert.EqualValues(t, 1, r.Hits())
	assert.Equal(t, 1, available(t, l), "permits taken by a resent attempt")
}

// TestRateWaitEnds: a waiter whose context ends returns an error matching
// ErrNotAcquired and the context's, and takes nothing; one whose wait
// runs out returns (false, nil).
func TestRateWaitEnds(t *testing.T) {
	c := relocktest.Client(t)
	l := c.GetRateLimiter(relocktest.Name(t))
	setRate(t, l, 2, time.Minute)
	require.NoError(t, l.Acquire(t.Context(), 1))
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	err := l.Acquire(ctx, 2)
	assert.ErrorIs(t, err, ratelimit.ErrNotAcquired)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	ok, err := l.TryAcquire(t.Context(), 2, 50*time.Millisecond)
	require.NoError(t, err)
	assert.False(t, ok, "TryAcquire(2) with 1 left")
	assert.Equal(t, 1, available(t, l))
}
