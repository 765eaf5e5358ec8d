package lockcore

import (
	"sync"
	"testing"

	"github.com/relock-go/relock/internal/redistest"
)

// TestReview35StaleGrantTaken: owner x's call 1 sleeps, offered; a's
// Unlock grants it the lock in Redis. Before call 1 takes the grant (it
// waits for the release's answer and then for x's call slot), x's call 2
// (a TryLock with no wait) takes the granted field over, as the docs
// say, holds, and unlocks: x's field is gone and the lock is free, and
// another Client's z takes it. Call 1 then takes the grant (x holds
// nothing, so takeGrant's "another call took it over" check passes) and
// returns success: x and z both hold the lock, the Client records a hold
// of x whose field Redis does not have (found only by the confirmation a
// second later).
func TestReview35StaleGrantTaken(t *testing.T) {
	raw := redistest.Shared(t).Client(t)
	c := grantCore(t, raw, Config{})
	c2 := grantCore(t, redistest.Shared(t).Client(t), Config{})
	name := grantName(t, raw)
	m := NewMutex(c, name, Reentrant{})
	m2 := NewMutex(c2, name, Reentrant{})
	a := WithOwner(t.Context(), "a")
	x := WithOwner(t.Context(), "x")
	z := WithOwner(t.Context(), "z")
	if _, ok, err := m.Acquire(a, 0, 0); !ok || err != nil {
		t.Fatalf("a: %v %v", ok, err)
	}
	x1 := goAcquire(m, x, NoLimit, 0)
	waitOffer(t, c, name, 1)
	landing := make(chan struct{})
	proceed := make(chan struct{})
	var proceedOnce sync.Once
	letGo := func() { proceedOnce.Do(func() { close(proceed) }) }
	// A test that fails before it lets call 1 go lets it go at its end
	// (before the Clients close), instead of hanging.
	t.Cleanup(letGo)
	c.landHook = func() {
		close(landing)
		<-proceed
	}
	g0 := GrantsMade()
	if err := m.Unlock(a); err != nil {
		t.Fatal(err)
	}
	if GrantsMade() == g0 {
		t.Fatal("a's Unlock granted nothing")
	}
	receive(t, landing, "x's call 1 landing its grant")
	// x's call 2 takes the granted field over, and lets it go.
	if _, ok, err := m.Acquire(x, 0, 0); !ok || err != nil {
		t.Fatalf("x's call 2: %v %v", ok, err)
	}
	if err := m.Unlock(x); err != nil {
		t.Fatalf("x's call 2 unlock: %v", err)
	}
	zok := false
	if _, ok, err := m2.Acquire(z, 0, 0); err != nil {
		t.Fatalf("z: %v", err)
	} else {
		zok = ok
	}
	letGo()
	// x's call 1 must not take the spent grant: it goes on waiting while
	// z holds, and takes the lock itself once z lets it go. (The test at
	// first awaited call 1 while z held the lock: with the fix, call 1
	// waits, as it must.) A call that took the spent grant returns
	// holding a field Redis does not have.
	if zok {
		if err := m2.Unlock(z); err != nil {
			t.Fatalf("z unlock: %v", err)
		}
	}
	r := receive(t, x1, "x's call 1")
	v := hget(t, raw, name, m.Field("x"))
	t.Logf("z held: %v; x's call 1: %v %v; x's field in Redis %q", zok, r.ok, r.err, v)
	if r.ok && r.err == nil && v != "1" {
		t.Errorf("x's call 1 returned holding the lock, and x's field in Redis is %q: a grant taken after x's own later hold of it had ended", v)
	}
	if r.ok {
		_ = m.Unlock(x)
	}
}
