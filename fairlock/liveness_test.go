package fairlock_test

import (
	"context"
	"errors"
	"github.com/relock-go/relock/internal/layout"
	"slices"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/fairlock"
	"github.com/relock-go/relock/internal/redissontest"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// deadBound is what a dead relock waiter may cost a queue of relock
// waiters once the lock is free: its heartbeat runs out at most
// WaiterTimeout after its last refresh, the next waiter looks within a
// RefreshInterval, and a round trip or two (with room for a loaded
// machine).
const deadBound = fairlock.WaiterTimeout + fairlock.RefreshInterval + 250*time.Millisecond

// doomedWaiter starts a relock waiter on name whose Client the test can
// kill: the Client runs on a rueidis client of its own. It returns when
// the waiter is queued.
type doomedWaiter struct {
	t      *testing.T
	mortal *relocktest.Mortal
	rdb    rueidis.Client
	c      *rlock.Client
	field  string
	cancel context.CancelFunc
	done   chan redissontest.Result
}

func startDoomed(t *testing.T, name string) *doomedWaiter {
	t.Helper()
	opt := redistest.Shared(t).ClientOption()
	mortal := relocktest.NewMortal(relocktest.Raw(t), &opt, "doomed-"+relocktest.Name(t))
	rdb, err := rueidis.NewClient(opt)
	require.NoError(t, err)
	c, err := rlock.New(rdb)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(rlock.WithOwner(t.Context(), "doomed"))
	d := &doomedWaiter{t: t, mortal: mortal, rdb: rdb, c: c, field: c.ID() + ":doomed", cancel: cancel}
	d.done = make(chan redissontest.Result, 1)
	go func() {
		err := c.GetFairLock(name).Lock(ctx)
		d.done <- redissontest.Result{Err: err, At: time.Now()}
	}()
	t.Cleanup(func() {
		d.cancel()
		select {
		case <-d.done:
		case <-time.After(5 * time.Second):
			t.Errorf("the doomed waiter's Lock did not return 5s after its context ended")
		}
		_ = c.Close()
		rdb.Close()
	})
	return d
}

// kill ends the waiter's process as far as Redis can tell: its
// connections end as a killed process's do, and a refresh it had sent
// runs before kill returns or never. (A refresh that reached the server
// after the release would take the lock as the dead waiter's last act: a
// lock a process takes as it dies is held for its lease, which is not
// what this test measures.)
func (d *doomedWaiter) kill() { d.mortal.Kill(d.t) }

// TestDeadWaiterCostsAboutASecond: a queue of relock waiters loses at most
// about a second (WaiterTimeout plus a RefreshInterval) to a waiter whose
// Client died while it was queued, whatever the thread wait time (the
// default 5 minutes here): its heartbeat, not its deadline, decides.
func TestDeadWaiterCostsAboutASecond(t *testing.T) {
	for _, death := range []struct {
		how  string
		kill func(d *doomedWaiter)
	}{
		{"killed", (*doomedWaiter).kill},
		{"closed", func(d *doomedWaiter) { _ = d.c.Close() }},
	} {
		t.Run(death.how, func(t *testing.T) {
			holderClient := relocktest.Client(t)
			c := relocktest.Client(t)
			raw := relocktest.Raw(t)
			name := relocktest.Name(t)
			holder := heldBy(t, holderClient.GetFairLock(name), "holder")
			d := startDoomed(t, name)
			relocktest.Eventually(t, 5*time.Second, "the doomed waiter queued", func() bool {
				return len(queue(t, raw, name)) == 1
			})
			next := rlock.WithOwner(t.Context(), "next")
			got := redissontest.Async(func() error { return c.GetFairLock(name).Lock(next) })
			relocktest.Eventually(t, 5*time.Second, "the next waiter queued", func() bool {
				return len(queue(t, raw, name)) == 2
			})
			require.Equal(t, d.field, queue(t, raw, name)[0], "the doomed waiter heads the queue")

			death.kill(d)
			released := time.Now()
			require.NoError(t, holderClient.GetFairLock(name).Unlock(holder))
			select {
			case r := <-got:
				require.NoError(t, r.Err)
				cost := r.At.Sub(released)
				assert.LessOrEqual(t, cost, deadBound, "the next waiter acquired %v after the release", cost)
				t.Logf("a %s waiter at the head cost the queue %v (bound %v)", death.how, cost.Round(time.Millisecond), deadBound)
			case <-time.After(5 * time.Second):
				holders, _ := raw.Do(t.Context(), raw.B().Hgetall().Key(name).Build()).AsStrMap()
				pttl, _ := raw.Do(t.Context(), raw.B().Pttl().Key(name).Build()).AsInt64()
				t.Fatalf("the next waiter still waits 5s after the release (queue %v, holders %v, pttl %dms)",
					queue(t, raw, name), holders, pttl)
			}
			require.NoError(t, c.GetFairLock(name).Unlock(next))
			assert.Empty(t, queue(t, raw, name), "queue at the end")
			alive, err := raw.Do(t.Context(), raw.B().Zrange().Key(aliveKey(name)).Min("0").Max("-1").Build()).AsStrSlice()
			require.NoError(t, err)
			assert.Empty(t, alive, "heartbeats at the end")
			if death.how == "closed" {
				r := <-d.done
				assert.True(t, errors.Is(r.Err, rlock.ErrClosed), "the closed waiter's Lock = %v, want ErrClosed", r.Err)
				d.done <- r
			}
		})
	}
}

// TestFairLockWaitTimeoutOption: the thread wait time is what a waiter
// adds to the deadline of the waiter before it; out-of-range values are
// refused.
func TestFairLockWaitTimeoutOption(t *testing.T) {
	raw := relocktest.Raw(t)
	for _, d := range []time.Duration{0, -time.Second, time.Millisecond / 2, 200 * 365 * 24 * time.Hour} {
		_, err := rlock.New(raw, rlock.WithFairLockWaitTimeout(d))
		assert.ErrorIs(t, err, rlock.ErrInvalidArgument, "WithFairLockWaitTimeout(%v)", d)
	}

	const wait = 2 * time.Second
	c := relocktest.Client(t, rlock.WithFairLockWaitTimeout(wait))
	name := relocktest.Name(t)
	l := c.GetFairLock(name)
	h := rlock.WithOwner(t.Context(), "h")
	require.NoError(t, l.Lock(h))
	var waiters []<-chan redissontest.Result
	for _, owner := range []string{"a", "b"} {
		ctx := rlock.WithOwner(t.Context(), owner)
		waiters = append(waiters, redissontest.Async(func() error {
			if err := l.Lock(ctx); err != nil {
				return err
			}
			return l.Unlock(ctx)
		}))
		relocktest.Eventually(t, 5*time.Second, owner+" queued", func() bool { return slices.Contains(queue(t, raw, name), c.ID()+":"+owner) })
	}
	timeouts := layout.Timeouts(name)
	a, b := score(t, raw, timeouts, c.ID()+":a"), score(t, raw, timeouts, c.ID()+":b")
	assert.Equal(t, wait.Milliseconds(), b-a, "deadline of the second waiter less the first's")
	require.NoError(t, l.Unlock(h))
	for _, w := range waiters {
		select {
		case r := <-w:
			require.NoError(t, r.Err)
		case <-time.After(5 * time.Second):
			t.Fatal("a waiter still waits 5s after the release")
		}
	}
}

// TestHeadWokenAtRelease: the release (or force-unlock) that frees a
// fair lock publishes a wake-up on the channel of the head of its queue,
// so the head takes the lock at that message, not at its next heartbeat
// refresh (which would take it too, a RefreshInterval later: the wake-up
// is what this test looks for, not the time).
func TestHeadWokenAtRelease(t *testing.T) {
	for _, tc := range []struct {
		name string
		free func(t *testing.T, l *fairlock.Lock, h context.Context)
	}{
		{"Unlock", func(t *testing.T, l *fairlock.Lock, h context.Context) { require.NoError(t, l.Unlock(h)) }},
		{"ForceUnlock", func(t *testing.T, l *fairlock.Lock, h context.Context) {
			ok, err := l.ForceUnlock(h)
			require.NoError(t, err)
			require.True(t, ok, "ForceUnlock found a hold")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := relocktest.Raw(t)
			name := relocktest.Name(t)
			holders, waiters := relocktest.Client(t), relocktest.Client(t)
			h := rlock.WithOwner(t.Context(), "h")
			require.NoError(t, holders.GetFairLock(name).Lock(h))
			head := layout.FairWaiterChannel(name, layout.Field(waiters.ID(), "w"))
			msgs := make(chan string, 8)
			ctx, cancel := context.WithCancel(t.Context())
			listened := make(chan struct{})
			go func() {
				defer close(listened)
				_ = raw.Receive(ctx, raw.B().Subscribe().Channel(head).Build(), func(m rueidis.PubSubMessage) { msgs <- m.Message })
			}()
			defer func() { cancel(); <-listened }()
			relocktest.Eventually(t, 5*time.Second, "the test's subscription", func() bool { return relocktest.Subscribers(raw, head) >= 1 })
			w := rlock.WithOwner(t.Context(), "w")
			wctx, wcancel := context.WithTimeout(w, 10*time.Second)
			defer wcancel()
			got := make(chan error, 1)
			go func() { got <- waiters.GetFairLock(name).Lock(wctx) }()
			relocktest.Eventually(t, 5*time.Second, "the waiter to sleep on its channel", func() bool {
				return relocktest.Subscribers(raw, head) >= 2
			})
			tc.free(t, holders.GetFairLock(name), h)
			relocktest.Receive(t, msgs, 5*time.Second, "a wake-up on the head's channel after the lock came free")
			require.NoError(t, relocktest.Receive(t, got, 5*time.Second, "the head to get the lock"))
			require.NoError(t, waiters.GetFairLock(name).Unlock(w))
		})
	}
}
