package relocktest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/rlock"
)

// Lockable is the method set the lock kinds share, for the checks that
// run on each kind.
type Lockable interface {
	Lock(ctx context.Context) error
	TryLock(ctx context.Context, wait, lease time.Duration) (bool, error)
	Unlock(ctx context.Context) error
	IsLocked(ctx context.Context) (bool, error)
	HoldCount(ctx context.Context) (int, error)
	RemainingLease(ctx context.Context) (time.Duration, error)
}

// TransientErrors are error replies of a server that is loading, read-only,
// busy, out of memory or cut off from its master: a waiting call retries
// through them. The last two are how Redis 6 answers a script whose first
// write it refuses (out of memory, on a read-only replica): an ERR that
// quotes the call's error (Redis 7 answers with that error itself).
var TransientErrors = []string{
	"LOADING Redis is loading the dataset in memory",
	"READONLY You can't write against a read only replica.",
	"BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
	"OOM command not allowed when used memory > 'maxmemory'.",
	"MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
	"ERR Error running script (call to f_02670597a1d1c6c34c22dcc5b0f81261185b112d): @user_script:98: @user_script: 98: -OOM command not allowed when used memory > 'maxmemory'.",
	"ERR Error running script (call to f_02670597a1d1c6c34c22dcc5b0f81261185b112d): @user_script:98: @user_script: 98: -READONLY You can't write against a read only replica.",
}

// ErrorCode is the code of an error reply of TransientErrors: its first
// word, or for a Redis 6 script error the code of the call's error.
func ErrorCode(msg string) string {
	if _, call, ok := strings.Cut(msg, ": -"); ok && strings.HasPrefix(msg, "ERR Error running script ") {
		msg = call
	}
	code, _, _ := strings.Cut(msg, " ")
	return code
}

// ErrorName names an error reply of TransientErrors in a subtest: its
// code, with "script-" before it for a Redis 6 script error.
func ErrorName(msg string) string {
	if strings.HasPrefix(msg, "ERR Error running script ") {
		return "script-" + ErrorCode(msg)
	}
	return ErrorCode(msg)
}

// CheckAcquireErrors answers the acquire script of l (SHA1 acquire) with
// the error reply msg through f, the wrapper under l's Client: a single
// attempt returns the error, never "held by another owner"; a waiting Lock
// retries until the error stops; a wait that ends while the error lasts
// reports it beside ErrNotAcquired and the context's error, and a TryLock
// whose wait ends so returns it, not (false, nil).
func CheckAcquireErrors(t *testing.T, f *Faulty, l Lockable, acquire, msg string) {
	t.Helper()
	reply := ErrorReply(t, f.Client, msg)
	prefix := ErrorCode(msg)
	a := rlock.WithOwner(t.Context(), "a")

	f.Inject(&Rule{SHA1s: []string{acquire}, N: 1, Reply: reply})
	ok, err := l.TryLock(a, 0, time.Second)
	assert.False(t, ok, "TryLock(wait 0) through a %s reply", prefix)
	assert.ErrorContains(t, err, prefix, "TryLock(wait 0) must return the %s error", prefix)
	assert.NotErrorIs(t, err, relock.ErrNotHeld, "a Redis error reported as a lock state")
	assert.NotErrorIs(t, err, relock.ErrInvalidArgument, "a Redis error reported as a lock state")
	locked, err := l.IsLocked(t.Context())
	require.NoError(t, err)
	assert.False(t, locked, "IsLocked after a failed attempt")

	r := f.Inject(&Rule{SHA1s: []string{acquire}, N: 3, Reply: reply})
	ctx, cancel := context.WithTimeout(a, 5*time.Second)
	defer cancel()
	require.NoError(t, l.Lock(ctx), "Lock through 3 %s replies", prefix)
	assert.EqualValues(t, 3, r.Hits(), "attempts answered %s", prefix)
	n, err := l.HoldCount(a)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "HoldCount")

	f.Inject(&Rule{SHA1s: []string{acquire}, N: -1, Reply: reply})
	b := rlock.WithOwner(t.Context(), "b")
	bctx, bcancel := context.WithTimeout(b, 300*time.Millisecond)
	defer bcancel()
	err = l.Lock(bctx)
	assert.ErrorIs(t, err, relock.ErrNotAcquired, "Lock until the deadline")
	assert.ErrorIs(t, err, context.DeadlineExceeded, "Lock until the deadline")
	assert.ErrorContains(t, err, prefix, "Lock until the deadline must report the %s error", prefix)
	ok, err = l.TryLock(b, 300*time.Millisecond, time.Second)
	assert.False(t, ok, "TryLock(wait 300ms) while every attempt fails")
	assert.ErrorContains(t, err, prefix, "TryLock(wait 300ms) while every attempt fails must return the %s error", prefix)
	f.Clear()
	require.NoError(t, l.Unlock(a))
	locked, err = l.IsLocked(t.Context())
	require.NoError(t, err)
	assert.False(t, locked, "locked after the last Unlock")
}

// CheckLostAcquireReply loses the reply of l's acquire script (it ran):
// the call reports an error and gives back what it may have won, and the
// owner's next TryLock holds l with the lease it asked for.
func CheckLostAcquireReply(t *testing.T, f *Faulty, l Lockable, acquire string) {
	t.Helper()
	a := rlock.WithOwner(t.Context(), "a")
	f.Inject(&Rule{SHA1s: []string{acquire}, N: 1, Run: true, Reply: LostReply()})
	ok, err := l.TryLock(a, 0, 250*time.Millisecond)
	require.Error(t, err, "TryLock with its reply lost")
	require.False(t, ok, "TryLock with its reply lost")
	locked, err := l.IsLocked(t.Context())
	require.NoError(t, err)
	assert.False(t, locked, "the lock won unseen was not given back")
	ok, err = l.TryLock(a, 0, 2*time.Second)
	require.NoError(t, err)
	require.True(t, ok, "TryLock after the lost reply")
	left, err := l.RemainingLease(t.Context())
	require.NoError(t, err)
	assert.GreaterOrEqual(t, left, 1500*time.Millisecond, "RemainingLease after TryLock with a 2s lease")
	require.NoError(t, l.Unlock(a))
}

// CheckUnlockErrors answers l's release script (SHA1 release) with a
// LOADING and an OOM error reply: Unlock retries them (an unlock is safe to
// resend) and releases l, rather than leaving it held until its lease ends.
func CheckUnlockErrors(t *testing.T, f *Faulty, l Lockable, release string) {
	t.Helper()
	a := rlock.WithOwner(t.Context(), "a")
	require.NoError(t, l.Lock(a))
	r1 := f.Inject(&Rule{SHA1s: []string{release}, N: 1, Reply: ErrorReply(t, f.Client, TransientErrors[0])})
	r2 := f.Inject(&Rule{SHA1s: []string{release}, N: 1, Reply: ErrorReply(t, f.Client, TransientErrors[3])})
	require.NoError(t, l.Unlock(a), "Unlock through LOADING and OOM replies")
	assert.EqualValues(t, 2, r1.Hits()+r2.Hits(), "unlock attempts answered with errors")
	locked, err := l.IsLocked(t.Context())
	require.NoError(t, err)
	assert.False(t, locked, "locked after Unlock")
}

// CheckUnconfirmedUnlockSettled answers l's release script (SHA1 release)
// with BUSY, which a release does not resend: Unlock fails, and the
// Client, which counts the level released, removes the hold from Redis in
// the background as soon as the server answers, instead of leaving it
// until its 30s watchdog lease ends.
func CheckUnconfirmedUnlockSettled(t *testing.T, f *Faulty, l Lockable, release string) {
	t.Helper()
	a := rlock.WithOwner(t.Context(), "a")
	require.NoError(t, l.Lock(a))
	r := f.Inject(&Rule{SHA1s: []string{release}, N: 1, Reply: ErrorReply(t, f.Client, "BUSY Redis is busy running a script.")})
	require.ErrorContains(t, l.Unlock(a), "BUSY", "Unlock answered BUSY")
	assert.EqualValues(t, 1, r.Hits(), "unlock attempts answered BUSY")
	Eventually(t, 5*time.Second, "the hold to be released in the background", func() bool {
		locked, err := l.IsLocked(t.Context())
		return err == nil && !locked
	})
	require.ErrorIs(t, l.Unlock(a), rlock.ErrNotHeld, "a second Unlock")
}
