package rlock_test

import (
	"context"
	"fmt"
	"os"
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
func scriptCalls(t testing.TB, raw rueidis.Client) int {
	t.Helper()
	calls := commandCalls(t, raw)
	return calls["evalsha"] + calls["eval"]
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
	// Without grants every release wakes (no grant across Clients skips
	// the wake-up and the unlock message that the Clients let pass).
	woken := contend(t, srv, clients, true, rlock.WithWakeOne(), rlock.WithoutGrantOnRelease())
	t.Logf("scripts per acquisition, %d Clients: %.1f waking every Client, %.1f with wake-one (%.1f without grants)",
		clients, all, one, woken)
	// Three at best: a failed attempt, the woken one, the release (two
	// when the release grants).
	for _, c := range []struct {
		what string
		n    float64
	}{{"with wake-one", one}, {"with wake-one, without grants", woken}} {
		assert.LessOrEqual(t, c.n, 6.0, "scripts per acquisition %s", c.what)
		assert.LessOrEqual(t, c.n, all/2, "scripts per acquisition %s: at most half of waking every Client's", c.what)
	}
	// No lock is left, and the wake registry expires by itself within a
	// registration's lifetime (3s) of the last wait.
	raw := srv.Client(t)
	relocktest.Eventually(t, 5*time.Second, "every key but the wake registry and its grantees to go", func() bool {
		keys, err := raw.Do(context.Background(), raw.B().Keys().Pattern("*").Build()).AsStrSlice()
		return err == nil && !slices.ContainsFunc(keys, func(k string) bool {
			return !strings.HasPrefix(k, layout.WakersPrefix) && !strings.HasPrefix(k, layout.GranteesPrefix)
		})
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

// wakeChildEnv carries what TestWakeOneChild does: the server's address,
// the lock's name, and "try" (TryLock for 300ms, then nothing) or "wait"
// (Lock until the process ends), separated by \x1f.
const wakeChildEnv = "RELOCK_WAKE_CHILD"

// TestWakeOneChild is a child process of TestWakeOneStoppedRegistrant: a
// Client with wake-one that waits for the lock.
func TestWakeOneChild(t *testing.T) {
	v := os.Getenv(wakeChildEnv)
	if v == "" {
		t.Skip("only in a child process of TestWakeOneStoppedRegistrant")
	}
	f := strings.Split(v, "\x1f")
	if len(f) != 3 {
		relocktest.ChildSay("error bad %s: %q", wakeChildEnv, v)
		return
	}
	c, err := rlock.NewClient(rueidis.ClientOption{InitAddress: []string{f[0]}, DisableCache: true}, rlock.WithWakeOne())
	if err != nil {
		relocktest.ChildSay("error %v", err)
		return
	}
	defer c.Close()
	relocktest.ChildSay("client %s", c.ID())
	ctx := rlock.WithOwner(context.Background(), "w")
	switch f[2] {
	case "try":
		ok, err := c.GetLock(f[1]).TryLock(ctx, 300*time.Millisecond, 0)
		relocktest.ChildSay("gave up %v %v", ok, err)
	case "wait":
		go func() { _ = c.GetLock(f[1]).Lock(ctx) }() // ends at Close
	}
	relocktest.ChildWait()
}

// startWakeChild starts TestWakeOneChild doing act on name (on the shared
// server) and returns it with its Client's ID. It is killed when t ends.
func startWakeChild(t *testing.T, name, act string) (*relocktest.Child, string) {
	t.Helper()
	p, err := relocktest.StartChild("TestWakeOneChild",
		wakeChildEnv+"="+strings.Join([]string{redistest.Shared(t).Addr, name, act}, "\x1f"))
	require.NoError(t, err, "start a child")
	t.Cleanup(p.Kill)
	id, err := p.Expect("client ", 10*time.Second)
	require.NoError(t, err, "the child's Client")
	return p, id
}

// registered reports whether the Client id is in the wake registry of
// name.
func registered(t *testing.T, raw rueidis.Client, name, id string) bool {
	t.Helper()
	err := raw.Do(t.Context(), raw.B().Zscore().Key(layout.Wakers(name)).Member(id).Build()).Error()
	if rueidis.IsRedisNil(err) {
		return false
	}
	require.NoError(t, err, "ZSCORE")
	return true
}

// TestWakeOneStoppedRegistrant (issue 32, item 2): a Client with wake-one
// whose process is stopped (SIGSTOP) keeps its wake channel subscribed on
// the server; a release that wakes it must still wake a waiter that is
// not registered (a Client without wake-one, Redisson's) at once, not
// when the holder's lease would have ended (30s). Two ways:
//
//   - "gave up": the scenario. The stopped Client's TryLock gave
//     up; it listens on its wake channel (and so on the lock's channel:
//     a Client subscribes to it while it listens on its wake channel, see
//     wake.go). It must have left the registry when it gave up; and a
//     release that still woke it must publish on the lock's channel.
//   - "waiting": the stopped Client still waits (it is registered and
//     subscribes to both channels), and a dead Client registered after it
//     (its registration left behind, its connections gone). The release
//     wakes the stopped one; it must publish on the lock's channel
//     whatever the count of its subscribers against the registry's.
func TestWakeOneStoppedRegistrant(t *testing.T) {
	for _, tc := range []struct {
		act   string
		grant bool
	}{{"try", true}, {"wait", true}, {"wait", false}} {
		act := tc.act
		what := map[string]string{"try": "gave up", "wait": "waiting"}[act]
		opts := []rlock.Option{rlock.WithWakeOne()}
		if !tc.grant {
			// Without grants the release stops at the first live
			// registration: the dead one after it stays counted.
			what += " without grants"
			opts = append(opts, rlock.WithoutGrantOnRelease())
		}
		t.Run(what, func(t *testing.T) {
			raw := relocktest.Raw(t)
			name := relocktest.Name(t)
			ch := layout.Channel(name)
			holder := relocktest.Client(t, opts...)
			h := rlock.WithOwner(t.Context(), "h")
			require.NoError(t, holder.GetLock(name).Lock(h))
			// The waiter that is not registered sleeps (on the holder's
			// 30s lease), alone on the lock's channel.
			plain, attempts := countingClient(t, redistest.Shared(t).Client(t))
			got := waitingOn(t, plain, attempts, name)
			require.Equal(t, int64(1), numsub(raw, ch), "subscribers of the lock's channel")

			w, id := startWakeChild(t, name, act)
			subscribers := int64(2) // the plain waiter's and the child's
			if act == "try" {
				_, err := w.Expect("gave up", 10*time.Second)
				require.NoError(t, err, "the child's TryLock")
			} else {
				relocktest.Eventually(t, 5*time.Second, "the child's waiter to register", func() bool {
					return registered(t, raw, name, id)
				})
				// A dead Client, registered after it until well past the
				// release.
				score, err := raw.Do(t.Context(), raw.B().Zscore().Key(layout.Wakers(name)).Member(id).Build()).AsFloat64()
				require.NoError(t, err)
				require.NoError(t, raw.Do(t.Context(), raw.B().Zadd().Key(layout.Wakers(name)).ScoreMember().
					ScoreMember(score+15000, "dead-client").Build()).Error())
			}
			wake := layout.WakeChannel(name, id)
			relocktest.Eventually(t, 5*time.Second, "the child to listen on its wake channel, and on the lock's as said", func() bool {
				return numsub(raw, ch) == subscribers && numsub(raw, wake) == 1
			})
			w.Stop(t)
			t.Logf("the stopped Client is registered at the release: %v", registered(t, raw, name, id))

			start := time.Now()
			require.NoError(t, holder.GetLock(name).Unlock(h))
			// The holder's lease is 30s, and a plain waiter re-checks every
			// 1 to 2s: 500ms is the release's wake-up or nothing.
			require.NoError(t, relocktest.Receive(t, got, 500*time.Millisecond, "the plain waiter to take the lock at the release"))
			t.Logf("the plain waiter took the lock %v after the release", time.Since(start).Round(time.Millisecond))
		})
	}
}

// TestWakeOneGiveUpLeavesRegistry: a Client with wake-one leaves the wake
// registry when its last waiter of the lock gives up (a wait that ran
// out, a context that ended), at once, so that no release wakes it for
// nothing (or, when its process is stopped, for nobody); while another of
// its waiters waits, it stays.
func TestWakeOneGiveUpLeavesRegistry(t *testing.T) {
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	holder := relocktest.Client(t)
	h := rlock.WithOwner(t.Context(), "h")
	require.NoError(t, holder.GetLock(name).Lock(h))
	c := relocktest.Client(t, rlock.WithWakeOne())
	l := c.GetLock(name)

	ctx, cancel := context.WithCancel(rlock.WithOwner(t.Context(), "a"))
	defer cancel()
	got := make(chan error, 1)
	go func() { got <- l.Lock(ctx) }()
	relocktest.Eventually(t, 5*time.Second, "the waiter to register", func() bool { return registered(t, raw, name, c.ID()) })

	ok, err := l.TryLock(rlock.WithOwner(t.Context(), "b"), 300*time.Millisecond, 0)
	requireTry(t, false, ok, err, "a second waiter's TryLock")
	assert.True(t, registered(t, raw, name, c.ID()), "registered while a waiter of the Client waits")

	cancel()
	assert.ErrorIs(t, relocktest.Receive(t, got, 5*time.Second, "Lock to end with its context"), context.Canceled)
	assert.False(t, registered(t, raw, name, c.ID()), "registered after the last waiter gave up")

	ok, err = l.TryLock(rlock.WithOwner(t.Context(), "b"), 300*time.Millisecond, 0)
	requireTry(t, false, ok, err, "a waiter's TryLock")
	assert.False(t, registered(t, raw, name, c.ID()), "registered after a TryLock gave up")
	require.NoError(t, holder.GetLock(name).Unlock(h))
}
