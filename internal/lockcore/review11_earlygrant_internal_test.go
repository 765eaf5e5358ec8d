package lockcore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/redistest"
)

// early11 is the scene of earlyGrant11: h holds the lock on Client a; x's
// call on Client b is held right after its refused attempt that wrote b's
// grantees entry, and h's release granted it the lock (parked on b).
type early11 struct {
	raw     rueidis.Client
	a, b    *Core
	ma, mb  *Mutex
	name    string
	call    <-chan acquired
	proceed func()
}

// earlyGrant11 sets the scene: two Clients with wake-one on one lock of
// kind kind, h holding it on a; x's call on b (with lease lease) is held
// right after its attempt that wrote b's grantees entry was refused,
// before it acts on the reply (b's refusedHook, which returns what reply
// returns); h's release then grants it the lock, parked on b. before, if
// not nil, sets more of the scene on b before x's call starts.
func earlyGrant11(t *testing.T, kind Kind, x context.Context, lease time.Duration, before func(e *early11), reply func() error) *early11 {
	t.Helper()
	e := &early11{raw: redistest.Shared(t).Client(t)}
	e.a = grantCore(t, e.raw, Config{WakeOne: true})
	e.b = grantCore(t, e.raw, Config{WakeOne: true})
	e.name = grantName(t, e.raw)
	t.Cleanup(func() {
		e.raw.Do(context.Background(), e.raw.B().Del().Key(layout.Grantees(e.name), layout.Wakers(e.name)).Build())
	})
	e.ma, e.mb = NewMutex(e.a, e.name, kind), NewMutex(e.b, e.name, kind)
	h := WithOwner(t.Context(), "h")
	if _, ok, err := e.ma.Acquire(h, 0, 0); !ok || err != nil {
		t.Fatalf("h: %v %v", ok, err)
	}
	held := make(chan struct{})
	release := make(chan struct{})
	var once, letOnce sync.Once
	e.proceed = func() { letOnce.Do(func() { close(release) }) }
	t.Cleanup(e.proceed)
	var hooked sync.Once
	var armed atomic.Bool // x's call only: other waiters of b pass
	e.b.refusedHook = func() error {
		if !armed.Load() {
			return nil
		}
		first := false
		hooked.Do(func() { first = true })
		if !first {
			return nil
		}
		once.Do(func() { close(held) })
		<-release
		return reply()
	}
	if before != nil {
		before(e)
	}
	armed.Store(true)
	e.call = goAcquire(e.mb, x, NoLimit, lease)
	receive(t, held, "x's refused attempt")
	parked := GrantsParked()
	if err := e.ma.Unlock(h); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the grant to x parked", func() bool { return GrantsParked() != parked })
	return e
}

// noneParked fails t when c keeps a parked grant.
func noneParked(t *testing.T, c *Core) {
	t.Helper()
	c.mu.Lock()
	left := len(c.early)
	var attempting []string
	for _, h := range c.holds {
		if h.users == 0 && h.attempting.Load() != 0 {
			attempting = append(attempting, h.key.owner)
		}
	}
	for _, h := range c.anonFree {
		if h.attempting.Load() != 0 {
			attempting = append(attempting, h.key.owner)
		}
	}
	c.mu.Unlock()
	if len(attempting) > 0 {
		t.Errorf("records of owners with no call still name an attempt: %v", attempting)
	}
	if n := c.earlyN.Load(); n != 0 || left != 0 {
		t.Errorf("parked grants left: earlyN %d, early %d", n, left)
	}
}

// freeSoon fails t unless the lock is free well before a grant's window
// (3s) runs out: a grant that is given back frees it at once.
func freeSoon(t *testing.T, e *early11) {
	t.Helper()
	freeWithin(t, e.raw, e.name, 1500*time.Millisecond)
}

// TestReview11EarlyGrantFenced: a fenced lock's grant parked for x's call
// is taken with its token.
func TestReview11EarlyGrantFenced(t *testing.T) {
	x := WithOwner(t.Context(), "x")
	e := earlyGrant11(t, Fenced{}, x, 0, nil, func() error { return nil })
	e.proceed()
	r := receive(t, e.call, "x's call")
	if !r.ok || r.err != nil || r.token <= 0 {
		t.Fatalf("x: %v %v token %d", r.ok, r.err, r.token)
	}
	noneParked(t, e.b)
	if v := hget(t, e.raw, e.name, e.mb.Field("x")); v != "1" {
		t.Errorf("x's field %q, want 1", v)
	}
	if err := e.mb.Unlock(x); err != nil {
		t.Fatal(err)
	}
}

// TestReview11EarlyGrantAnonymous: an ownerless call takes the grant
// parked for it, and its release frees the lock.
func TestReview11EarlyGrantAnonymous(t *testing.T) {
	x := t.Context()
	e := earlyGrant11(t, Reentrant{}, x, 0, nil, func() error { return nil })
	e.proceed()
	r := receive(t, e.call, "x's call")
	if !r.ok || r.err != nil {
		t.Fatalf("x: %v %v", r.ok, r.err)
	}
	noneParked(t, e.b)
	if err := e.mb.Unlock(x); err != nil {
		t.Fatal(err)
	}
	freeSoon(t, e)
}

// TestReview11EarlyGrantCancelled: x's context ends as its refused reply
// is read: the call ends without the lock, gives the parked grant back,
// and the lock is free at once (not after the window).
func TestReview11EarlyGrantCancelled(t *testing.T) {
	x, cancel := context.WithCancel(WithOwner(t.Context(), "x"))
	defer cancel()
	e := earlyGrant11(t, Reentrant{}, x, 0, nil, func() error { cancel(); return nil })
	e.proceed()
	r := receive(t, e.call, "x's call")
	if r.ok || r.err == nil {
		t.Fatalf("x: %v %v, want an error", r.ok, r.err)
	}
	noneParked(t, e.b)
	freeSoon(t, e)
}

// TestReview11EarlyGrantClosed: b closes while the grant is parked: x's
// call ends with ErrClosed, and nothing stays parked.
func TestReview11EarlyGrantClosed(t *testing.T) {
	x := WithOwner(t.Context(), "x")
	var e *early11
	e = earlyGrant11(t, Reentrant{}, x, 0, nil, func() error {
		go func() { _ = e.b.Close() }()
		<-e.b.closed
		return nil
	})
	e.proceed()
	r := receive(t, e.call, "x's call")
	if r.ok || !errors.Is(r.err, relock.ErrClosed) {
		t.Fatalf("x: %v %v, want ErrClosed", r.ok, r.err)
	}
	noneParked(t, e.b)
}

// TestReview11EarlyGrantShortLease: x's fixed lease is shorter than the
// grant window, which is then that lease; x's call is held (in its
// attempt, on its owner's call slot) with the grant parked until the
// Client gives the grant back or x's granted field is gone from Redis
// (its window ran out). Given back before the window ends, the grant
// frees the lock and wakes b, and x gets the lock at once by an attempt.
// Left parked until the window ran out, the field expires and nobody is
// told: x finds the grant too old when it sleeps, and its give-back
// finds nothing to free; x sleeps until its next look (1s to 2s).
func TestReview11EarlyGrantShortLease(t *testing.T) {
	x := WithOwner(t.Context(), "x")
	const lease = 400 * time.Millisecond
	var e *early11
	e = earlyGrant11(t, Reentrant{}, x, lease, nil, func() error {
		for e.b.earlyN.Load() != 0 {
			n, err := e.raw.Do(context.Background(), e.raw.B().Exists().Key(e.name).Build()).AsInt64()
			if err != nil || n == 0 {
				return err
			}
			time.Sleep(time.Millisecond)
		}
		return nil
	})
	start := time.Now()
	e.proceed()
	r := receive(t, e.call, "x's call")
	if !r.ok || r.err != nil {
		t.Fatalf("x: %v %v", r.ok, r.err)
	}
	if d := time.Since(start); d > 700*time.Millisecond {
		t.Errorf("x got the lock %v after its call went on: it slept through a free lock", d)
	}
	noneParked(t, e.b)
	if err := e.mb.Unlock(x); err != nil {
		t.Fatal(err)
	}
}

// TestReview11EarlyGrantSameOwner: a second call of x on b waits for x's
// call slot while the first is held with the grant parked. Both get the
// lock in turn, each holding it alone, and nothing stays parked.
func TestReview11EarlyGrantSameOwner(t *testing.T) {
	x := WithOwner(t.Context(), "x")
	var second <-chan acquired
	e := earlyGrant11(t, Reentrant{}, x, 0, nil, func() error { return nil })
	second = goAcquire(e.mb, x, NoLimit, 0)
	e.proceed()
	for i := 0; i < 2; i++ {
		var r acquired
		select {
		case r = <-e.call:
		case r = <-second:
		case <-time.After(10 * time.Second):
			t.Fatal("no call of x returned")
		}
		if !r.ok || r.err != nil {
			t.Fatalf("x: %v %v", r.ok, r.err)
		}
	}
	// Both calls hold a level of x's hold: two in all.
	waitUntil(t, 1500*time.Millisecond, "x's field at 2", func() bool { return hget(t, e.raw, e.name, e.mb.Field("x")) == "2" },
		func() string { return fmt.Sprintf("x's field %q", hget(t, e.raw, e.name, e.mb.Field("x"))) })
	noneParked(t, e.b)
	for i := 0; i < 2; i++ {
		if err := e.mb.Unlock(x); err != nil {
			t.Fatal(err)
		}
	}
	freeSoon(t, e)
}

// TestReview11EarlyGrantUnconfirmed: x's call joins a subscription that
// another waiter of b made (z's), so its first attempt writes the entry
// while its own subscription is not confirmed: it sleeps without an
// offer, and the parked grant is given back at once; the lock goes on to
// a waiter of b well before the window ends.
func TestReview11EarlyGrantUnconfirmed(t *testing.T) {
	x := WithOwner(t.Context(), "x")
	z := WithOwner(t.Context(), "z")
	var zCall <-chan acquired
	e := earlyGrant11(t, Reentrant{}, x, 0, func(e *early11) {
		zCall = goAcquire(e.mb, z, NoLimit, 0)
		waitOffer(t, e.b, e.name, 1)
	}, func() error { return nil })
	start := time.Now()
	e.proceed()
	var r acquired
	var who context.Context
	select {
	case r = <-e.call:
		who = x
	case r = <-zCall:
		who = z
	case <-time.After(10 * time.Second):
		t.Fatal("neither x nor z got the lock")
	}
	if !r.ok || r.err != nil {
		t.Fatalf("%v %v", r.ok, r.err)
	}
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Errorf("the lock went on after %v", d)
	}
	if err := e.mb.Unlock(who); err != nil {
		t.Fatal(err)
	}
	other := zCall
	if who == z {
		other = e.call
	}
	if r := receive(t, other, "the other call"); !r.ok || r.err != nil {
		t.Fatalf("%v %v", r.ok, r.err)
	}
	noneParked(t, e.b)
}

// TestReview11EarlyGrantStress: three Clients with wake-one take one lock
// in turn from two owners each, two goroutines an owner (calls of one
// owner share its call slot and its parked grant), and one anonymous
// caller, with fixed leases shorter than the grant window, watchdog ones,
// and calls whose context ends at random. No two owners hold at once, a
// call that succeeds finds its owner's field in Redis, nothing stays
// parked once every call returned, and the lock is free at once after
// the last release.
func TestReview11EarlyGrantStress(t *testing.T) {
	raw := redistest.Shared(t).Client(t)
	name := ""
	var cores []*Core
	var ms []*Mutex
	for i := 0; i < 3; i++ {
		c := grantCore(t, raw, Config{WakeOne: true})
		if name == "" {
			name = grantName(t, raw)
			t.Cleanup(func() {
				raw.Do(context.Background(), raw.B().Del().Key(layout.Grantees(name), layout.Wakers(name)).Build())
			})
		}
		cores = append(cores, c)
		ms = append(ms, NewMutex(c, name, Reentrant{}))
	}
	var mu sync.Mutex
	inside := map[string]int{}
	enter := func(who string) {
		mu.Lock()
		defer mu.Unlock()
		inside[who]++
		for other, n := range inside {
			if other != who && n > 0 {
				t.Errorf("%s holds the lock with %s", who, other)
			}
		}
	}
	leave := func(who string) {
		mu.Lock()
		inside[who]--
		mu.Unlock()
	}
	parked := GrantsParked()
	deadline := time.Now().Add(1200 * time.Millisecond)
	var wg sync.WaitGroup
	run := func(m *Mutex, who string, ctx context.Context, field string, seed int) {
		defer wg.Done()
		for i := 0; time.Now().Before(deadline); i++ {
			var lease time.Duration
			switch (i + seed) % 3 {
			case 1:
				lease = 120 * time.Millisecond
			case 2:
				lease = 400 * time.Millisecond
			}
			cctx, cancel := context.WithCancel(ctx)
			if (i+seed)%5 == 0 {
				timer := time.AfterFunc(time.Duration((i*7+seed)%4)*time.Millisecond, cancel)
				defer timer.Stop()
			}
			_, ok, err := m.Acquire(cctx, NoLimit, lease)
			cancel()
			if err != nil || !ok {
				if ok {
					t.Errorf("%s: ok with %v", who, err)
				}
				continue
			}
			enter(who)
			f := field
			if f == "" {
				f = m.Field(anonOwnerOf(t, m))
			}
			if v := hget(t, raw, name, f); v == "" {
				t.Errorf("%s holds nothing in Redis after its call returned", who)
			}
			leave(who)
			if err := m.Unlock(ctx); err != nil {
				t.Errorf("%s: unlock: %v", who, err)
			}
		}
	}
	for i, m := range ms {
		for o := 0; o < 2; o++ {
			owner := "o" + string(rune('a'+i)) + string(rune('0'+o))
			for g := 0; g < 2; g++ {
				wg.Add(1)
				go run(m, owner, WithOwner(t.Context(), owner), m.Field(owner), i*4+o*2+g)
			}
		}
	}
	wg.Add(1)
	go run(ms[0], "anonymous", t.Context(), "", 11)
	wg.Wait()
	t.Logf("grants parked: %d, landed %d, given back %d", GrantsParked()-parked, GrantsLanded(), GrantsReturned())
	for _, c := range cores {
		noneParked(t, c)
	}
	freeWithin(t, raw, name, 1500*time.Millisecond) // every call ended
}

// anonOwnerOf is the owner of m's Client's latest anonymous hold of m.
func anonOwnerOf(t *testing.T, m *Mutex) string {
	t.Helper()
	owner, h := m.core.findAnon(m)
	if h != nil {
		m.core.leave(h)
	}
	return owner
}

// TestReview11EarlyGrantShortLeaseTaken: a grant parked for a call with a
// fixed lease shorter than the window is taken when the call sleeps at
// once: the call holds, its field in Redis with no more than its lease.
func TestReview11EarlyGrantShortLeaseTaken(t *testing.T) {
	x := WithOwner(t.Context(), "x")
	const lease = 600 * time.Millisecond
	landed := GrantsLanded()
	e := earlyGrant11(t, Reentrant{}, x, lease, nil, func() error { return nil })
	e.proceed()
	r := receive(t, e.call, "x's call")
	if !r.ok || r.err != nil {
		t.Fatalf("x: %v %v", r.ok, r.err)
	}
	if GrantsLanded() == landed {
		t.Error("the parked grant was not taken")
	}
	if v := hget(t, e.raw, e.name, e.mb.Field("x")); v != "1" {
		t.Errorf("x's field %q, want 1", v)
	}
	if p := pttl(t, e.raw, e.name); p <= 0 || p > lease.Milliseconds() {
		t.Errorf("the lock's pttl %dms, want within x's lease %v", p, lease)
	}
	noneParked(t, e.b)
	if err := e.mb.Unlock(x); err != nil {
		t.Fatal(err)
	}
	freeSoon(t, e)
}
