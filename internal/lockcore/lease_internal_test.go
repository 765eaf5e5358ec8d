package lockcore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/observe"
)

// These tests run on the model of wait_internal_test.go: its scripts run
// the moment they are sent, so a lease counted from the send ends in the
// model at the very moment the Client's timer fires.

// lossLog records the lost handler's calls.
type lossLog struct {
	mu     sync.Mutex
	causes []error
}

func (l *lossLog) handler(_, _ string, cause error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.causes = append(l.causes, cause)
}

func (l *lossLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.causes)
}

// recordOf returns the Client's record of owner's hold on name.
func recordOf(c *Core, name, owner string) *hold {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.holds[holdKey{name, "", owner, false}]
}

// endedAt waits for life to end and checks that it ended at want (from
// the bubble's clock) with a cause that says the fixed lease of lease
// ran out.
func endedAt(t *testing.T, life context.Context, start time.Time, want, lease time.Duration) {
	t.Helper()
	waitEnd(t, life)
	if d := time.Since(start); d != want {
		t.Errorf("the hold's life ended %v after the start, want %v", d, want)
	}
	cause := context.Cause(life)
	if why := ranOut(lease); !errors.Is(cause, relock.ErrLockLost) || !strings.Contains(cause.Error(), why) {
		t.Errorf("the hold's life ended with %v, want relock.ErrLockLost saying %q", cause, why)
	}
}

// waitEnd waits for life to end, for an hour of the bubble's time at most,
// then for the bubble's other goroutines to block: a loss ends the hold's
// life first and tells the lost handler after, on its own goroutine.
func waitEnd(t *testing.T, life context.Context) {
	t.Helper()
	select {
	case <-life.Done():
	case <-time.After(time.Hour):
		t.Fatal("the hold's life has not ended after an hour")
	}
	synctest.Wait()
}

// ranOut is how the cause of a hold's end at its fixed lease says it.
func ranOut(lease time.Duration) string { return fmt.Sprintf("its fixed lease of %v ran out", lease) }

// live checks that life has not ended.
func live(t *testing.T, life context.Context, when string) {
	t.Helper()
	select {
	case <-life.Done():
		t.Errorf("%s: the hold's life ended: %v", when, context.Cause(life))
	default:
	}
}

// TestModelFixedLeaseEndsWatchedHold: a watched hold on a fixed lease ends
// when its lease ends, counted from the acquisition's send, as lost (the
// lost handler hears of it once); the release after says so, once. A hold
// nobody watches has no timer: its end is found at its owner's next call.
func TestModelFixedLeaseEndsWatchedHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newModel()
		c := modelCore(t, m, 30*time.Second)
		var lost lossLog
		c.onLost = lost.handler
		l := NewMutex(c, "x", m)
		a := WithOwner(t.Context(), "a")
		start := time.Now()
		if err := l.LockLease(a, time.Second); err != nil {
			t.Fatal(err)
		}
		life := l.HoldContext(a)
		endedAt(t, life, start, time.Second, time.Second)
		if n := lost.count(); n != 1 {
			t.Errorf("the lost handler was called %d times, want 1", n)
		}
		err := l.Unlock(a)
		if why := ranOut(time.Second); !errors.Is(err, relock.ErrNotHeld) || !errors.Is(err, relock.ErrLockLost) ||
			!strings.Contains(err.Error(), why) {
			t.Errorf("Unlock after the lease ran out = %v, want relock.ErrNotHeld and relock.ErrLockLost saying %q", err, why)
		}
		if err := l.Unlock(a); !errors.Is(err, relock.ErrNotHeld) || errors.Is(err, relock.ErrLockLost) {
			t.Errorf("a second Unlock = %v, want relock.ErrNotHeld alone", err)
		}

		// Not watched: no timer, found at the release.
		y := NewMutex(c, "y", m)
		if err := y.LockLease(a, time.Second); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		if n := c.lookupHold("y", "", "a"); n != 1 {
			t.Errorf("an unwatched hold has %d levels after its lease, want 1 (found at the next call)", n)
		}
		err = y.Unlock(a)
		if !errors.Is(err, relock.ErrLockLost) || !strings.Contains(err.Error(), "its release found it gone: its fixed lease of 1s had run out") {
			t.Errorf("Unlock of an unwatched hold after its lease = %v, want a loss found by the release", err)
		}
		if n := lost.count(); n != 2 {
			t.Errorf("the lost handler was called %d times in all, want 2", n)
		}
	})
}

// TestModelFixedLeaseMovedByReentry: a re-entry with a fixed lease, and a
// partial release, reset the lease and so move the end of the hold's life;
// a re-entry on the watchdog lease puts the hold on the watchdog, which
// keeps it.
func TestModelFixedLeaseMovedByReentry(t *testing.T) {
	bubble(t, "re-entry", func(t *testing.T, m *model, c *Core, a context.Context) {
		l := NewMutex(c, "reenter", m)
		start := time.Now()
		if err := l.LockLease(a, time.Second); err != nil {
			t.Fatal(err)
		}
		life := l.HoldContext(a)
		time.Sleep(800 * time.Millisecond)
		if err := l.LockLease(a, time.Second); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
		live(t, life, "past the first lease")
		endedAt(t, life, start, 1800*time.Millisecond, time.Second)
	})
	bubble(t, "shorter re-entry", func(t *testing.T, m *model, c *Core, a context.Context) {
		l := NewMutex(c, "shorter", m)
		start := time.Now()
		if err := l.LockLease(a, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		life := l.HoldContext(a)
		time.Sleep(time.Second)
		if err := l.LockLease(a, time.Second); err != nil {
			t.Fatal(err)
		}
		endedAt(t, life, start, 2*time.Second, time.Second)
	})
	bubble(t, "partial release", func(t *testing.T, m *model, c *Core, a context.Context) {
		l := NewMutex(c, "partial", m)
		start := time.Now()
		for range 2 {
			if err := l.LockLease(a, time.Second); err != nil {
				t.Fatal(err)
			}
		}
		life := l.HoldContext(a)
		time.Sleep(800 * time.Millisecond)
		if err := l.Unlock(a); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
		live(t, life, "past the lease before the partial release")
		endedAt(t, life, start, 1800*time.Millisecond, time.Second)
	})
	bubble(t, "watchdog re-entry", func(t *testing.T, m *model, c *Core, a context.Context) {
		l := NewMutex(c, "watchdog", m)
		if err := l.LockLease(a, time.Second); err != nil {
			t.Fatal(err)
		}
		life := l.HoldContext(a)
		time.Sleep(500 * time.Millisecond)
		if err := l.Lock(a); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Minute) // renewed all along
		live(t, life, "on the watchdog")
		for range 2 {
			if err := l.Unlock(a); err != nil {
				t.Fatal(err)
			}
		}
		waitEnd(t, life)
		if cause := context.Cause(life); !errors.Is(cause, context.Canceled) {
			t.Errorf("released: the life ended with %v, want context.Canceled", cause)
		}
	})
}

// TestModelLeaseTimerRacesReentry: the lease's timer fires while a
// re-entry is in flight, which the model ran before the lease ended but
// whose reply comes after: the hold ends at its lease all the same (the
// Client cannot know that Redis kept it), and the re-entry, finding its
// hold ended, takes the lock anew, in line with Redis. The same race with
// a partial release: the level it kept in Redis (with its lease reset) is
// taken back. A timer run that lost the race to a re-entry that moved the
// end leaves the hold alone.
func TestModelLeaseTimerRacesReentry(t *testing.T) {
	bubble(t, "reply after the timer", func(t *testing.T, m *model, c *Core, a context.Context) {
		var lost lossLog
		c.onLost = lost.handler
		l := NewMutex(c, "late", m)
		start := time.Now()
		if err := l.LockLease(a, time.Second); err != nil {
			t.Fatal(err)
		}
		life := l.HoldContext(a)
		time.Sleep(900 * time.Millisecond)
		m.reentered = func() { time.Sleep(300 * time.Millisecond) }
		done := make(chan error, 1)
		go func() { done <- l.LockLease(a, time.Second) }()
		endedAt(t, life, start, time.Second, time.Second)
		if err := <-done; err != nil {
			t.Fatalf("the re-entry whose hold ended meanwhile: %v", err)
		}
		m.reentered = nil
		if n := c.lookupHold("late", "", "a"); n != 1 {
			t.Errorf("the Client counts %d levels after the re-entry took the lock anew, want 1", n)
		}
		m.mu.Lock()
		count := m.lock("late").fields[l.Field("a")]
		m.mu.Unlock()
		if count != 1 {
			t.Errorf("the model counts %d levels, want 1", count)
		}
		if n := lost.count(); n != 1 {
			t.Errorf("the lost handler was called %d times, want 1", n)
		}
		next := l.HoldContext(a)
		live(t, next, "the new hold")
		if err := l.Unlock(a); err != nil {
			t.Fatal(err)
		}
		m.mu.Lock()
		left := m.lock("late")
		m.mu.Unlock()
		if left != nil {
			t.Errorf("the lock is still in the model after the release: %v", left.fields)
		}
	})
	bubble(t, "partial release's reply after the timer", func(t *testing.T, m *model, c *Core, a context.Context) {
		var lost lossLog
		c.onLost = lost.handler
		l := NewMutex(c, "partial", m)
		start := time.Now()
		for range 2 {
			if err := l.LockLease(a, time.Second); err != nil {
				t.Fatal(err)
			}
		}
		life := l.HoldContext(a)
		time.Sleep(900 * time.Millisecond)
		m.released = func() {
			m.released = nil // the settle's release answers at once
			time.Sleep(300 * time.Millisecond)
		}
		done := make(chan error, 1)
		go func() { done <- l.Unlock(a) }()
		endedAt(t, life, start, time.Second, time.Second)
		if err := <-done; err != nil {
			t.Errorf("the partial release: %v", err)
		}
		// The release kept a level in the model and reset its lease to
		// 1.9s; the Client, whose hold ended, takes it back at once.
		time.Sleep(100 * time.Millisecond)
		m.mu.Lock()
		left := m.lock("partial")
		m.mu.Unlock()
		if left != nil {
			t.Errorf("the level the release kept is still in the model at %v: %v", time.Since(start), left.fields)
		}
		if n := lost.count(); n != 1 {
			t.Errorf("the lost handler was called %d times, want 1", n)
		}
	})
	bubble(t, "timer run after the re-entry", func(t *testing.T, m *model, c *Core, a context.Context) {
		var lost lossLog
		c.onLost = lost.handler
		l := NewMutex(c, "early", m)
		start := time.Now()
		if err := l.LockLease(a, time.Second); err != nil {
			t.Fatal(err)
		}
		life := l.HoldContext(a)
		time.Sleep(900 * time.Millisecond)
		if err := l.LockLease(a, time.Second); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		recordOf(c, "early", "a").leaseRanOut() // as a run that waited for c.mu meanwhile
		live(t, life, "after a timer run that lost the race")
		endedAt(t, life, start, 1900*time.Millisecond, time.Second)
	})
}

// bubble runs test t's subtest name in a synctest bubble of its own, on a
// model with a Core on a 30s watchdog lease; a carries owner "a".
func bubble(t *testing.T, name string, fn func(t *testing.T, m *model, c *Core, a context.Context)) {
	t.Run(name, func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := newModel()
			fn(t, m, modelCore(t, m, 30*time.Second), WithOwner(t.Context(), "a"))
		})
	})
}

// modelListener is what listenHook returns: a listener that hears what the
// test says it heard.
type modelListener struct{ modelWaiter }

// TestModelLossCauseSaysWhatWasHeard: a hold's loss says what the Client
// saw. A message on the lock's channel that was no force-unlock (a
// re-entry that shortened the lease publishes one) brings a renewal
// forward that finds the hold there: a later deletion, found by the next
// renewal, is not reported as a force-unlock. A message heard once the
// hold is gone is.
func TestModelLossCauseSaysWhatWasHeard(t *testing.T) {
	setup := func(t *testing.T, m *model, c *Core) func(l *Mutex) {
		var mu sync.Mutex
		heard := make(map[string]func())
		c.listenHook = func(channel string, fn func()) (waiter, error) {
			mu.Lock()
			defer mu.Unlock()
			heard[channel] = fn
			return &modelListener{modelWaiter{h: m.hub, ch: channel, wake: make(chan struct{}, 1)}}, nil
		}
		hear := func(l *Mutex) {
			mu.Lock()
			fn := heard[l.channel]
			mu.Unlock()
			if fn == nil {
				t.Fatalf("no listener on %s", l.channel)
			}
			fn()
		}
		return hear
	}
	gone := func(m *model, name string) {
		m.mu.Lock()
		delete(m.locks, name)
		m.mu.Unlock()
	}

	bubble(t, "deleted after a message", func(t *testing.T, m *model, c *Core, a context.Context) {
		hear := setup(t, m, c)
		l := NewMutex(c, "deleted", m)
		if err := l.Lock(a); err != nil {
			t.Fatal(err)
		}
		life := l.HoldContext(a)
		hear(l)                            // a message that was no force-unlock
		time.Sleep(100 * time.Millisecond) // its renewal ran and found the hold
		start := time.Now()
		gone(m, "deleted")
		waitEnd(t, life)
		if d := time.Since(start); d < 9*time.Second {
			t.Errorf("the loss was found %v after the deletion, want at the next renewal", d)
		}
		cause := context.Cause(life).Error()
		if !strings.Contains(cause, "its renewal found it gone") || strings.Contains(cause, "force-unlocked:") {
			t.Errorf("a deletion found by a renewal is reported as %q", cause)
		}
	})
	bubble(t, "force-unlocked, heard", func(t *testing.T, m *model, c *Core, a context.Context) {
		hear := setup(t, m, c)
		l := NewMutex(c, "forced", m)
		if err := l.Lock(a); err != nil {
			t.Fatal(err)
		}
		life := l.HoldContext(a)
		start := time.Now()
		gone(m, "forced")
		hear(l)
		waitEnd(t, life)
		if d := time.Since(start); d > time.Second {
			t.Errorf("the loss was found %v after the message, want at once", d)
		}
		if cause := context.Cause(life).Error(); !strings.Contains(cause, "it was force-unlocked: a message on its channel was heard") {
			t.Errorf("a hold gone after a message is reported as %q", cause)
		}
	})
}

// holdEnds is an observer that counts the ends of holds, by outcome.
type holdEnds struct {
	observe.Base
	mu   sync.Mutex
	ends map[observe.Outcome]int
}

func (o *holdEnds) HoldEnd(h observe.Hold) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ends[h.Outcome]++
}

// TestModelFixedLeaseAfterClose: Close ends a watched hold on a fixed
// lease; its lease's end, later, reports nothing more.
func TestModelFixedLeaseAfterClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newModel()
		obs := &holdEnds{ends: make(map[observe.Outcome]int)}
		var lost lossLog
		c, err := NewCore(Config{RDB: noRedis{}, Observer: obs, OnLost: lost.handler})
		if err != nil {
			t.Fatal(err)
		}
		c.subscribeHook = m.hub.subscribe
		c.renewHook = m.renew
		c.waits.off = true
		l := NewMutex(c, "x", m)
		a := WithOwner(t.Context(), "a")
		if err := l.LockLease(a, time.Second); err != nil {
			t.Fatal(err)
		}
		life := l.HoldContext(a)
		time.Sleep(500 * time.Millisecond)
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		waitEnd(t, life)
		if cause := context.Cause(life); !errors.Is(cause, relock.ErrClosed) {
			t.Errorf("the life ended with %v, want relock.ErrClosed", cause)
		}
		time.Sleep(2 * time.Second)
		obs.mu.Lock()
		ends := maps.Clone(obs.ends)
		obs.mu.Unlock()
		if want := map[observe.Outcome]int{observe.OutcomeClosed: 1}; !maps.Equal(ends, want) {
			t.Errorf("the observer was told of ends %v, want %v", ends, want)
		}
		if n := lost.count(); n != 0 {
			t.Errorf("the lost handler was called %d times after Close", n)
		}
	})
}

// TestModelLapsedLeaseWatchedLate: a hold on a fixed lease that nobody
// watched until its lease had run out (so it had no timer) ends as lost
// before HoldContext returns its life: the life is already over, the
// lost handler has been told, and the owner's next Lock takes the lock
// anew, counting none of the lost hold's levels. (A life handed out live
// and ended by a timer a moment later let a caller that sampled it count
// the lost levels as held, after the loss was reported.)
func TestModelLapsedLeaseWatchedLate(t *testing.T) {
	bubble(t, "lapsed", func(t *testing.T, m *model, c *Core, a context.Context) {
		var lost lossLog
		c.onLost = lost.handler
		l := NewMutex(c, "lapsed", m)
		if err := l.Lock(a); err != nil {
			t.Fatal(err)
		}
		if err := l.LockLease(a, 400*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		life := l.HoldContext(a)
		if cause := context.Cause(life); !errors.Is(cause, relock.ErrLockLost) || !strings.Contains(cause.Error(), ranOut(400*time.Millisecond)) {
			t.Errorf("HoldContext after the fixed lease ran out returned a life with cause %v, want one ended with relock.ErrLockLost saying %q",
				cause, ranOut(400*time.Millisecond))
		}
		if n := lost.count(); n != 1 {
			t.Errorf("the lost handler was called %d times when HoldContext returned, want 1", n)
		}
		if n := c.lookupHold("lapsed", "", "a"); n != 0 {
			t.Errorf("the Client counts %d levels of the lapsed hold, want 0", n)
		}
		if err := l.Lock(a); err != nil {
			t.Fatal(err)
		}
		m.mu.Lock()
		count := m.lock("lapsed").fields[l.Field("a")]
		m.mu.Unlock()
		if n := c.lookupHold("lapsed", "", "a"); n != 1 || count != 1 {
			t.Errorf("after a new Lock the Client counts %d levels and the model %d, want 1 and 1", n, count)
		}
		if err := l.Unlock(a); err != nil {
			t.Fatal(err)
		}
		if n := lost.count(); n != 1 {
			t.Errorf("the lost handler was called %d times in all, want 1", n)
		}
	})
}
