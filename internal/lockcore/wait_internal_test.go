package lockcore

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/relock-go/relock"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/watchdog"
)

// These tests run the wait loop and the hold lifecycle on a model of
// Redis (a Kind that keeps the locks in memory) and a model of the pub/sub
// hub, inside a synctest bubble: time moves only when every goroutine is
// blocked, so 30-second leases take no time and no test depends on the
// machine's speed.

// model is an in-memory Redis for the reentrant lock's scripts.
type model struct {
	mu    sync.Mutex
	locks map[string]*modelLock
	hub   *modelHub
	// fail, when not empty, is the error the next acquire scripts answer
	// with (the script does not run).
	fail []error
	// attempts counts the acquire and re-enter scripts that reached the
	// model.
	attempts int
	// latency, when set, is how long an acquire, re-enter or release
	// script takes to reach the model, and its reply to come back (a
	// network between Client and server). A context that ends on the way there keeps the
	// script from running; one that ends on the way back loses its reply.
	latency time.Duration
	// reentered and released, when set, are called (without mu) by a
	// re-enter script and by a release script after it ran and before it
	// answers.
	reentered, released func()
}

type modelLock struct {
	fields  map[string]int
	expires time.Time
}

func newModel() *model {
	return &model{locks: make(map[string]*modelLock), hub: &modelHub{chans: make(map[string][]*modelWaiter)}}
}

// lock returns the live lock name, forgetting it once its lease ended.
func (m *model) lock(name string) *modelLock {
	l := m.locks[name]
	if l != nil && !time.Now().Before(l.expires) {
		delete(m.locks, name)
		return nil
	}
	return l
}

func (m *model) failure() error {
	if len(m.fail) == 0 {
		return nil
	}
	err := m.fail[0]
	m.fail = m.fail[1:]
	return err
}

func lease(r Request) time.Duration { return time.Duration(r.LeaseMs) * time.Millisecond }

// travel is one way of a script's round trip (see model.latency).
func (m *model) travel(ctx context.Context) error {
	m.mu.Lock()
	d := m.latency
	m.mu.Unlock()
	if d == 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (m *model) Acquire(ctx context.Context, r Request) (Attempt, error) {
	if err := m.travel(ctx); err != nil {
		return Attempt{}, err
	}
	at, err := m.acquire(r)
	if err := m.travel(ctx); err != nil {
		return Attempt{}, err
	}
	return at, err
}

func (m *model) acquire(r Request) (Attempt, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.attempts++
	if err := m.failure(); err != nil {
		return Attempt{}, err
	}
	l := m.lock(r.Name)
	if l == nil {
		l = &modelLock{fields: make(map[string]int)}
		m.locks[r.Name] = l
	} else if _, ok := l.fields[r.Field]; !ok {
		return Attempt{Retry: time.Until(l.expires) + time.Millisecond}, nil
	}
	l.fields[r.Field] = 1
	l.expires = time.Now().Add(lease(r))
	return Attempt{Acquired: true}, nil
}

func (m *model) Reenter(ctx context.Context, r Request) (Attempt, error) {
	if err := m.travel(ctx); err != nil {
		return Attempt{}, err
	}
	at, err := m.reenter(r)
	if m.reentered != nil {
		m.reentered()
	}
	if err := m.travel(ctx); err != nil {
		return Attempt{}, err
	}
	return at, err
}

func (m *model) reenter(r Request) (Attempt, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.attempts++
	if err := m.failure(); err != nil {
		return Attempt{}, err
	}
	l := m.lock(r.Name)
	if l == nil || l.fields[r.Field] == 0 {
		return Attempt{}, nil
	}
	l.fields[r.Field] = r.Target
	l.expires = time.Now().Add(lease(r))
	return Attempt{Acquired: true}, nil
}

func (m *model) Release(ctx context.Context, r Request) (int64, error) {
	if err := m.travel(ctx); err != nil {
		return 0, err
	}
	n, err := m.release(r)
	if m.released != nil {
		m.released()
	}
	if err := m.travel(ctx); err != nil {
		return 0, err
	}
	return n, err
}

func (m *model) release(r Request) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.lock(r.Name)
	if l == nil || l.fields[r.Field] == 0 {
		return -1, nil
	}
	if r.Target <= 0 {
		delete(l.fields, r.Field)
		if len(l.fields) == 0 {
			delete(m.locks, r.Name)
			m.hub.publish("ch:" + r.Name)
		}
		return 0, nil
	}
	l.fields[r.Field] = min(l.fields[r.Field], r.Target)
	l.expires = time.Now().Add(lease(r))
	return int64(l.fields[r.Field]), nil
}

func (m *model) ForceRelease(_ context.Context, _ *Core, name string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lock(name) == nil {
		return false, nil
	}
	delete(m.locks, name)
	m.hub.publish("ch:" + name)
	return true, nil
}

func (m *model) Abandon(context.Context, Request) error { return nil }

func (m *model) WaitChannel(r Request) string { return "ch:" + r.Name }

// renew is the model's renewal script, for the watchdog.
func (m *model) renew(_ context.Context, leases []*watchdog.Lease) []error {
	m.mu.Lock()
	defer m.mu.Unlock()
	errs := make([]error, len(leases))
	for i, wl := range leases {
		h := wl.Value().(*renewal).h
		l := m.lock(h.key.name)
		if l == nil || l.fields[h.field] == 0 {
			errs[i] = watchdog.ErrNotHeld
			continue
		}
		l.expires = time.Now().Add(wl.Duration())
	}
	return errs
}

// holder puts a hold of field on name straight into the model, as another
// process would (it never publishes).
func (m *model) holder(name, field string, lease time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.locks[name] = &modelLock{fields: map[string]int{field: 1}, expires: time.Now().Add(lease)}
}

// modelHub wakes one waiter per message, in arrival order, as the real hub
// does. With stall set, Subscribe waits until its context ends.
type modelHub struct {
	mu    sync.Mutex
	chans map[string][]*modelWaiter
	stall bool
	// confirmAfter is how long a subscription begun by begin takes to be
	// confirmed; begins counts the calls of begin.
	confirmAfter time.Duration
	begins       int
}

type modelWaiter struct {
	h    *modelHub
	ch   string
	wake chan struct{}
	// unconfirmed: the waiter's subscription is not confirmed yet, so
	// messages do not reach it.
	unconfirmed bool
}

// modelPending is the subscription of a modelHub's begin.
type modelPending struct{ done chan struct{} }

func (p modelPending) Done() <-chan struct{} { return p.done }
func (p modelPending) Err() error            { return nil }

// begin registers a waiter on ch whose subscription is confirmed
// confirmAfter later (at once when 0), as the hub's Begin does.
func (h *modelHub) begin(ch string) (waiter, pending, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.begins++
	w := &modelWaiter{h: h, ch: ch, wake: make(chan struct{}, 1)}
	h.chans[ch] = append(h.chans[ch], w)
	if h.confirmAfter == 0 {
		return w, nil, nil
	}
	w.unconfirmed = true
	p := modelPending{done: make(chan struct{})}
	time.AfterFunc(h.confirmAfter, func() {
		h.mu.Lock()
		w.unconfirmed = false
		h.mu.Unlock()
		close(p.done)
	})
	return w, p, nil
}

func (h *modelHub) beginsMade() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.begins
}

func (h *modelHub) subscribe(ctx context.Context, ch string) (waiter, error) {
	h.mu.Lock()
	if h.stall {
		h.mu.Unlock()
		<-ctx.Done()
		return nil, ctx.Err()
	}
	defer h.mu.Unlock()
	w := &modelWaiter{h: h, ch: ch, wake: make(chan struct{}, 1)}
	h.chans[ch] = append(h.chans[ch], w)
	return w, nil
}

func (h *modelHub) publish(ch string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.wakeOneLocked(ch)
}

func (h *modelHub) wakeOneLocked(ch string) {
	for _, w := range h.chans[ch] {
		if w.unconfirmed {
			continue
		}
		select {
		case w.wake <- struct{}{}:
			return
		default:
		}
	}
}

func (w *modelWaiter) C() <-chan struct{} { return w.wake }

// Heard: the model's messages are never the news themselves.
func (w *modelWaiter) Heard() bool { return false }
func (*modelWaiter) Err() error    { return nil }

// PassOn wakes the next waiter after w that has no wake-up pending.
func (w *modelWaiter) PassOn() {
	h := w.h
	h.mu.Lock()
	defer h.mu.Unlock()
	after := false
	for _, x := range h.chans[w.ch] {
		if x == w {
			after = true
			continue
		}
		if after {
			select {
			case x.wake <- struct{}{}:
				return
			default:
			}
		}
	}
}

func (w *modelWaiter) Leave(passOn bool) {
	h := w.h
	h.mu.Lock()
	defer h.mu.Unlock()
	ws := h.chans[w.ch]
	for i, x := range ws {
		if x == w {
			h.chans[w.ch] = append(ws[:i:i], ws[i+1:]...)
			break
		}
	}
	select {
	case <-w.wake:
		passOn = true
	default:
	}
	if passOn {
		h.wakeOneLocked(w.ch)
	}
}

// noRedis is a rueidis client that must never be called: every Redis call
// of these tests goes to the model.
type noRedis struct{ rueidis.Client }

// modelCore returns a Core on m with the given watchdog timeout, closed
// when t ends. It must be called inside the bubble.
func modelCore(t *testing.T, m *model, watchdogTimeout time.Duration) *Core {
	t.Helper()
	c, err := NewCore(Config{RDB: noRedis{}, WatchdogTimeout: watchdogTimeout})
	if err != nil {
		t.Fatal(err)
	}
	c.subscribeHook = m.hub.subscribe
	c.renewHook = m.renew
	c.waits.off = true // the model has no wait records
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func (m *model) attemptsMade() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.attempts
}

// TestModelWaiterSleepsUntilLeaseEnds: a holder that never publishes (it
// crashed) is taken over when its lease ends, by a waiter that made three
// attempts in all: no polling.
func TestModelWaiterSleepsUntilLeaseEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newModel()
		c := modelCore(t, m, 30*time.Second)
		l := NewMutex(c, "x", m)
		m.holder("x", "crashed:o", 30*time.Second)
		start := time.Now()
		if err := l.Lock(WithOwner(t.Context(), "a")); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < 30*time.Second || d > 30*time.Second+10*time.Millisecond {
			t.Errorf("taken over after %v, want the holder's 30s lease", d)
		}
		if n := m.attemptsMade(); n != 3 {
			t.Errorf("%d attempts, want 3 (before and after subscribing, then at the lease's end)", n)
		}
	})
}

// TestModelWakeUpPassedOn: the waiter woken by an unlock fails its attempt
// with a connection error, and its context ends while it sleeps before
// retrying; the other waiter gets the wake-up at once.
func TestModelWakeUpPassedOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newModel()
		c := modelCore(t, m, 30*time.Second)
		l := NewMutex(c, "x", m)
		h := WithOwner(t.Context(), "h")
		if err := l.Lock(h); err != nil {
			t.Fatal(err)
		}
		w1, cancel1 := context.WithCancel(WithOwner(t.Context(), "w1"))
		w2 := WithOwner(t.Context(), "w2")
		errs := make(chan error, 2)
		go func() { errs <- l.Lock(w1) }()
		synctest.Wait() // w1 waits first
		got2 := make(chan time.Time, 1)
		go func() {
			err := l.Lock(w2)
			got2 <- time.Now()
			errs <- err
		}()
		synctest.Wait()
		m.mu.Lock()
		m.fail = []error{errors.New("injected: connection reset by peer")}
		m.mu.Unlock()
		unlocked := time.Now()
		if err := l.Unlock(h); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // w1 was woken, failed, and sleeps 100ms before retrying
		cancel1()
		at := <-got2
		if d := at.Sub(unlocked); d >= RetryBackoff {
			t.Errorf("w2 got the lock %v after the unlock, want at once", d)
		}
		var failed int
		for range 2 {
			if err := <-errs; err != nil {
				failed++
				if !errors.Is(err, context.Canceled) {
					t.Errorf("w1's Lock = %v, want its context's end", err)
				}
			}
		}
		if failed != 1 {
			t.Errorf("%d Locks failed, want 1 (w1's)", failed)
		}
	})
}

// TestModelSlowSubscribeBoundedByWait: a subscription that never
// completes does not stretch a TryLock past its wait.
func TestModelSlowSubscribeBoundedByWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newModel()
		m.hub.stall = true
		c := modelCore(t, m, 30*time.Second)
		l := NewMutex(c, "x", m)
		m.holder("x", "other:o", 30*time.Second)
		start := time.Now()
		ok, err := l.TryLock(WithOwner(t.Context(), "a"), 200*time.Millisecond, 0)
		if d := time.Since(start); d != 200*time.Millisecond {
			t.Errorf("TryLock returned after %v, want its 200ms wait", d)
		}
		if ok || err != nil {
			t.Errorf("TryLock = %v, %v, want false, nil (the lock is held)", ok, err)
		}
	})
}

// TestModelShortWaitTakesFreeLock: a wait shorter than a round trip takes
// a free lock, as wait 0 does: the attempt is sent however short the
// wait, and its grant, which arrives after the wait ended, is the call's
// success (it used to be given back, and TryLock returned false, nil).
// Re-entries too. A wait that ended stops nothing but the sleeping: on a
// held lock the call returns when its one attempt is answered, and sends
// no other.
func TestModelShortWaitTakesFreeLock(t *testing.T) {
	for _, wait := range []time.Duration{time.Nanosecond, time.Microsecond, 100 * time.Microsecond, time.Millisecond, 2 * time.Millisecond} {
		t.Run(wait.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := newModel()
				m.latency = 2 * time.Millisecond // each way: a round trip is longer than every wait
				c := modelCore(t, m, 30*time.Second)
				l := NewMutex(c, "x", m)
				a := WithOwner(t.Context(), "a")
				for level := 1; level <= 2; level++ {
					start := time.Now()
					ok, err := l.TryLock(a, wait, 0)
					if !ok || err != nil {
						t.Fatalf("TryLock(wait %v) of level %d, the lock free for the owner = %v, %v; want true, nil (wait 0 takes it)",
							wait, level, ok, err)
					}
					if d := time.Since(start); d != 2*m.latency {
						t.Errorf("TryLock of level %d took %v, want one round trip (%v)", level, d, 2*m.latency)
					}
					if n := c.lookupHold("x", "", "a"); n != level {
						t.Errorf("the owner holds %d levels after TryLock, want %d", n, level)
					}
				}
				m.mu.Lock()
				m.attempts = 0
				m.mu.Unlock()
				start := time.Now()
				ok, err := l.TryLock(WithOwner(t.Context(), "b"), wait, 0)
				if ok || err != nil {
					t.Errorf("TryLock(wait %v) of a held lock = %v, %v; want false, nil", wait, ok, err)
				}
				if d := time.Since(start); d != 2*m.latency {
					t.Errorf("TryLock of a held lock took %v, want its one round trip (%v)", d, 2*m.latency)
				}
				if n := m.attemptsMade(); n != 1 {
					t.Errorf("TryLock of a held lock made %d attempts, want 1 (none sent after the wait)", n)
				}
				for range 2 {
					if err := l.Unlock(a); err != nil {
						t.Fatal(err)
					}
				}
			})
		})
	}
}

// TestModelShortWaitBehindOwnersCall: the owner's Unlock on another
// goroutine is in flight, and its TryLock with a 1ms wait waits for its
// turn longer than that. The attempt wait 0 would make is still made, and
// takes the lock the Unlock freed (it used to give up at the wait's end
// without sending anything).
func TestModelShortWaitBehindOwnersCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newModel()
		m.latency = 2 * time.Millisecond
		c := modelCore(t, m, 30*time.Second)
		l := NewMutex(c, "x", m)
		a := WithOwner(t.Context(), "a")
		if err := l.Lock(a); err != nil {
			t.Fatal(err)
		}
		unlocked := make(chan error, 1)
		start := time.Now()
		go func() { unlocked <- l.Unlock(a) }()
		synctest.Wait() // the Unlock is on its way: the owner's turn is taken until 4ms
		ok, err := l.TryLock(a, time.Millisecond, 0)
		if !ok || err != nil {
			t.Fatalf("TryLock(wait 1ms) behind the owner's Unlock = %v, %v; want true, nil (wait 0 takes the lock)", ok, err)
		}
		if d := time.Since(start); d != 8*time.Millisecond {
			t.Errorf("TryLock returned at %v, want 8ms (sent when the Unlock was answered at 4ms)", d)
		}
		if err := <-unlocked; err != nil {
			t.Fatal(err)
		}
		if n := c.lookupHold("x", "", "a"); n != 1 {
			t.Errorf("the owner holds %d levels, want 1", n)
		}
		if err := l.Unlock(a); err != nil {
			t.Fatal(err)
		}
	})
}

// TestModelGrantAfterWaitKept: a waiter woken by a release just before
// its wait ends sends its attempt; the grant comes back after the wait
// ended, and is the call's success (it used to be given back, the lock
// free again and the call false, nil).
func TestModelGrantAfterWaitKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newModel()
		m.latency = 2 * time.Millisecond
		c := modelCore(t, m, 30*time.Second)
		l := NewMutex(c, "x", m)
		h := WithOwner(t.Context(), "h")
		if err := l.Lock(h); err != nil {
			t.Fatal(err)
		}
		type result struct {
			ok  bool
			err error
		}
		res := make(chan result, 1)
		a := WithOwner(t.Context(), "a")
		start := time.Now()
		go func() {
			ok, err := l.TryLock(a, 10*time.Millisecond, 0)
			res <- result{ok, err}
		}()
		// Two refused attempts (before and after subscribing) end at 8ms;
		// the release sent at 7ms frees the lock at 9ms and wakes the
		// waiter, whose attempt reaches the lock at 11ms, after its wait
		// ended, and is back at 13ms.
		time.Sleep(7*time.Millisecond - time.Since(start))
		if err := l.Unlock(h); err != nil {
			t.Fatal(err)
		}
		r := <-res
		if !r.ok || r.err != nil {
			t.Fatalf("TryLock whose attempt was sent before its wait ended and granted after = %v, %v; want true, nil", r.ok, r.err)
		}
		if d := time.Since(start); d != 13*time.Millisecond {
			t.Errorf("TryLock returned after %v, want 13ms (the reply of the attempt sent at 9ms)", d)
		}
		if n := c.lookupHold("x", "", "a"); n != 1 {
			t.Errorf("the waiter holds %d levels, want 1", n)
		}
		if err := l.Unlock(a); err != nil {
			t.Fatal(err)
		}
	})
}

// TestModelShortWaitContextEnds: the caller's context still ends an
// attempt sent within a short wait: a grant that crosses its end is given
// back, and the call reports the context's end.
func TestModelShortWaitContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newModel()
		m.latency = 2 * time.Millisecond
		c := modelCore(t, m, 30*time.Second)
		l := NewMutex(c, "x", m)
		// The script runs at 2ms; the context ends before its reply is back.
		ctx, cancel := context.WithTimeout(WithOwner(t.Context(), "a"), 3*time.Millisecond)
		defer cancel()
		ok, err := l.TryLock(ctx, time.Microsecond, 0)
		if ok || !errors.Is(err, relock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("TryLock whose context ended while its grant came back = %v, %v; want false, ErrNotAcquired and DeadlineExceeded", ok, err)
		}
		synctest.Wait()
		m.mu.Lock()
		held := m.lock("x") != nil
		m.mu.Unlock()
		if held {
			t.Error("the level won as the context ended was not given back")
		}
	})
}

// TestModelOutageRetried: a waiting Lock retries every RetryBackoff
// through an outage, and takes the lock when it ends.
func TestModelOutageRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newModel()
		c := modelCore(t, m, 30*time.Second)
		l := NewMutex(c, "x", m)
		for range 10 {
			m.fail = append(m.fail, errors.New("injected: connection refused"))
		}
		start := time.Now()
		if err := l.Lock(WithOwner(t.Context(), "a")); err != nil {
			t.Fatal(err)
		}
		// The first two attempts (before and after subscribing) fail at
		// once; the eight others are 100ms apart.
		if d := time.Since(start); d != 9*RetryBackoff {
			t.Errorf("Lock took %v through 10 failures, want %v", d, 9*RetryBackoff)
		}
	})
}

// TestModelOneWakeForOneOwner: two goroutines of one owner wait; one
// unlock wakes one of them, and the other re-enters at once.
func TestModelOneWakeForOneOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newModel()
		c := modelCore(t, m, 30*time.Second)
		l := NewMutex(c, "x", m)
		b := WithOwner(t.Context(), "b")
		if err := l.Lock(b); err != nil {
			t.Fatal(err)
		}
		a := WithOwner(t.Context(), "a")
		errs := make(chan error, 2)
		for range 2 {
			go func() { errs <- l.Lock(a) }()
		}
		synctest.Wait()
		start := time.Now()
		if err := l.Unlock(b); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("both of the owner's Locks returned %v after the unlock, want at once", d)
		}
		if want := c.lookupHold("x", "", "a"); want != 2 {
			t.Errorf("the owner holds %d levels, want 2", want)
		}
	})
}

// TestModelStaleLossReportIgnored: a loss reported by a registration that
// is no longer the hold's does not end the hold; and a hold taken off the
// watchdog (a fixed-lease re-entry) and put back on it is renewed, and
// reported lost by nobody.
func TestModelStaleLossReportIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newModel()
		c := modelCore(t, m, 30*time.Second)
		l := NewMutex(c, "x", m)
		a := WithOwner(t.Context(), "a")
		if err := l.Lock(a); err != nil {
			t.Fatal(err)
		}
		done := l.Done(a)
		h := c.holds[holdKey{"x", "", "a", false}]
		stale := &renewal{h: h}
		stale.lost(errors.New("a late report"))
		if err := l.LockLease(a, time.Minute); err != nil { // a fixed lease: renewal off
			t.Fatal(err)
		}
		if err := l.Lock(a); err != nil { // the watchdog again
			t.Fatal(err)
		}
		time.Sleep(2 * time.Minute) // many leases: renewed all along
		select {
		case <-done:
			t.Fatalf("the hold ended: %v", context.Cause(l.HoldContext(a)))
		default:
		}
		c.mu.Lock()
		current := h.renewal
		c.mu.Unlock()
		if current == nil {
			t.Error("the hold is not on the watchdog after a re-entry on the watchdog lease")
		}

		for range 3 {
			if err := l.Unlock(a); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestModelLossAtRenewal: a hold deleted behind the Client's back is
// reported lost at the next renewal, a third of the lease later.
func TestModelLossAtRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newModel()
		c := modelCore(t, m, 30*time.Second)
		l := NewMutex(c, "x", m)
		a := WithOwner(t.Context(), "a")
		if err := l.Lock(a); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		m.mu.Lock()
		delete(m.locks, "x")
		m.mu.Unlock()
		<-l.Done(a)
		if d := time.Since(start); d < 10*time.Second || d > 10*time.Second+50*time.Millisecond {
			t.Errorf("loss reported after %v, want at the renewal 10s later", d)
		}
		if cause := context.Cause(l.HoldContext(a)); !errors.Is(cause, relock.ErrNotHeld) {
			t.Errorf("after the loss, HoldContext's cause = %v, want relock.ErrNotHeld (no hold)", cause)
		}
		if err := l.Unlock(a); !errors.Is(err, relock.ErrNotHeld) {
			t.Errorf("Unlock after the loss = %v, want relock.ErrNotHeld", err)
		}
	})
}

// TestModelAnonymousRecordsRecycled: ownerless holds leave no records
// behind (one idle record is kept for the next), and the record's watchdog
// registration, passed on with it to an ownerless hold of another lock,
// renews its new hold (and only that one), which is reported lost when it
// goes.
func TestModelAnonymousRecordsRecycled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newModel()
		c := modelCore(t, m, 30*time.Second)
		ctx := t.Context()
		x := NewMutex(c, "x", m)
		for range 100 {
			if err := x.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := x.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		c.mu.Lock()
		records, free := len(c.holds), len(c.anonFree)
		spare := free == 1 && c.anonFree[0].spare != nil
		c.mu.Unlock()
		if records != 0 || free != 1 || !spare {
			t.Fatalf("after 100 ownerless holds: %d records, %d free records (with a spare registration: %v); want 0, 1, true",
				records, free, spare)
		}

		y := NewMutex(c, "y", m)
		if err := y.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		c.mu.Lock()
		free = len(c.anonFree)
		c.mu.Unlock()
		if free != 0 {
			t.Fatalf("the new hold did not take the free record and its registration (%d left)", free)
		}
		time.Sleep(45 * time.Second) // past the first lease: renewed at 10s, 20s, 30s, 40s
		synctest.Wait()
		done := y.Done(ctx)
		m.mu.Lock()
		held := m.lock("y") != nil
		delete(m.locks, "y")
		m.mu.Unlock()
		if !held {
			t.Fatal("y expired after 45s: its recycled registration did not renew it")
		}
		<-done
		if cause := context.Cause(y.HoldContext(ctx)); !errors.Is(cause, relock.ErrNotHeld) {
			t.Errorf("after the loss, HoldContext's cause = %v, want relock.ErrNotHeld (no hold)", cause)
		}
	})
}

// TestModelExpiredAnonymousHoldReplaced: an ownerless hold on a fixed
// lease that runs out is replaced by the Client's next ownerless hold of
// the lock; the old one ends (it is certainly gone: the lock is
// exclusive) instead of staying recorded forever, unreachable.
func TestModelExpiredAnonymousHoldReplaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newModel()
		c := modelCore(t, m, 30*time.Second)
		ctx := t.Context()
		x := NewMutex(c, "x", m)
		if err := x.LockLease(ctx, time.Second); err != nil {
			t.Fatal(err)
		}
		first := x.HoldContext(ctx)
		for range 10 {
			time.Sleep(2 * time.Second) // the lease runs out
			if err := x.LockLease(ctx, time.Second); err != nil {
				t.Fatal(err)
			}
		}
		if cause := context.Cause(first); !errors.Is(cause, relock.ErrLockLost) {
			t.Errorf("the first hold's life ended with %v, want relock.ErrLockLost", cause)
		}
		c.mu.Lock()
		records := len(c.holds)
		c.mu.Unlock()
		if records != 1 {
			t.Errorf("%d hold records after 11 ownerless holds, one held; want 1", records)
		}
		if err := x.Unlock(ctx); err != nil {
			t.Errorf("Unlock of the latest hold: %v", err)
		}
	})
}

// TestModelSlowSubscriptionKept: a subscription that takes longer than
// the bound of the call's sleep (here 5s, where a holder that renews a
// 1.5s lease gives a bound of 1.5s at most) is not given up at the bound
// and begun again, which would never see it made: it goes on while the
// call attempts and sleeps, and once it is made a release's message
// wakes the call at once.
func TestModelSlowSubscriptionKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newModel()
		m.hub.confirmAfter = 5 * time.Second
		c := modelCore(t, m, 30*time.Second)
		c.beginHook = m.hub.begin
		var logged strings.Builder
		var logMu sync.Mutex
		c.obs = newObserver(Config{Logger: slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logged}, nil))})
		l := NewMutex(c, "x", m)
		m.holder("x", "other:o", 1500*time.Millisecond)
		stop, stopped := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(stopped)
			tick := time.NewTicker(500 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-tick.C:
					m.holder("x", "other:o", 1500*time.Millisecond)
				case <-stop:
					return
				}
			}
		}()
		done := make(chan error, 1)
		go func() { done <- l.Lock(WithOwner(t.Context(), "a")) }()
		time.Sleep(6 * time.Second)
		close(stop)
		<-stopped
		synctest.Wait()
		if n := m.hub.beginsMade(); n != 1 {
			t.Errorf("the subscription was begun %d times, want once", n)
		}
		logMu.Lock()
		if s := logged.String(); strings.Contains(s, "failing") {
			// A subscription that is slow is no outage.
			t.Errorf("a slow subscription was logged as Redis failing:\n%s", s)
		}
		logMu.Unlock()
		m.mu.Lock()
		delete(m.locks, "x")
		m.hub.publish("ch:x")
		m.mu.Unlock()
		start := time.Now()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("the release's message woke nobody: the lock was taken %v after it", d)
		}
		if err := l.Unlock(WithOwner(t.Context(), "a")); err != nil {
			t.Fatal(err)
		}
	})
}

// lockedWriter is a writer that a test's logger and the test share.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
