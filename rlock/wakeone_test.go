package rlock_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
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
	"github.com/relock-go/relock/rlock"
)

// scriptCalls is the server's count of EVALSHA and EVAL calls.
func scriptCalls(t *testing.T, raw rueidis.Client) int {
	t.Helper()
	info, err := raw.Do(t.Context(), raw.B().Info().Section("commandstats").Build()).ToString()
	require.NoError(t, err)
	n := 0
	for _, cmd := range []string{"cmdstat_evalsha:calls=", "cmdstat_eval:calls="} {
		if _, rest, ok := cutString(info, cmd); ok {
			v, _, _ := cutString(rest, ",")
			c, _ := strconv.Atoi(v)
			n += c
		}
	}
	return n
}

func cutString(s, sep string) (before, after string, found bool) {
	for i := 0; i+len(sep) <= len(s); i++ {
		if s[i:i+len(sep)] == sep {
			return s[:i], s[i+len(sep):], true
		}
	}
	return s, "", false
}

// contend has one goroutine in each Client take the lock again and again,
// holding it a moment, and returns the scripts the server ran per
// acquisition while measuring. The measurement starts once every Client
// has had the lock once (so that every Client waits, and the first waits
// do not count) and ends once 8 acquisitions per Client were made and,
// with everyTurn, every Client has had the lock again: a count of turns,
// not a span of time, so that a slow machine makes fewer acquisitions a
// second but measures the same thing. With everyTurn, a Client that does
// not get the lock again within 10s fails the test: it starved.
func contend(t *testing.T, srv *redistest.Server, clients int, everyTurn bool, opts ...rlock.Option) (scriptsPerAcq float64) {
	t.Helper()
	raw := srv.Client(t)
	name := "wake:" + t.Name() + ":" + strconv.Itoa(len(opts))
	cs := make([]*rlock.Client, clients)
	for i := range cs {
		cs[i] = relocktest.ClientOn(t, srv, opts...)
	}
	var acquired atomic.Int64
	per := make([]atomic.Int64, clients)   // acquisitions while measuring
	warmed := make([]atomic.Bool, clients) // the Client has had the lock once
	measuring := make(chan struct{})
	// stop ends the run; it ends a wait in Lock too. Each Lock has a
	// deadline besides: a release that woke nobody would leave the others
	// asleep for the 30s lease they saw, and the run fails with that.
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() {
			owner := rlock.WithOwner(ctx, "w"+strconv.Itoa(i))
			l := c.GetLock(name)
			for ctx.Err() == nil {
				cctx, cancel := context.WithTimeout(owner, 10*time.Second)
				err := l.Lock(cctx)
				cancel()
				if ctx.Err() != nil {
					if err == nil {
						_ = l.Unlock(context.WithoutCancel(owner))
					}
					return
				}
				if !assert.NoError(t, err, "Client %d's Lock: no release woke it within 10s", i) {
					return
				}
				acquired.Add(1)
				warmed[i].Store(true)
				select {
				case <-measuring:
					per[i].Add(1)
				default:
				}
				time.Sleep(time.Millisecond) // the scenario: the holder's work
				if !assert.NoError(t, l.Unlock(context.WithoutCancel(owner)), "Client %d's Unlock", i) {
					return
				}
			}
		})
	}
	defer func() {
		stop()
		wg.Wait()
	}()
	relocktest.Eventually(t, 10*time.Second, "every Client to have had the lock once", func() bool {
		for i := range warmed {
			if !warmed[i].Load() {
				return false
			}
		}
		return true
	})
	scripts, n := scriptCalls(t, raw), acquired.Load()
	close(measuring)
	what := fmt.Sprintf("%d acquisitions while measuring", 8*clients)
	if everyTurn {
		what += ", and every Client to have the lock again (one that does not starves)"
	}
	relocktest.Eventually(t, 10*time.Second, what, func() bool {
		if acquired.Load()-n < int64(8*clients) {
			return false
		}
		for i := range per {
			if everyTurn && per[i].Load() == 0 {
				return false
			}
		}
		return true
	})
	scripts, n = scriptCalls(t, raw)-scripts, acquired.Load()-n
	stop()
	wg.Wait()
	return float64(scripts) / float64(n)
}

// TestWakeOneAcrossClients: with wake-one, a release wakes one of the
// waiting Clients, not all of them: the scripts per acquisition stay near
// three (a failed attempt, the woken one, a release) instead of growing
// with the Clients; every Client gets its turns (the one registered
// longest ago is woken, and registers again when it tries).
func TestWakeOneAcrossClients(t *testing.T) {
	srv := redistest.Start(t)
	const clients = 16
	all := contend(t, srv, clients, false)
	one := contend(t, srv, clients, true, rlock.WithWakeOne())
	t.Logf("scripts per acquisition, %d Clients: %.1f waking every Client, %.1f with wake-one", clients, all, one)
	// Three at best: a failed attempt, the woken one, the release.
	assert.LessOrEqual(t, one, 6.0, "scripts per acquisition with wake-one")
	assert.LessOrEqual(t, one, all/2, "scripts per acquisition with wake-one: at most half of waking every Client's")
	// No lock is left, and the wake registry expires by itself within a
	// registration's lifetime (3s) of the last wait.
	raw := srv.Client(t)
	relocktest.Eventually(t, 5*time.Second, "every key but the wake registry to go", func() bool {
		keys, err := raw.Do(context.Background(), raw.B().Keys().Pattern("*").Build()).AsStrSlice()
		return err == nil && !slices.ContainsFunc(keys, func(k string) bool { return !strings.HasPrefix(k, layout.WakersPrefix) })
	})
	keys, err := raw.Do(t.Context(), raw.B().Keys().Pattern("*").Build()).AsStrSlice()
	require.NoError(t, err)
	for _, k := range keys {
		ttl, err := raw.Do(t.Context(), raw.B().Pttl().Key(k).Build()).AsInt64()
		require.NoError(t, err)
		if ttl != -2 { // gone meanwhile
			assert.True(t, ttl > 0 && ttl <= 3000, "%s's TTL: %dms, not within the 3s of a registration", k, ttl)
		}
	}
}

// TestWakeOneDeadClient: the registered Client that registered longest
// ago died (it never tries again); the release wakes it, and a live waiter
// still takes the lock within the bound of 2s.
func TestWakeOneDeadClient(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	holderC := relocktest.ClientOn(t, srv, rlock.WithWakeOne())
	waiterC := relocktest.ClientOn(t, srv, rlock.WithWakeOne())
	name := "wake:dead"
	h := rlock.WithOwner(t.Context(), "h")
	require.NoError(t, holderC.GetLock(name).Lock(h))
	// A dead Client, registered before anyone, until its deadline.
	registry := layout.Wakers(name)
	deadline := time.Now().Add(10 * time.Second).UnixMilli()
	require.NoError(t, raw.Do(t.Context(), raw.B().Zadd().Key(registry).ScoreMember().ScoreMember(float64(deadline-9000), "dead-client").Build()).Error())
	got := make(chan time.Time, 1)
	go func() {
		assert.NoError(t, waiterC.GetLock(name).Lock(rlock.WithOwner(t.Context(), "w")))
		got <- time.Now()
	}()
	relocktest.Eventually(t, 5*time.Second, "the waiter to register", func() bool {
		n, _ := raw.Do(t.Context(), raw.B().Zcard().Key(registry).Build()).AsInt64()
		return n == 2
	})
	released := time.Now()
	require.NoError(t, holderC.GetLock(name).Unlock(h))
	at := relocktest.Receive(t, got, 10*time.Second, "the live waiter to take the lock")
	d := at.Sub(released)
	assert.LessOrEqual(t, d, 2500*time.Millisecond, "the live waiter's take-over after the release: within the 2s bound")
	t.Logf("the live waiter took the lock %v after a release that woke a dead Client", d.Round(time.Millisecond))
	_ = waiterC.GetLock(name).Unlock(rlock.WithOwner(t.Context(), "w"))
}

// TestWakeOneForeignWaiters: a release with wake-one still publishes on
// the lock's channel while someone who is not a registered Client
// subscribes to it (a Redisson waiter, a Client without wake-one), and a
// Redisson-style release wakes a wake-one waiter at once.
func TestWakeOneForeignWaiters(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	c := relocktest.ClientOn(t, srv, rlock.WithWakeOne())
	plain := relocktest.ClientOn(t, srv)
	name := "wake:foreign"
	channel := layout.Channel(name)

	// A Client without wake-one waits behind a wake-one holder.
	h := rlock.WithOwner(t.Context(), "h")
	require.NoError(t, c.GetLock(name).Lock(h))
	got := make(chan error, 1)
	go func() { got <- plain.GetLock(name).Lock(rlock.WithOwner(t.Context(), "p")) }()
	relocktest.Eventually(t, 5*time.Second, "the plain waiter to subscribe", func() bool { return numsub(raw, channel) == 1 })
	require.NoError(t, c.GetLock(name).Unlock(h))
	// The holder's lease is 30s: 5s is a release's wake-up or nothing.
	require.NoError(t, relocktest.Receive(t, got, 5*time.Second, "a release with wake-one to wake a waiter of a Client without it"))
	require.NoError(t, plain.GetLock(name).Unlock(rlock.WithOwner(t.Context(), "p")))

	// A Redisson holder, released the Redisson way, and a wake-one waiter.
	javaField := "5c2c1d9e-7a4b-4e0f-9d43-0123456789ab:1"
	raw.Do(t.Context(), raw.B().Hset().Key(name).FieldValue().FieldValue(javaField, "1").Build())
	raw.Do(t.Context(), raw.B().Pexpire().Key(name).Milliseconds(30000).Build())
	go func() { got <- c.GetLock(name).Lock(rlock.WithOwner(t.Context(), "w")) }()
	registry := layout.Wakers(name)
	relocktest.Eventually(t, 5*time.Second, "the wake-one waiter to register", func() bool {
		n, _ := raw.Do(t.Context(), raw.B().Zcard().Key(registry).Build()).AsInt64()
		return n == 1
	})
	raw.Do(t.Context(), raw.B().Del().Key(name).Build())
	raw.Do(t.Context(), raw.B().Publish().Channel(channel).Message("0").Build())
	// 900ms: before the wake-one waiter's own retry (every second) would
	// take the lock without a wake-up.
	require.NoError(t, relocktest.Receive(t, got, 900*time.Millisecond, "a Redisson release to wake a wake-one waiter"))
	_ = c.GetLock(name).Unlock(rlock.WithOwner(t.Context(), "w"))
}
