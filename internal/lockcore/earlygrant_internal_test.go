package lockcore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/redistest"
)

// TestEarlyGrantTaken: a grant through the registry reaches x's Client
// while x's call has not yet read its attempt's reply (the call has no
// offer). The grant is parked, and the call takes it when it goes to
// sleep on that attempt: it returns holding the lock, and the grant is
// not given back (given back, the lock is freed, x's Client woken, and x
// takes it by an attempt of its own, a round trip later).
func TestEarlyGrantTaken(t *testing.T) {
	x := WithOwner(t.Context(), "x")
	landed, returned := GrantsLanded(), GrantsReturned()
	e := earlyGrant11(t, Reentrant{}, x, 0, nil, func() error { return nil })
	b, mb, name := e.b, e.mb, e.name
	e.proceed()
	if r := receive(t, e.call, "x's call"); !r.ok || r.err != nil {
		t.Fatalf("x: %v %v", r.ok, r.err)
	}
	if n := GrantsReturned() - returned; n != 0 {
		t.Errorf("%d grants given back, want 0", n)
	}
	if n := GrantsLanded() - landed; n != 1 {
		t.Errorf("%d grants landed, want 1", n)
	}
	if v := hget(t, b.RDB, name, mb.Field("x")); v != "1" {
		t.Errorf("x's field in Redis %q, want 1", v)
	}
	if n := b.earlyN.Load(); n != 0 {
		t.Errorf("%d grants still parked", n)
	}
	if err := mb.Unlock(x); err != nil {
		t.Fatal(err)
	}
}

// TestEarlyGrantCallEnds: the grant is parked for x's call, whose attempt
// then fails (its reply lost, as the hook says) as x's context ends: the
// call ends without sleeping, and gives the parked grant back. Nothing stays parked, x
// holds nothing, and another owner takes the lock.
func TestEarlyGrantCallEnds(t *testing.T) {
	x, cancel := context.WithCancel(WithOwner(t.Context(), "x"))
	defer cancel()
	returned := GrantsReturned()
	e := earlyGrant11(t, Reentrant{}, x, 0, nil, func() error {
		cancel()
		return errors.New("injected: the attempt's reply was lost")
	})
	a, b, ma, mb, name := e.a, e.b, e.ma, e.mb, e.name
	e.proceed()
	if r := receive(t, e.call, "x's call"); r.ok || r.err == nil {
		t.Fatalf("x: %v %v, want an error", r.ok, r.err)
	}
	if n := b.earlyN.Load(); n != 0 {
		t.Errorf("%d grants still parked after x's call returned", n)
	}
	b.mu.Lock()
	left := len(b.early)
	b.mu.Unlock()
	if left != 0 {
		t.Errorf("%d parked grants left", left)
	}
	waitUntil(t, 10*time.Second, "x's granted field gone from Redis", func() bool { return hget(t, a.RDB, name, mb.Field("x")) == "" })
	// The call's end settled the lost attempt and gave the parked grant
	// back; either frees x's field (whichever ran first).
	t.Logf("grants given back: %d", GrantsReturned()-returned)
	z := WithOwner(t.Context(), "z")
	if _, ok, err := ma.Acquire(z, 0, 0); !ok || err != nil {
		t.Fatalf("z: %v %v", ok, err)
	}
	if err := ma.Unlock(z); err != nil {
		t.Fatal(err)
	}
}

// TestGranteeStampsUnique: two attempts of an owner in the same ms do not
// both write a grantees entry: a grant names its entry by the stamp, and
// could not tell the attempts apart (one of them may have taken the
// granted field over with its reply lost). The second writes none; an
// attempt a ms later writes one again.
func TestGranteeStampsUnique(t *testing.T) {
	c := grantCore(t, redistest.Shared(t).Client(t), Config{WakeOne: true})
	m := NewMutex(c, "grant:stamps", Reentrant{})
	h := c.enter(m, "x")
	defer c.leave(h)
	a := &acquisition{m: m, h: h, joined: true, lease: c.WatchdogTimeout}
	sent := c.epoch.Add(5 * time.Millisecond)
	if e := a.grantee(t.Context(), sent); e == "" || a.stamp != 5 {
		t.Fatalf("first attempt: entry %q, stamp %d", e, a.stamp)
	}
	a.stamp = -1
	if e := a.grantee(t.Context(), sent.Add(500*time.Microsecond)); e != "" || a.stamp != -1 {
		t.Fatalf("second attempt in the same ms: entry %q, stamp %d, want none", e, a.stamp)
	}
	b := &acquisition{m: m, h: h, joined: true, lease: c.WatchdogTimeout, stamp: -1}
	if e := b.grantee(t.Context(), sent); e != "" {
		t.Fatalf("another call of the owner in the same ms: entry %q, want none", e)
	}
	if e := a.grantee(t.Context(), sent.Add(time.Millisecond)); e == "" || a.stamp != 6 {
		t.Fatalf("an attempt a ms later: entry %q, stamp %d", e, a.stamp)
	}
}

// TestGrantToOtherFormLanded: the names "n" and "{n}" share the wake
// channels. A Client whose waiter on "n" got the lock keeps listening on
// its wake channel for a while (idle), and then waits on "{n}": it has a
// listener for each form. A grant for "{n}" (its kind in upper case) is
// landed by the "{n}" listener alone: the idle "n" listener, which hears
// it too, neither lands it nor gives it back (on its own hash, where it
// means nothing).
func TestGrantToOtherFormLanded(t *testing.T) {
	raw := redistest.Shared(t).Client(t)
	a := grantCore(t, raw, Config{WakeOne: true})
	a2 := grantCore(t, raw, Config{WakeOne: true})
	b := grantCore(t, raw, Config{WakeOne: true})
	plain := grantName(t, raw)
	braced := "{" + plain + "}"
	t.Cleanup(func() {
		raw.Do(context.Background(), raw.B().Del().Key(braced, layout.Grantees(plain), layout.Wakers(plain)).Build())
	})
	maPlain, ma2Braced := NewMutex(a, plain, Reentrant{}), NewMutex(a2, braced, Reentrant{})
	mbPlain, mbBraced := NewMutex(b, plain, Reentrant{}), NewMutex(b, braced, Reentrant{})
	leaveIdleListener(t, maPlain, mbPlain)
	h := WithOwner(t.Context(), "h")
	if _, ok, err := ma2Braced.Acquire(h, 0, 0); !ok || err != nil {
		t.Fatalf("h on %s: %v %v", braced, ok, err)
	}
	x := WithOwner(t.Context(), "x")
	xCall := goAcquire(mbBraced, x, NoLimit, 0)
	waitOffer(t, b, braced, 1)
	b.mu.Lock()
	both := b.wakers[plain] != nil && b.wakers[plain].listener != nil && b.wakers[braced] != nil
	b.mu.Unlock()
	if !both {
		t.Fatal("b does not listen for both forms (the idle listener of the plain name left)")
	}
	landed, returned := GrantsLanded(), GrantsReturned()
	if err := ma2Braced.Unlock(h); err != nil {
		t.Fatal(err)
	}
	if r := receive(t, xCall, "x's call"); !r.ok || r.err != nil {
		t.Fatalf("x: %v %v", r.ok, r.err)
	}
	if n := GrantsLanded() - landed; n != 1 {
		t.Errorf("%d grants landed, want 1", n)
	}
	if n := GrantsReturned() - returned; n != 0 {
		t.Errorf("%d grants given back, want 0 (the other form's listener gave it back)", n)
	}
	if v := hget(t, raw, braced, mbBraced.Field("x")); v != "1" {
		t.Errorf("x's field in %s: %q, want 1", braced, v)
	}
	if err := mbBraced.Unlock(x); err != nil {
		t.Fatal(err)
	}
}

// leaveIdleListener has mb's Client listen on the wake channel of mb's
// name, idle: h holds the lock on ma's Client, y waits for it on mb's
// (joining its registration), gets it at h's release, and lets it go; the
// Client keeps listening for wakeTTL.
func leaveIdleListener(t *testing.T, ma, mb *Mutex) {
	t.Helper()
	h := WithOwner(t.Context(), "h")
	if _, ok, err := ma.Acquire(h, 0, 0); !ok || err != nil {
		t.Fatalf("h on %s: %v %v", ma.name, ok, err)
	}
	y := WithOwner(t.Context(), "y")
	yCall := goAcquire(mb, y, NoLimit, 0)
	waitOffer(t, mb.core, mb.name, 1)
	if err := ma.Unlock(h); err != nil {
		t.Fatal(err)
	}
	if r := receive(t, yCall, "y's call"); !r.ok || r.err != nil {
		t.Fatalf("y: %v %v", r.ok, r.err)
	}
	if err := mb.Unlock(y); err != nil {
		t.Fatal(err)
	}
}
