package rlock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/lockcore"
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

// s8Registered waits for the waiter Client id to be registered with its
// grantees entry for name, and returns the entry.
func s8Registered(t *testing.T, raw rueidis.Client, name, id string) string {
	t.Helper()
	var e string
	relocktest.Eventually(t, 5*time.Second, "the waiter to register with its grantee entry", func() bool {
		e = granteeOf(t, raw, name, id)
		return e != ""
	})
	return e
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
		entry := s8Registered(t, raw, name, waiter.ID())
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
	entry := s8Registered(t, raw, name, waiter.ID())
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
	for {
		select {
		case <-r.hold.Done():
			require.True(t, s8Holds(t, raw, name, field), "the Client's end of the hold came after Redis's")
			relocktest.Eventually(t, 2*time.Second, "the lock to expire", func() bool { return s8PTTL(t, raw, name) == -2 })
			relocktest.Eventually(t, time.Second, "the loss to be told", func() bool { return len(lost.list()) == 1 })
			assert.Contains(t, lost.list()[0], "fixed lease", "the loss's cause")
			return
		case <-time.After(50 * time.Millisecond):
		}
		left := s8PTTL(t, raw, name)
		require.LessOrEqual(t, left, last+5*time.Millisecond, "the fixed lease was renewed")
		last = left
	}
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
		entry := s8Registered(t, raw, name, waiter.ID())
		require.Contains(t, entry, "r 800 ", "the entry's window")
		start := time.Now()
		require.NoError(t, holder.GetLock(name).Unlock(h))
		r := relocktest.Receive(t, got, 5*time.Second, "the waiter to get the lock")
		require.NoError(t, r.err)
		field := layout.Field(waiter.ID(), "w")
		select {
		case <-r.hold.Done():
			require.True(t, s8Holds(t, raw, name, field), "the Client's end of the hold came after Redis's")
		case <-time.After(2 * time.Second):
			t.Fatal("the hold did not end with its lease")
		}
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
		t.Run(map[bool]string{false: "waiter of a", true: "waiter of {a}"}[braced], func(t *testing.T) {
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
			first := s8Registered(t, raw, mine, waiter.ID())
			// Just after a fresh attempt: the waiter sleeps 1s to 2s.
			relocktest.Eventually(t, 5*time.Second, "the waiter's next attempt", func() bool {
				return granteeOf(t, raw, mine, waiter.ID()) != first
			})
			require.NoError(t, raw.Do(t.Context(), raw.B().Del().Key(mine).Build()).Error())
			require.NoError(t, holder.GetLock(other).Lock(h))
			made := lockcore.GrantsMade()
			require.NoError(t, holder.GetLock(other).Unlock(h))
			assert.Zero(t, lockcore.GrantsMade()-made, "grants made by the release of %q", other)
			field := layout.Field(waiter.ID(), "w")
			require.NoError(t, relocktest.Receive(t, got, 3*time.Second, "the waiter to get the lock"))
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
			entry := s8Registered(t, raw, name, waiter.ID())
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
