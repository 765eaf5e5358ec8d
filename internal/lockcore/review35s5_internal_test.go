package lockcore

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/lua"
)

// TestTryContextEndsInFlight: a TryLock with wait 0 whose context ends
// at any of the moments the call looks at it, while another owner holds
// the lock throughout, and that looks at it again after that, returns an
// error matching the context's and relock.ErrNotAcquired: never "not
// acquired" without an error, which
// the API keeps for a call whose context is live. A context that ended
// while the call's one attempt was in flight (its script runs on a
// context that outlives the caller's by a moment) once made the call
// return (false, nil).
func TestTryContextEndsInFlight(t *testing.T) {
	raw, _, _, name, m, _ := grantHeld(t) // owner a holds the lock
	for n := int32(1); n <= 8; n++ {
		inner, cancel := context.WithCancel(t.Context())
		ctx := &endingCtx{Context: inner, cancel: cancel}
		ctx.n.Store(n)
		_, ok, err := m.Acquire(WithOwner(ctx, "b"), 0, 0)
		// The call looked at its context after it ended (it can tell
		// only then).
		seen := ctx.n.Load() < 0
		cancel()
		if !seen {
			if ok || (err != nil && !errors.Is(err, context.Canceled)) {
				t.Errorf("context ending after look %d: b's TryLock returned %v, %v while a holds the lock", n, ok, err)
			}
			continue
		}
		if ok || err == nil || !errors.Is(err, context.Canceled) || !errors.Is(err, relock.ErrNotAcquired) {
			t.Errorf("context ending after look %d: b's TryLock returned %v, %v while a holds the lock", n, ok, err)
		}
		if v := hget(t, raw, name, m.Field("b")); v != "" {
			t.Fatalf("b's count in Redis is %q", v)
		}
	}
}

// TestGrantNotPastOtherKind: a plain lock and a fenced lock of one name
// share its hash. A release of one does not grant the lock to a waiter
// of its own Client while the Client has a caller of the name's other
// kind that wants it: a sleeping waiter (it offers itself to the other
// kind's releases only, and hears no release that grants), a TryLock
// with no wait that was refused, or a spin waiter (whose knocks carry the
// Client's own ID, which the release's script skips). Each release of a
// run of grants among the Client's goroutines of one kind passed it over.
// The release publishes, as without grants.
func TestGrantNotPastOtherKind(t *testing.T) {
	for _, kinds := range [][2]Kind{{Reentrant{}, Fenced{}}, {Fenced{}, Reentrant{}}, {Reentrant{}, Spin{}}} {
		for _, how := range []string{"waiter", "poller"} {
			if _, spin := kinds[1].(Spin); spin && how == "poller" {
				continue
			}
			t.Run(fmt.Sprintf("%T/%T/%s", kinds[0], kinds[1], how), func(t *testing.T) {
				raw := redistest.Shared(t).Client(t)
				c := grantCore(t, raw, Config{})
				name := grantName(t, raw)
				m := NewMutex(c, name, kinds[0])
				other := NewMutex(c, name, kinds[1])
				a := WithOwner(t.Context(), "a")
				if _, ok, err := m.Acquire(a, 0, 0); !ok || err != nil {
					t.Fatalf("a: %v %v", ok, err)
				}
				octx, cancelO := context.WithCancel(t.Context())
				defer cancelO()
				var ogot <-chan acquired
				offers := 1
				switch _, spin := kinds[1].(Spin); {
				case how == "poller":
					if _, ok, err := other.Acquire(WithOwner(t.Context(), "o"), 0, 0); ok || err != nil {
						t.Fatalf("poller: %v %v, want refused", ok, err)
					}
				case spin:
					// The spin waiter was refused once at least.
					k0 := knocks(t, raw, name)
					ogot = goAcquire(other, WithOwner(octx, "o"), NoLimit, 0)
					waitUntil(t, 10*time.Second, "the spin waiter's knock on a refusal", func() bool { return knocks(t, raw, name) != k0 })
				default:
					ogot = goAcquire(other, WithOwner(octx, "o"), NoLimit, 0)
					waitOffer(t, c, name, 1)
					offers = 2
				}
				got := goAcquire(m, WithOwner(t.Context(), "b"), NoLimit, 0)
				waitOffer(t, c, name, offers)
				g0 := GrantsMade()
				if err := m.Unlock(a); err != nil {
					t.Fatal(err)
				}
				if g := GrantsMade() - g0; g != 0 {
					t.Errorf("the release granted the lock (%d grants) while a caller of the other kind wanted it", g)
				}
				// Whoever got the lock lets it go; then the other does.
				waiting := map[string]bool{"b": true, "o": ogot != nil}
				for waiting["b"] || waiting["o"] {
					var r acquired
					var who string
					select {
					case r = <-got:
						who = "b"
					case r = <-ogot:
						who = "o"
					case <-time.After(10 * time.Second):
						t.Fatalf("b and o did not both get the lock within 10s: %v", waiting)
					}
					if !r.ok || r.err != nil {
						t.Fatalf("%s: %v %v", who, r.ok, r.err)
					}
					waiting[who] = false
					mw := m
					if who == "o" {
						mw = other
					}
					if err := mw.Unlock(WithOwner(t.Context(), who)); err != nil {
						t.Fatalf("%s: unlock: %v", who, err)
					}
				}
			})
		}
	}
}

// knocks is the number of entries in name's record of refused Clients.
func knocks(t *testing.T, rdb rueidis.Client, name string) int64 {
	t.Helper()
	n, err := rdb.Do(t.Context(), rdb.B().Zcard().Key(layout.Knocks(name)).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestGrantNotUndoneByGiveBack: while a release's grant to owner b's
// waiting goroutine is on its way, another goroutine of b makes an
// attempt that finds the granted field and takes it over, and its
// context ends before it reads the reply: the attempt gives back what it
// won, which removes the granted field. The waiting goroutine must not
// then take the grant (return holding a lock Redis does not hold for b,
// which another owner may take): it holds only with b's field in Redis.
func TestGrantNotUndoneByGiveBack(t *testing.T) {
	raw, g, c, name, m, a := grantHeld(t)
	got := goAcquire(m, WithOwner(t.Context(), "b"), NoLimit, 0)
	waitOffer(t, c, name, 1)
	b2ctx, cancelB2 := context.WithCancel(t.Context())
	defer cancelB2()
	var started atomic.Bool
	var b2 acquired
	g.setAfter(func(args []string) {
		switch args[0] {
		case lua.LockAcquire.SHA1:
			// b's second goroutine won (it took the granted field
			// over); its context ends before it reads the reply.
			cancelB2()
		case lua.LockUnlock.SHA1:
			if !started.CompareAndSwap(false, true) {
				return
			}
			// The grant is written; its reply is held while b's
			// second goroutine tries the lock.
			if hget(t, raw, name, m.Field("b")) != "1" {
				t.Error("the release did not grant b")
			}
			_, ok, err := m.Acquire(WithOwner(b2ctx, "b"), 0, 0)
			b2 = acquired{ok: ok, err: err}
		}
	})
	if err := m.Unlock(a); err != nil {
		t.Fatal(err)
	}
	g.setAfter(nil)
	if b2.ok || !errors.Is(b2.err, context.Canceled) {
		t.Fatalf("b's second goroutine: %v %v, want cancelled", b2.ok, b2.err)
	}
	r := receive(t, got, "b's call")
	if !r.ok || r.err != nil {
		t.Fatalf("b: %v %v", r.ok, r.err)
	}
	if v := hget(t, raw, name, m.Field("b")); v != "1" {
		t.Errorf("b's call returned holding the lock, and b's count in Redis is %q", v)
	}
	_ = m.Unlock(WithOwner(t.Context(), "b"))
}

// TestGrantGiveBackBothGone is TestGrantNotUndoneByGiveBack where the
// granted goroutine's context ends too, before the release's reply
// comes: neither call keeps the level, and b's field (granted, then
// taken over) is taken back at once, not left for its lease.
func TestGrantGiveBackBothGone(t *testing.T) {
	raw, g, c, name, m, a := grantHeld(t)
	b1ctx, cancelB1 := context.WithCancel(t.Context())
	defer cancelB1()
	got := goAcquire(m, WithOwner(b1ctx, "b"), NoLimit, 0)
	waitOffer(t, c, name, 1)
	b2ctx, cancelB2 := context.WithCancel(t.Context())
	defer cancelB2()
	var started atomic.Bool
	var b1, b2 acquired
	g.setAfter(func(args []string) {
		switch args[0] {
		case lua.LockAcquire.SHA1:
			cancelB2()
		case lua.LockUnlock.SHA1:
			if !started.CompareAndSwap(false, true) {
				return
			}
			_, ok, err := m.Acquire(WithOwner(b2ctx, "b"), 0, 0)
			b2 = acquired{ok: ok, err: err}
			cancelB1()
			b1 = receive(t, got, "b's call")
		}
	})
	if err := m.Unlock(a); err != nil {
		t.Fatal(err)
	}
	g.setAfter(nil)
	if b1.ok || b2.ok || !errors.Is(b1.err, context.Canceled) || !errors.Is(b2.err, context.Canceled) {
		t.Fatalf("b's calls: %v %v and %v %v, want both cancelled", b1.ok, b1.err, b2.ok, b2.err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for hget(t, raw, name, m.Field("b")) != "" {
		if time.Now().After(deadline) {
			t.Fatalf("b gave up twice and still holds in Redis 5s later (PTTL %dms)", pttl(t, raw, name))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if c.lookupHold(name, "", "b") != 0 {
		t.Error("the Client records a hold of b")
	}
}
