package rlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/fence"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

func TestFencedTokensIncrease(t *testing.T) {
	c1 := relocktest.Client(t)
	c2 := relocktest.Client(t)
	name := relocktest.Name(t)
	a := rlock.WithOwner(t.Context(), "a")
	b := rlock.WithOwner(t.Context(), "b")
	var last int64
	next := func(step string, token int64) {
		t.Helper()
		assert.Greater(t, token, last, "%s: the token", step)
		last = token
	}

	l1 := c1.GetFencedLock(name)
	tok, err := l1.LockAndGetToken(a)
	require.NoError(t, err)
	next("first acquisition", tok)
	// Re-entry keeps the token.
	again, err := l1.LockAndGetToken(a)
	require.NoError(t, err)
	assert.Equal(t, tok, again, "the re-entry's token")
	cur, err := l1.Token(a)
	require.NoError(t, err)
	assert.Equal(t, tok, cur, "Token")
	_ = l1.Unlock(a)
	_ = l1.Unlock(a)

	// Another owner on another Client.
	l2 := c2.GetFencedLock(name)
	tok, ok, err := l2.TryLockAndGetToken(b, 0, 50*time.Millisecond)
	requireTry(t, true, ok, err, "TryLockAndGetToken")
	next("other client", tok)

	// After the fixed lease expired.
	tok, ok, err = l1.TryLockAndGetToken(a, 2*time.Second, time.Second)
	requireTry(t, true, ok, err, "TryLockAndGetToken after expiry")
	next("after expiry", tok)

	// After ForceUnlock.
	ok, err = l2.ForceUnlock(b)
	requireTry(t, true, ok, err, "ForceUnlock")
	tok, err = l2.LockAndGetToken(b)
	require.NoError(t, err)
	next("after ForceUnlock", tok)
	_ = l2.Unlock(b)
}

func TestTokenOfNonHolder(t *testing.T) {
	c := relocktest.Client(t)
	l := c.GetFencedLock(relocktest.Name(t))
	a := rlock.WithOwner(t.Context(), "a")
	_, err := l.Token(a)
	assert.ErrorIs(t, err, rlock.ErrNotHeld, "Token of a free lock")
	require.NoError(t, l.Lock(a))
	defer l.Unlock(a)
	_, err = l.Token(rlock.WithOwner(t.Context(), "b"))
	assert.ErrorIs(t, err, rlock.ErrNotHeld, "Token of a non-holder")
	_, err = l.Token(t.Context())
	assert.ErrorIs(t, err, rlock.ErrNotHeld, "Token without owner or anonymous hold")
}

// TestPausedHolderWriteRejected plays a holder whose lease runs out while
// it is paused: the next holder writes with a newer token, and the late
// write of the first is refused by the fenced register.
func TestPausedHolderWriteRejected(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	reg := fence.NewRegister(raw, name+":resource")
	// t.Context() has ended when clean-up runs: the DEL needs its own.
	t.Cleanup(func() { raw.Do(context.Background(), raw.B().Del().Key(reg.Key()).Build()) })
	l := c.GetFencedLock(name)
	slow := rlock.WithOwner(t.Context(), "slow")
	fast := rlock.WithOwner(t.Context(), "fast")

	old, ok, err := l.TryLockAndGetToken(slow, 0, 100*time.Millisecond)
	requireTry(t, true, ok, err, "the slow holder's TryLockAndGetToken")
	// "slow" pauses past its lease; "fast" takes over and writes.
	newer, ok, err := l.TryLockAndGetToken(fast, 5*time.Second, time.Second)
	requireTry(t, true, ok, err, "the fast holder's TryLockAndGetToken")
	require.NoError(t, reg.Write(t.Context(), newer, "fast"), "newer holder's write")
	// "slow" wakes up and writes with its old token.
	assert.ErrorIs(t, reg.Write(t.Context(), old, "slow"), fence.ErrStaleToken, "late write")
	v, tok, err := reg.Read(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "fast", v, "the register's value")
	assert.Equal(t, newer, tok, "the register's token")
	_ = l.Unlock(fast)
}

func TestTokensSurvivePersistentRestart(t *testing.T) {
	srv := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "always")
	c := relocktest.ClientOn(t, srv)
	l := c.GetFencedLock("restart")
	a := rlock.WithOwner(t.Context(), "a")
	first, ok, err := l.TryLockAndGetToken(a, 0, time.Second)
	requireTry(t, true, ok, err, "TryLockAndGetToken")
	srv.Kill()
	require.NoError(t, srv.Restart())
	// The lock itself survived too (it was persisted). A new Client: the
	// old one's connection died with the server.
	l = relocktest.ClientOn(t, srv).GetFencedLock("restart")
	assertLocked(t, l, true, "after the restart")
	_, err = l.ForceUnlock(t.Context())
	require.NoError(t, err)
	second, err := l.LockAndGetToken(a)
	require.NoError(t, err)
	assert.Greater(t, second, first, "the token after the restart")
	_ = l.Unlock(a)
}
