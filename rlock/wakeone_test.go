package rlock_test

import (
	"context"
	"github.com/relock-go/relock/internal/layout"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// scriptCalls is the server's count of EVALSHA and EVAL calls.
func scriptCalls(t *testing.T, raw rueidis.Client) int {
	t.Helper()
	info, err := raw.Do(t.Context(), raw.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
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
// acquisition over a second, once every Client waits (so that neither the
// first waits nor the last ones count).
func contend(t *testing.T, srv *redistest.Server, clients int, opts ...rlock.Option) (scriptsPerAcq float64, fewest int64) {
	t.Helper()
	raw := srv.Client(t)
	name := "wake:" + t.Name() + ":" + strconv.Itoa(len(opts))
	cs := make([]*rlock.Client, clients)
	for i := range cs {
		cs[i] = relocktest.ClientOn(t, srv, opts...)
	}
	var acquired atomic.Int64
	per := make([]atomic.Int64, clients)
	measuring := make(chan struct{})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() {
			ctx := rlock.WithOwner(t.Context(), "w"+strconv.Itoa(i))
			l := c.GetLock(name)
			for {
				select {
				case <-stop:
					return
				default:
				}
				cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				err := l.Lock(cctx)
				cancel()
				if err != nil {
					t.Error(err)
					return
				}
				acquired.Add(1)
				select {
				case <-measuring:
					per[i].Add(1)
				default:
				}
				time.Sleep(time.Millisecond)
				if err := l.Unlock(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	scripts, n := scriptCalls(t, raw), acquired.Load()
	close(measuring)
	time.Sleep(time.Second)
	scripts, n = scriptCalls(t, raw)-scripts, acquired.Load()-n
	close(stop)
	wg.Wait()
	if n == 0 {
		t.Fatal("no acquisition in a second")
	}
	fewest = per[0].Load()
	for i := range per {
		fewest = min(fewest, per[i].Load())
	}
	return float64(scripts) / float64(n), fewest
}

// TestWakeOneAcrossClients: with wake-one, a release wakes one of the
// waiting Clients, not all of them: the scripts per acquisition stay near
// three (a failed attempt, the woken one, a release) instead of growing
// with the Clients; every Client gets its turns (the one registered
// longest ago is woken, and registers again when it tries).
func TestWakeOneAcrossClients(t *testing.T) {
	srv := redistest.Start(t)
	const clients = 16
	all, _ := contend(t, srv, clients)
	one, fewest := contend(t, srv, clients, rlock.WithWakeOne())
	t.Logf("scripts per acquisition, %d Clients: %.1f waking every Client, %.1f with wake-one", clients, all, one)
	if fewest == 0 {
		t.Error("with wake-one, a Client got the lock not once in a second: it starved")
	}
	// Three at best: a failed attempt, the woken one, the release.
	if one > 6 || one > all/2 {
		t.Errorf("with wake-one, %.1f scripts per acquisition (waking every Client: %.1f), want at most 6 and half", one, all)
	}
	// The wake registry expires a few seconds after the last wait.
	relocktest.Eventually(t, 5*time.Second, "every key to go", func() bool { return relocktest.DBSize(t, srv.Client(t)) == 0 })
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
	if err := holderC.GetLock(name).Lock(h); err != nil {
		t.Fatal(err)
	}
	// A dead Client, registered before anyone, until its deadline.
	registry := layout.Wakers(name)
	deadline := time.Now().Add(10 * time.Second).UnixMilli()
	if err := raw.Do(t.Context(), raw.B().Zadd().Key(registry).ScoreMember().ScoreMember(float64(deadline-9000), "dead-client").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	got := make(chan time.Time, 1)
	go func() {
		if err := waiterC.GetLock(name).Lock(rlock.WithOwner(t.Context(), "w")); err != nil {
			t.Error(err)
		}
		got <- time.Now()
	}()
	relocktest.Eventually(t, 5*time.Second, "the waiter to register", func() bool {
		n, _ := raw.Do(t.Context(), raw.B().Zcard().Key(registry).Build()).AsInt64()
		return n == 2
	})
	released := time.Now()
	if err := holderC.GetLock(name).Unlock(h); err != nil {
		t.Fatal(err)
	}
	at := <-got
	if d := at.Sub(released); d > 2500*time.Millisecond {
		t.Errorf("the live waiter took the lock %v after the release, want within the 2s bound", d)
	} else {
		t.Logf("the live waiter took the lock %v after a release that woke a dead Client", d.Round(time.Millisecond))
	}
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
	if err := c.GetLock(name).Lock(h); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- plain.GetLock(name).Lock(rlock.WithOwner(t.Context(), "p")) }()
	relocktest.Eventually(t, 5*time.Second, "the plain waiter to subscribe", func() bool { return numsub(t, raw, channel) == 1 })
	if err := c.GetLock(name).Unlock(h); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second): // the holder's lease is 30s
		t.Fatal("a release with wake-one did not wake a waiter of a Client without it")
	}
	if err := plain.GetLock(name).Unlock(rlock.WithOwner(t.Context(), "p")); err != nil {
		t.Fatal(err)
	}

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
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(900 * time.Millisecond): // before its wake-one retry
		t.Fatal("a Redisson release did not wake a wake-one waiter")
	}
	_ = c.GetLock(name).Unlock(rlock.WithOwner(t.Context(), "w"))
}
