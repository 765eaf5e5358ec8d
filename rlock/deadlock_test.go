package rlock_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
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
	"github.com/relock-go/relock/internal/waitrec"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/observe"
	"github.com/relock-go/relock/rlock"
)

// waitRecords returns the wait records of the Client c (its hash), by
// field; none when the hash is gone.
func waitRecords(t testing.TB, raw rueidis.Client, c *rlock.Client) map[string]waitrec.Record {
	t.Helper()
	return waitRecordsByID(t, raw, c.ID())
}

// waitRecordsByID returns the wait records of the Client whose ID is id.
func waitRecordsByID(t testing.TB, raw rueidis.Client, id string) map[string]waitrec.Record {
	t.Helper()
	m, err := raw.Do(context.Background(), raw.B().Hgetall().Key(waitrec.Key("", id)).Build()).AsStrMap()
	require.NoError(t, err)
	out := make(map[string]waitrec.Record, len(m))
	for f, v := range m {
		r, err := waitrec.Decode(v)
		require.NoError(t, err)
		out[f] = r
	}
	return out
}

// waitRecordsOf returns the records of c whose name is name.
func waitRecordsOf(t testing.TB, raw rueidis.Client, c *rlock.Client, name string) []waitrec.Record {
	var out []waitrec.Record
	for _, r := range waitRecords(t, raw, c) {
		if r.Name == name {
			out = append(out, r)
		}
	}
	return out
}

// awaitNoRecords waits until c has no record left: a wait's delete is
// sent when it ends, and not waited for.
func awaitNoRecords(t testing.TB, raw rueidis.Client, c *rlock.Client) {
	t.Helper()
	relocktest.Eventually(t, 5*time.Second, "the wait records deleted", func() bool {
		return len(waitRecords(t, raw, c)) == 0
	})
}

// awaitRecords waits until c has n records for name.
func awaitRecords(t testing.TB, raw rueidis.Client, c *rlock.Client, name string, n int) []waitrec.Record {
	t.Helper()
	var got []waitrec.Record
	relocktest.Eventually(t, 5*time.Second, fmt.Sprintf("%d wait records for %q", n, name), func() bool {
		got = waitRecordsOf(t, raw, c, name)
		return len(got) == n
	})
	return got
}

// TestWaitRecorded: a waiting Lock records who waits for what since when
// (the server's time), with the hash's expiry the watchdog timeout, and
// the record goes when the wait ends: acquired, given up (wait limit),
// context ended, Close.
func TestWaitRecorded(t *testing.T) {
	raw := relocktest.Raw(t)
	c := relocktest.Client(t, rlock.WithWatchdogTimeout(5*time.Second))
	holder := relocktest.Client(t)
	name := relocktest.Name(t)
	h := rlock.WithOwner(t.Context(), "h")
	require.NoError(t, holder.GetLock(name).Lock(h))
	l := c.GetLock(name)

	before, err := raw.Do(t.Context(), raw.B().Time().Build()).AsStrSlice()
	require.NoError(t, err)

	t.Run("acquired", func(t *testing.T) {
		got := lockAsync(l, rlock.WithOwner(t.Context(), "w"))
		recs := awaitRecords(t, raw, c, name, 1)
		assert.Equal(t, layout.Field(c.ID(), "w"), recs[0].Owner)
		assert.Equal(t, "lock", recs[0].Kind)
		assert.Greater(t, recs[0].Since, int64(0))
		assert.GreaterOrEqual(t, recs[0].Since/1000, mustInt(t, before[0]), "since is the server's time")
		pttl, err := raw.Do(t.Context(), raw.B().Pttl().Key(waitrec.Key("", c.ID())).Build()).AsInt64()
		require.NoError(t, err)
		assert.InDelta(t, 5000, pttl, 1000, "the hash expires with the watchdog timeout")
		require.NoError(t, holder.GetLock(name).Unlock(h))
		require.NoError(t, relocktest.Receive(t, got, 5*time.Second, "the waiter to acquire"))
		awaitNoRecords(t, raw, c)
		require.NoError(t, l.Unlock(rlock.WithOwner(t.Context(), "w")))
		require.NoError(t, holder.GetLock(name).Lock(h))
	})
	t.Run("wait limit", func(t *testing.T) {
		ok, err := l.TryLock(rlock.WithOwner(t.Context(), "w"), 300*time.Millisecond, 0)
		require.NoError(t, err)
		require.False(t, ok)
		awaitNoRecords(t, raw, c)
	})
	t.Run("context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(rlock.WithOwner(t.Context(), "w"))
		got := lockAsync(l, ctx)
		awaitRecords(t, raw, c, name, 1)
		cancel()
		require.ErrorIs(t, relocktest.Receive(t, got, 5*time.Second, "the wait to end"), context.Canceled)
		awaitNoRecords(t, raw, c)
	})
	t.Run("close", func(t *testing.T) {
		c2 := relocktest.Client(t)
		got := lockAsync(c2.GetLock(name), rlock.WithOwner(t.Context(), "w"))
		awaitRecords(t, raw, c2, name, 1)
		require.NoError(t, c2.Close())
		require.ErrorIs(t, relocktest.Receive(t, got, 5*time.Second, "the wait to end"), rlock.ErrClosed)
		assert.Empty(t, waitRecords(t, raw, c2), "Close returned: its records are gone")
	})
	t.Run("error", func(t *testing.T) {
		// The name turns into a read-write lock while the call waits: its
		// next attempt is refused with ErrWrongKind, which ends the wait.
		other := relocktest.Name(t)
		hc := rlock.WithOwner(t.Context(), "h")
		require.NoError(t, holder.GetLock(other).Lock(hc))
		got := lockAsync(c.GetLock(other), rlock.WithOwner(t.Context(), "w"))
		awaitRecords(t, raw, c, other, 1)
		// In one step, so that every attempt finds either the plain hold
		// or the read-write lock.
		swap := "redis.call('del', KEYS[1]); redis.call('hset', KEYS[1], 'mode', 'read', ARGV[1], 1); return 1"
		for _, cmd := range []rueidis.Completed{
			raw.B().Eval().Script(swap).Numkeys(1).Key(other).Arg(layout.Field(holder.ID(), "r")).Build(),
			raw.B().Publish().Channel(layout.Channel(other)).Message(layout.UnlockMessage).Build(),
		} {
			require.NoError(t, raw.Do(t.Context(), cmd).Error())
		}
		require.ErrorIs(t, relocktest.Receive(t, got, 5*time.Second, "the wait to end"), rlock.ErrWrongKind)
		awaitNoRecords(t, raw, c)
	})
	t.Run("single attempt", func(t *testing.T) {
		ok, err := l.TryLock(rlock.WithOwner(t.Context(), "w"), 0, 0)
		require.NoError(t, err)
		require.False(t, ok)
		n, err := raw.Do(t.Context(), raw.B().Exists().Key(waitrec.Key("", c.ID())).Build()).AsInt64()
		require.NoError(t, err)
		assert.Zero(t, n, "a single attempt records nothing")
	})
}

func mustInt(t testing.TB, s string) int64 {
	t.Helper()
	var n int64
	_, err := fmt.Sscan(s, &n)
	require.NoError(t, err)
	return n
}

// cycleMember is one owner of a cycle: it holds hold and then waits for
// wait.
type cycleMember struct {
	c          *rlock.Client
	owner      string
	hold, wait string
}

// runCycle makes each member hold its lock, then wait for the next one's,
// and returns the results of the waits, by owner; each member releases
// its hold after its wait returned.
func runCycle(t *testing.T, members []cycleMember, limit time.Duration) map[string]error {
	errs, _ := runCycleTimed(t, members, limit)
	return errs
}

// runCycleTimed is runCycle that also returns how long each wait lasted.
func runCycleTimed(t *testing.T, members []cycleMember, limit time.Duration) (map[string]error, map[string]time.Duration) {
	t.Helper()
	for _, m := range members {
		require.NoError(t, m.c.GetLock(m.hold).Lock(rlock.WithOwner(t.Context(), m.owner)))
	}
	var mu sync.Mutex
	errs := make(map[string]error)
	took := make(map[string]time.Duration)
	var wg sync.WaitGroup
	for _, m := range members {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(rlock.WithOwner(t.Context(), m.owner), limit)
			defer cancel()
			start := time.Now()
			err := m.c.GetLock(m.wait).Lock(ctx)
			mu.Lock()
			errs[m.owner], took[m.owner] = err, time.Since(start)
			mu.Unlock()
			if err == nil {
				_ = m.c.GetLock(m.wait).Unlock(ctx)
			}
			_ = m.c.GetLock(m.hold).Unlock(rlock.WithOwner(context.Background(), m.owner))
		})
	}
	wg.Wait()
	return errs, took
}

// TestDeadlockTwoOwners: A holds L1 and waits for L2, B holds L2 and
// waits for L1, on two Clients: one of them (the one that began to wait
// last) ends with ErrDeadlock within the detection delay and a second,
// naming the cycle; the other then gets its lock.
func TestDeadlockTwoOwners(t *testing.T) {
	testDeadlock(t, 2)
}

// TestDeadlockThreeOwners: a cycle of three owners on three Clients ends
// one wait.
func TestDeadlockThreeOwners(t *testing.T) {
	testDeadlock(t, 3)
}

func testDeadlock(t *testing.T, n int) {
	const after = 300 * time.Millisecond
	names := make([]string, n)
	for i := range names {
		names[i] = relocktest.Name(t)
	}
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	members := make([]cycleMember, n)
	for i := range members {
		members[i] = cycleMember{c: relocktest.Client(t, rlock.WithDeadlockDetection(after), rlock.WithLogger(log)),
			owner: fmt.Sprintf("o%d", i), hold: names[i], wait: names[(i+1)%n]}
	}
	errs, took := runCycleTimed(t, members, 10*time.Second)
	var victims []string
	for owner, err := range errs {
		if err != nil {
			require.ErrorIs(t, err, rlock.ErrDeadlock, owner)
			require.ErrorIs(t, err, rlock.ErrNotAcquired, owner)
			victims = append(victims, owner)
			for _, name := range names {
				assert.Contains(t, err.Error(), name, "the error names the cycle")
			}
			t.Log(err)
		}
	}
	require.Len(t, victims, 1, "one victim: %v", errs)
	for _, m := range members {
		awaitNoRecords(t, relocktest.Raw(t), m.c)
	}
	assert.Equal(t, 1, strings.Count(logs.String(), "relock: deadlock; this wait ends"), "one WARN line:\n%s", logs.String())
	// The victim's wait is the youngest: the cycle closed when it began.
	assert.Less(t, took[victims[0]], after+time.Second, "the victim's wait ended within the delay and a second")
}

// TestDeadlockMixedKinds: A holds a read-write lock's read side and waits
// for a plain lock that B holds, B waits for the write side: one ends.
func TestDeadlockMixedKinds(t *testing.T) {
	const after = 300 * time.Millisecond
	ca := relocktest.Client(t, rlock.WithDeadlockDetection(after))
	cb := relocktest.Client(t, rlock.WithDeadlockDetection(after))
	rw, plain := relocktest.Name(t), relocktest.Name(t)
	a, b := rlock.WithOwner(t.Context(), "a"), rlock.WithOwner(t.Context(), "b")
	require.NoError(t, ca.GetReadWriteLock(rw).ReadLock().Lock(a))
	require.NoError(t, cb.GetLock(plain).Lock(b))
	ea := make(chan error, 1)
	eb := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(a, 10*time.Second)
		defer cancel()
		err := ca.GetLock(plain).Lock(ctx)
		if err == nil {
			_ = ca.GetLock(plain).Unlock(a)
		}
		_ = ca.GetReadWriteLock(rw).ReadLock().Unlock(a)
		ea <- err
	}()
	go func() {
		ctx, cancel := context.WithTimeout(b, 10*time.Second)
		defer cancel()
		err := cb.GetReadWriteLock(rw).WriteLock().Lock(ctx)
		if err == nil {
			_ = cb.GetReadWriteLock(rw).WriteLock().Unlock(b)
		}
		_ = cb.GetLock(plain).Unlock(b)
		eb <- err
	}()
	errA, errB := <-ea, <-eb
	if (errA == nil) == (errB == nil) {
		t.Fatalf("want one victim: a: %v, b: %v", errA, errB)
	}
	err := errors.Join(errA, errB)
	require.ErrorIs(t, err, rlock.ErrDeadlock)
	assert.True(t, strings.Contains(err.Error(), "write") || strings.Contains(err.Error(), "lock"), err.Error())
}

// waitKind is one kind's waiting call, for TestWaitRecordedEveryKind.
type waitKind struct {
	kind    string
	hold    func(t *testing.T, c *rlock.Client, name string) // makes the waiter wait
	wait    func(ctx context.Context, c *rlock.Client, name string) error
	release func(t *testing.T, c *rlock.Client, name string) // lets it go on; nil: the context ends it
}

func waitKinds() []waitKind {
	h := func(t *testing.T) context.Context { return rlock.WithOwner(t.Context(), "h") }
	var permit string
	return []waitKind{
		{kind: "fenced",
			hold: func(t *testing.T, c *rlock.Client, n string) { require.NoError(t, c.GetFencedLock(n).Lock(h(t))) },
			wait: func(ctx context.Context, c *rlock.Client, n string) error { return c.GetFencedLock(n).Lock(ctx) },
			release: func(t *testing.T, c *rlock.Client, n string) {
				require.NoError(t, c.GetFencedLock(n).Unlock(h(t)))
			}},
		{kind: "fair",
			hold: func(t *testing.T, c *rlock.Client, n string) { require.NoError(t, c.GetFairLock(n).Lock(h(t))) },
			wait: func(ctx context.Context, c *rlock.Client, n string) error { return c.GetFairLock(n).Lock(ctx) },
			release: func(t *testing.T, c *rlock.Client, n string) {
				require.NoError(t, c.GetFairLock(n).Unlock(h(t)))
			}},
		{kind: "spin",
			hold: func(t *testing.T, c *rlock.Client, n string) { require.NoError(t, c.GetSpinLock(n).Lock(h(t))) },
			wait: func(ctx context.Context, c *rlock.Client, n string) error { return c.GetSpinLock(n).Lock(ctx) },
			release: func(t *testing.T, c *rlock.Client, n string) {
				require.NoError(t, c.GetSpinLock(n).Unlock(h(t)))
			}},
		{kind: "read",
			hold: func(t *testing.T, c *rlock.Client, n string) {
				require.NoError(t, c.GetReadWriteLock(n).WriteLock().Lock(h(t)))
			},
			wait: func(ctx context.Context, c *rlock.Client, n string) error {
				return c.GetReadWriteLock(n).ReadLock().Lock(ctx)
			},
			release: func(t *testing.T, c *rlock.Client, n string) {
				require.NoError(t, c.GetReadWriteLock(n).WriteLock().Unlock(h(t)))
			}},
		{kind: "write",
			hold: func(t *testing.T, c *rlock.Client, n string) {
				require.NoError(t, c.GetReadWriteLock(n).ReadLock().Lock(h(t)))
			},
			wait: func(ctx context.Context, c *rlock.Client, n string) error {
				return c.GetReadWriteLock(n).WriteLock().Lock(ctx)
			},
			release: func(t *testing.T, c *rlock.Client, n string) {
				require.NoError(t, c.GetReadWriteLock(n).ReadLock().Unlock(h(t)))
			}},
		{kind: "semaphore",
			hold: func(t *testing.T, c *rlock.Client, n string) {
				_, err := c.GetSemaphore(n).TrySetPermits(t.Context(), 1)
				require.NoError(t, err)
				permit, err = c.GetSemaphore(n).Acquire(t.Context(), 0)
				require.NoError(t, err)
			},
			wait: func(ctx context.Context, c *rlock.Client, n string) error {
				id, err := c.GetSemaphore(n).Acquire(ctx, 0)
				if err == nil {
					_ = c.GetSemaphore(n).Release(ctx, id)
				}
				return err
			},
			release: func(t *testing.T, c *rlock.Client, n string) {
				require.NoError(t, c.GetSemaphore(n).Release(t.Context(), permit))
			}},
		{kind: "counting_semaphore",
			hold: func(t *testing.T, c *rlock.Client, n string) {
				_, err := c.GetCountingSemaphore(n).TrySetPermits(t.Context(), 1)
				require.NoError(t, err)
				require.NoError(t, c.GetCountingSemaphore(n).Acquire(t.Context(), 1))
			},
			wait: func(ctx context.Context, c *rlock.Client, n string) error {
				return c.GetCountingSemaphore(n).Acquire(ctx, 1)
			},
			release: func(t *testing.T, c *rlock.Client, n string) {
				require.NoError(t, c.GetCountingSemaphore(n).Release(t.Context(), 1))
			}},
		{kind: "rate_limiter",
			hold: func(t *testing.T, c *rlock.Client, n string) {
				_, err := c.GetRateLimiter(n).TrySetRate(t.Context(), 1, time.Hour)
				require.NoError(t, err)
				require.NoError(t, c.GetRateLimiter(n).Acquire(t.Context(), 1))
			},
			wait: func(ctx context.Context, c *rlock.Client, n string) error {
				return c.GetRateLimiter(n).Acquire(ctx, 1)
			}},
		{kind: "latch",
			hold: func(t *testing.T, c *rlock.Client, n string) {
				_, err := c.GetCountDownLatch(n).TrySetCount(t.Context(), 1)
				require.NoError(t, err)
			},
			wait: func(ctx context.Context, c *rlock.Client, n string) error { return c.GetCountDownLatch(n).Await(ctx) },
			release: func(t *testing.T, c *rlock.Client, n string) {
				require.NoError(t, c.GetCountDownLatch(n).CountDown(t.Context()))
			}},
	}
}

// TestWaitRecordedEveryKind: the waiting call of every kind records who
// waits (the owner in its context, as a hash field names a holder), for
// what (the name, the kind), and deletes its record when its wait ends.
func TestWaitRecordedEveryKind(t *testing.T) {
	raw := relocktest.Raw(t)
	for _, k := range waitKinds() {
		t.Run(k.kind, func(t *testing.T) {
			holder := relocktest.Client(t)
			c := relocktest.Client(t)
			name := relocktest.Name(t)
			k.hold(t, holder, name)
			ctx, cancel := context.WithCancel(rlock.WithOwner(t.Context(), "w"))
			defer cancel()
			got := make(chan error, 1)
			go func() { got <- k.wait(ctx, c, name) }()
			recs := awaitRecords(t, raw, c, name, 1)
			assert.Equal(t, waitrec.Record{Owner: layout.Field(c.ID(), "w"), Name: name, Kind: k.kind, Since: recs[0].Since}, recs[0])
			if k.release != nil {
				k.release(t, holder, name)
				require.NoError(t, relocktest.Receive(t, got, 5*time.Second, "the wait to end"))
			} else {
				cancel()
				require.Error(t, relocktest.Receive(t, got, 5*time.Second, "the wait to end"))
			}
			awaitNoRecords(t, raw, c)
		})
	}
}

// TestDeadlockUpgrade: an owner that holds a read-write lock's read side
// and waits for its write side waits for itself: a cycle of one, ended
// after the delay.
func TestDeadlockUpgrade(t *testing.T) {
	c := relocktest.Client(t, rlock.WithDeadlockDetection(200*time.Millisecond))
	rw := c.GetReadWriteLock(relocktest.Name(t))
	a := rlock.WithOwner(t.Context(), "a")
	require.NoError(t, rw.ReadLock().Lock(a))
	ctx, cancel := context.WithTimeout(a, 10*time.Second)
	defer cancel()
	start := time.Now()
	err := rw.WriteLock().Lock(ctx)
	require.ErrorIs(t, err, rlock.ErrDeadlock)
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Contains(t, err.Error(), `owner "a"`)
	require.NoError(t, rw.ReadLock().Unlock(a))
	// A writer that takes the read side too is no cycle: it is granted.
	require.NoError(t, rw.WriteLock().Lock(a))
	require.NoError(t, rw.ReadLock().Lock(a))
	require.NoError(t, rw.ReadLock().Unlock(a))
	require.NoError(t, rw.WriteLock().Unlock(a))
}

// TestDeadlockSharedOwner: owners are threads of control. Goroutine 1 of
// owner O holds L1 (and would release it later); goroutine 2 of O waits
// for L2, held by P, which waits for L1. The detector cannot see that
// goroutine 1 runs: it reports the cycle through O, and one wait ends
// (documented: give goroutines that take locks on their own their own
// owners).
func TestDeadlockSharedOwner(t *testing.T) {
	const after = 200 * time.Millisecond
	co := relocktest.Client(t, rlock.WithDeadlockDetection(after))
	cp := relocktest.Client(t, rlock.WithDeadlockDetection(after))
	l1, l2 := relocktest.Name(t), relocktest.Name(t)
	o, p := rlock.WithOwner(t.Context(), "o"), rlock.WithOwner(t.Context(), "p")
	require.NoError(t, co.GetLock(l1).Lock(o)) // goroutine 1 of O
	require.NoError(t, cp.GetLock(l2).Lock(p))
	pWait := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(p, 10*time.Second)
		defer cancel()
		err := cp.GetLock(l1).Lock(ctx)
		if err == nil {
			_ = cp.GetLock(l1).Unlock(p)
		}
		_ = cp.GetLock(l2).Unlock(p)
		pWait <- err
	}()
	awaitRecords(t, relocktest.Raw(t), cp, l1, 1)
	ctx, cancel := context.WithTimeout(o, 10*time.Second)
	defer cancel()
	errO := co.GetLock(l2).Lock(ctx) // goroutine 2 of O: the youngest wait
	require.ErrorIs(t, errO, rlock.ErrDeadlock, "the cycle through O is reported")
	require.NoError(t, co.GetLock(l1).Unlock(o))
	require.NoError(t, relocktest.Receive(t, pWait, 5*time.Second, "P to go on"))
}

// TestDeadlockChainIsNoCycle: a long chain of waits that is no cycle ends
// nothing, however many times its waiters look.
func TestDeadlockChainIsNoCycle(t *testing.T) {
	const after = 100 * time.Millisecond
	names := []string{relocktest.Name(t), relocktest.Name(t), relocktest.Name(t), relocktest.Name(t)}
	cs := make([]*rlock.Client, len(names))
	for i := range cs {
		cs[i] = relocktest.Client(t, rlock.WithDeadlockDetection(after))
	}
	// o_i holds names[i] and waits for names[i+1]; the last holds only.
	raw := relocktest.Raw(t)
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(t.Context())
	errs := make([]error, len(names)-1)
	for i := range names {
		require.NoError(t, cs[i].GetLock(names[i]).Lock(rlock.WithOwner(ctx, fmt.Sprint("o", i))))
	}
	for i := range len(names) - 1 {
		wg.Go(func() {
			errs[i] = cs[i].GetLock(names[i+1]).Lock(rlock.WithOwner(ctx, fmt.Sprint("o", i)))
		})
		awaitRecords(t, raw, cs[i], names[i+1], 1)
	}
	// Several looks of every waiter: that nothing ends is seen only by
	// letting them look.
	time.Sleep(5 * after)
	cancel()
	wg.Wait()
	for i, err := range errs {
		require.ErrorIs(t, err, context.Canceled, "wait %d", i)
		require.NotErrorIs(t, err, rlock.ErrDeadlock, "wait %d", i)
	}
}

// TestUncontendedSendsNothingMore: an acquisition that gets the lock at
// once, and its release, send one command each, as before waits were
// recorded; a contended one sends one more at the start of its wait and
// one at its end.
func TestUncontendedSendsNothingMore(t *testing.T) {
	f := relocktest.NewFaulty(relocktest.Raw(t))
	c, err := rlock.New(f, rlock.WithWatchdogTimeout(time.Minute))
	require.NoError(t, err)
	defer c.Close()
	l := c.GetLock(relocktest.Name(t))
	a := rlock.WithOwner(t.Context(), "a")
	// Load the scripts first (a server new to a script answers NOSCRIPT,
	// and the script is sent again).
	require.NoError(t, l.Lock(a))
	require.NoError(t, l.Unlock(a))
	start := f.Commands()
	before := start
	require.NoError(t, l.Lock(a))
	assert.Equal(t, int64(1), f.Commands()-before, "an uncontended Lock")
	before = f.Commands()
	require.NoError(t, l.Unlock(a))
	assert.Equal(t, int64(1), f.Commands()-before, "an Unlock")
	before = f.Commands()
	ok, err := l.TryLock(a, time.Second, 0)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, int64(1), f.Commands()-before, "an uncontended TryLock")
	require.NoError(t, l.Unlock(a))
	require.NoError(t, c.Close()) // and what it waits for
	assert.Equal(t, int64(4), f.Commands()-start, "two Locks and two Unlocks, and Close, send 4 commands in all")
	n, err := relocktest.Raw(t).Do(t.Context(), relocktest.Raw(t).B().Exists().Key(waitrec.Key("", c.ID())).Build()).AsInt64()
	require.NoError(t, err)
	assert.Zero(t, n, "no wait record hash")
}

// deadlockChildEnv passes TestDeadlockChild its server, names and act.
const deadlockChildEnv = "RELOCK_DEADLOCK_CHILD"

// TestDeadlockChild is the child process of the cross-process tests: its
// Client (watchdog timeout 1s) holds the first name as owner "child",
// then waits for the second, and says how its wait ended.
func TestDeadlockChild(t *testing.T) {
	v := os.Getenv(deadlockChildEnv)
	if v == "" {
		t.Skip("only in a child process of TestDeadlockAcrossProcesses and TestWaitRecordOfDeadClientExpires")
	}
	f := strings.Split(v, "\x1f")
	if len(f) != 3 {
		relocktest.ChildSay("error bad %s: %q", deadlockChildEnv, v)
		return
	}
	c, err := rlock.NewClient(rueidis.ClientOption{InitAddress: []string{f[0]}, DisableCache: true},
		rlock.WithWatchdogTimeout(time.Second), rlock.WithDeadlockDetection(200*time.Millisecond))
	if err != nil {
		relocktest.ChildSay("error %v", err)
		return
	}
	defer c.Close()
	relocktest.ChildSay("client %s", c.ID())
	ctx := rlock.WithOwner(context.Background(), "child")
	if err := c.GetLock(f[1]).Lock(ctx); err != nil {
		relocktest.ChildSay("error %v", err)
		return
	}
	relocktest.ChildSay("holding")
	err = c.GetLock(f[2]).Lock(ctx)
	if err == nil {
		_ = c.GetLock(f[2]).Unlock(ctx)
	}
	_ = c.GetLock(f[1]).Unlock(ctx)
	relocktest.ChildSay("waited %v", err)
	relocktest.ChildWait()
}

func startDeadlockChild(t *testing.T, hold, wait string) (*relocktest.Child, string) {
	t.Helper()
	p, err := relocktest.StartChild("TestDeadlockChild",
		deadlockChildEnv+"="+strings.Join([]string{redistest.Shared(t).Addr, hold, wait}, "\x1f"))
	require.NoError(t, err, "start a child")
	t.Cleanup(p.Kill)
	id, err := p.Expect("client ", 10*time.Second)
	require.NoError(t, err, "the child's Client")
	_, err = p.Expect("holding", 10*time.Second)
	require.NoError(t, err, "the child's hold")
	return p, id
}

// TestDeadlockAcrossProcesses: a cycle between this process and a child
// process ends one wait, this one (it began last); the child then gets
// its lock.
func TestDeadlockAcrossProcesses(t *testing.T) {
	raw := relocktest.Raw(t)
	c := relocktest.Client(t, rlock.WithDeadlockDetection(200*time.Millisecond))
	l1, l2 := relocktest.Name(t), relocktest.Name(t)
	p := rlock.WithOwner(t.Context(), "parent")
	require.NoError(t, c.GetLock(l2).Lock(p))
	child, id := startDeadlockChild(t, l1, l2)
	relocktest.Eventually(t, 5*time.Second, "the child's wait record", func() bool {
		m, err := raw.Do(t.Context(), raw.B().Hvals().Key(waitrec.Key("", id)).Build()).AsStrSlice()
		return err == nil && len(m) == 1
	})
	ctx, cancel := context.WithTimeout(p, 10*time.Second)
	defer cancel()
	err := c.GetLock(l1).Lock(ctx)
	require.ErrorIs(t, err, rlock.ErrDeadlock)
	assert.Contains(t, err.Error(), `owner "child"`)
	require.NoError(t, c.GetLock(l2).Unlock(p))
	got, err := child.Expect("waited ", 10*time.Second)
	require.NoError(t, err)
	assert.Equal(t, "<nil>", got, "the child goes on")
}

// TestWaitRecordOfDeadClientExpires: a process killed while it waits
// leaves its record, which expires with its hash (the watchdog timeout,
// 1s) since no one renews it.
func TestWaitRecordOfDeadClientExpires(t *testing.T) {
	raw := relocktest.Raw(t)
	c := relocktest.Client(t)
	l1, l2 := relocktest.Name(t), relocktest.Name(t)
	p := rlock.WithOwner(t.Context(), "parent")
	require.NoError(t, c.GetLock(l2).Lock(p))
	child, id := startDeadlockChild(t, l1, l2)
	key := waitrec.Key("", id)
	relocktest.Eventually(t, 5*time.Second, "the child's wait record", func() bool {
		n, err := raw.Do(t.Context(), raw.B().Hlen().Key(key).Build()).AsInt64()
		return err == nil && n == 1
	})
	// Renewed while the child lives: still there after two timeouts.
	time.Sleep(2 * time.Second)
	n, err := raw.Do(t.Context(), raw.B().Hlen().Key(key).Build()).AsInt64()
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "a live Client's record is renewed")
	child.Kill()
	killed := time.Now()
	relocktest.Eventually(t, 5*time.Second, "the dead child's records to expire", func() bool {
		n, err := raw.Do(t.Context(), raw.B().Exists().Key(key).Build()).AsInt64()
		return err == nil && n == 0
	})
	assert.Less(t, time.Since(killed), 2*time.Second, "gone within the watchdog timeout (1s)")
	require.NoError(t, c.GetLock(l2).Unlock(p))
}

// waitCounter counts the calls that waited.
type waitCounter struct {
	observe.Base
	waits atomic.Int64
}

func (w *waitCounter) WaitStart(context.Context, observe.Wait) { w.waits.Add(1) }

// TestCommandsPerAcquisition measures the commands a Client sends per
// acquisition, uncontended and contended (4 Clients, one goroutine each,
// on one lock held 1ms each time), for docs/benchmarks.md: a contended
// acquisition that waited sends one command more at the start of its wait
// (its record) and one at its end (the record's delete). It checks only
// the uncontended count (TestUncontendedSendsNothingMore checks it
// exactly); the contended counts depend on the machine's timing.
func TestCommandsPerAcquisition(t *testing.T) {
	const clients, rounds = 4, 100
	name := relocktest.Name(t)
	fs := make([]*relocktest.Faulty, clients)
	cs := make([]*rlock.Client, clients)
	obs := &waitCounter{}
	for i := range cs {
		fs[i] = relocktest.NewFaulty(relocktest.Raw(t))
		c, err := rlock.New(fs[i], rlock.WithWatchdogTimeout(time.Minute), rlock.WithObserver(obs))
		require.NoError(t, err)
		cs[i] = c
	}
	sent := func() (n int64) {
		for _, f := range fs {
			n += f.Commands()
		}
		return n
	}
	// Warm up: the scripts loaded.
	l := cs[0].GetLock(name)
	require.NoError(t, l.Lock(t.Context()))
	require.NoError(t, l.Unlock(t.Context()))
	start := sent()
	for range rounds {
		require.NoError(t, l.Lock(t.Context()))
		require.NoError(t, l.Unlock(t.Context()))
	}
	unc := float64(sent()-start) / rounds
	assert.Equal(t, 2.0, unc, "uncontended: one command to Lock, one to Unlock")

	obs.waits.Store(0)
	start = sent()
	var wg sync.WaitGroup
	for i := range cs {
		wg.Go(func() {
			l := cs[i].GetLock(name)
			for range rounds {
				if err := l.Lock(t.Context()); err != nil {
					t.Error(err)
					return
				}
				time.Sleep(time.Millisecond) // the hold
				if err := l.Unlock(t.Context()); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, c := range cs {
		require.NoError(t, c.Close()) // its last commands sent
	}
	total := sent() - start
	n := int64(clients * rounds)
	t.Logf("uncontended: %.2f commands per Lock+Unlock; contended: %d acquisitions, %d waited, %.2f commands per acquisition (Lock+Unlock), %.2f per wait",
		unc, n, obs.waits.Load(), float64(total)/float64(n), float64(total)/float64(max(obs.waits.Load(), 1)))
}

// TestWaitRecordFailureDoesNotFailTheWait: a record's write that Redis
// refuses (OOM) leaves the wait unrecorded, and the wait goes on and gets
// the lock.
func TestWaitRecordFailureDoesNotFailTheWait(t *testing.T) {
	raw := relocktest.Raw(t)
	f := relocktest.NewFaulty(raw)
	c, err := rlock.New(f)
	require.NoError(t, err)
	defer c.Close()
	refused := f.Inject(&relocktest.Rule{SHA1s: []string{lua.WaitRecord.SHA1}, N: -1,
		Reply: relocktest.ErrorReply(t, raw, "OOM command not allowed when used memory > 'maxmemory'.")})
	name := relocktest.Name(t)
	holder := relocktest.Client(t)
	h := rlock.WithOwner(t.Context(), "h")
	require.NoError(t, holder.GetLock(name).Lock(h))
	w := rlock.WithOwner(t.Context(), "w")
	got := lockAsync(c.GetLock(name), w)
	relocktest.Eventually(t, 5*time.Second, "the record's write refused", func() bool { return refused.Hits() > 0 })
	require.NoError(t, holder.GetLock(name).Unlock(h))
	require.NoError(t, relocktest.Receive(t, got, 5*time.Second, "the wait to get the lock"))
	require.NoError(t, c.GetLock(name).Unlock(w))
	assert.Empty(t, waitRecords(t, raw, c))
}

// TestDeadlockPhilosophers: five owners on five Clients, five locks in a
// ring, each owner taking its left lock then its right one, again and
// again: the order that deadlocks. Each deadlock ends one wait; its owner
// releases its left lock, waits until the neighbour it kept waiting has
// eaten (or finished), and tries again; every owner finishes its rounds.
//
// The victim lets its neighbour go first, as operations.md advises (a
// pause before the retry): a plain lock is not fair, and a victim that
// tries again at once takes back the lock it just released before the
// neighbour hears of the release, the same cycle forms, and the same wait
// (again the youngest) ends, round after round (a flake of this test when
// it tried again at once: 580 deadlocks in 60s, every one p1's).
func TestDeadlockPhilosophers(t *testing.T) {
	const n, rounds = 5, 8
	names := make([]string, n)
	for i := range names {
		names[i] = relocktest.Name(t)
	}
	var (
		mu       sync.Mutex
		ate      = sync.NewCond(&mu)
		meals    = make([]int, n)
		finished = make([]bool, n)
	)
	var deadlocks atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		c := relocktest.Client(t, rlock.WithDeadlockDetection(100*time.Millisecond))
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(rlock.WithOwner(t.Context(), fmt.Sprint("p", i)), 60*time.Second)
			defer cancel()
			defer context.AfterFunc(ctx, func() {
				mu.Lock()
				defer mu.Unlock()
				ate.Broadcast()
			})()
			defer func() {
				mu.Lock()
				defer mu.Unlock()
				finished[i] = true
				ate.Broadcast()
			}()
			left, right := c.GetLock(names[i]), c.GetLock(names[(i+1)%n])
			neighbour := (i + n - 1) % n // waits for left in a cycle
			for done := 0; done < rounds; {
				if err := left.Lock(ctx); err != nil {
					t.Errorf("p%d: left: %v", i, err)
					return
				}
				err := right.Lock(ctx)
				switch {
				case errors.Is(err, rlock.ErrDeadlock):
					deadlocks.Add(1)
					mu.Lock()
					before := meals[neighbour]
					mu.Unlock()
					_ = left.Unlock(ctx)
					mu.Lock()
					for meals[neighbour] == before && !finished[neighbour] && ctx.Err() == nil {
						ate.Wait()
					}
					mu.Unlock()
					continue
				case err != nil:
					t.Errorf("p%d: right: %v", i, err)
					_ = left.Unlock(ctx)
					return
				}
				time.Sleep(time.Millisecond) // eat
				_ = right.Unlock(ctx)
				_ = left.Unlock(ctx)
				done++
				mu.Lock()
				meals[i]++
				ate.Broadcast()
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("%d deadlocks broken", deadlocks.Load())
}

// TestDeadlockDetectionOff: WithDeadlockDetection(0) turns detection off
// (a cycle then waits until its contexts end; its waits are still
// recorded); a negative delay is refused.
func TestDeadlockDetectionOff(t *testing.T) {
	_, err := rlock.NewClient(rueidis.ClientOption{InitAddress: []string{redistest.Shared(t).Addr}},
		rlock.WithDeadlockDetection(-time.Second))
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)

	n1, n2 := relocktest.Name(t), relocktest.Name(t)
	members := []cycleMember{
		{c: relocktest.Client(t, rlock.WithDeadlockDetection(0)), owner: "a", hold: n1, wait: n2},
		{c: relocktest.Client(t, rlock.WithDeadlockDetection(0)), owner: "b", hold: n2, wait: n1},
	}
	// Longer than the default delay (1s) and a look. The holds are kept
	// until every wait has ended: a member that let its hold go when its
	// own wait ended would grant the other's wait, still running (flake
	// hunt of issue 32: "a" got its lock when "b", whose wait began first,
	// gave up and released).
	for _, m := range members {
		require.NoError(t, m.c.GetLock(m.hold).Lock(rlock.WithOwner(t.Context(), m.owner)))
	}
	errs := make([]error, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(rlock.WithOwner(t.Context(), m.owner), 1500*time.Millisecond)
			defer cancel()
			errs[i] = m.c.GetLock(m.wait).Lock(ctx)
		})
	}
	wg.Wait()
	for i, m := range members {
		require.ErrorIs(t, errs[i], context.DeadlineExceeded, m.owner)
		require.NotErrorIs(t, errs[i], rlock.ErrDeadlock, m.owner)
		require.NoError(t, m.c.GetLock(m.hold).Unlock(rlock.WithOwner(t.Context(), m.owner)), m.owner)
	}
}
