package rlock_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/internal/redissontest"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/rlock"
)

// Session 8's review of grants across Clients (issue 35): the seams where
// a grant through the wake-one registry meets the Clients' other options,
// fixed leases, other kinds and forms of a name, latency and the ends of
// calls.

// s8Losses collects the losses a Client's lost handler is told of.
type s8Losses struct {
	mu     sync.Mutex
	causes []string
}

func (l *s8Losses) handler() rlock.Option {
	return rlock.WithLostHandler(func(name, owner string, cause error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.causes = append(l.causes, name+" "+owner+": "+cause.Error())
	})
}

func (l *s8Losses) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.causes...)
}

// s8PTTL is the lock's remaining lease in Redis (-2: no key).
func s8PTTL(t *testing.T, raw rueidis.Client, name string) time.Duration {
	t.Helper()
	ms, err := raw.Do(t.Context(), raw.B().Pttl().Key(name).Build()).AsInt64()
	require.NoError(t, err)
	if ms < 0 {
		return time.Duration(ms)
	}
	return time.Duration(ms) * time.Millisecond
}

// s8Holds reports whether field holds the lock name in Redis.
func s8Holds(t *testing.T, raw rueidis.Client, name, field string) bool {
	t.Helper()
	n, err := raw.Do(t.Context(), raw.B().Hexists().Key(name).Field(field).Build()).AsInt64()
	require.NoError(t, err)
	return n == 1
}

// s8EndsFirst waits up to timeout for done (a watched hold's end) and
// fails the test if Redis lets the hold's field go before the Client
// ends the hold (allowing the end's timer 20ms to fire); it returns when
// done is closed.
func s8EndsFirst(t *testing.T, raw rueidis.Client, name, field string, done <-chan struct{}, timeout time.Duration) {
	t.Helper()
	for end := time.Now().Add(timeout); time.Now().Before(end); {
		select {
		case <-done:
			return
		case <-time.After(5 * time.Millisecond):
		}
		if !s8Holds(t, raw, name, field) {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
				t.Fatal("Redis let the hold go before the Client's end of it")
			}
		}
	}
	t.Fatal("the hold did not end")
}

// TestReview35s8ShortWatchdogWaiter: the waiting Client's watchdog lease
// (300ms) is far shorter than the holder Client's: its grantees entry
// carries a window of 300ms, the grant's lease in Redis. The waiter gets
// the lock soon after the release (by the grant, or by its attempt once
// the Client gave a grant too old to take back), and its hold lasts,
// renewed on its own watchdog, with no loss reported.
func TestReview35s8ShortWatchdogWaiter(t *testing.T) {
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	holder := relocktest.Client(t, rlock.WithWakeOne())
	var lost s8Losses
	waiter := relocktest.Client(t, rlock.WithWakeOne(), rlock.WithWatchdogTimeout(300*time.Millisecond), lost.handler())
	h, w := rlock.WithOwner(t.Context(), "h"), rlock.WithOwner(t.Context(), "w")
	for round := range 3 {
		require.NoError(t, holder.GetLock(name).Lock(h))
		got := make(chan error, 1)
		go func() { got <- waiter.GetLock(name).Lock(w) }()
		entry := awaitGrantee(t, raw, name, waiter.ID())
		require.Contains(t, entry, "r 300 ", "the entry's window")
		time.Sleep(time.Duration(round) * 400 * time.Millisecond) // the entry's age at the release
		start := time.Now()
		require.NoError(t, holder.GetLock(name).Unlock(h))
		require.NoError(t, relocktest.Receive(t, got, 5*time.Second, "the waiter to get the lock"))
		assert.Less(t, time.Since(start), time.Second, "the waiter's take-over after the release")
		field := layout.Field(waiter.ID(), "w")
		for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			require.True(t, s8Holds(t, raw, name, field), "the waiter's hold is in Redis")
		}
		require.NoError(t, waiter.GetLock(name).Unlock(w))
		require.Empty(t, lost.list(), "losses")
	}
}

// TestReview35s8FixedLeaseGranted: a waiter that asked a fixed lease
// longer than the window (4s) is granted the lock through the registry:
// once confirmed, the lease in Redis is the rest of 4s counted from no
// later than the grant, never renewed past it; the watched hold ends (its
// Done) before Redis lets the lock go; nothing is lost but by that end.
func TestReview35s8FixedLeaseGranted(t *testing.T) {
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	holder := relocktest.Client(t, rlock.WithWakeOne())
	var lost s8Losses
	waiter := relocktest.Client(t, rlock.WithWakeOne(), lost.handler())
	h, w := rlock.WithOwner(t.Context(), "h"), rlock.WithOwner(t.Context(), "w")
	require.NoError(t, holder.GetLock(name).Lock(h))
	type res struct {
		hold interface{ Done() <-chan struct{} }
		err  error
	}
	got := make(chan res, 1)
	go func() {
		hd, err := waiter.GetLock(name).TryAcquire(w, 10*time.Second, 4*time.Second)
		got <- res{hd, err}
	}()
	entry := awaitGrantee(t, raw, name, waiter.ID())
	require.Contains(t, entry, "r 3000 ", "the entry's window")
	landed := lockcore.GrantsLanded()
	granted := time.Now()
	require.NoError(t, holder.GetLock(name).Unlock(h))
	r := relocktest.Receive(t, got, 5*time.Second, "the waiter to get the lock")
	require.NoError(t, r.err)
	relocktest.Eventually(t, time.Second, "the grant to land", func() bool { return lockcore.GrantsLanded() > landed })
	field := layout.Field(waiter.ID(), "w")
	confirmed := false
	for !confirmed {
		select {
		case <-r.hold.Done():
			t.Fatal("the hold ended before its confirmation")
		case <-time.After(20 * time.Millisecond):
		}
		left := s8PTTL(t, raw, name)
		require.LessOrEqual(t, left, 4*time.Second-time.Since(granted)+10*time.Millisecond, "the lease in Redis is past 4s after the grant")
		confirmed = left > 3*time.Second-time.Since(granted)+50*time.Millisecond
	}
	// Not renewed: the lease only goes down.
	last := s8PTTL(t, raw, name)
	for range 10 {
		time.Sleep(50 * time.Millisecond)
		left := s8PTTL(t, raw, name)
		require.LessOrEqual(t, left, last+5*time.Millisecond, "the fixed lease was renewed")
		last = left
	}
	s8EndsFirst(t, raw, name, field, r.hold.Done(), 5*time.Second)
	relocktest.Eventually(t, 2*time.Second, "the lock to expire", func() bool { return s8PTTL(t, raw, name) == -2 })
	relocktest.Eventually(t, time.Second, "the loss to be told", func() bool { return len(lost.list()) == 1 })
	assert.Contains(t, lost.list()[0], "fixed lease", "the loss's cause")
}

// TestReview35s8ShortFixedLeaseGranted: a waiter whose fixed lease
// (800ms) is shorter than the window is granted with that lease: the
// Client sends no confirmation, the hold ends by its lease, before
// Redis's end, and the lock is free after.
func TestReview35s8ShortFixedLeaseGranted(t *testing.T) {
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	holder := relocktest.Client(t, rlock.WithWakeOne())
	renews := relocktest.NewFaulty(relocktest.Raw(t))
	rule := renews.Inject(&relocktest.Rule{SHA1s: []string{lua.LockRenew.SHA1}, N: -1, Run: true, Keep: true})
	waiter, err := rlock.New(renews, rlock.WithWakeOne())
	require.NoError(t, err)
	t.Cleanup(func() { _ = waiter.Close() })
	h, w := rlock.WithOwner(t.Context(), "h"), rlock.WithOwner(t.Context(), "w")
	for range 3 {
		require.NoError(t, holder.GetLock(name).Lock(h))
		type res struct {
			hold interface{ Done() <-chan struct{} }
			err  error
		}
		got := make(chan res, 1)
		go func() {
			hd, err := waiter.GetLock(name).TryAcquire(w, 10*time.Second, 800*time.Millisecond)
			got <- res{hd, err}
		}()
		entry := awaitGrantee(t, raw, name, waiter.ID())
		require.Contains(t, entry, "r 800 ", "the entry's window")
		start := time.Now()
		require.NoError(t, holder.GetLock(name).Unlock(h))
		r := relocktest.Receive(t, got, 5*time.Second, "the waiter to get the lock")
		require.NoError(t, r.err)
		field := layout.Field(waiter.ID(), "w")
		s8EndsFirst(t, raw, name, field, r.hold.Done(), 2*time.Second)
		assert.Less(t, time.Since(start), 900*time.Millisecond, "the hold's end")
		relocktest.Eventually(t, 2*time.Second, "the lock to expire", func() bool { return s8PTTL(t, raw, name) == -2 })
		assert.Zero(t, rule.Hits(), "renewals of a hold on a fixed lease")
	}
}

// TestReview35s8OtherFormGrant: the names "a" and "{a}" share the wake
// registry, the grantees and the channels (docs/layout.md, one name, one
// key space). A waiter of one form sleeps registered; that form's lock
// goes without a release (deleted by hand), and another Client takes and
// releases the other form before the waiter tries again. That release
// must not grant the waiter's entry: it would write the waiter's field in
// the other form's hash, and the waiter's Lock would return holding
// nothing of its own lock (its hold lost at the confirmation), beside a
// field that keeps both forms from everyone for the window. The waiter
// is woken instead, and takes its lock by its attempt.
func TestReview35s8OtherFormGrant(t *testing.T) {
	for _, braced := range []bool{false, true} {
		t.Run(map[bool]string{false: "waiter of x", true: "waiter of braced x"}[braced], func(t *testing.T) {
			raw := relocktest.Raw(t)
			mine, other := namePair(t)
			if braced {
				mine, other = other, mine
			}
			holder := relocktest.Client(t, rlock.WithWakeOne())
			var lost s8Losses
			waiter := relocktest.Client(t, rlock.WithWakeOne(), lost.handler())
			h, w := rlock.WithOwner(t.Context(), "h"), rlock.WithOwner(t.Context(), "w")
			require.NoError(t, holder.GetLock(mine).Lock(h))
			got := make(chan error, 1)
			go func() { got <- waiter.GetLock(mine).Lock(w) }()
			first := awaitGrantee(t, raw, mine, waiter.ID())
			// Just after a fresh attempt: the waiter sleeps 1s to 2s.
			relocktest.Eventually(t, 5*time.Second, "the waiter's next attempt", func() bool {
				return granteeOf(t, raw, mine, waiter.ID()) != first
			})
			require.NoError(t, raw.Do(t.Context(), raw.B().Del().Key(mine).Build()).Error())
			require.NoError(t, holder.GetLock(other).Lock(h))
			made := lockcore.GrantsMade()
			start := time.Now()
			require.NoError(t, holder.GetLock(other).Unlock(h))
			assert.Zero(t, lockcore.GrantsMade()-made, "grants made by the release of %q", other)
			field := layout.Field(waiter.ID(), "w")
			require.NoError(t, relocktest.Receive(t, got, 3*time.Second, "the waiter to get the lock"))
			assert.Less(t, time.Since(start), 500*time.Millisecond, "the waiter, woken, takes its lock")
			assert.True(t, s8Holds(t, raw, mine, field), "the waiter's Lock of %q returned, and its field is not in %q", mine, mine)
			assert.False(t, s8Holds(t, raw, other, field), "the waiter's field is in %q", other)
			require.NoError(t, waiter.GetLock(mine).Unlock(w))
			assert.Empty(t, lost.list(), "losses")
		})
	}
}

// TestReview35s8BracedNameGranted: a name with a hash tag of its own
// ("{a}", "x{a}") is granted across Clients as one without: its entries
// carry the kind in upper case, which its own releases grant.
func TestReview35s8BracedNameGranted(t *testing.T) {
	raw := relocktest.Raw(t)
	for _, shape := range []string{"{%s}", "x{%s}"} {
		for _, fenced := range []bool{false, true} {
			// A name of its own each time: a Client of the round
			// before stays registered for a while.
			name := fmt.Sprintf(shape, relocktest.Name(t))
			t.Cleanup(func() { _ = raw.Do(context.Background(), raw.B().Del().Key(name).Build()).Error() })
			holder := relocktest.Client(t, rlock.WithWakeOne())
			waiter := relocktest.Client(t, rlock.WithWakeOne())
			h, w := rlock.WithOwner(t.Context(), "h"), rlock.WithOwner(t.Context(), "w")
			lock := func(c *rlock.Client, ctx context.Context) error {
				if fenced {
					_, err := c.GetFencedLock(name).LockAndGetToken(ctx)
					return err
				}
				return c.GetLock(name).Lock(ctx)
			}
			unlock := func(c *rlock.Client, ctx context.Context) error {
				if fenced {
					return c.GetFencedLock(name).Unlock(ctx)
				}
				return c.GetLock(name).Unlock(ctx)
			}
			require.NoError(t, lock(holder, h))
			got := make(chan error, 1)
			go func() { got <- lock(waiter, w) }()
			entry := awaitGrantee(t, raw, name, waiter.ID())
			require.Equal(t, map[bool]string{false: "R", true: "F"}[fenced], entry[:1], "the entry %q of %q", entry, name)
			landed := lockcore.GrantsLanded()
			require.NoError(t, unlock(holder, h))
			require.NoError(t, relocktest.Receive(t, got, 3*time.Second, "the waiter to get the lock"))
			relocktest.Eventually(t, time.Second, "the grant to land", func() bool { return lockcore.GrantsLanded() > landed })
			require.True(t, s8Holds(t, raw, name, layout.Field(waiter.ID(), "w")))
			require.NoError(t, unlock(waiter, w))
		}
	}
}

// TestReview35s8CancelAtGrant: the waiter's context ends as the release
// that grants it the lock across Clients returns (before or after the
// grant message reaches its Client). Either the waiter's Lock returns nil
// and its field holds the lock, or it returns the context's error and
// the lock is free at once (given back), not held for the window; the
// Client is never left counting a hold Redis does not have, nor Redis a
// field no call owns.
func TestReview35s8CancelAtGrant(t *testing.T) {
	raw := relocktest.Raw(t)
	f := relocktest.NewFaulty(relocktest.Raw(t))
	holder, err := rlock.New(f, rlock.WithWakeOne())
	require.NoError(t, err)
	t.Cleanup(func() { _ = holder.Close() })
	var lost s8Losses
	waiter := relocktest.Client(t, rlock.WithWakeOne(), lost.handler())
	h := rlock.WithOwner(t.Context(), "h")
	outcomes := map[string]int{}
	for round := range 6 {
		name := relocktest.Name(t)
		require.NoError(t, holder.GetLock(name).Lock(h))
		wctx, cancel := context.WithCancel(rlock.WithOwner(t.Context(), "w"))
		got := make(chan error, 1)
		go func() { got <- waiter.GetLock(name).Lock(wctx) }()
		awaitGrantee(t, raw, name, waiter.ID())
		delay := time.Duration(round%3) * time.Millisecond
		f.Inject(&relocktest.Rule{SHA1s: []string{lua.LockUnlock.SHA1}, N: 1, Run: true, Keep: true, After: func([]string) {
			time.Sleep(delay)
			cancel()
		}})
		made := lockcore.GrantsMade()
		require.NoError(t, holder.GetLock(name).Unlock(h))
		require.Greater(t, lockcore.GrantsMade(), made, "the release granted the lock")
		err := relocktest.Receive(t, got, 5*time.Second, "the waiter's Lock to return")
		field := layout.Field(waiter.ID(), "w")
		if err == nil {
			outcomes["held"]++
			require.True(t, s8Holds(t, raw, name, field), "the waiter's Lock returned nil without its field")
			require.NoError(t, waiter.GetLock(name).Unlock(rlock.WithOwner(t.Context(), "w")))
		} else {
			outcomes["gave up"]++
			require.ErrorIs(t, err, context.Canceled)
			relocktest.Eventually(t, 500*time.Millisecond, "the grant to be given back", func() bool {
				return s8PTTL(t, raw, name) == -2
			})
		}
		cancel()
	}
	t.Logf("outcomes: %v", outcomes)
	assert.Empty(t, lost.list(), "losses")
}

// TestReview35s8BothKindsOneClient: one Client waits for a name with a
// Lock (owner p) and a FencedLock (owner f) at once; its wake channel's
// listener is the Mutex of whichever joined first. Another Client's
// releases, of either kind, grant the lock through the registry to the
// waiter whose attempt came last; each waiter gets the lock in turn, the
// fenced one with a token above every earlier one.
func TestReview35s8BothKindsOneClient(t *testing.T) {
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	holder := relocktest.Client(t, rlock.WithWakeOne())
	var lost s8Losses
	waiter := relocktest.Client(t, rlock.WithWakeOne(), lost.handler())
	h := rlock.WithOwner(t.Context(), "h")
	p, fo := rlock.WithOwner(t.Context(), "p"), rlock.WithOwner(t.Context(), "f")
	first, err := holder.GetFencedLock(name).LockAndGetToken(h)
	require.NoError(t, err)
	gotP := make(chan error, 1)
	gotF := make(chan int64, 1)
	go func() { gotP <- waiter.GetLock(name).Lock(p) }()
	relocktest.Eventually(t, 5*time.Second, "the plain waiter to register", func() bool {
		return strings.HasSuffix(granteeOf(t, raw, name, waiter.ID()), ":p")
	})
	go func() {
		tok, err := waiter.GetFencedLock(name).LockAndGetToken(fo)
		assert.NoError(t, err)
		gotF <- tok
	}()
	relocktest.Eventually(t, 5*time.Second, "the fenced waiter to register, and both to sleep", func() bool {
		return strings.HasPrefix(granteeOf(t, raw, name, waiter.ID()), "f ") &&
			recordedWaits(t, raw, waiter.ID(), name) == 2 // see awaitGrantee
	})
	landed := lockcore.GrantsLanded()
	require.NoError(t, holder.GetFencedLock(name).Unlock(h))
	// The fenced waiter's entry came last: it is granted.
	select {
	case tok := <-gotF:
		assert.Greater(t, tok, first, "the granted token")
		relocktest.Eventually(t, time.Second, "the grant to land", func() bool { return lockcore.GrantsLanded() > landed })
		require.NoError(t, waiter.GetFencedLock(name).Unlock(fo))
	case err := <-gotP:
		t.Fatalf("the plain waiter got the lock first (%v)", err)
	case <-time.After(3 * time.Second):
		t.Fatal("the fenced waiter did not get the lock")
	}
	require.NoError(t, relocktest.Receive(t, gotP, 5*time.Second, "the plain waiter to get the lock"))
	require.True(t, s8Holds(t, raw, name, layout.Field(waiter.ID(), "p")))
	require.NoError(t, waiter.GetLock(name).Unlock(p))
	assert.Empty(t, lost.list(), "losses")
}

// s8Exclusive watches the lock name's hash every few ms until the test
// ends, and fails the test if it ever has two fields (two holders).
func s8Exclusive(t *testing.T, name string) {
	t.Helper()
	raw := relocktest.Raw(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			m, err := raw.Do(ctx, raw.B().Hgetall().Key(name).Build()).AsStrMap()
			if err == nil && len(m) > 1 {
				t.Errorf("two holders at once: %v", m)
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
}

// TestReview35s8GrantsBehindLatency: two waiting Clients reach Redis
// through a proxy that delays every byte (commands, replies and pub/sub
// messages) by 100ms each way; a third, direct, holds first. The
// lock goes round by grants across Clients: never two holders, each
// take-over soon after the release (no waiter left asleep while the lock
// is free), each hold kept until its release (no loss), and Unlock finds
// each hold there.
func TestReview35s8GrantsBehindLatency(t *testing.T) {
	srv := redistest.Shared(t)
	for _, delay := range []time.Duration{100 * time.Millisecond} {
		t.Run(delay.String(), func(t *testing.T) {
			name := relocktest.Name(t)
			s8Exclusive(t, name)
			p, err := relocktest.NewProxy(srv.Addr)
			require.NoError(t, err)
			t.Cleanup(func() { _ = p.Close() })
			p.SetDelay(delay)
			var lost s8Losses
			far := func() *rlock.Client {
				c, err := rlock.NewClient(rueidis.ClientOption{InitAddress: []string{p.Addr()}, DisableCache: true},
					rlock.WithWakeOne(), lost.handler())
				require.NoError(t, err)
				t.Cleanup(func() { _ = c.Close() })
				return c
			}
			a, b := far(), far()
			holder := relocktest.Client(t, rlock.WithWakeOne(), lost.handler())
			h := rlock.WithOwner(t.Context(), "h")
			require.NoError(t, holder.GetLock(name).Lock(h))
			type took struct {
				who string
				at  time.Time
			}
			took1 := make(chan took, 4)
			release := make(chan struct{}, 4)
			run := func(c *rlock.Client, who string) {
				ctx := rlock.WithOwner(t.Context(), who)
				if err := c.GetLock(name).Lock(ctx); err != nil {
					t.Errorf("%s: %v", who, err)
					return
				}
				took1 <- took{who, time.Now()}
				<-release
				if err := c.GetLock(name).Unlock(ctx); err != nil {
					t.Errorf("%s's Unlock: %v", who, err)
				}
			}
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { defer wg.Done(); run(a, "a") }()
			go func() { defer wg.Done(); run(b, "b") }()
			raw := relocktest.Raw(t)
			awaitGrantee(t, raw, name, a.ID())
			awaitGrantee(t, raw, name, b.ID())
			landed := lockcore.GrantsLanded()
			start := time.Now()
			require.NoError(t, holder.GetLock(name).Unlock(h))
			first := relocktest.Receive(t, took1, 5*time.Second, "a waiter to take the lock")
			t.Logf("%s took the lock %v after the release", first.who, first.at.Sub(start).Round(time.Millisecond))
			assert.Less(t, first.at.Sub(start), 2*time.Second+4*delay, "the first take-over")
			time.Sleep(300 * time.Millisecond) // the hold lasts past a confirmation round trip
			start = time.Now()
			release <- struct{}{}
			second := relocktest.Receive(t, took1, 5*time.Second, "the other waiter to take the lock")
			t.Logf("%s took the lock %v after the release was asked", second.who, second.at.Sub(start).Round(time.Millisecond))
			assert.Less(t, second.at.Sub(start), 2*time.Second+6*delay, "the second take-over")
			release <- struct{}{}
			wg.Wait()
			t.Logf("grants landed: %d", lockcore.GrantsLanded()-landed)
			assert.Empty(t, lost.list(), "losses")
		})
	}
}

// TestReview35s8MixedOptions: Clients that share a lock with different
// options: a key prefix against the same name in full, a Client with
// wake-one and grants off, a short watchdog. They take the lock in turns
// (grants across Clients where the options allow, wake-ups elsewhere):
// never two holders, no loss, no waiter left asleep for the bound of a
// registered waiter's retry (2s) while the lock is free.
func TestReview35s8MixedOptions(t *testing.T) {
	name := relocktest.Name(t)
	s8Exclusive(t, name)
	var lost s8Losses
	clients := map[string]*rlock.Client{
		"prefixed": relocktest.Client(t, rlock.WithWakeOne(), rlock.WithKeyPrefix("relock-test:"), lost.handler()),
		"nogrant":  relocktest.Client(t, rlock.WithWakeOne(), rlock.WithoutGrantOnRelease(), lost.handler()),
		"short":    relocktest.Client(t, rlock.WithWakeOne(), rlock.WithWatchdogTimeout(400*time.Millisecond), lost.handler()),
		"plain":    relocktest.Client(t, rlock.WithWakeOne(), lost.handler()),
	}
	nameOf := func(who string) string {
		if who == "prefixed" {
			return strings.TrimPrefix(name, "relock-test:")
		}
		return name
	}
	type took struct {
		who string
		at  time.Time
	}
	took1 := make(chan took, len(clients))
	release := make(chan time.Time)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for who, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ctx := rlock.WithOwner(t.Context(), who)
			l := c.GetLock(nameOf(who))
			for range 2 {
				if err := l.Lock(ctx); err != nil {
					t.Errorf("%s: %v", who, err)
					return
				}
				took1 <- took{who, time.Now()}
				<-release
				if err := l.Unlock(ctx); err != nil {
					t.Errorf("%s's Unlock: %v", who, err)
				}
			}
		}()
	}
	close(start)
	landed := lockcore.GrantsLanded()
	last := relocktest.Receive(t, took1, 5*time.Second, "the first holder")
	for i := 1; i < 2*len(clients); i++ {
		time.Sleep(50 * time.Millisecond)
		asked := time.Now()
		release <- asked
		next := relocktest.Receive(t, took1, 5*time.Second, "the next holder")
		d := next.at.Sub(asked)
		t.Logf("%s -> %s: %v", last.who, next.who, d.Round(time.Millisecond))
		assert.Less(t, d, 2100*time.Millisecond, "%s's take-over after %s's release", next.who, last.who)
		last = next
	}
	release <- time.Now()
	wg.Wait()
	t.Logf("grants across Clients landed: %d", lockcore.GrantsLanded()-landed)
	assert.Empty(t, lost.list(), "losses")
}

// TestReview35s8FixedLeaseConfirmShortens: a grant across Clients counts
// the waiter's fixed lease from its attempt, which came before the grant
// (here 900ms before). With a lease a little over the window (3.2s), the
// rest of the lease the confirmation sets is shorter than the window's
// lease left in Redis: the confirmation cuts the lease. A waiter that
// came after the grant and sleeps until the end of the lease it read (a
// Redisson waiter) is left asleep after the lock's end when the lease is
// cut without a word; a re-entry that shortens a lease publishes '1' on
// the lock's channel for that (lease.lua), and so must the confirmation.
func TestReview35s8FixedLeaseConfirmShortens(t *testing.T) {
	sc := newGrantScene(t, func(l *rlock.Lock, ctx context.Context) error {
		ok, err := l.TryLock(ctx, 10*time.Second, 3200*time.Millisecond)
		assert.True(t, ok)
		return err
	})
	raw, name, holder, waiter, h, got := sc.raw, sc.name, sc.holder, sc.waiter, sc.h, sc.got
	time.Sleep(900 * time.Millisecond) // the attempt's age at the grant (its next comes 1s to 2s after it)
	landed := lockcore.GrantsLanded()
	require.NoError(t, holder.GetLock(name).Unlock(h))
	require.NoError(t, relocktest.Receive(t, got, 5*time.Second, "the waiter to get the lock"))
	relocktest.Eventually(t, time.Second, "the grant to land", func() bool { return lockcore.GrantsLanded() > landed })
	j := redissontest.New(t, relocktest.Raw(t))
	jctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	lateGot := make(chan time.Time, 1)
	go func() {
		if err := j.Lock(name).Lock(jctx, 1, 0); err != nil {
			t.Errorf("the Redisson waiter: %v", err)
		}
		lateGot <- time.Now()
	}()
	var free time.Time
	relocktest.Eventually(t, 5*time.Second, "the granted hold to end", func() bool {
		if s8Holds(t, raw, name, layout.Field(waiter.ID(), "w")) {
			return false
		}
		free = time.Now()
		return true
	})
	at := relocktest.Receive(t, lateGot, 5*time.Second, "the Redisson waiter to get the lock")
	t.Logf("the Redisson waiter took the lock %v after the granted hold ended", at.Sub(free).Round(time.Millisecond))
	assert.Less(t, at.Sub(free), 200*time.Millisecond, "the Redisson waiter slept on after the lock's end")
	require.NoError(t, j.Lock(name).Unlock(t.Context(), 1))
}

// TestReview35s8GrantMessageCut: the grant message to the waiter's
// Client is lost with its connections (a network cut while the message
// was on its way). The granted field is in Redis with the window's lease
// and the waiter sleeps on: its next attempt (within 2s) finds its own
// field and takes it over, so it gets the lock well within the window,
// holds it after (renewed, no loss), and nobody else holds meanwhile.
func TestReview35s8GrantMessageCut(t *testing.T) {
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	s8Exclusive(t, name)
	p, err := relocktest.NewProxy(redistest.Shared(t).Addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	var lost s8Losses
	waiter, err := rlock.NewClient(rueidis.ClientOption{InitAddress: []string{p.Addr()}, DisableCache: true},
		rlock.WithWakeOne(), lost.handler())
	require.NoError(t, err)
	t.Cleanup(func() { _ = waiter.Close() })
	holder := relocktest.Client(t, rlock.WithWakeOne())
	h, w := rlock.WithOwner(t.Context(), "h"), rlock.WithOwner(t.Context(), "w")
	require.NoError(t, holder.GetLock(name).Lock(h))
	got := make(chan error, 1)
	go func() { got <- waiter.GetLock(name).Lock(w) }()
	awaitGrantee(t, raw, name, waiter.ID())
	p.Stall()
	made := lockcore.GrantsMade()
	start := time.Now()
	require.NoError(t, holder.GetLock(name).Unlock(h))
	require.Greater(t, lockcore.GrantsMade(), made, "the release granted the lock")
	field := layout.Field(waiter.ID(), "w")
	require.True(t, s8Holds(t, raw, name, field), "the granted field")
	time.Sleep(20 * time.Millisecond) // the message reaches the proxy
	p.Cut()
	require.NoError(t, relocktest.Receive(t, got, 5*time.Second, "the waiter to get the lock"))
	t.Logf("the waiter took the lock %v after the release", time.Since(start).Round(time.Millisecond))
	assert.Less(t, time.Since(start), 3*time.Second, "the waiter's take-over after the release")
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		require.True(t, s8Holds(t, raw, name, field), "the waiter's hold is in Redis")
	}
	assert.Greater(t, s8PTTL(t, raw, name), 3*time.Second, "the hold's lease is the watchdog's")
	require.NoError(t, waiter.GetLock(name).Unlock(w))
	assert.Empty(t, lost.list(), "losses")
}

// TestReview35s8SharedRueidisSharded: TestReview35SharedRueidisClientFair
// with sharded pub/sub: two Clients built with rlock.New on one rueidis
// client. Client A's goroutines take turns; Client B's waiter must get
// the lock within 3s (a release counts the lock channel's subscribers to
// know whether another Client waits).
func TestReview35s8SharedRueidisSharded(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	if !relocktest.Knows(t, rdb, "spublish") {
		t.Skip("no sharded pub/sub")
	}
	ca, err := rlock.New(rdb, rlock.WithShardedPubSub())
	require.NoError(t, err)
	defer ca.Close()
	cb, err := rlock.New(rdb, rlock.WithShardedPubSub())
	require.NoError(t, err)
	defer cb.Close()
	name := relocktest.Name(t)
	la, lb := ca.GetLock(name), cb.GetLock(name)
	_, stop := takeTurns(t, la, 3, 200)
	defer stop()
	bctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	g0, t0 := lockcore.GrantsMade(), time.Now()
	err = lb.Lock(rlock.WithOwner(bctx, "b"))
	t.Logf("B waited %v; grants meanwhile %d", time.Since(t0), lockcore.GrantsMade()-g0)
	require.NoError(t, err, "Client B's waiter did not get the lock in 3s while Client A's goroutines took turns")
	require.NoError(t, lb.Unlock(rlock.WithOwner(t.Context(), "b")))
}

// TestReview35s8GrantBeforeReply: the waiter's Client is 100ms from Redis
// for commands and replies but hears pub/sub at once. The release comes
// just after the waiter's attempt ran (its entry changed), so the grant
// message arrives while that attempt's reply (refused) is on its way:
// the waiter is awake and not offered. The Client must not leave the
// grant unused for the window: the waiter gets the lock within a few
// round trips, never beside another holder, and keeps it.
func TestReview35s8GrantBeforeReply(t *testing.T) {
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	s8Exclusive(t, name)
	var lost s8Losses
	waiter := relocktest.SlowClient(t, 100*time.Millisecond, nil, rlock.WithWakeOne(), lost.handler())
	holder := relocktest.Client(t, rlock.WithWakeOne())
	h, w := rlock.WithOwner(t.Context(), "h"), rlock.WithOwner(t.Context(), "w")
	{
		require.NoError(t, holder.GetLock(name).Lock(h))
		got := make(chan error, 1)
		go func() { got <- waiter.GetLock(name).Lock(w) }()
		first := awaitGrantee(t, raw, name, waiter.ID())
		for end := time.Now().Add(5 * time.Second); granteeOf(t, raw, name, waiter.ID()) == first; time.Sleep(time.Millisecond) {
			require.True(t, time.Now().Before(end), "the waiter attempted no more")
		}
		start := time.Now()
		returned := lockcore.GrantsReturned()
		require.NoError(t, holder.GetLock(name).Unlock(h))
		require.NoError(t, relocktest.Receive(t, got, 5*time.Second, "the waiter to get the lock"))
		t.Logf("the waiter took the lock %v after the release (grants given back: %d)", time.Since(start).Round(time.Millisecond),
			lockcore.GrantsReturned()-returned)
		assert.Less(t, time.Since(start), time.Second, "the waiter's take-over")
		field := layout.Field(waiter.ID(), "w")
		for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			require.True(t, s8Holds(t, raw, name, field), "the waiter's hold is in Redis")
		}
		require.NoError(t, waiter.GetLock(name).Unlock(w))
	}
	assert.Empty(t, lost.list(), "losses")
}

// TestReview35s8CloseAtGrant: the waiter's Client closes as the release
// that grants its waiter the lock across Clients returns. Close returns;
// the waiter's Lock ends (ErrClosed, or nil when it had the hold first);
// the lock is free within the window (3s) of the grant at the latest,
// and nothing of the closed Client stays in the registry or the
// grantees.
func TestReview35s8CloseAtGrant(t *testing.T) {
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	f := relocktest.NewFaulty(relocktest.Raw(t))
	holder, err := rlock.New(f, rlock.WithWakeOne())
	require.NoError(t, err)
	t.Cleanup(func() { _ = holder.Close() })
	waiter, err := rlock.New(relocktest.Raw(t), rlock.WithWakeOne())
	require.NoError(t, err)
	h := rlock.WithOwner(t.Context(), "h")
	require.NoError(t, holder.GetLock(name).Lock(h))
	got := make(chan error, 1)
	go func() { got <- waiter.GetLock(name).Lock(rlock.WithOwner(t.Context(), "w")) }()
	awaitGrantee(t, raw, name, waiter.ID())
	closed := make(chan error, 1)
	f.Inject(&relocktest.Rule{SHA1s: []string{lua.LockUnlock.SHA1}, N: 1, Run: true, Keep: true, After: func([]string) {
		go func() { closed <- waiter.Close() }()
	}})
	made := lockcore.GrantsMade()
	require.NoError(t, holder.GetLock(name).Unlock(h))
	start := time.Now()
	require.Greater(t, lockcore.GrantsMade(), made, "the release granted the lock")
	require.NoError(t, relocktest.Receive(t, closed, 5*time.Second, "Close to return"))
	err = relocktest.Receive(t, got, 5*time.Second, "the waiter's Lock to end")
	t.Logf("the waiter's Lock: %v", err)
	relocktest.Eventually(t, 4*time.Second, "the lock to be free", func() bool { return s8PTTL(t, raw, name) == -2 })
	t.Logf("the lock was free %v after the grant", time.Since(start).Round(time.Millisecond))
	assert.Less(t, time.Since(start), 3100*time.Millisecond, "the lock's end after the grant")
	assert.False(t, registered(t, raw, name, waiter.ID()), "registered after Close")
	assert.Empty(t, granteeOf(t, raw, name, waiter.ID()), "the grantees entry after Close")
}

// TestReview35s8SameOwnerTwoCalls: two goroutines of one owner wait in
// one Client; a release grants the lock across Clients to the call whose
// attempt came last, and the other call re-enters: both return nil, the
// owner's count in Redis is 2, as the Client counts it, and two Unlocks
// free the lock.
func TestReview35s8SameOwnerTwoCalls(t *testing.T) {
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	holder := relocktest.Client(t, rlock.WithWakeOne())
	var lost s8Losses
	waiter := relocktest.Client(t, rlock.WithWakeOne(), lost.handler())
	h, w := rlock.WithOwner(t.Context(), "h"), rlock.WithOwner(t.Context(), "w")
	require.NoError(t, holder.GetLock(name).Lock(h))
	got := make(chan error, 2)
	for range 2 {
		go func() { got <- waiter.GetLock(name).Lock(w) }()
	}
	awaitGrantee(t, raw, name, waiter.ID())
	awaitRecords(t, raw, waiter, name, 2) // both calls asleep
	landed := lockcore.GrantsLanded()
	require.NoError(t, holder.GetLock(name).Unlock(h))
	for range 2 {
		require.NoError(t, relocktest.Receive(t, got, 3*time.Second, "the owner's calls to return"))
	}
	t.Logf("grants landed: %d", lockcore.GrantsLanded()-landed)
	n, err := waiter.GetLock(name).HoldCount(w)
	require.NoError(t, err)
	assert.Equal(t, 2, n, "the Client's count")
	c, err := raw.Do(t.Context(), raw.B().Hget().Key(name).Field(layout.Field(waiter.ID(), "w")).Build()).AsInt64()
	require.NoError(t, err)
	assert.Equal(t, int64(2), c, "the count in Redis")
	require.NoError(t, waiter.GetLock(name).Unlock(w))
	require.NoError(t, waiter.GetLock(name).Unlock(w))
	assert.Equal(t, time.Duration(-2), s8PTTL(t, raw, name), "the lock is free")
	assert.Empty(t, lost.list(), "losses")
}

// TestReview35s8WatchSeesGrant: a Watch in the granted Client itself (its
// subscription rides the Client's connection, so it does not keep the
// release from granting across Clients) sees the hand-off: the holder's
// release and the waiter's hold, soon after the release, though the
// release published nothing on the lock's channel (the granted Client
// publishes the mark 3 there).
func TestReview35s8WatchSeesGrant(t *testing.T) {
	sc := newGrantScene(t, (*rlock.Lock).Lock)
	name, holder, waiter, h, w, got := sc.name, sc.holder, sc.waiter, sc.h, sc.w, sc.got
	wctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	watch, err := waiter.GetLock(name).Watch(wctx)
	require.NoError(t, err)
	landed := lockcore.GrantsLanded()
	start := time.Now()
	require.NoError(t, holder.GetLock(name).Unlock(h))
	require.NoError(t, relocktest.Receive(t, got, 3*time.Second, "the waiter to get the lock"))
	relocktest.Eventually(t, time.Second, "the grant to land", func() bool { return lockcore.GrantsLanded() > landed })
	seen := map[string]bool{}
	for !seen["released h"] || !seen["acquired w"] {
		ev := relocktest.Receive(t, watch.Events(), 2*time.Second, "the watch's events")
		seen[ev.Type.String()+" "+ev.Owner] = true
	}
	t.Logf("the watch saw the hand-off %v after the release", time.Since(start).Round(time.Millisecond))
	assert.Less(t, time.Since(start), 500*time.Millisecond, "the watch's report of the hand-off")
	require.NoError(t, waiter.GetLock(name).Unlock(w))
}

// TestReview35s8SharedRueidisWakeOne: two Clients with wake-one and
// sharded pub/sub on one rueidis client wait, beside a Client without
// wake-one on its own connection. Registered, the two would count as two
// live registrations and one subscriber of the lock's channel, and the
// release would grant the lock to one of them through the registry,
// passing over the third. They wait unregistered instead: the release
// grants nothing, and wakes every waiter.
func TestReview35s8SharedRueidisWakeOne(t *testing.T) {
	raw := relocktest.Raw(t)
	rdb := redistest.Shared(t).Client(t)
	if !relocktest.Knows(t, rdb, "spublish") {
		t.Skip("no sharded pub/sub")
	}
	name := relocktest.Name(t)
	s8Exclusive(t, name)
	x, err := rlock.New(rdb, rlock.WithShardedPubSub(), rlock.WithWakeOne())
	require.NoError(t, err)
	defer x.Close()
	y, err := rlock.New(rdb, rlock.WithShardedPubSub(), rlock.WithWakeOne())
	require.NoError(t, err)
	defer y.Close()
	h := relocktest.Client(t, rlock.WithShardedPubSub(), rlock.WithWakeOne())
	z := relocktest.Client(t, rlock.WithShardedPubSub())
	ho := rlock.WithOwner(t.Context(), "h")
	require.NoError(t, h.GetLock(name).Lock(ho))
	got := make(chan string, 3)
	var wg sync.WaitGroup
	defer wg.Wait()
	for who, c := range map[string]*rlock.Client{"x": x, "y": y, "z": z} {
		wg.Go(func() {
			ctx := rlock.WithOwner(t.Context(), who)
			if err := c.GetLock(name).Lock(ctx); err != nil {
				t.Errorf("%s: %v", who, err)
				return
			}
			got <- who
			time.Sleep(10 * time.Millisecond)
			if err := c.GetLock(name).Unlock(ctx); err != nil {
				t.Errorf("%s's Unlock: %v", who, err)
			}
		})
	}
	ch := layout.Channel(name)
	relocktest.Eventually(t, 5*time.Second, "the waiters to subscribe", func() bool {
		n, err := raw.Do(t.Context(), raw.B().PubsubShardnumsub().Channel(ch).Build()).ToArray()
		if err != nil || len(n) < 2 {
			return false
		}
		c, _ := n[1].AsInt64()
		return c == 2 // the shared connection and z's
	})
	time.Sleep(100 * time.Millisecond) // every waiter asleep
	made := lockcore.GrantsMade()
	require.NoError(t, h.GetLock(name).Unlock(ho))
	assert.Zero(t, lockcore.GrantsMade()-made, "grants made past z's waiter")
	for range 3 {
		t.Logf("%s took the lock", relocktest.Receive(t, got, 5*time.Second, "the waiters to take the lock in turn"))
	}
}

// TestReview35s8ReplicasNoRemoteGrant: on a server with a replica, a
// Client that counts the replicas (the default) waits for them at each
// acquisition, and a grant across Clients is confirmed on none: its
// waiter records no grantees entry, so no release grants it the lock
// through the registry; the release wakes it, and its own attempt (with
// WAIT) takes the lock at once. A Client without replica sync beside it
// (WithoutReplicaSync) is granted as usual.
func TestReview35s8ReplicasNoRemoteGrant(t *testing.T) {
	master := redistest.Start(t, "--repl-diskless-sync-delay", "0")
	startReplica(t, master)
	raw := master.Client(t)
	holder := relocktest.ClientOn(t, master, rlock.WithWakeOne())
	counted := relocktest.ClientOn(t, master, rlock.WithWakeOne())
	unsynced := relocktest.ClientOn(t, master, rlock.WithWakeOne(), rlock.WithoutReplicaSync())
	h, w := rlock.WithOwner(t.Context(), "h"), rlock.WithOwner(t.Context(), "w")
	for i, c := range []*rlock.Client{counted, unsynced} {
		// A name each: a Client stays registered a while after its waiter.
		name := "review35s8:replicas:" + strconv.Itoa(i)
		require.NoError(t, holder.GetLock(name).Lock(h))
		got := make(chan error, 1)
		go func() { got <- c.GetLock(name).Lock(w) }()
		relocktest.Eventually(t, 5*time.Second, "the waiter to register", func() bool { return registered(t, raw, name, c.ID()) })
		time.Sleep(50 * time.Millisecond) // asleep
		entry := granteeOf(t, raw, name, c.ID())
		made := lockcore.GrantsMade()
		start := time.Now()
		require.NoError(t, holder.GetLock(name).Unlock(h))
		require.NoError(t, relocktest.Receive(t, got, 3*time.Second, "the waiter to get the lock"))
		assert.Less(t, time.Since(start), 500*time.Millisecond, "the waiter's take-over")
		if c == counted {
			assert.Empty(t, entry, "the grantees entry of a Client that waits for replicas")
			assert.Equal(t, made, lockcore.GrantsMade(), "grants to a Client that waits for replicas")
		} else {
			assert.NotEmpty(t, entry, "the grantees entry of a Client without replica sync")
			assert.Greater(t, lockcore.GrantsMade(), made, "grants to a Client without replica sync")
		}
		require.NoError(t, c.GetLock(name).Unlock(w))
	}
}

// TestReview35s8FixedLeaseBesideWatched: a waiter on a fixed lease
// (500ms, never released: its hold ends by its lease, silently) and a
// waiter on the watchdog's lease, of two Clients, wait for a third's
// lock. Whichever the release grants it to, the other gets the lock:
// after the fixed lease's end within a registered waiter's retry bound
// (2s), or at the watched hold's Unlock; never two holders.
func TestReview35s8FixedLeaseBesideWatched(t *testing.T) {
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	s8Exclusive(t, name)
	holder := relocktest.Client(t, rlock.WithWakeOne())
	fc := relocktest.Client(t, rlock.WithWakeOne())
	lc := relocktest.Client(t, rlock.WithWakeOne())
	h, fo, lo := rlock.WithOwner(t.Context(), "h"), rlock.WithOwner(t.Context(), "f"), rlock.WithOwner(t.Context(), "l")
	require.NoError(t, holder.GetLock(name).Lock(h))
	type took struct {
		who string
		at  time.Time
	}
	got := make(chan took, 2)
	go func() {
		ok, err := fc.GetLock(name).TryLock(fo, 10*time.Second, 500*time.Millisecond)
		assert.NoError(t, err)
		assert.True(t, ok)
		got <- took{"f", time.Now()}
	}()
	go func() {
		assert.NoError(t, lc.GetLock(name).Lock(lo))
		got <- took{"l", time.Now()}
	}()
	awaitGrantee(t, raw, name, fc.ID())
	awaitGrantee(t, raw, name, lc.ID())
	require.NoError(t, holder.GetLock(name).Unlock(h))
	first := relocktest.Receive(t, got, 3*time.Second, "a waiter to get the lock")
	if first.who == "l" {
		time.Sleep(100 * time.Millisecond)
		start := time.Now()
		require.NoError(t, lc.GetLock(name).Unlock(lo))
		second := relocktest.Receive(t, got, 3*time.Second, "the fixed-lease waiter to get the lock")
		assert.Less(t, second.at.Sub(start), 500*time.Millisecond, "the fixed-lease waiter's take-over")
		return
	}
	var free time.Time
	relocktest.Eventually(t, 3*time.Second, "the fixed lease to end", func() bool {
		if s8Holds(t, raw, name, layout.Field(fc.ID(), "f")) {
			return false
		}
		free = time.Now()
		return true
	})
	second := relocktest.Receive(t, got, 5*time.Second, "the watched waiter to get the lock")
	t.Logf("the watched waiter took the lock %v after the fixed lease's end", second.at.Sub(free).Round(time.Millisecond))
	assert.Less(t, second.at.Sub(free), 2100*time.Millisecond, "the watched waiter's take-over")
	require.NoError(t, lc.GetLock(name).Unlock(lo))
}

// TestReview35s8GrantNotPastFairQueue: a plain acquisition is refused
// while a fair lock's queue is beside the lock (ErrWrongKind: it would
// take the lock past the queue, and its release would not wake the
// queue's head). A waiter of the plain lock that began before the queue
// did must not get the lock by a grant, at a release, past that queue,
// whether the grant is across Clients or to the releasing Client's own
// waiter: the release publishes, the fair waiter gets the lock, and the
// plain waiter's attempt is refused as any other (or, made once the fair
// waiter left the queue for the lock, waits for it).
func TestReview35s8GrantNotPastFairQueue(t *testing.T) {
	for _, remote := range []bool{true, false} {
		t.Run(map[bool]string{true: "across Clients", false: "own waiter"}[remote], func(t *testing.T) {
			raw := relocktest.Raw(t)
			name := relocktest.Name(t)
			holder := relocktest.Client(t, rlock.WithWakeOne())
			waiter := holder
			if remote {
				waiter = relocktest.Client(t, rlock.WithWakeOne())
			}
			fair := relocktest.Client(t)
			h, w, f := rlock.WithOwner(t.Context(), "h"), rlock.WithOwner(t.Context(), "w"), rlock.WithOwner(t.Context(), "f")
			require.NoError(t, holder.GetLock(name).Lock(h))
			got := make(chan error, 1)
			go func() { got <- waiter.GetLock(name).Lock(w) }()
			if remote {
				awaitGrantee(t, raw, name, waiter.ID())
			} else {
				time.Sleep(100 * time.Millisecond) // asleep, offered
			}
			fairGot := make(chan error, 1)
			go func() { fairGot <- fair.GetFairLock(name).Lock(f) }()
			relocktest.Eventually(t, 5*time.Second, "the fair waiter to queue", func() bool {
				n, err := raw.Do(t.Context(), raw.B().Llen().Key(layout.Queue(name)).Build()).AsInt64()
				return err == nil && n == 1
			})
			made := lockcore.GrantsMade()
			require.NoError(t, holder.GetLock(name).Unlock(h))
			assert.Equal(t, made, lockcore.GrantsMade(), "grants made past the fair queue")
			require.NoError(t, relocktest.Receive(t, fairGot, 3*time.Second, "the fair waiter to get the lock"))
			// The plain waiter was refused (it tried while the queue
			// was there), or waits on (it tried once the fair waiter
			// had left the queue for the lock) and gets the lock next.
			select {
			case err := <-got:
				require.ErrorIs(t, err, rlock.ErrWrongKind, "the plain waiter's Lock")
				require.NoError(t, fair.GetFairLock(name).Unlock(f))
			case <-time.After(100 * time.Millisecond):
				require.NoError(t, fair.GetFairLock(name).Unlock(f))
				require.NoError(t, relocktest.Receive(t, got, 3*time.Second, "the plain waiter to get the lock"))
				require.NoError(t, waiter.GetLock(name).Unlock(w))
			}
		})
	}
}
