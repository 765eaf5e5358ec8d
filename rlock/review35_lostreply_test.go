package rlock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/rlock"
)

// grantLost makes owner "a" hold l and owner "b" wait with lock, and
// releases a with the release's reply lost, until that release granted
// the lock to b (b's field written by the script); it returns when b's
// call returned nil.
func grantLost(t *testing.T, f *relocktest.Faulty, l *rlock.Lock, raw interface {
	hget(field string) string
}, fieldB string, lock func(ctx context.Context) error) context.Context {
	t.Helper()
	a := rlock.WithOwner(t.Context(), "a")
	b := rlock.WithOwner(t.Context(), "b")
	for round := range 30 {
		require.NoError(t, l.Lock(a))
		res := make(chan error, 1)
		go func() { res <- lock(b) }()
		time.Sleep(time.Duration(round+1) * 5 * time.Millisecond)
		var granted atomic.Bool
		f.Inject(&relocktest.Rule{SHA1s: []string{lua.LockUnlock.SHA1}, N: 1, Run: true, Reply: relocktest.LostReply(),
			After: func([]string) { granted.Store(raw.hget(fieldB) == "1") }})
		_ = l.Unlock(a)
		f.Clear()
		require.NoError(t, relocktest.Receive(t, res, 10*time.Second, "b's call"))
		if granted.Load() {
			return b
		}
		require.NoError(t, l.Unlock(b))
	}
	t.Fatal("no release granted b")
	return nil
}

type rawHget struct {
	t    *testing.T
	name string
}

func (r rawHget) hget(field string) string {
	raw := relocktest.Raw(r.t)
	v, _ := raw.Do(context.Background(), raw.B().Hget().Key(r.name).Field(field).Build()).ToString()
	return v
}

// TestReview35GrantReplyLostLease (holds): the reply of the release that granted
// the lock to b is lost; b's next attempt takes over the field the
// release wrote (as the docs say). Does the hold then get b's lease in
// Redis? The grant wrote the 3s confirmation window, and a hold taken by
// an attempt is not confirmed: unless the attempt set the lease, Redis
// lets the hold go 3s after the grant while b's hold stands (the watchdog
// renews a third of 30s later; a fixed lease is not renewed at all).
func TestReview35GrantReplyLostLease(t *testing.T) {
	for _, tc := range []struct {
		name string
		lock func(l *rlock.Lock) func(ctx context.Context) error
	}{
		{"watchdog", func(l *rlock.Lock) func(ctx context.Context) error { return l.Lock }},
		{"fixed-10s", func(l *rlock.Lock) func(ctx context.Context) error {
			return func(ctx context.Context) error { return l.LockLease(ctx, 10*time.Second) }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := relocktest.NewFaulty(relocktest.Raw(t))
			c, err := rlock.New(f)
			require.NoError(t, err)
			defer c.Close()
			raw := relocktest.Raw(t)
			name := relocktest.Name(t)
			l := c.GetLock(name)
			b := grantLost(t, f, l, rawHget{t, name}, c.ID()+":b", tc.lock(l))
			pt, err := raw.Do(t.Context(), raw.B().Pttl().Key(name).Build()).AsInt64()
			require.NoError(t, err)
			t.Logf("b holds; the lock's PTTL in Redis: %dms", pt)
			require.Greater(t, pt, int64(3000), "b holds by an attempt that took over a granted field, and the hold's lease in Redis is the confirmation window (%dms)", pt)
			require.NoError(t, l.Unlock(b))
		})
	}
}

// TestReview35GrantReplyLostCancel: the reply of the release that granted
// the lock to b is lost, and b's context ends at that moment: b's call
// returns an error and b holds nothing afterwards (the field the release
// wrote is removed: the lock is free at once, not after the window).
func TestReview35GrantReplyLostCancel(t *testing.T) {
	f := relocktest.NewFaulty(relocktest.Raw(t))
	c, err := rlock.New(f)
	require.NoError(t, err)
	defer c.Close()
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	l := c.GetLock(name)
	fieldB := c.ID() + ":b"
	a := rlock.WithOwner(t.Context(), "a")
	for round := range 30 {
		require.NoError(t, l.Lock(a))
		bctx, cancel := context.WithCancel(t.Context())
		res := make(chan error, 1)
		go func() { res <- l.Lock(rlock.WithOwner(bctx, "b")) }()
		time.Sleep(time.Duration(round+1) * 5 * time.Millisecond)
		var granted atomic.Bool
		f.Inject(&relocktest.Rule{SHA1s: []string{lua.LockUnlock.SHA1}, N: 1, Run: true, Reply: relocktest.LostReply(),
			After: func([]string) {
				granted.Store(rawHget{t, name}.hget(fieldB) == "1")
				cancel()
			}})
		_ = l.Unlock(a)
		f.Clear()
		berr := relocktest.Receive(t, res, 10*time.Second, "b's call")
		cancel()
		if !granted.Load() {
			if berr == nil {
				require.NoError(t, l.Unlock(rlock.WithOwner(t.Context(), "b")))
			}
			continue
		}
		if berr == nil {
			t.Logf("b's call succeeded (a grant it took before its context ended)")
			require.NoError(t, l.Unlock(rlock.WithOwner(t.Context(), "b")))
			continue
		}
		relocktest.Eventually(t, time.Second, "the lock to be free", func() bool {
			n, _ := raw.Do(t.Context(), raw.B().Exists().Key(name).Build()).AsInt64()
			return n == 0
		})
		return
	}
	t.Skip("no round crossed a lost grant reply with b's cancellation")
}
