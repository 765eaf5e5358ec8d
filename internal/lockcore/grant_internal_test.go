package lockcore

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/observe"
	"github.com/relock-go/relock/watchdog"
)

// These tests run the grant on release (grant.go) against the package's
// shared redis-server.

// grantRDB passes every command on to a real server, counting the
// scripts sent by SHA1, and calls after, if set, with the words of each
// script once the server ran it and before its caller gets the reply (an
// EVALSHA the server did not know, and did not run, is not seen: the
// EVAL that follows is).
type grantRDB struct {
	rueidis.Client
	mu      sync.Mutex
	scripts map[string]int
	after   func(args []string)
	// before, if set, is called with a script's SHA1 before it is sent.
	before func(sha string)
	// lose, if set, is asked after each script ran: true replaces its
	// reply with a lost one (a connection error).
	lose func(sha string) bool
}

func (g *grantRDB) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	args := cmd.Commands()
	var words []string
	if len(args) > 1 && (args[0] == "EVALSHA" || args[0] == "EVAL") {
		words = slices.Clone(args) // before sending: rueidis recycles a sent command
	}
	var sha string
	if words != nil {
		sha = words[1]
		if words[0] == "EVAL" {
			for _, s := range []*lua.Script{lua.LockAcquire, lua.LockUnlock, lua.FencedAcquire} {
				if s.Body == words[1] {
					sha = s.SHA1
				}
			}
		}
		g.mu.Lock()
		before := g.before
		g.mu.Unlock()
		if before != nil {
			before(sha)
		}
	}
	res := g.Client.Do(ctx, cmd)
	if words == nil {
		return res
	}
	g.mu.Lock()
	if g.scripts == nil {
		g.scripts = make(map[string]int)
	}
	if e, ok := rueidis.IsRedisErr(res.Error()); ok && e.IsNoScript() {
		// The script did not run (the server had not loaded it yet):
		// rueidis sends it again with EVAL, which the hooks see.
		g.mu.Unlock()
		return res
	}
	g.scripts[sha]++
	after, lose := g.after, g.lose
	g.mu.Unlock()
	if after != nil {
		after(append(words[:0:0], sha))
	}
	if lose != nil && lose(sha) {
		return rueidis.NewErrorResult(errors.New("injected: connection reset by peer"))
	}
	return res
}

func (g *grantRDB) count(s *lua.Script) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.scripts[s.SHA1]
}

func (g *grantRDB) setAfter(f func(args []string)) {
	g.mu.Lock()
	g.after = f
	g.mu.Unlock()
}

// grantCore is a Core on rdb (wrapped), replica sync off, closed when t
// ends.
func grantCore(t *testing.T, rdb rueidis.Client, cfg Config) *Core {
	t.Helper()
	cfg.RDB, cfg.ReplicasSet = rdb, true
	c, err := NewCore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

var grantSeq atomic.Int64

func grantName(t *testing.T, rdb rueidis.Client) string {
	name := "grant:" + t.Name() + ":" + strconv.FormatInt(grantSeq.Add(1), 10)
	t.Cleanup(func() {
		rdb.Do(context.Background(), rdb.B().Del().Key(name, layout.Token(name)).Build())
	})
	return name
}

// waitOffer waits until n acquisitions of c sleep offering themselves to
// c's releases of name.
func waitOffer(t *testing.T, c *Core, name string, n int) {
	t.Helper()
	got := 0
	waitUntil(t, 10*time.Second, fmt.Sprintf("%d acquisitions offered for %s", n, name), func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		got = 0
		for k, list := range c.offers {
			if k.name == name {
				got += len(list)
			}
		}
		return got >= n
	}, func() string { return fmt.Sprintf("%d offered", got) })
}

type acquired struct {
	token int64
	ok    bool
	err   error
}

func goAcquire(m *Mutex, ctx context.Context, wait, lease time.Duration) <-chan acquired {
	out := make(chan acquired, 1)
	go func() {
		token, ok, err := m.Acquire(ctx, wait, lease)
		out <- acquired{token, ok, err}
	}()
	return out
}

// goAcquireEnded is goAcquire with a channel closed when the call has
// returned, for a hook that holds a reply until the call waits for it: a
// call that returns without waiting then fails its test instead of
// holding the reply for ever.
func goAcquireEnded(m *Mutex, ctx context.Context, wait, lease time.Duration) (<-chan acquired, <-chan struct{}) {
	calling := goAcquire(m, ctx, wait, lease)
	ended := make(chan struct{})
	got := make(chan acquired, 1)
	go func() {
		r := <-calling
		close(ended)
		got <- r
	}()
	return got, ended
}

func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s within 10s", what)
		panic("unreachable")
	}
}

// waitUntil checks cond every millisecond until it holds, and fails t
// when it does not within d; what names the awaited event, and detail,
// when given, says what was seen instead.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool, detail ...func() string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			msg := fmt.Sprintf("%s: not within %v", what, d)
			for _, f := range detail {
				msg += "; " + f()
			}
			t.Fatal(msg)
		}
		time.Sleep(time.Millisecond)
	}
}

// freeWithin fails t unless the lock name is free (its hash gone) within d.
func freeWithin(t *testing.T, rdb rueidis.Client, name string, d time.Duration) {
	t.Helper()
	waitUntil(t, d, "the lock freed", func() bool {
		n, err := rdb.Do(context.Background(), rdb.B().Exists().Key(name).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return n == 0
	}, func() string {
		return fmt.Sprintf("still held (pttl %d) by %v", pttl(t, rdb, name),
			rdb.Do(context.Background(), rdb.B().Hgetall().Key(name).Build()))
	})
}

// subscribed reports whether a client listens on channel.
func subscribed(rdb rueidis.Client, channel string) bool {
	n, _ := rdb.Do(context.Background(), rdb.B().PubsubNumsub().Channel(channel).Build()).AsIntMap()
	return n[channel] >= 1
}

func pttl(t *testing.T, rdb rueidis.Client, name string) int64 {
	t.Helper()
	n, err := rdb.Do(context.Background(), rdb.B().Pttl().Key(name).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func hget(t *testing.T, rdb rueidis.Client, name, field string) string {
	t.Helper()
	v, err := rdb.Do(context.Background(), rdb.B().Hget().Key(name).Field(field).Build()).ToString()
	if err != nil && !rueidis.IsRedisNil(err) {
		t.Fatal(err)
	}
	return v
}

// TestGrantHandsOver: the last Unlock of a hold hands the lock to the
// Client's sleeping waiter in the release: the waiter makes no attempt
// after it (two attempts in all: before and after subscribing), holds
// with the confirmation window as its lease in Redis, and the Client
// confirms it (the watchdog's lease) within the window.
func TestGrantHandsOver(t *testing.T) {
	raw, g, c, name, m, a := grantHeld(t)
	b := WithOwner(t.Context(), "b")
	got := goAcquire(m, b, NoLimit, 0)
	waitOffer(t, c, name, 1)
	before := g.count(lua.LockAcquire)
	if err := m.Unlock(a); err != nil {
		t.Fatal(err)
	}
	r := receive(t, got, "grant")
	if !r.ok || r.err != nil {
		t.Fatalf("b: %v %v", r.ok, r.err)
	}
	if n := g.count(lua.LockAcquire) - before; n != 0 {
		t.Errorf("b made %d attempts after the release, want 0 (the release granted it)", n)
	}
	if v := hget(t, raw, name, m.Field("b")); v != "1" {
		t.Errorf("b's count in Redis = %q, want 1", v)
	}
	if v := hget(t, raw, name, m.Field("a")); v != "" {
		t.Errorf("a's count in Redis = %q, want none", v)
	}
	if p := pttl(t, raw, name); p <= 0 || p > grantWindow.Milliseconds() {
		t.Errorf("granted hold's PTTL = %dms, want within the window %v", p, grantWindow)
	}
	// b's wait record (the only wait of the Client) ends with its wait.
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := raw.Do(context.Background(), raw.B().Hlen().Key(c.waits.key).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b's wait record is still there after the grant")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The Client confirms it: the watchdog's lease, within the window.
	deadline = time.Now().Add(grantWindow)
	for pttl(t, raw, name) <= grantWindow.Milliseconds() {
		if time.Now().After(deadline) {
			t.Fatalf("the grant was not confirmed within the window %v", grantWindow)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := m.Unlock(b); err != nil {
		t.Fatal(err)
	}
}

// TestGrantOff: with Config.NoGrant the release publishes and the waiter
// acquires with an attempt of its own.
func TestGrantOff(t *testing.T) {
	raw := redistest.Shared(t).Client(t)
	g := &grantRDB{Client: raw}
	c := grantCore(t, g, Config{NoGrant: true})
	name := grantName(t, raw)
	m := NewMutex(c, name, Reentrant{})
	a := WithOwner(t.Context(), "a")
	if _, ok, err := m.Acquire(a, 0, 0); !ok || err != nil {
		t.Fatalf("a: %v %v", ok, err)
	}
	b := WithOwner(t.Context(), "b")
	got := goAcquire(m, b, NoLimit, 0)
	for g.count(lua.LockAcquire) < 3 { // a's, b's two
		time.Sleep(time.Millisecond)
	}
	if err := m.Unlock(a); err != nil {
		t.Fatal(err)
	}
	if r := receive(t, got, "acquisition"); !r.ok || r.err != nil {
		t.Fatalf("b: %v %v", r.ok, r.err)
	}
	if n := g.count(lua.LockAcquire); n != 4 {
		t.Errorf("%d attempts, want 4 (b's third took the lock)", n)
	}
	c.mu.Lock()
	n := len(c.offers)
	c.mu.Unlock()
	if n != 0 {
		t.Errorf("%d offers with grants off", n)
	}
	_ = m.Unlock(b)
}

// TestGrantNotWhileOthersWait: while another client subscribes to the
// lock's channel (another Client's or Redisson's waiter), a release with
// a waiter of its own Client grants nothing: it publishes, and the other
// client's waiter hears it. The bound on a streak of local grants is
// therefore zero while anyone else waits.
func TestGrantNotWhileOthersWait(t *testing.T) {
	raw := redistest.Shared(t).Client(t)
	c := grantCore(t, raw, Config{})
	name := grantName(t, raw)
	m := NewMutex(c, name, Reentrant{})
	msgs := make(chan string, 16)
	other := redistest.Shared(t).Client(t)
	listening := make(chan struct{})
	go func() {
		_ = other.Receive(context.WithoutCancel(t.Context()), other.B().Subscribe().Channel(layout.Channel(name)).Build(),
			func(msg rueidis.PubSubMessage) { msgs <- msg.Message })
	}()
	go func() {
		for !subscribed(raw, layout.Channel(name)) {
			time.Sleep(time.Millisecond)
		}
		close(listening)
	}()
	receive(t, listening, "subscription of the other client")
	a := WithOwner(t.Context(), "a")
	if _, ok, err := m.Acquire(a, 0, 0); !ok || err != nil {
		t.Fatalf("a: %v %v", ok, err)
	}
	b := WithOwner(t.Context(), "b")
	got := goAcquire(m, b, NoLimit, 0)
	waitOffer(t, c, name, 1)
	if err := m.Unlock(a); err != nil {
		t.Fatal(err)
	}
	if msg := receive(t, msgs, "unlock message for the other client"); msg != layout.UnlockMessage {
		t.Errorf("message %q, want the unlock message", msg)
	}
	if r := receive(t, got, "acquisition"); !r.ok || r.err != nil {
		t.Fatalf("b: %v %v", r.ok, r.err)
	}
	_ = m.Unlock(b)
}

// TestGrantFairToOtherClient: a Client whose goroutines take the lock in
// turn, again and again, does not keep it from another Client's waiter.
func TestGrantFairToOtherClient(t *testing.T) {
	raw := redistest.Shared(t).Client(t)
	c1 := grantCore(t, raw, Config{})
	c2 := grantCore(t, redistest.Shared(t).Client(t), Config{})
	name := grantName(t, raw)
	m1 := NewMutex(c1, name, Reentrant{})
	m2 := NewMutex(c2, name, Reentrant{})
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := WithOwner(ctx, "w"+strconv.Itoa(i))
			for ctx.Err() == nil {
				if _, ok, err := m1.Acquire(o, NoLimit, 0); !ok || err != nil {
					return
				}
				time.Sleep(time.Millisecond)
				_ = m1.Unlock(o)
			}
		}()
	}
	waitOffer(t, c1, name, 1) // the goroutines hand the lock on
	wctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	o := WithOwner(wctx, "other")
	_, ok, err := m2.Acquire(o, NoLimit, 0)
	stop()
	wg.Wait()
	if !ok || err != nil {
		t.Fatalf("the other Client's waiter did not get the lock within 10s: %v %v", ok, err)
	}
	_ = m2.Unlock(WithOwner(t.Context(), "other"))
}

// TestGrantCrossedWithCancel: the waiter's context ends while the
// release that grants it is on its way (the script ran, its reply has
// not come back): the waiter returns not acquired, and the Client gives
// the granted hold back, so that the lock is free, not held for the
// window by nobody.
func TestGrantCrossedWithCancel(t *testing.T) {
	raw, g, c, name, m, a := grantHeld(t)
	bctx, cancelB := context.WithCancel(t.Context())
	defer cancelB()
	got := goAcquire(m, WithOwner(bctx, "b"), NoLimit, 0)
	waitOffer(t, c, name, 1)
	// (The waiter, cancelled, no longer waits for the release that
	// claimed its offer: it returns, and the release gives the grant
	// back before the Unlock returns. The hook holds the reply until
	// the waiter's call has ended.)
	var r acquired
	var once sync.Once
	g.setAfter(func(args []string) {
		if args[0] != lua.LockUnlock.SHA1 {
			return
		}
		once.Do(func() {
			// The grant is written; its reply is held until the waiter,
			// cancelled, waits for it.
			if hget(t, raw, name, m.Field("b")) != "1" {
				t.Error("the release did not grant b")
			}
			cancelB()
			r = receive(t, got, "end of b's call")
		})
	})
	if err := m.Unlock(a); err != nil {
		t.Fatal(err)
	}
	if r.ok || !errors.Is(r.err, context.Canceled) || !errors.Is(r.err, relock.ErrNotAcquired) {
		t.Fatalf("b: %v %v, want not acquired, cancelled", r.ok, r.err)
	}
	if v := hget(t, raw, name, m.Field("b")); v != "" {
		t.Errorf("b gave up and still holds in Redis (%q, PTTL %dms)", v, pttl(t, raw, name))
	}
	if c.lookupHold(name, "", "b") != 0 {
		t.Error("the Client records a hold of b")
	}
}

// TestGrantNeverConfirmed: a Client that took a grant and closes (or
// dies) before confirming it keeps the lock from others for at most the
// confirmation window, not the watchdog's lease.
func TestGrantNeverConfirmed(t *testing.T) {
	raw := redistest.Shared(t).Client(t)
	c := grantCore(t, raw, Config{})
	// Renewals never reach Redis: the grant is never confirmed.
	c.renewHook = func(_ context.Context, leases []*watchdog.Lease) []error {
		errs := make([]error, len(leases))
		for i := range errs {
			errs[i] = errors.New("renewal cut off")
		}
		return errs
	}
	name := grantName(t, raw)
	m := NewMutex(c, name, Reentrant{})
	a := WithOwner(t.Context(), "a")
	if _, ok, err := m.Acquire(a, 0, 0); !ok || err != nil {
		t.Fatalf("a: %v %v", ok, err)
	}
	got := goAcquire(m, WithOwner(t.Context(), "b"), NoLimit, 0)
	waitOffer(t, c, name, 1)
	if err := m.Unlock(a); err != nil {
		t.Fatal(err)
	}
	if r := receive(t, got, "grant"); !r.ok || r.err != nil {
		t.Fatalf("b: %v %v", r.ok, r.err)
	}
	_ = c.Close()
	if p := pttl(t, raw, name); p <= 0 || p > grantWindow.Milliseconds() {
		t.Fatalf("granted hold's PTTL = %dms after its Client closed, want within the window %v", p, grantWindow)
	}
	other := grantCore(t, raw, Config{})
	start := time.Now()
	wctx, cancel := context.WithTimeout(t.Context(), grantWindow+5*time.Second)
	defer cancel()
	if _, ok, err := NewMutex(other, name, Reentrant{}).Acquire(WithOwner(wctx, "c"), NoLimit, 0); !ok || err != nil {
		t.Fatalf("c: %v %v", ok, err)
	}
	if took := time.Since(start); took > grantWindow+time.Second {
		t.Errorf("the lock came free %v after the grant's Client closed, want within the window %v", took, grantWindow)
	}
}

// TestGrantFixedLease: a waiter with a fixed lease longer than the window
// holds with the window until the Client confirms it, then with its
// lease; one with a lease within the window gets its lease at once.
func TestGrantFixedLease(t *testing.T) {
	raw := redistest.Shared(t).Client(t)
	c := grantCore(t, raw, Config{})
	for _, lease := range []time.Duration{10 * time.Second, 2 * time.Second} {
		name := grantName(t, raw)
		m := NewMutex(c, name, Reentrant{})
		a := WithOwner(t.Context(), "a")
		if _, ok, err := m.Acquire(a, 0, 0); !ok || err != nil {
			t.Fatalf("a: %v %v", ok, err)
		}
		b := WithOwner(t.Context(), "b")
		got := goAcquire(m, b, NoLimit, lease)
		waitOffer(t, c, name, 1)
		if err := m.Unlock(a); err != nil {
			t.Fatal(err)
		}
		if r := receive(t, got, "grant"); !r.ok || r.err != nil {
			t.Fatalf("b: %v %v", r.ok, r.err)
		}
		window := grantWindowFor(lease)
		if p := pttl(t, raw, name); p <= 0 || p > window.Milliseconds() {
			t.Errorf("lease %v: PTTL %dms after the grant, want within %v", lease, p, window)
		}
		if lease > window {
			deadline := time.Now().Add(window)
			for pttl(t, raw, name) <= window.Milliseconds() {
				if time.Now().After(deadline) {
					t.Fatalf("lease %v: not confirmed within the window", lease)
				}
				time.Sleep(10 * time.Millisecond)
			}
			if p := pttl(t, raw, name); p > lease.Milliseconds() {
				t.Errorf("lease %v: PTTL %dms after confirmation", lease, p)
			}
		}
		if err := m.Unlock(b); err != nil {
			t.Fatal(err)
		}
	}
}

// TestGrantFencedToken: a granted fenced hold gets a new token, as an
// acquisition would.
func TestGrantFencedToken(t *testing.T) {
	raw := redistest.Shared(t).Client(t)
	g := &grantRDB{Client: raw}
	c := grantCore(t, g, Config{})
	name := grantName(t, raw)
	m := NewMutex(c, name, Fenced{})
	a := WithOwner(t.Context(), "a")
	t1, ok, err := m.Acquire(a, 0, 0)
	if !ok || err != nil {
		t.Fatalf("a: %v %v", ok, err)
	}
	got := goAcquire(m, WithOwner(t.Context(), "b"), NoLimit, 0)
	waitOffer(t, c, name, 1)
	before := g.count(lua.FencedAcquire)
	if err := m.Unlock(a); err != nil {
		t.Fatal(err)
	}
	r := receive(t, got, "grant")
	if !r.ok || r.err != nil {
		t.Fatalf("b: %v %v", r.ok, r.err)
	}
	if g.count(lua.FencedAcquire) != before {
		t.Error("b attempted after the release: not granted")
	}
	counter, err := raw.Do(t.Context(), raw.B().Get().Key(layout.Token(name)).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	if r.token != t1+1 || counter != t1+1 {
		t.Errorf("granted token %d, counter %d; want %d", r.token, counter, t1+1)
	}
	_ = m.Unlock(WithOwner(t.Context(), "b"))
}

// TestGrantSameOwnerAndAnonymous: two goroutines of one owner wait: the
// grant goes to one, and the other re-enters; an anonymous waiter is
// granted too, and its ownerless Unlock releases it.
func TestGrantSameOwnerAndAnonymous(t *testing.T) {
	raw := redistest.Shared(t).Client(t)
	c := grantCore(t, raw, Config{})
	name := grantName(t, raw)
	m := NewMutex(c, name, Reentrant{})
	a := WithOwner(t.Context(), "a")
	if _, ok, err := m.Acquire(a, 0, 0); !ok || err != nil {
		t.Fatalf("a: %v %v", ok, err)
	}
	x := WithOwner(t.Context(), "x")
	x1 := goAcquire(m, x, NoLimit, 0)
	x2 := goAcquire(m, x, NoLimit, 0)
	waitOffer(t, c, name, 2)
	if err := m.Unlock(a); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []<-chan acquired{x1, x2} {
		if r := receive(t, ch, "x's acquisition"); !r.ok || r.err != nil {
			t.Fatalf("x: %v %v", r.ok, r.err)
		}
	}
	if v := hget(t, raw, name, m.Field("x")); v != "2" {
		t.Errorf("x's count = %q, want 2", v)
	}
	anon := goAcquire(m, t.Context(), NoLimit, 0)
	waitOffer(t, c, name, 1)
	for range 2 {
		if err := m.Unlock(x); err != nil {
			t.Fatal(err)
		}
	}
	if r := receive(t, anon, "anonymous acquisition"); !r.ok || r.err != nil {
		t.Fatalf("anonymous: %v %v", r.ok, r.err)
	}
	if err := m.Unlock(t.Context()); err != nil {
		t.Fatalf("ownerless unlock: %v", err)
	}
	if n, _ := raw.Do(t.Context(), raw.B().Exists().Key(name).Build()).AsInt64(); n != 0 {
		t.Error("the lock is still held")
	}
}

// grantObs records the acquisitions and waits an observer is told of.
type grantObs struct {
	observe.Base
	mu       sync.Mutex
	acquires []observe.Acquire
	waits    []observe.Wait
}

func (o *grantObs) AcquireEnd(_ context.Context, a observe.Acquire) {
	o.mu.Lock()
	o.acquires = append(o.acquires, a)
	o.mu.Unlock()
}

func (o *grantObs) WaitEnd(_ context.Context, w observe.Wait) {
	o.mu.Lock()
	o.waits = append(o.waits, w)
	o.mu.Unlock()
}

// TestGrantObserved: a waiter that takes a grant is observed as an
// acquisition that waited.
func TestGrantObserved(t *testing.T) {
	raw := redistest.Shared(t).Client(t)
	obs := &grantObs{}
	c := grantCore(t, raw, Config{Observer: obs})
	name := grantName(t, raw)
	m := NewMutex(c, name, Reentrant{})
	a := WithOwner(t.Context(), "a")
	if _, ok, err := m.Acquire(a, 0, 0); !ok || err != nil {
		t.Fatalf("a: %v %v", ok, err)
	}
	got := goAcquire(m, WithOwner(t.Context(), "b"), NoLimit, 0)
	waitOffer(t, c, name, 1)
	if err := m.Unlock(a); err != nil {
		t.Fatal(err)
	}
	if r := receive(t, got, "grant"); !r.ok || r.err != nil {
		t.Fatalf("b: %v %v", r.ok, r.err)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	var b *observe.Acquire
	for i := range obs.acquires {
		if obs.acquires[i].Owner == "b" {
			b = &obs.acquires[i]
		}
	}
	if b == nil || b.Outcome != observe.OutcomeAcquired || b.Err != nil {
		t.Fatalf("b's acquisition observed as %+v, want acquired", b)
	}
	waited := false
	for _, w := range obs.waits {
		waited = waited || w.Owner == "b"
	}
	if !waited {
		t.Error("b's wait was not observed")
	}
	_ = m.Unlock(WithOwner(t.Context(), "b"))
}

// TestGrantReplyLost: the reply of the release that granted is lost: the
// waiter's outcome is unknown, and its next attempt takes over the field
// the release wrote; the release, resent, finds its own field gone and
// reports success.
func TestGrantReplyLost(t *testing.T) {
	raw, g, c, name, m, a := grantHeld(t)
	got := goAcquire(m, WithOwner(t.Context(), "b"), NoLimit, 0)
	waitOffer(t, c, name, 1)
	var lost atomic.Bool
	g.mu.Lock()
	g.lose = func(sha string) bool { return sha == lua.LockUnlock.SHA1 && lost.CompareAndSwap(false, true) }
	g.mu.Unlock()
	before := g.count(lua.LockAcquire)
	if err := m.Unlock(a); err != nil {
		t.Fatalf("unlock: %v", err)
	}
	r := receive(t, got, "b's acquisition")
	if !r.ok || r.err != nil {
		t.Fatalf("b: %v %v", r.ok, r.err)
	}
	if !lost.Load() {
		t.Fatal("no release reply was lost")
	}
	if g.count(lua.LockAcquire) == before {
		t.Error("b made no attempt after a grant whose outcome it could not know")
	}
	if v := hget(t, raw, name, m.Field("b")); v != "1" {
		t.Errorf("b's count = %q, want 1", v)
	}
	if err := m.Unlock(WithOwner(t.Context(), "b")); err != nil {
		t.Fatal(err)
	}
}

// TestGrantAfterWaitLimit: a grant whose release was on its way when the
// waiter's wait limit ran out is the call's success, as an attempt sent
// before the limit is.
func TestGrantAfterWaitLimit(t *testing.T) {
	_, g, c, name, m, a := grantHeld(t)
	got, ended := goAcquireEnded(m, WithOwner(t.Context(), "b"), 500*time.Millisecond, 0)
	waitOffer(t, c, name, 1)
	landing := make(chan struct{}, 1)
	c.landHook = func() { landing <- struct{}{} }
	var once sync.Once
	g.setAfter(func(args []string) {
		if args[0] == lua.LockUnlock.SHA1 {
			// The reply is held until b's wait has run out and b waits
			// for it.
			once.Do(func() {
				select {
				case <-landing:
				case <-ended:
				}
			})
		}
	})
	if err := m.Unlock(a); err != nil {
		t.Fatal(err)
	}
	r := receive(t, got, "b's call")
	if !r.ok || r.err != nil {
		t.Fatalf("b: %v %v, want the grant", r.ok, r.err)
	}
	if c.lookupHold(name, "", "b") != 1 {
		t.Error("the Client does not record b's hold")
	}
	if err := m.Unlock(WithOwner(t.Context(), "b")); err != nil {
		t.Fatal(err)
	}
}

// TestGrantCrossedWithClose: the waiter's Client closes while the release
// that grants it is on its way: the waiter returns relock.ErrClosed and
// the granted hold is given back, not left to its window.
func TestGrantCrossedWithClose(t *testing.T) {
	raw, g, c, name, m, a := grantHeld(t)
	got, ended := goAcquireEnded(m, WithOwner(t.Context(), "b"), NoLimit, 0)
	waitOffer(t, c, name, 1)
	landing := make(chan struct{}, 1)
	c.landHook = func() { landing <- struct{}{} }
	closed := make(chan error, 1)
	var once sync.Once
	g.setAfter(func(args []string) {
		if args[0] != lua.LockUnlock.SHA1 {
			return
		}
		once.Do(func() {
			go func() { closed <- c.Close() }()
			select {
			case <-landing:
			case <-ended:
			}
		})
	})
	_ = m.Unlock(a) // the Client closes under it
	r := receive(t, got, "end of b's call")
	if r.ok || !errors.Is(r.err, relock.ErrClosed) {
		t.Fatalf("b: %v %v, want not acquired, closed", r.ok, r.err)
	}
	receive(t, closed, "Close")
	if v := hget(t, raw, name, m.Field("b")); v != "" {
		t.Errorf("b's Client closed and b still holds in Redis (%q, PTTL %dms)", v, pttl(t, raw, name))
	}
}

// grantHeld sets up the usual case of these tests: a Core on a client
// that lets the test watch and hold replies (grantRDB), a reentrant lock
// of a fresh name, and owner "a" holding it.
func grantHeld(t *testing.T) (raw rueidis.Client, g *grantRDB, c *Core, name string, m *Mutex, a context.Context) {
	t.Helper()
	raw = redistest.Shared(t).Client(t)
	g = &grantRDB{Client: raw}
	c = grantCore(t, g, Config{})
	name = grantName(t, raw)
	m = NewMutex(c, name, Reentrant{})
	a = WithOwner(t.Context(), "a")
	if _, ok, err := m.Acquire(a, 0, 0); !ok || err != nil {
		t.Fatalf("a: %v %v", ok, err)
	}
	return raw, g, c, name, m, a
}

// TestGrantNotWhileRefused: a release does not grant the lock to a
// waiter of its own Client while a caller that hears no release wants it:
// another Client's TryLock with no wait that found it held (recorded in
// Redis, layout.Knocks), or one of the Client's own (recorded by the
// Client). The release frees the lock and publishes, as without grants,
// and the waiter takes it by its own attempt.
func TestGrantNotWhileRefused(t *testing.T) {
	for _, kind := range []Kind{Reentrant{}, Fenced{}} {
		for _, who := range []string{"other-client", "same-client"} {
			t.Run(fmt.Sprintf("%T", kind)+"/"+who, func(t *testing.T) {
				raw := redistest.Shared(t).Client(t)
				c := grantCore(t, raw, Config{})
				name := grantName(t, raw)
				m := NewMutex(c, name, kind)
				a := WithOwner(t.Context(), "a")
				if _, ok, err := m.Acquire(a, 0, 0); !ok || err != nil {
					t.Fatalf("a: %v %v", ok, err)
				}
				poller := m
				if who == "other-client" {
					poller = NewMutex(grantCore(t, raw, Config{}), name, kind)
				}
				if _, ok, err := poller.Acquire(WithOwner(t.Context(), "p"), 0, 0); ok || err != nil {
					t.Fatalf("poller: %v %v, want refused", ok, err)
				}
				got := goAcquire(m, WithOwner(t.Context(), "b"), NoLimit, 0)
				waitOffer(t, c, name, 1)
				g0 := GrantsMade()
				if err := m.Unlock(a); err != nil {
					t.Fatal(err)
				}
				if r := receive(t, got, "b's call"); !r.ok || r.err != nil {
					t.Fatalf("b: %v %v", r.ok, r.err)
				}
				if g := GrantsMade() - g0; g != 0 {
					t.Errorf("the release granted the lock (%d grants) while a poller wanted it", g)
				}
				_ = m.Unlock(WithOwner(t.Context(), "b"))
			})
		}
	}
}

// stuckWaiter is a waiter whose subscription never completes.
type stuckWaiter struct{ wake chan struct{} }

func (w stuckWaiter) C() <-chan struct{} { return w.wake }
func (stuckWaiter) Leave(bool)           {}
func (stuckWaiter) PassOn()              {}
func (stuckWaiter) Heard() bool          { return false }
func (stuckWaiter) Err() error           { return nil }

type neverPending struct{}

func (neverPending) Done() <-chan struct{} { return nil }
func (neverPending) Err() error            { return nil }

// TestGrantNotToUnsubscribed: a waiter whose subscription to the lock's
// channel is not made (pending) offers itself to no release: the channel's
// one subscriber is then another Client's waiter, and a grant to the
// unsubscribed waiter would pass that one over. The release publishes.
func TestGrantNotToUnsubscribed(t *testing.T) {
	raw := redistest.Shared(t).Client(t)
	c := grantCore(t, raw, Config{})
	c.beginHook = func(string) (waiter, pending, error) {
		return stuckWaiter{wake: make(chan struct{}, 1)}, neverPending{}, nil
	}
	name := grantName(t, raw)
	m := NewMutex(c, name, Reentrant{})
	msgs := make(chan string, 16)
	other := redistest.Shared(t).Client(t)
	go func() {
		_ = other.Receive(context.WithoutCancel(t.Context()), other.B().Subscribe().Channel(layout.Channel(name)).Build(),
			func(msg rueidis.PubSubMessage) { msgs <- msg.Message })
	}()
	waitUntil(t, 10*time.Second, "the other client's subscription", func() bool { return subscribed(raw, layout.Channel(name)) })
	a := WithOwner(t.Context(), "a")
	if _, ok, err := m.Acquire(a, 0, 0); !ok || err != nil {
		t.Fatalf("a: %v %v", ok, err)
	}
	got := goAcquire(m, WithOwner(t.Context(), "b"), NoLimit, 0)
	// b sleeps in its wait loop once its subscription's bound (1-2s) ran
	// out.
	waitUntil(t, 10*time.Second, "b asleep in its wait loop", waitLoopAsleep)
	g0 := GrantsMade()
	if err := m.Unlock(a); err != nil {
		t.Fatal(err)
	}
	if msg := receive(t, msgs, "a message of the release"); msg != layout.UnlockMessage {
		t.Errorf("the release published %q, want the unlock message (it granted to a waiter not subscribed)", msg)
	}
	if g := GrantsMade() - g0; g != 0 {
		t.Errorf("%d grants to a waiter whose subscription is not made", g)
	}
	if r := receive(t, got, "b's call"); !r.ok || r.err != nil {
		t.Fatalf("b: %v %v", r.ok, r.err)
	}
	_ = m.Unlock(WithOwner(t.Context(), "b"))
}

// waitLoopAsleep reports whether a goroutine sleeps in a wait loop's
// sleep.
func waitLoopAsleep() bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if lines := strings.SplitN(g, "\n", 3); len(lines) > 1 && strings.Contains(lines[0], "[select") &&
			strings.HasPrefix(lines[1], "github.com/relock-go/relock/internal/lockcore.(*Wait).run(") {
			return true
		}
	}
	return false
}

// queueKindStub is a QueueKind for the tests of the offers' order.
type queueKindStub struct{ Reentrant }

func (queueKindStub) GrantsInQueueOrder() {}

// TestOffersInQueueOrder: a QueueKind's offers are kept in the order
// their calls queued (their first attempts), whatever the order they are
// made in; another kind's in the order they are made.
func TestOffersInQueueOrder(t *testing.T) {
	for _, tc := range []struct {
		kind Kind
		want []uint64
	}{
		{queueKindStub{}, []uint64{1, 2, 3, 4}},
		{Reentrant{}, []uint64{3, 1, 4, 2}},
	} {
		m := &Mutex{kind: tc.kind}
		var list []*grantOffer
		for _, q := range []uint64{3, 1, 4, 2} {
			list = addOffer(list, &grantOffer{a: &acquisition{m: m, queued: q}})
		}
		var got []uint64
		for _, o := range list {
			got = append(got, o.a.queued)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%T: offers in order %v, want %v", tc.kind, got, tc.want)
		}
	}
}
