package rlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/internal/waitrec"
	"github.com/relock-go/relock/rlock"
)

// review10Lockable is a plain or a fenced lock.
type review10Lockable interface {
	Lock(ctx context.Context) error
	Unlock(ctx context.Context) error
}

// TestReview10PhilosophersGrants: dining philosophers on three Clients
// that share the names, several owners on each (so that releases grant
// to waiters of the same Client, and across Clients with wake-one), one
// Client with grants off, each with its own detection delay, a name taken
// as a plain lock by one owner and as a fenced lock by its neighbour.
// Every call that returns nil holds its lock in Redis and nobody else
// holds it in the process; every call that ends with ErrDeadlock holds
// nothing once its grant (if one was on its way) is given back, well
// within the grant's window.
func TestReview10PhilosophersGrants(t *testing.T) {
	const n, rounds = 6, 8
	raw := relocktest.Raw(t)
	clients := []*rlock.Client{
		relocktest.Client(t, rlock.WithDeadlockDetection(40*time.Millisecond), rlock.WithWakeOne()),
		relocktest.Client(t, rlock.WithDeadlockDetection(70*time.Millisecond), rlock.WithWakeOne()),
		relocktest.Client(t, rlock.WithDeadlockDetection(50*time.Millisecond), rlock.WithoutGrantOnRelease()),
	}
	names := make([]string, n)
	for i := range names {
		names[i] = relocktest.Name(t)
	}
	holders := make([]atomic.Int32, n)
	var deadlocks atomic.Int64
	g0 := lockcore.GrantsMade()
	var wg sync.WaitGroup
	for i := range n {
		c := clients[i%len(clients)]
		owner := fmt.Sprint("p", i)
		field := c.ID() + ":" + owner
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(rlock.WithOwner(t.Context(), owner), 60*time.Second)
			defer cancel()
			li, ri := i, (i+1)%n
			var left, right review10Lockable = c.GetLock(names[li]), c.GetFencedLock(names[ri])
			if i%2 == 1 {
				left, right = c.GetFencedLock(names[li]), c.GetLock(names[ri])
			}
			holds := func(name string) int64 {
				v, err := raw.Do(context.Background(), raw.B().Hexists().Key(name).Field(field).Build()).AsInt64()
				if err != nil {
					t.Errorf("%s: HEXISTS: %v", owner, err)
				}
				return v
			}
			take := func(idx int) {
				if k := holders[idx].Add(1); k != 1 {
					t.Errorf("%s: %d holders of %s", owner, k, names[idx])
				}
			}
			for done := 0; done < rounds && ctx.Err() == nil; {
				if err := left.Lock(ctx); err != nil {
					// It holds nothing: no cycle runs through it.
					t.Errorf("%s: left: %v", owner, err)
					return
				}
				take(li)
				if holds(names[li]) != 1 {
					t.Errorf("%s: Lock of left returned nil, not held in Redis", owner)
				}
				err := right.Lock(ctx)
				switch {
				case errors.Is(err, rlock.ErrDeadlock):
					deadlocks.Add(1)
					if !review10Gone(func() bool { return holds(names[ri]) == 0 }, time.Second) {
						t.Errorf("%s: ended with %v and holds %s in Redis", owner, err, names[ri])
					}
					holders[li].Add(-1)
					if err := left.Unlock(ctx); err != nil {
						t.Errorf("%s: unlock left: %v", owner, err)
					}
					time.Sleep(time.Duration(i+1) * 3 * time.Millisecond)
					continue
				case err != nil:
					t.Errorf("%s: right: %v", owner, err)
					holders[li].Add(-1)
					_ = left.Unlock(ctx)
					return
				}
				take(ri)
				if holds(names[ri]) != 1 {
					t.Errorf("%s: Lock of right returned nil, not held in Redis", owner)
				}
				time.Sleep(time.Millisecond)
				holders[ri].Add(-1)
				if err := right.Unlock(ctx); err != nil {
					t.Errorf("%s: unlock right: %v", owner, err)
				}
				holders[li].Add(-1)
				if err := left.Unlock(ctx); err != nil {
					t.Errorf("%s: unlock left: %v", owner, err)
				}
				done++
			}
		})
	}
	wg.Wait()
	for _, name := range names {
		n, err := raw.Do(context.Background(), raw.B().Exists().Key(name).Build()).AsInt64()
		require.NoError(t, err)
		require.Zero(t, n, "%s is still held", name)
	}
	t.Logf("%d deadlocks broken, %d grants", deadlocks.Load(), lockcore.GrantsMade()-g0)
}

// review10Gone polls cond until it holds or d passes.
func review10Gone(cond func() bool, d time.Duration) bool {
	end := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestReview10VictimGrantedAtOnce: a cycle of two owners, h (holds L1,
// waits for L2) and v (holds L2, waits for L1, its wait the younger: the
// victim), where h's wait ends by its context at about the moment v's
// look ends v's wait, and h's release of L1 then grants it to v (a waiter
// of h's Client, or with wake-one of another Client). Whichever comes
// first, v's Lock returns nil holding L1, or an error holding it no more
// (once a grant on its way is given back, well within its window).
func TestReview10VictimGrantedAtOnce(t *testing.T) {
	for _, remote := range []bool{false, true} {
		t.Run(fmt.Sprint("remote=", remote), func(t *testing.T) {
			const after = 50 * time.Millisecond
			raw := relocktest.Raw(t)
			ch := relocktest.Client(t, rlock.WithDeadlockDetection(after), rlock.WithWakeOne())
			cv := ch
			if remote {
				cv = relocktest.Client(t, rlock.WithDeadlockDetection(after), rlock.WithWakeOne())
			}
			n1, n2 := relocktest.Name(t), relocktest.Name(t)
			h, v := rlock.WithOwner(t.Context(), "h"), rlock.WithOwner(t.Context(), "v")
			vField := cv.ID() + ":v"
			var dl, got int
			g0 := lockcore.GrantsMade()
			for round := range 14 {
				require.NoError(t, ch.GetLock(n1).Lock(h))
				require.NoError(t, cv.GetLock(n2).Lock(v))
				hctx, cancel := context.WithTimeout(h, 40*time.Millisecond+time.Duration(round)*3*time.Millisecond)
				hres := make(chan error, 1)
				go func() {
					hres <- ch.GetLock(n2).Lock(hctx)
					_ = ch.GetLock(n1).Unlock(h)
				}()
				time.Sleep(5 * time.Millisecond) // h's wait is the older
				err := cv.GetLock(n1).Lock(v)
				herr := relocktest.Receive(t, hres, 10*time.Second, "h's Lock")
				cancel()
				if herr == nil {
					require.NoError(t, ch.GetLock(n2).Unlock(h))
				}
				hold := func() int64 {
					x, rerr := raw.Do(context.Background(), raw.B().Hexists().Key(n1).Field(vField).Build()).AsInt64()
					require.NoError(t, rerr)
					return x
				}
				switch {
				case err == nil:
					got++
					require.EqualValues(t, 1, hold(), "round %d: v's Lock returned nil, L1 not held", round)
					require.NoError(t, cv.GetLock(n1).Unlock(v))
				default:
					require.ErrorIs(t, err, rlock.ErrDeadlock, "round %d", round)
					dl++
					if round%2 == 0 {
						require.True(t, review10Gone(func() bool { return hold() == 0 }, time.Second),
							"round %d: v ended with %v and holds L1", round, err)
						break
					}
					// v lets L2 go and asks for L1 again at once, while a
					// grant of L1 to its ended call may be on its way.
					require.NoError(t, cv.GetLock(n2).Unlock(v))
					require.NoError(t, cv.GetLock(n1).Lock(v), "round %d", round)
					require.EqualValues(t, 1, hold(), "round %d: v's second Lock returned nil, L1 not held", round)
					require.NoError(t, cv.GetLock(n1).Unlock(v), "round %d", round)
					require.NoError(t, cv.GetLock(n2).Lock(v))
				}
				require.NoError(t, cv.GetLock(n2).Unlock(v))
				for _, name := range []string{n1, n2} {
					require.True(t, review10Gone(func() bool {
						x, rerr := raw.Do(context.Background(), raw.B().Exists().Key(name).Build()).AsInt64()
						return rerr == nil && x == 0
					}, time.Second), "round %d: %s still held", round, name)
				}
			}
			t.Logf("%d deadlocks, %d acquired, %d grants", dl, got, lockcore.GrantsMade()-g0)
		})
	}
}

// TestReview10HandOverHandNoDeadlock: owners on two Clients walk a chain
// of names hand over hand (take the next, then let the previous go), so
// no cycle of waits ever forms; with a detection delay of 1ms, waits
// recorded at once and releases granting to the next waiter (of the
// same Client, and across Clients with wake-one), a record that outlives
// its wait by a moment (its delete not yet sent when the call goes on)
// must not close a false cycle: no call may end with ErrDeadlock.
func TestReview10HandOverHandNoDeadlock(t *testing.T) {
	const owners, chain, rounds = 6, 4, 15
	clients := []*rlock.Client{
		relocktest.Client(t, rlock.WithDeadlockDetection(time.Millisecond), rlock.WithWakeOne()),
		relocktest.Client(t, rlock.WithDeadlockDetection(time.Millisecond), rlock.WithWakeOne()),
	}
	names := make([]string, chain)
	for i := range names {
		names[i] = relocktest.Name(t)
	}
	g0 := lockcore.GrantsMade()
	var false_ atomic.Int64
	var wg sync.WaitGroup
	for i := range owners {
		c := clients[i%len(clients)]
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(rlock.WithOwner(t.Context(), fmt.Sprint("p", i)), 60*time.Second)
			defer cancel()
			lock := func(k int) review10Lockable {
				if (i+k)%2 == 0 {
					return c.GetFencedLock(names[k])
				}
				return c.GetLock(names[k])
			}
			for range rounds {
				if err := lock(0).Lock(ctx); err != nil {
					t.Errorf("p%d: %s: %v", i, names[0], err)
					return
				}
				for k := 1; k < chain; k++ {
					if err := lock(k).Lock(ctx); err != nil {
						if errors.Is(err, rlock.ErrDeadlock) {
							false_.Add(1)
						}
						t.Errorf("p%d: %s: %v", i, names[k], err)
						_ = lock(k - 1).Unlock(ctx)
						return
					}
					if err := lock(k - 1).Unlock(ctx); err != nil {
						t.Errorf("p%d: unlock %s: %v", i, names[k-1], err)
					}
				}
				if err := lock(chain - 1).Unlock(ctx); err != nil {
					t.Errorf("p%d: unlock %s: %v", i, names[chain-1], err)
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d false deadlocks, %d grants", false_.Load(), lockcore.GrantsMade()-g0)
}

// TestReview10MixedDetection: a cycle of three owners on three Clients:
// one with detection off (its wait the oldest), one with a delay of 30ms,
// and the youngest on one with 300ms. Exactly one wait ends, the
// youngest's, by its own Client's look, within its delay and a little;
// the 30ms Client looks many times meanwhile and ends nothing, nor does
// the Client with detection off. With grants on, the victim's release
// then lets the others through.
func TestReview10MixedDetection(t *testing.T) {
	const slow = 300 * time.Millisecond
	raw := relocktest.Raw(t)
	cs := []*rlock.Client{
		relocktest.Client(t, rlock.WithDeadlockDetection(0)),
		relocktest.Client(t, rlock.WithDeadlockDetection(30*time.Millisecond), rlock.WithWakeOne()),
		relocktest.Client(t, rlock.WithDeadlockDetection(slow)),
	}
	names := []string{relocktest.Name(t), relocktest.Name(t), relocktest.Name(t)}
	ctxs := make([]context.Context, len(cs))
	for i, c := range cs {
		ctxs[i] = rlock.WithOwner(t.Context(), fmt.Sprint("o", i))
		require.NoError(t, c.GetLock(names[i]).Lock(ctxs[i]))
	}
	type result struct {
		err  error
		took time.Duration
	}
	res := make([]chan result, len(cs))
	for i, c := range cs {
		res[i] = make(chan result, 1)
		go func() {
			ctx, cancel := context.WithTimeout(ctxs[i], 10*time.Second)
			defer cancel()
			start := time.Now()
			err := c.GetLock(names[(i+1)%len(cs)]).Lock(ctx)
			res[i] <- result{err, time.Since(start)}
			if err == nil {
				_ = c.GetLock(names[(i+1)%len(cs)]).Unlock(ctxs[i])
			}
			_ = c.GetLock(names[i]).Unlock(ctxs[i])
		}()
		// Each wait younger than the last: the next starts once this one
		// is recorded.
		awaitRecords(t, raw, c, names[(i+1)%len(cs)], 1)
	}
	var got []result
	for i := range cs {
		got = append(got, relocktest.Receive(t, res[i], 15*time.Second, fmt.Sprint("o", i)))
	}
	require.NoError(t, got[0].err)
	require.NoError(t, got[1].err)
	require.ErrorIs(t, got[2].err, rlock.ErrDeadlock)
	require.Less(t, got[2].took, slow+500*time.Millisecond, "the victim's wait ended within its delay and a little")
}

// review10SlowDelete is a rueidis client whose HDEL of a wait record hash
// waits for gate first while hold is set: a record's delete that the
// Client's goroutine has not sent yet when the call that waited goes on
// (a goroutine scheduled late, or on Redis Cluster a delete to another
// node than the lock's, or on another connection).
type review10SlowDelete struct {
	rueidis.Client
	hold atomic.Bool
	gate chan struct{}
}

func (s *review10SlowDelete) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	if args := cmd.Commands(); s.hold.Load() && len(args) > 1 && args[0] == "HDEL" && strings.HasPrefix(args[1], "relock_waits") {
		<-s.gate
	}
	return s.Client.Do(ctx, cmd)
}

// TestReview10LateRecordDeleteNoCycle: v's wait for L1 ends with the
// lock (here granted by h's release); its record's delete is not waited
// for, and is late. v takes L2 and lets L1 go; w (another Client) takes
// L1 and waits for L2. The only wait is w's, for v, which waits for
// nothing: v's record, read before its delete lands, names L1, now w's,
// and would close a false cycle through w. w's wait must not end with
// ErrDeadlock.
func TestReview10LateRecordDeleteNoCycle(t *testing.T) {
	for _, grant := range []bool{true, false} {
		t.Run(fmt.Sprint("grant=", grant), func(t *testing.T) {
			slow := &review10SlowDelete{gate: make(chan struct{})}
			opts := []rlock.Option{rlock.WithDeadlockDetection(20 * time.Millisecond)}
			if !grant {
				opts = append(opts, rlock.WithoutGrantOnRelease())
			}
			cx := relocktest.SlowClient(t, 0, func(c rueidis.Client) rueidis.Client { slow.Client = c; return slow }, opts...)
			cy := relocktest.Client(t, rlock.WithDeadlockDetection(20*time.Millisecond))
			raw := relocktest.Raw(t)
			n1, n2 := relocktest.Name(t), relocktest.Name(t)
			h, v, w := rlock.WithOwner(t.Context(), "h"), rlock.WithOwner(t.Context(), "v"), rlock.WithOwner(t.Context(), "w")
			require.NoError(t, cx.GetLock(n1).Lock(h))
			got := make(chan error, 1)
			go func() { got <- cx.GetLock(n1).Lock(v) }()
			relocktest.Eventually(t, 5*time.Second, "v's wait record", func() bool {
				n, err := raw.Do(t.Context(), raw.B().Hlen().Key(waitrec.Key("", cx.ID())).Build()).AsInt64()
				return err == nil && n == 1
			})
			// The delete goes 100ms late (less than the 250ms a call
			// gives a delete before it goes on without it).
			slow.hold.Store(true)
			var open sync.Once
			late := time.AfterFunc(100*time.Millisecond, func() { open.Do(func() { close(slow.gate) }) })
			t.Cleanup(func() { late.Stop(); open.Do(func() { close(slow.gate) }) }) // before the Clients close
			g0 := lockcore.GrantsMade()
			require.NoError(t, cx.GetLock(n1).Unlock(h))
			require.NoError(t, relocktest.Receive(t, got, 5*time.Second, "v's Lock"))
			require.Equal(t, grant, lockcore.GrantsMade() > g0)
			require.NoError(t, cx.GetLock(n2).Lock(v))
			require.NoError(t, cx.GetLock(n1).Unlock(v))
			require.NoError(t, cy.GetLock(n1).Lock(w))
			ok, err := cy.GetLock(n2).TryLock(w, 200*time.Millisecond, 0)
			require.False(t, ok)
			require.NoError(t, err, "w's wait for v, which waits for nothing, ended with an error")
			require.NoError(t, cx.GetLock(n2).Unlock(v))
			require.NoError(t, cy.GetLock(n1).Unlock(w))
		})
	}
}
