package rlock_test

import (
	"errors"
	"testing"
	"time"

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
		if token <= last {
			t.Errorf("%s: token %d, want more than %d", step, token, last)
		}
		last = token
	}

	l1 := c1.GetFencedLock(name)
	tok, err := l1.LockAndGetToken(a)
	if err != nil {
		t.Fatal(err)
	}
	next("first acquisition", tok)
	// Re-entry keeps the token.
	again, err := l1.LockAndGetToken(a)
	if err != nil || again != tok {
		t.Errorf("re-entry token = %d, %v, want %d", again, err, tok)
	}
	if cur, err := l1.Token(a); err != nil || cur != tok {
		t.Errorf("Token = %d, %v, want %d", cur, err, tok)
	}
	_ = l1.Unlock(a)
	_ = l1.Unlock(a)

	// Another owner on another Client.
	l2 := c2.GetFencedLock(name)
	tok, ok, err := l2.TryLockAndGetToken(b, 0, 50*time.Millisecond)
	if err != nil || !ok {
		t.Fatalf("TryLockAndGetToken = %v, %v", ok, err)
	}
	next("other client", tok)

	// After the fixed lease expired.
	tok, ok, err = l1.TryLockAndGetToken(a, 2*time.Second, time.Second)
	if err != nil || !ok {
		t.Fatalf("TryLockAndGetToken after expiry = %v, %v", ok, err)
	}
	next("after expiry", tok)

	// After ForceUnlock.
	if ok, err := l2.ForceUnlock(b); err != nil || !ok {
		t.Fatalf("ForceUnlock = %v, %v", ok, err)
	}
	tok, err = l2.LockAndGetToken(b)
	if err != nil {
		t.Fatal(err)
	}
	next("after ForceUnlock", tok)
	_ = l2.Unlock(b)
}

func TestTokenOfNonHolder(t *testing.T) {
	c := relocktest.Client(t)
	l := c.GetFencedLock(relocktest.Name(t))
	a := rlock.WithOwner(t.Context(), "a")
	if _, err := l.Token(a); !errors.Is(err, rlock.ErrNotHeld) {
		t.Errorf("Token of a free lock = %v, want ErrNotHeld", err)
	}
	if err := l.Lock(a); err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(a)
	if _, err := l.Token(rlock.WithOwner(t.Context(), "b")); !errors.Is(err, rlock.ErrNotHeld) {
		t.Errorf("Token of a non-holder = %v, want ErrNotHeld", err)
	}
	if _, err := l.Token(t.Context()); !errors.Is(err, rlock.ErrNotHeld) {
		t.Errorf("Token without owner or anonymous hold = %v, want ErrNotHeld", err)
	}
}

// TestPausedHolderWriteRejected plays a holder whose lease runs out while
// it is paused: the next holder writes with a newer token, and the late
// write of the first is refused by the fenced register.
func TestPausedHolderWriteRejected(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	reg := fence.NewRegister(raw, name+":resource")
	t.Cleanup(func() { raw.Do(t.Context(), raw.B().Del().Key(reg.Key()).Build()) })
	l := c.GetFencedLock(name)
	slow := rlock.WithOwner(t.Context(), "slow")
	fast := rlock.WithOwner(t.Context(), "fast")

	old, ok, err := l.TryLockAndGetToken(slow, 0, 100*time.Millisecond)
	if err != nil || !ok {
		t.Fatalf("slow holder: %v, %v", ok, err)
	}
	// "slow" pauses past its lease; "fast" takes over and writes.
	newer, ok, err := l.TryLockAndGetToken(fast, 5*time.Second, time.Second)
	if err != nil || !ok {
		t.Fatalf("fast holder: %v, %v", ok, err)
	}
	if err := reg.Write(t.Context(), newer, "fast"); err != nil {
		t.Fatalf("newer holder's write: %v", err)
	}
	// "slow" wakes up and writes with its old token.
	if err := reg.Write(t.Context(), old, "slow"); !errors.Is(err, fence.ErrStaleToken) {
		t.Errorf("late write = %v, want ErrStaleToken", err)
	}
	v, tok, err := reg.Read(t.Context())
	if err != nil || v != "fast" || tok != newer {
		t.Errorf("register = %q, %d, %v, want %q, %d", v, tok, err, "fast", newer)
	}
	_ = l.Unlock(fast)
}

func TestTokensSurvivePersistentRestart(t *testing.T) {
	srv := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "always")
	c := relocktest.ClientOn(t, srv)
	l := c.GetFencedLock("restart")
	a := rlock.WithOwner(t.Context(), "a")
	first, ok, err := l.TryLockAndGetToken(a, 0, time.Second)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	srv.Kill()
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	// The lock itself survived too (it was persisted). A new Client: the
	// old one's connection died with the server.
	l = relocktest.ClientOn(t, srv).GetFencedLock("restart")
	if locked, err := l.IsLocked(t.Context()); err != nil || !locked {
		t.Fatalf("IsLocked after restart = %v, %v, want true", locked, err)
	}
	if _, err := l.ForceUnlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	second, err := l.LockAndGetToken(a)
	if err != nil {
		t.Fatal(err)
	}
	if second <= first {
		t.Errorf("token after restart = %d, want more than %d", second, first)
	}
	_ = l.Unlock(a)
}
