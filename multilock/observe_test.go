package multilock_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/multilock"
	"github.com/relock-go/relock/observe"
	"github.com/relock-go/relock/rlock"
)

// recorder keeps the events of the kinds it is told to watch, one line
// each: "Method kind outcome".
type recorder struct {
	kinds []string
	mu    sync.Mutex
	ev    []string
}

type spanKey struct{}

func (r *recorder) add(method string, l observe.Lock, outcome observe.Outcome) {
	if !slices.Contains(r.kinds, l.Kind) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := method + " " + l.Kind
	if outcome != "" {
		s += " " + string(outcome)
	}
	r.ev = append(r.ev, s)
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ev := r.ev
	r.ev = nil
	return ev
}

func (r *recorder) AcquireStart(ctx context.Context, a observe.Acquire) context.Context {
	r.add("AcquireStart", a.Lock, "")
	return context.WithValue(ctx, spanKey{}, a.Lock.Kind)
}

func (r *recorder) AcquireEnd(ctx context.Context, a observe.Acquire) {
	if ctx.Value(spanKey{}) != a.Lock.Kind {
		r.add("AcquireEnd-without-its-context", a.Lock, "")
	}
	r.add("AcquireEnd", a.Lock, a.Outcome)
}

func (r *recorder) ReleaseStart(ctx context.Context, e observe.Release) context.Context {
	r.add("ReleaseStart", e.Lock, "")
	return ctx
}

func (r *recorder) ReleaseEnd(_ context.Context, e observe.Release) {
	r.add("ReleaseEnd", e.Lock, e.Outcome)
}

func (r *recorder) HoldStart(h observe.Hold) { r.add("HoldStart", h.Lock, "") }
func (r *recorder) HoldEnd(h observe.Hold)   { r.add("HoldEnd", h.Lock, h.Outcome) }
func (r *recorder) Renewal(observe.Renewal)  {}
func (r *recorder) WaitStart(_ context.Context, w observe.Wait) {
	r.add("WaitStart", w.Lock, "")
}
func (r *recorder) WaitEnd(_ context.Context, w observe.Wait) { r.add("WaitEnd", w.Lock, "") }

func wantEvents(t *testing.T, got []string, want ...string) {
	t.Helper()
	assert.Equal(t, want, got, "events")
}

func observedClient(t *testing.T, srv *redistest.Server, o observe.Observer) *rlock.Client {
	t.Helper()
	c, err := rlock.NewClient(srv.ClientOption(), rlock.WithObserver(o))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestMultiLockObserved: a MultiLock reports to its locks' observer, as
// kind multi, around its locks' own reports, and its spans' context
// reaches its locks.
func TestMultiLockObserved(t *testing.T) {
	rec := &recorder{kinds: []string{"multi", "lock"}}
	c := observedClient(t, redistest.Shared(t), rec)
	m := multilock.New(c.GetLock(t.Name()+":a"), c.GetLock(t.Name()+":b"))
	require.Same(t, rec, m.Observer(), "MultiLock's Observer: its locks'")
	ctx := t.Context() // anonymous
	require.NoError(t, m.Lock(ctx))
	require.NoError(t, m.Unlock(ctx))
	require.ErrorIs(t, m.Unlock(ctx), multilock.ErrNotHeld, "second Unlock")
	lockCycle := []string{"AcquireStart lock", "HoldStart lock", "AcquireEnd lock acquired"}
	want := []string{"AcquireStart multi"}
	want = append(want, lockCycle...)
	want = append(want, lockCycle...)
	want = append(want, "HoldStart multi", "AcquireEnd multi acquired", "ReleaseStart multi")
	for range 2 {
		want = append(want, "ReleaseStart lock", "HoldEnd lock released", "ReleaseEnd lock released")
	}
	want = append(want, "HoldEnd multi released", "ReleaseEnd multi released",
		"ReleaseStart multi", "ReleaseEnd multi not_held")
	wantEvents(t, rec.take(), want...)

	// Busy: not acquired, and nothing held.
	other := rlock.WithOwner(t.Context(), "other")
	require.NoError(t, c.GetLock(t.Name()+":b").Lock(other))
	// Released before c closes, so that a rerun in this process finds b free.
	t.Cleanup(func() { _ = c.GetLock(t.Name() + ":b").Unlock(other) })
	rec.take()
	ok, err := m.TryLock(t.Context(), 0, 0)
	require.NoError(t, err, "TryLock")
	require.False(t, ok, "TryLock")
	got := rec.take()
	require.NotEmpty(t, got, "events of a busy TryLock")
	assert.Equal(t, "AcquireStart multi", got[0], "the first event of a busy TryLock")
	assert.Equal(t, "AcquireEnd multi not_acquired", got[len(got)-1], "the last event of a busy TryLock")
	assert.NotContains(t, got, "HoldStart multi", "events of a busy TryLock")
}

// TestMultiLockObservedLoss: the loss of one lock ends the MultiLock's
// hold, reported once, as lost.
func TestMultiLockObservedLoss(t *testing.T) {
	rec := &recorder{kinds: []string{"multi"}}
	srv := redistest.Shared(t)
	c := observedClient(t, srv, rec)
	a, b := c.GetLock(t.Name()+":a"), c.GetLock(t.Name()+":b")
	m := multilock.New(a, b)
	ctx := rlock.WithOwner(t.Context(), "o")
	require.NoError(t, m.Lock(ctx))
	_, err := b.ForceUnlock(ctx)
	require.NoError(t, err)
	relocktest.Receive(t, m.Done(ctx), 5*time.Second, "the loss to be noticed")
	require.ErrorIs(t, m.Unlock(ctx), multilock.ErrLockLost, "Unlock after the loss")
	wantEvents(t, rec.take(), "AcquireStart multi", "HoldStart multi", "AcquireEnd multi acquired",
		"HoldEnd multi lost", "ReleaseStart multi", "ReleaseEnd multi not_held")
}

// TestRedLockObserved: a RedLock reports as kind redlock, to the observer
// given with WithObserver, and a RedLock that retries rounds is a waiter.
func TestRedLockObserved(t *testing.T) {
	plain := &recorder{kinds: []string{"redlock", "lock"}}
	rec := &recorder{kinds: []string{"redlock"}}
	var locks []multilock.Locker
	var clients []*rlock.Client
	for range 3 {
		c := observedClient(t, redistest.Start(t), plain)
		clients = append(clients, c)
		locks = append(locks, c.GetLock("job"))
	}
	rl := multilock.NewRedLock(locks...)
	require.Same(t, plain, rl.Observer(), "RedLock's Observer: its locks'")
	rl = rl.With(multilock.WithObserver(rec))
	ctx := rlock.WithOwner(t.Context(), "o")
	require.NoError(t, rl.Lock(ctx))
	require.NoError(t, rl.Unlock(ctx))
	wantEvents(t, rec.take(), "AcquireStart redlock", "HoldStart redlock", "AcquireEnd redlock acquired",
		"ReleaseStart redlock", "HoldEnd redlock released", "ReleaseEnd redlock released")
	got := plain.take()
	assert.NotContains(t, got, "AcquireStart redlock", "the locks' observer: their own events only")
	assert.Contains(t, got, "AcquireEnd lock acquired", "the locks' observer: their own events")

	// Two of three held by someone else: the rounds fail until wait ends.
	for _, c := range clients[:2] {
		require.NoError(t, c.GetLock("job").Lock(rlock.WithOwner(t.Context(), "other")))
	}
	ok, err := rl.TryLock(ctx, 60*time.Millisecond, 0)
	require.NoError(t, err, "TryLock")
	require.False(t, ok, "TryLock")
	wantEvents(t, rec.take(), "AcquireStart redlock", "WaitStart redlock", "WaitEnd redlock",
		"AcquireEnd redlock not_acquired")
}
