package rlock_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
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
	if e.Outcome == observe.OutcomeReleased && e.Held <= 0 && e.Lock.Kind != observe.KindSemaphore {
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
		t.Error(err)
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
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func TestObserverLockReentryUnlock(t *testing.T) {
	rec := &recorder{}
	c := relocktest.Client(t, rlock.WithObserver(rec))
	ctx := rlock.WithOwner(t.Context(), "a")
	l := c.GetLock(relocktest.Name(t))
	for range 2 {
		if err := l.Lock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Unlock(ctx); !errors.Is(err, rlock.ErrNotHeld) {
		t.Fatalf("third Unlock = %v, want ErrNotHeld", err)
	}
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
		if err := tc.l.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := tc.l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
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
	if err := c.GetLock(name).Lock(holder); err != nil {
		t.Fatal(err)
	}
	rec.take(t)
	other := rlock.WithOwner(t.Context(), "other")
	if ok, err := c.GetLock(name).TryLock(other, 0, 0); ok || err != nil {
		t.Fatalf("TryLock(wait 0) = %v, %v; want false, nil", ok, err)
	}
	wantEvents(t, rec.take(t), "AcquireStart lock", "AcquireEnd lock not_acquired")

	if ok, err := c.GetLock(name).TryLock(other, 30*time.Millisecond, 0); ok || err != nil {
		t.Fatalf("TryLock(wait 30ms) = %v, %v; want false, nil", ok, err)
	}
	wantEvents(t, rec.take(t), "AcquireStart lock", "WaitStart lock", "WaitEnd lock", "AcquireEnd lock not_acquired")

	// A wait ended by the context is not_acquired too.
	wctx, cancel := context.WithTimeout(other, 30*time.Millisecond)
	defer cancel()
	if err := c.GetLock(name).Lock(wctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock = %v, want DeadlineExceeded", err)
	}
	wantEvents(t, rec.take(t), "AcquireStart lock", "WaitStart lock", "WaitEnd lock", "AcquireEnd lock not_acquired")

	// A waiter that gets the lock after its holder let go.
	got := make(chan error, 1)
	go func() { got <- c.GetLock(name).Lock(other) }()
	relocktest.Eventually(t, 5*time.Second, "the waiter to wait", func() bool { return rec.has("WaitStart lock") })
	if err := c.GetLock(name).Unlock(holder); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if err := c.GetLock(name).Unlock(other); err != nil {
		t.Fatal(err)
	}
	ev := rec.take(t)
	for _, want := range []string{"WaitEnd lock", "HoldEnd lock released", "AcquireEnd lock acquired"} {
		n := 0
		for _, e := range ev {
			if e == want {
				n++
			}
		}
		if want == "HoldEnd lock released" && n != 2 || want != "HoldEnd lock released" && n != 1 {
			t.Errorf("%q seen %d times in %q", want, n, ev)
		}
	}
}

func TestObserverRenewalsAndLoss(t *testing.T) {
	rec := &recorder{}
	c := relocktest.Client(t, rlock.WithObserver(rec), rlock.WithWatchdogTimeout(150*time.Millisecond))
	raw := relocktest.Raw(t)
	ctx := rlock.WithOwner(t.Context(), "a")
	l := c.GetLock(relocktest.Name(t))
	if err := l.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	relocktest.Eventually(t, 5*time.Second, "a renewal", func() bool { return rec.has("Renewal lock ok") })
	if err := raw.Do(ctx, raw.B().Del().Key(l.Name()).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done(ctx):
	case <-time.After(5 * time.Second):
		t.Fatal("the loss was not noticed")
	}
	if !rec.has("Renewal lock lost") || !rec.has("HoldEnd lock lost") {
		t.Errorf("events %q: want a lost renewal and a lost hold", rec.take(t))
	}
	rec.take(t)
}

func TestObserverClose(t *testing.T) {
	rec := &recorder{}
	c, err := rlock.NewClient(redistest.Shared(t).ClientOption(), rlock.WithObserver(rec))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := rlock.WithOwner(t.Context(), "a")
	l := c.GetLock(relocktest.Name(t))
	if err := l.LockLease(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := c.GetFairLock(relocktest.Name(t)).Lock(ctx); err != nil {
		t.Fatal(err)
	}
	rec.take(t)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	got := rec.take(t)
	if len(got) != 2 || !(got[0] == "HoldEnd lock closed" && got[1] == "HoldEnd fair closed" ||
		got[1] == "HoldEnd lock closed" && got[0] == "HoldEnd fair closed") {
		t.Errorf("events at Close: %q, want each hold ended as closed", got)
	}
	// After Close, nothing more is reported for these holds.
	_ = l.Unlock(ctx)
	wantEvents(t, rec.take(t), "ReleaseStart lock", "ReleaseEnd lock error")
}

func TestObserverDo(t *testing.T) {
	rec := &recorder{}
	c := relocktest.Client(t, rlock.WithObserver(rec))
	l := c.GetLock(relocktest.Name(t))
	if err := l.Do(t.Context(), func(ctx context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
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
	c := relocktest.ClientOn(t, srv, rlock.WithLogger(log))
	name := "outage"
	// A holder of another client, with a long lease: the waiter sleeps
	// until an unlock message that never comes.
	if _, err := srv.Do(t.Context(), "HSET", name, "other:holder", "1"); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Do(t.Context(), "PEXPIRE", name, "60000"); err != nil {
		t.Fatal(err)
	}
	ctx := rlock.WithOwner(t.Context(), "waiter")
	got := make(chan error, 1)
	go func() { got <- c.GetLock(name).Lock(ctx) }()
	relocktest.Eventually(t, 5*time.Second, "the waiter to subscribe", func() bool {
		v, err := srv.Do(t.Context(), "PUBSUB", "NUMSUB", "redisson_lock__channel:{"+name+"}")
		if err != nil {
			return false
		}
		a, _ := v.ToArray()
		n, _ := a[1].AsInt64()
		return n == 1
	})
	if w := logs.lines("WARN"); len(w) != 0 {
		t.Fatalf("WARN before the outage: %q", w)
	}

	srv.Kill()
	relocktest.Eventually(t, 5*time.Second, "the WARN line", func() bool { return len(logs.lines("WARN")) > 0 })
	// Let several attempts fail (one every 100ms) before Redis is back: the
	// WARN must not repeat for them.
	time.Sleep(350 * time.Millisecond)
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	// The restarted server has no data: the lock is free.
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("Lock after the outage: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not get the lock after the restart")
	}
	if err := c.GetLock(name).Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	warns, infos := logs.lines("WARN"), logs.lines("INFO")
	if len(warns) != 1 {
		t.Errorf("WARN lines: %d, want 1:\n%s", len(warns), strings.Join(warns, "\n"))
	}
	if len(infos) != 1 {
		t.Fatalf("INFO lines: %d, want 1:\n%s", len(infos), strings.Join(infos, "\n"))
	}
	for _, want := range []string{"lock=outage", "owner=waiter", "failed_attempts="} {
		if !strings.Contains(infos[0], want) {
			t.Errorf("INFO line %q lacks %q", infos[0], want)
		}
	}
	if strings.Contains(infos[0], "failed_attempts=1 ") {
		t.Errorf("INFO line %q: want several failed attempts behind one WARN", infos[0])
	}
	if e := logs.lines("ERROR"); len(e) != 0 {
		t.Errorf("ERROR lines: %q", e)
	}
	t.Logf("log:\n%s%s", warns[0], "\n"+infos[0])
}

func TestLoggerLoss(t *testing.T) {
	var logs syncBuffer
	c := relocktest.Client(t, rlock.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))),
		rlock.WithWatchdogTimeout(150*time.Millisecond))
	raw := relocktest.Raw(t)
	ctx := rlock.WithOwner(t.Context(), "a")
	l := c.GetLock(relocktest.Name(t))
	if err := l.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if s := logs.String(); s != "" {
		t.Fatalf("logged on the success path: %q", s)
	}
	if err := l.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := raw.Do(ctx, raw.B().Del().Key(l.Name()).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done(ctx):
	case <-time.After(5 * time.Second):
		t.Fatal("the loss was not noticed")
	}
	e := logs.lines("ERROR")
	if len(e) != 1 || !strings.Contains(e[0], "lock lost") || !strings.Contains(e[0], "owner=a") {
		t.Errorf("ERROR lines %q, want one lock lost line", e)
	}
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
		if err := side.l.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := side.l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		k := side.kind
		wantEvents(t, rec.take(t),
			"AcquireStart "+k, "HoldStart "+k, "AcquireEnd "+k+" acquired",
			"ReleaseStart "+k, "HoldEnd "+k+" released", "ReleaseEnd "+k+" released")
	}

	s := c.GetSemaphore(relocktest.Name(t))
	if _, err := s.TrySetPermits(ctx, 1); err != nil {
		t.Fatal(err)
	}
	id, err := s.Acquire(ctx, 0) // on the watchdog: a hold
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.TryAcquire(ctx, 20*time.Millisecond, time.Second); ok || err != nil {
		t.Fatalf("TryAcquire with none left = %v, %v", ok, err)
	}
	if err := s.Release(ctx, id); err != nil {
		t.Fatal(err)
	}
	fixed, err := s.Acquire(ctx, time.Minute) // a fixed lease: no hold events
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, fixed); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, fixed); !errors.Is(err, rlock.ErrNotHeld) {
		t.Fatalf("second Release = %v, want ErrNotHeld", err)
	}
	k := "semaphore"
	wantEvents(t, rec.take(t),
		"AcquireStart "+k, "HoldStart "+k, "AcquireEnd "+k+" acquired",
		"AcquireStart "+k, "WaitStart "+k, "WaitEnd "+k, "AcquireEnd "+k+" not_acquired",
		"ReleaseStart "+k, "HoldEnd "+k+" released", "ReleaseEnd "+k+" released",
		"AcquireStart "+k, "AcquireEnd "+k+" acquired",
		"ReleaseStart "+k, "ReleaseEnd "+k+" released",
		"ReleaseStart "+k, "ReleaseEnd "+k+" not_held")

	// A permit held at Close ends as closed.
	if _, err := s.Acquire(ctx, 0); err != nil {
		t.Fatal(err)
	}
	rec.take(t)
	_ = c.Close()
	wantEvents(t, rec.take(t), "HoldEnd "+k+" closed")
}
