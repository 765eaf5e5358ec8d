package rlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// TestHoldReleasesItself: Acquire returns a Hold bound to its owner: it
// is released by its own Release whatever context that is given, not
// twice, and it tells its owner, its token and its end.
func TestHoldReleasesItself(t *testing.T) {
	c := relocktest.Client(t)
	name := relocktest.Name(t)
	l := c.GetLock(name)

	h, err := l.Acquire(t.Context())
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(h.Owner(), "anon-"), "owner %q of a hold taken without one", h.Owner())
	assert.Contains(t, h.Owner(), "@"+c.Name(), "the owner names the Client")
	assert.Zero(t, h.Token(), "a plain lock's hold has no token")
	// Another acquisition without an owner waits for it: the hold is not
	// the Client's anonymous hold, nor reentrant for ownerless calls.
	ok, err := l.TryLock(t.Context(), 0, 0)
	require.NoError(t, err)
	assert.False(t, ok)

	require.NoError(t, h.Release(context.Background()), "Release with a context that carries no owner")
	<-h.Done()
	assert.ErrorIs(t, context.Cause(h.Context()), context.Canceled)
	assert.ErrorIs(t, h.Release(t.Context()), rlock.ErrNotHeld, "a second Release")
	locked, err := l.IsLocked(t.Context())
	require.NoError(t, err)
	assert.False(t, locked)

	// With an owner: the hold is that owner's level, and re-enters.
	ctx := rlock.WithOwner(t.Context(), "job-1")
	h1, err := l.Acquire(ctx)
	require.NoError(t, err)
	h2, err := l.TryAcquire(ctx, 0, time.Minute)
	require.NoError(t, err)
	require.NotNil(t, h2)
	assert.Equal(t, "job-1", h2.Owner())
	n, err := l.HoldCount(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	require.NoError(t, h2.Release(t.Context()))
	require.NoError(t, h1.Release(t.Context()))

	other, err := l.TryAcquire(rlock.WithOwner(t.Context(), "other"), 0, 0)
	require.NoError(t, err)
	require.NotNil(t, other, "free after both releases")
	busy, err := l.TryAcquire(ctx, 0, 0)
	assert.NoError(t, err)
	assert.Nil(t, busy, "TryAcquire of a held lock")
	require.NoError(t, other.Release(t.Context()))

	f := c.GetFencedLock(relocktest.Name(t))
	fh, err := f.Acquire(t.Context())
	require.NoError(t, err)
	assert.Positive(t, fh.Token(), "a fenced lock's hold has its token")
	require.NoError(t, fh.Release(t.Context()))
}

// TestReleaseAfterLoss: a release after a loss this Client knows of says
// so (ErrLockLost beside ErrNotHeld, with what ended the hold, on one
// line), whoever noticed the loss first; a second release says only that
// nothing is held.
func TestReleaseAfterLoss(t *testing.T) {
	raw := relocktest.Raw(t)
	lost := make(chan string, 8)
	c := relocktest.Client(t, rlock.WithWatchdogTimeout(300*time.Millisecond),
		rlock.WithLostHandler(func(name, owner string, cause error) { lost <- owner }))
	wantLoss := func(t *testing.T, err error, why string) {
		t.Helper()
		require.Error(t, err)
		assert.ErrorIs(t, err, rlock.ErrNotHeld)
		assert.ErrorIs(t, err, rlock.ErrLockLost)
		assert.Equal(t, 1, strings.Count(err.Error(), "relock:"), "one prefix: %q", err)
		assert.Contains(t, err.Error(), why)
	}
	waitLoss := func(t *testing.T, owner string) {
		t.Helper()
		select {
		case got := <-lost:
			assert.Equal(t, owner, got)
		case <-time.After(3 * time.Second):
			t.Fatal("no loss reported")
		}
	}

	t.Run("deleted, found by a renewal", func(t *testing.T) {
		name := relocktest.Name(t)
		ctx := rlock.WithOwner(t.Context(), "a")
		l := c.GetLock(name)
		require.NoError(t, l.Lock(ctx))
		require.NoError(t, raw.Do(t.Context(), raw.B().Del().Key(name).Build()).Error())
		waitLoss(t, "a")
		wantLoss(t, l.Unlock(ctx), "renewal found it gone")
		err := l.Unlock(ctx)
		assert.ErrorIs(t, err, rlock.ErrNotHeld)
		assert.False(t, errors.Is(err, rlock.ErrLockLost), "a second Unlock: %v", err)
	})
	t.Run("fixed lease ran out, found at release", func(t *testing.T) {
		name := relocktest.Name(t)
		ctx := rlock.WithOwner(t.Context(), "b")
		l := c.GetLock(name)
		require.NoError(t, l.LockLease(ctx, 50*time.Millisecond))
		relocktest.Eventually(t, 3*time.Second, "the lease to run out", func() bool {
			n, err := raw.Do(context.Background(), raw.B().Exists().Key(name).Build()).AsInt64()
			return err == nil && n == 0
		})
		wantLoss(t, l.Unlock(ctx), "its release found it gone: its fixed lease of 50ms had run out")
		waitLoss(t, "b")
	})
	t.Run("force-unlocked elsewhere, heard", func(t *testing.T) {
		name := relocktest.Name(t)
		ctx := rlock.WithOwner(t.Context(), "c")
		l := c.GetLock(name)
		require.NoError(t, l.Lock(ctx))
		done := l.Done(ctx) // watched: listens for a force-unlock
		relocktest.Eventually(t, 3*time.Second, "the hold to listen", func() bool {
			return relocktest.Subscribers(raw, "redisson_lock__channel:{"+name+"}") == 1
		})
		ok, err := relocktest.Client(t).GetLock(name).ForceUnlock(t.Context())
		require.NoError(t, err)
		require.True(t, ok)
		<-done
		waitLoss(t, "c")
		wantLoss(t, l.Unlock(ctx), "force-unlocked")
	})
	t.Run("without an owner", func(t *testing.T) {
		name := relocktest.Name(t)
		l := c.GetLock(name)
		require.NoError(t, l.Lock(t.Context()))
		require.NoError(t, raw.Do(t.Context(), raw.B().Del().Key(name).Build()).Error())
		select {
		case owner := <-lost:
			assert.True(t, strings.HasPrefix(owner, "anon-"), "owner %q", owner)
		case <-time.After(3 * time.Second):
			t.Fatal("no loss reported")
		}
		wantLoss(t, l.Unlock(t.Context()), "renewal found it gone")
		assert.ErrorIs(t, l.Unlock(t.Context()), rlock.ErrNotHeld)
	})
}

// TestClientName: a Client's name is in the owner of its ownerless holds,
// as Redis shows them; a bad name is refused before anything is sent.
func TestClientName(t *testing.T) {
	raw := relocktest.Raw(t)
	c := relocktest.Client(t, rlock.WithClientName("billing-7"))
	assert.Equal(t, "billing-7", c.Name())
	name := relocktest.Name(t)
	l := c.GetLock(name)
	require.NoError(t, l.Lock(t.Context()))
	fields := relocktest.HGetAll(t, raw, name)
	require.Len(t, fields, 1)
	for field := range fields {
		assert.True(t, strings.HasPrefix(field, c.ID()+":anon-"), "field %q", field)
		assert.True(t, strings.HasSuffix(field, "@billing-7"), "field %q", field)
	}
	require.NoError(t, l.Unlock(t.Context()))

	d := relocktest.Client(t)
	assert.NotEmpty(t, d.Name(), "the default name (host:pid)")
	assert.Contains(t, d.Name(), ":", "the default name (host:pid)")

	srv := redistest.Shared(t)
	for _, bad := range []string{"", "a\nb", strings.Repeat("x", 201)} {
		_, err := rlock.NewClient(srv.ClientOption(), rlock.WithClientName(bad))
		assert.ErrorIs(t, err, rlock.ErrInvalidArgument, "WithClientName(%q)", bad)
	}
	// An owner of the reserved form is refused from users.
	err := l.Lock(rlock.WithOwner(t.Context(), "anon-3@billing-7"))
	assert.ErrorIs(t, err, rlock.ErrInvalidArgument)
}
