package relocktest

import (
	"context"
	"errors"
	"github.com/relock-go/relock"
	"strings"
	"testing"
	"time"

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
// through them.
var TransientErrors = []string{
	"LOADING Redis is loading the dataset in memory",
	"READONLY You can't write against a read only replica.",
	"BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
	"OOM command not allowed when used memory > 'maxmemory'.",
	"MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
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
	prefix, _, _ := strings.Cut(msg, " ")
	a := rlock.WithOwner(t.Context(), "a")

	f.Inject(&Rule{SHA1s: []string{acquire}, N: 1, Reply: reply})
	ok, err := l.TryLock(a, 0, time.Second)
	if ok || err == nil || !strings.Contains(err.Error(), prefix) {
		t.Errorf("TryLock(wait 0) = %v, %v, want false and the %s error", ok, err, prefix)
	}
	if errors.Is(err, relock.ErrNotHeld) || errors.Is(err, relock.ErrInvalidArgument) {
		t.Errorf("TryLock(wait 0) = %v: a Redis error reported as a lock state", err)
	}
	if locked, err := l.IsLocked(t.Context()); locked || err != nil {
		t.Errorf("IsLocked after a failed attempt = %v, %v", locked, err)
	}

	r := f.Inject(&Rule{SHA1s: []string{acquire}, N: 3, Reply: reply})
	ctx, cancel := context.WithTimeout(a, 5*time.Second)
	defer cancel()
	if err := l.Lock(ctx); err != nil {
		t.Fatalf("Lock through 3 %s replies = %v, want the lock", prefix, err)
	}
	if n := r.Hits(); n != 3 {
		t.Errorf("%d attempts answered %s, want 3", n, prefix)
	}
	if n, err := l.HoldCount(a); n != 1 || err != nil {
		t.Errorf("HoldCount = %d, %v, want 1", n, err)
	}

	f.Inject(&Rule{SHA1s: []string{acquire}, N: -1, Reply: reply})
	b := rlock.WithOwner(t.Context(), "b")
	bctx, bcancel := context.WithTimeout(b, 300*time.Millisecond)
	defer bcancel()
	err = l.Lock(bctx)
	if !errors.Is(err, relock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), prefix) {
		t.Errorf("Lock until the deadline = %v, want ErrNotAcquired, DeadlineExceeded and the %s error", err, prefix)
	}
	ok, err = l.TryLock(b, 300*time.Millisecond, time.Second)
	if ok || err == nil || !strings.Contains(err.Error(), prefix) {
		t.Errorf("TryLock(wait 300ms) while every attempt fails = %v, %v, want false and the %s error", ok, err, prefix)
	}
	f.Clear()
	if err := l.Unlock(a); err != nil {
		t.Fatal(err)
	}
	if locked, _ := l.IsLocked(t.Context()); locked {
		t.Error("locked after the last Unlock")
	}
}

// CheckLostAcquireReply loses the reply of l's acquire script (it ran):
// the call reports an error and gives back what it may have won, and the
// owner's next TryLock holds l with the lease it asked for.
func CheckLostAcquireReply(t *testing.T, f *Faulty, l Lockable, acquire string) {
	t.Helper()
	a := rlock.WithOwner(t.Context(), "a")
	f.Inject(&Rule{SHA1s: []string{acquire}, N: 1, Run: true, Reply: LostReply()})
	if ok, err := l.TryLock(a, 0, 250*time.Millisecond); ok || err == nil {
		t.Fatalf("TryLock with its reply lost = %v, %v, want an error", ok, err)
	}
	if locked, _ := l.IsLocked(t.Context()); locked {
		t.Error("the lock won unseen was not given back")
	}
	if ok, err := l.TryLock(a, 0, 2*time.Second); !ok || err != nil {
		t.Fatalf("TryLock = %v, %v", ok, err)
	}
	if left, err := l.RemainingLease(t.Context()); err != nil || left < 1500*time.Millisecond {
		t.Errorf("RemainingLease after TryLock with a 2s lease = %v, %v, want about 2s", left, err)
	}
	if err := l.Unlock(a); err != nil {
		t.Fatal(err)
	}
}

// CheckUnlockErrors answers l's release script (SHA1 release) with a
// LOADING and an OOM error reply: Unlock retries them (an unlock is safe to
// resend) and releases l, rather than leaving it held until its lease ends.
func CheckUnlockErrors(t *testing.T, f *Faulty, l Lockable, release string) {
	t.Helper()
	a := rlock.WithOwner(t.Context(), "a")
	if err := l.Lock(a); err != nil {
		t.Fatal(err)
	}
	r1 := f.Inject(&Rule{SHA1s: []string{release}, N: 1, Reply: ErrorReply(t, f.Client, TransientErrors[0])})
	r2 := f.Inject(&Rule{SHA1s: []string{release}, N: 1, Reply: ErrorReply(t, f.Client, TransientErrors[3])})
	if err := l.Unlock(a); err != nil {
		t.Fatalf("Unlock through LOADING and OOM replies = %v", err)
	}
	if r1.Hits()+r2.Hits() != 2 {
		t.Errorf("%d unlock attempts answered with errors, want 2", r1.Hits()+r2.Hits())
	}
	if locked, _ := l.IsLocked(t.Context()); locked {
		t.Error("locked after Unlock")
	}
}
