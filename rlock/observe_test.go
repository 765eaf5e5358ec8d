package rlock_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/observe"
	"github.com/relock-go/relock/rlock"
)

// recorder is an Observer that keeps every event, one line each:
// "Method kind outcome", and checks that the contexts from the start
// calls reach the end calls.
type recorder struct {
	mu     sync.Mutex
	events []string
	errs   []error // an error of the test found in a call
}

type markKey struct{}

func (r *recorder) add(method string, lock observe.Lock, outcome observe.Outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ev := method + " " + lock.Kind
	if outcome != "" {
		ev += " " + string(outcome)
	}
	r.events = append(r.events, ev)
}

func (r *recorder) fail(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Errorf(format, args...))
}

func (r *recorder) AcquireStart(ctx context.Context, a observe.Acquire) context.Context {
	if a.Owner == "" || a.Outcome != "" || a.Duration != 0 {
		r.fail("AcquireStart(%+v): want an owner and no outcome yet", a)
	}
	r.add("AcquireStart", a.Lock, "")
	return context.WithValue(ctx, markKey{}, "acquire")
}

func (r *recorder) AcquireEnd(ctx context.Context, a observe.Acquire) {
	if ctx.Value(markKey{}) != "acquire" {
		r.fail("AcquireEnd did not get AcquireStart's context")
	}
	if a.Outcome == observe.OutcomeAcquired && a.Err != nil || a.Outcome == observe.OutcomeError && a.Err == nil ||
		a.Duration <= 0 {
		r.fail("AcquireEnd(%+v): inconsistent", a)
	}
	r.add("AcquireEnd", a.Lock, a.Outcome)
}

func (r *recorder) ReleaseStart(ctx context.Context, e observe.Release) context.Context {
	r.add("ReleaseStart", e.Lock, "")
	return context.WithValue(ctx, markKey{}, "release")
}

func (r *recorder) ReleaseEnd(ctx context.Context, e observe.Release) {
	if ctx.Value(markKey{}) != "release" {
		r.fail("ReleaseEnd did not get ReleaseStart's context")
	}
	if e.Outcome == observe.OutcomeReleased && e.Held <= 0 && e.Lock.Kind != observe.KindSemaphore &&
		e.Lock.Kind != observe.KindCountingSemaphore {
		r.fail("ReleaseEnd(%+v): a release with no hold time", e)
	}
	r.add("ReleaseEnd", e.Lock, e.Outcome)
}

func (r *recorder) HoldStart(h observe.Hold) { r.add("HoldStart", h.Lock, "") }

func (r *recorder) HoldEnd(h observe.Hold) {
	if h.Held <= 0 || (h.Outcome == observe.OutcomeReleased) != (h.Err == nil) {
		r.fail("HoldEnd(%+v): inconsistent", h)
	}
	r.add("HoldEnd", h.Lock, h.Outcome)
}

func (r *recorder) Renewal(e observe.Renewal) { r.add("Renewal", e.Lock, e.Outcome) }

func (r *recorder) WaitStart(ctx context.Context, w observe.Wait) {
	if ctx.Value(markKey{}) != "acquire" {
		r.fail("WaitStart did not get AcquireStart's context")
	}
	r.add("WaitStart", w.Lock, "")
}

func (r *recorder) WaitEnd(ctx context.Context, w observe.Wait) {
	if w.Waited <= 0 {
		r.fail("WaitEnd(%+v): no wait time", w)
	}
	r.add("WaitEnd", w.Lock, "")
}

// take returns the events so far and forgets them.
func (r *recorder) take(t *testing.T) []string {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, err := range r.errs {
		assert.NoError(t, err, "a call of the observer")
	}
	ev := r.events
	r.events, r.errs = nil, nil
	return ev
}

// has reports whether ev is among the events so far.
func (r *recorder) has(ev string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if e == ev {
			return true
		}
	}
	return false
}

func wantEvents(t *testing.T, got []string, want ...string) {
	t.Helper()
	assert.Equal(t, want, got, "events")
}

func TestObserverLockReentryUnlock(t *testing.T) {
	rec := &recorder{}
	c := relocktest.Client(t, rlock.WithObserver(rec))
	ctx := rlock.WithOwner(t.Context(), "a")
	l := c.GetLock(relocktest.Name(t))
	for range 2 {
		require.NoError(t, l.Lock(ctx))
	}
	for range 2 {
		require.NoError(t, l.Unlock(ctx))
	}
	require.ErrorIs(t, l.Unlock(ctx), rlock.ErrNotHeld, "third Unlock")
	wantEvents(t, rec.take(t),
		"AcquireStart lock", "HoldStart lock", "AcquireEnd lock acquired",
		"AcquireStart lock", "AcquireEnd lock acquired",
		"ReleaseStart lock", "ReleaseEnd lock released",
		"ReleaseStart lock", "HoldEnd lock released", "ReleaseEnd lock released",
		"ReleaseStart lock", "ReleaseEnd lock not_held")
}

func TestObserverKinds(t *testing.T) {
	rec := &recorder{}
	c := relocktest.Client(t, rlock.WithObserver(rec))
	ctx := t.Context()
	for _, tc := range []struct {
		kind string
		l    interface {
			Lock(context.Context) error
			Unlock(context.Context) error
		}
	}{
		{"lock", c.GetLock(relocktest.Name(t))},
		{"fenced", c.GetFencedLock(relocktest.Name(t))},
		{"fair", c.GetFairLock(relocktest.Name(t))},
	} {
		require.NoError(t, tc.l.Lock(ctx))
		require.NoError(t, tc.l.Unlock(ctx))
		k := tc.kind
		wantEvents(t, rec.take(t),
			"AcquireStart "+k, "HoldStart "+k, "AcquireEnd "+k+" acquired",
			"ReleaseStart "+k, "HoldEnd "+k+" released", "ReleaseEnd "+k+" released")
	}
}

func TestObserverNotAcquiredAndWait(t *testing.T) {
	rec := &recorder{}
	c := relocktest.Client(t, rlock.WithObserver(rec))
	name := relocktest.Name(t)
	holder := rlock.WithOwner(t.Context(), "holder")
	require.NoError(t, c.GetLock(name).Lock(holder))
	rec.take(t)
	other := rlock.WithOwner(t.Context(), "other")
	ok, err := c.GetLock(name).TryLock(other, 0, 0)
	requireTry(t, false, ok, err, "TryLock(wait 0)")
	wantEvents(t, rec.take(t), "AcquireStart lock", "AcquireEnd lock not_acquired")

	ok, err = c.GetLock(name).TryLock(other, 30*time.Millisecond, 0)
	requireTry(t, false, ok, err, "TryLock(wait 30ms)")
	wantEvents(t, rec.take(t), "AcquireStart lock", "WaitStart lock", "WaitEnd lock", "AcquireEnd lock not_acquired")

	// A wait ended by the context is not_acquired too.
	wctx, cancel := context.WithTimeout(other, 30*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, c.GetLock(name).Lock(wctx), context.DeadlineExceeded, "Lock")
	wantEvents(t, rec.take(t), "AcquireStart lock", "WaitStart lock", "WaitEnd lock", "AcquireEnd lock not_acquired")

	// A waiter that gets the lock after its holder let go.
	got := make(chan error, 1)
	go func() { got <- c.GetLock(name).Lock(other) }()
	relocktest.Eventually(t, 5*time.Second, "the waiter to wait", func() bool { return rec.has("WaitStart lock") })
	require.NoError(t, c.GetLock(name).Unlock(holder))
	require.NoError(t, relocktest.Receive(t, got, 5*time.Second, "the waiter to get the lock after the holder let go"))
	require.NoError(t, c.GetLock(name).Unlock(other))
	ev := rec.take(t)
	for want, times := range map[string]int{"WaitEnd lock": 1, "HoldEnd lock released": 2, "AcquireEnd lock acquired": 1} {
		n := 0
		for _, e := range ev {
			if e == want {
				n++
			}
		}
		assert.Equal(t, times, n, "times %q was seen in %q", want, ev)
	}
}

func TestObserverRenewalsAndLoss(t *testing.T) {
	rec := &recorder{}
	c := relocktest.Client(t, rlock.WithObserver(rec), rlock.WithWatchdogTimeout(150*time.Millisecond))
	raw := relocktest.Raw(t)
	ctx := rlock.WithOwner(t.Context(), "a")
	l := c.GetLock(relocktest.Name(t))
	require.NoError(t, l.Lock(ctx))
	relocktest.Eventually(t, 5*time.Second, "a renewal", func() bool { return rec.has("Renewal lock ok") })
	require.NoError(t, raw.Do(ctx, raw.B().Del().Key(l.Name()).Build()).Error())
	relocktest.Receive(t, l.Done(ctx), 5*time.Second, "the loss to be noticed")
	ev := rec.take(t)
	assert.Contains(t, ev, "Renewal lock lost", "events: want a lost renewal")
	assert.Contains(t, ev, "HoldEnd lock lost", "events: want a lost hold")
}

func TestObserverClose(t *testing.T) {
	rec := &recorder{}
	c, err := rlock.NewClient(redistest.Shared(t).ClientOption(), rlock.WithObserver(rec))
	require.NoError(t, err)
	defer c.Close()
	ctx := rlock.WithOwner(t.Context(), "a")
	l := c.GetLock(relocktest.Name(t))
	require.NoError(t, l.LockLease(ctx, time.Minute))
	require.NoError(t, c.GetFairLock(relocktest.Name(t)).Lock(ctx))
	rec.take(t)
	require.NoError(t, c.Close())
	assert.ElementsMatch(t, []string{"HoldEnd lock closed", "HoldEnd fair closed"}, rec.take(t), "events at Close: each hold ended as closed")
	// After Close, nothing more is reported for these holds.
	_ = l.Unlock(ctx)
	wantEvents(t, rec.take(t), "ReleaseStart lock", "ReleaseEnd lock error")
}

func TestObserverDo(t *testing.T) {
	rec := &recorder{}
	c := relocktest.Client(t, rlock.WithObserver(rec))
	l := c.GetLock(relocktest.Name(t))
	require.NoError(t, l.Do(t.Context(), func(ctx context.Context) error { return nil }))
	wantEvents(t, rec.take(t),
		"AcquireStart lock", "HoldStart lock", "AcquireEnd lock acquired",
		"ReleaseStart lock", "HoldEnd lock released", "ReleaseEnd lock released")
}

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) lines(level string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, l := range strings.Split(s.b.String(), "\n") {
		if strings.Contains(l, "level="+level+" ") {
			out = append(out, l)
		}
	}
	return out
}

// TestLoggerOutage kills the server under a waiting Lock: the wait logs
// one WARN while Redis is down, however many attempts fail, and one INFO
// when Redis answers again.
func TestLoggerOutage(t *testing.T) {
	srv := redistest.Start(t)
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	// The Client's acquire scripts are counted, failed ones too, so that
	// the test sees the attempts made during the outage.
	f := relocktest.NewFaulty(srv.Client(t))
	attempts := f.Inject(&relocktest.Rule{SHA1s: []string{lua.LockAcquire.SHA1}, N: -1, Run: true, Keep: true})
	c, err := rlock.New(f, rlock.WithLogger(log))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	name := "outage"
	// A holder of another client, with a long lease: the waiter sleeps
	// until an unlock message that never comes.
	_, err = srv.Do(t.Context(), "HSET", name, "other:holder", "1")
	require.NoError(t, err)
	_, err = srv.Do(t.Context(), "PEXPIRE", name, "60000")
	require.NoError(t, err)
	ctx := rlock.WithOwner(t.Context(), "waiter")
	got := make(chan error, 1)
	go func() { got <- c.GetLock(name).Lock(ctx) }()
	raw := srv.Client(t)
	relocktest.Eventually(t, 5*time.Second, "the waiter to subscribe", func() bool {
		return relocktest.Subscribers(raw, "redisson_lock__channel:{"+name+"}") == 1
	})
	require.Empty(t, logs.lines("WARN"), "WARN lines before the outage")

	before := attempts.Hits()
	srv.Kill()
	relocktest.Eventually(t, 5*time.Second, "the WARN line", func() bool { return len(logs.lines("WARN")) > 0 })
	// Several attempts fail (one every 100ms) before Redis is back: the
	// WARN must not repeat for them.
	relocktest.Eventually(t, 5*time.Second, "three failed attempts during the outage", func() bool { return attempts.Hits() >= before+3 })
	require.NoError(t, srv.Restart())
	// The restarted server has no data: the lock is free.
	require.NoError(t, relocktest.Receive(t, got, 10*time.Second, "the waiter to get the lock after the restart"), "Lock after the outage")
	require.NoError(t, c.GetLock(name).Unlock(ctx))

	warns, infos := logs.lines("WARN"), logs.lines("INFO")
	assert.Len(t, warns, 1, "WARN lines")
	require.Len(t, infos, 1, "INFO lines")
	for _, want := range []string{"lock=outage", "owner=waiter", "failed_attempts="} {
		assert.Contains(t, infos[0], want, "the INFO line")
	}
	assert.NotContains(t, infos[0], "failed_attempts=1 ", "the INFO line: want several failed attempts behind one WARN")
	assert.Empty(t, logs.lines("ERROR"), "ERROR lines")
	t.Logf("log:\n%s\n%s", strings.Join(warns, "\n"), infos[0])
}

func TestLoggerLoss(t *testing.T) {
	var logs syncBuffer
	c := relocktest.Client(t, rlock.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))),
		rlock.WithWatchdogTimeout(150*time.Millisecond))
	raw := relocktest.Raw(t)
	ctx := rlock.WithOwner(t.Context(), "a")
	l := c.GetLock(relocktest.Name(t))
	require.NoError(t, l.Lock(ctx))
	require.NoError(t, l.Unlock(ctx))
	require.Empty(t, logs.String(), "logs on the success path")
	require.NoError(t, l.Lock(ctx))
	require.NoError(t, raw.Do(ctx, raw.B().Del().Key(l.Name()).Build()).Error())
	relocktest.Receive(t, l.Done(ctx), 5*time.Second, "the loss to be noticed")
	e := logs.lines("ERROR")
	require.Len(t, e, 1, "ERROR lines: one lock lost line")
	assert.Contains(t, e[0], "lock lost", "the ERROR line")
	assert.Contains(t, e[0], "owner=a", "the ERROR line")
}

// TestObserverSyncKinds: the read and write sides of a read-write lock,
// and a semaphore's permits, report as their kinds.
func TestObserverSyncKinds(t *testing.T) {
	rec := &recorder{}
	c := relocktest.Client(t, rlock.WithObserver(rec))
	ctx := rlock.WithOwner(t.Context(), "a")
	rw := c.GetReadWriteLock(relocktest.Name(t))
	for _, side := range []struct {
		kind string
		l    interface {
			Lock(context.Context) error
			Unlock(context.Context) error
		}
	}{{"read", rw.ReadLock()}, {"write", rw.WriteLock()}} {
		require.NoError(t, side.l.Lock(ctx))
		require.NoError(t, side.l.Unlock(ctx))
		k := side.kind
		wantEvents(t, rec.take(t),
			"AcquireStart "+k, "HoldStart "+k, "AcquireEnd "+k+" acquired",
			"ReleaseStart "+k, "HoldEnd "+k+" released", "ReleaseEnd "+k+" released")
	}

	s := c.GetSemaphore(relocktest.Name(t))
	_, err := s.TrySetPermits(ctx, 1)
	require.NoError(t, err)
	id, err := s.Acquire(ctx, 0) // on the watchdog: a hold
	require.NoError(t, err)
	_, ok, err := s.TryAcquire(ctx, 20*time.Millisecond, time.Second)
	requireTry(t, false, ok, err, "TryAcquire with none left")
	require.NoError(t, s.Release(ctx, id))
	fixed, err := s.Acquire(ctx, time.Minute) // a fixed lease: no hold events
	require.NoError(t, err)
	require.NoError(t, s.Release(ctx, fixed))
	require.ErrorIs(t, s.Release(ctx, fixed), rlock.ErrNotHeld, "second Release")
	k := "semaphore"
	wantEvents(t, rec.take(t),
		"AcquireStart "+k, "HoldStart "+k, "AcquireEnd "+k+" acquired",
		"AcquireStart "+k, "WaitStart "+k, "WaitEnd "+k, "AcquireEnd "+k+" not_acquired",
		"ReleaseStart "+k, "HoldEnd "+k+" released", "ReleaseEnd "+k+" released",
		"AcquireStart "+k, "AcquireEnd "+k+" acquired",
		"ReleaseStart "+k, "ReleaseEnd "+k+" released",
		"ReleaseStart "+k, "ReleaseEnd "+k+" not_held")

	// A permit held at Close ends as closed.
	_, err = s.Acquire(ctx, 0)
	require.NoError(t, err)
	rec.take(t)
	_ = c.Close()
	wantEvents(t, rec.take(t), "HoldEnd "+k+" closed")
}
