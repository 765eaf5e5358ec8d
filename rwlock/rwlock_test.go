package rwlock_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/relock-go/relock/internal/layout"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/rlock"
	"github.com/relock-go/relock/rwlock"
)

// handoff bounds a wake-up that a notification brings: far under the
// 30s lease a waiter would otherwise sleep for.
const handoff = 5 * time.Second

func pttl(t *testing.T, raw rueidis.Client, key string) int64 {
	t.Helper()
	n, err := raw.Do(t.Context(), raw.B().Pttl().Key(key).Build()).AsInt64()
	if err != nil {
		t.Fatalf("PTTL %s: %v", key, err)
	}
	return n
}

func exists(t *testing.T, raw rueidis.Client, key string) bool {
	t.Helper()
	n, err := raw.Do(t.Context(), raw.B().Exists().Key(key).Build()).AsInt64()
	if err != nil {
		t.Fatalf("EXISTS %s: %v", key, err)
	}
	return n == 1
}

// keysOf returns the keys whose name contains name.
func keysOf(t *testing.T, raw rueidis.Client, name string) []string {
	t.Helper()
	keys, err := raw.Do(t.Context(), raw.B().Keys().Pattern("*"+name+"*").Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// wantHash checks the lock hash against want (nil: no hash).
func wantHash(t *testing.T, raw rueidis.Client, name string, want map[string]string) {
	t.Helper()
	got := relocktest.HGetAll(t, raw, name)
	if len(got) != len(want) {
		t.Fatalf("hash %s = %v, want %v", name, got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("hash %s = %v, want %v", name, got, want)
		}
	}
}

// wait returns the result of l.Lock(ctx) run on a goroutine, as a channel.
func lockAsync(ctx context.Context, l *rwlock.Lock) <-chan error {
	got := make(chan error, 1)
	go func() { got <- l.Lock(ctx) }()
	return got
}

func within(t *testing.T, got <-chan error, d time.Duration, what string) {
	t.Helper()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(d):
		t.Fatalf("%s: not done within %v", what, d)
	}
}

func notYet(t *testing.T, got <-chan error, what string) {
	t.Helper()
	select {
	case err := <-got:
		t.Fatalf("%s returned %v while it should wait", what, err)
	default:
	}
}

// subscribed waits until n Clients listen on the lock's channel.
func subscribed(t *testing.T, raw rueidis.Client, name string, n int64) {
	t.Helper()
	relocktest.Eventually(t, handoff, "subscribers on "+rwlock.Channel(name), func() bool {
		vals, err := raw.Do(t.Context(), raw.B().PubsubNumsub().Channel(rwlock.Channel(name)).Build()).ToArray()
		if err != nil || len(vals) != 2 {
			return false
		}
		got, _ := vals[1].AsInt64()
		return got == n
	})
}

func TestReadersShareInRedissonLayout(t *testing.T) {
	c1, c2 := relocktest.Client(t), relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	a := rlock.WithOwner(t.Context(), "a")
	b := rlock.WithOwner(t.Context(), "b")
	r1, r2 := c1.GetReadWriteLock(name).ReadLock(), c2.GetReadWriteLock(name).ReadLock()
	if err := r1.Lock(a); err != nil {
		t.Fatal(err)
	}
	if err := r1.Lock(a); err != nil { // re-entry
		t.Fatal(err)
	}
	if ok, err := r2.TryLock(b, 0, 10*time.Second); !ok || err != nil {
		t.Fatalf("a second reader: TryLock = %v, %v, want true", ok, err)
	}
	fa, fb := layout.Field(c1.ID(), "a"), layout.Field(c2.ID(), "b")
	wantHash(t, raw, name, map[string]string{"mode": "read", fa: "2", fb: "1"})
	for _, k := range []string{rwlock.LeaseKey(name, fa, 1), rwlock.LeaseKey(name, fa, 2), rwlock.LeaseKey(name, fb, 1)} {
		if ms := pttl(t, raw, k); ms <= 0 || ms > 30_000 {
			t.Errorf("PTTL %s = %d, want a lease of at most 30s", k, ms)
		}
	}
	if exists(t, raw, rwlock.LeaseKey(name, fa, 3)) {
		t.Errorf("a lease key for a level a does not hold")
	}
	if ms := pttl(t, raw, name); ms < 25_000 {
		t.Errorf("hash PTTL %d, want at least the longest read lease", ms)
	}
	for _, l := range []*rwlock.Lock{r1, r2} {
		if locked, err := l.IsLocked(t.Context()); !locked || err != nil {
			t.Errorf("read IsLocked = %v, %v", locked, err)
		}
	}
	if locked, _ := c1.GetReadWriteLock(name).WriteLock().IsLocked(t.Context()); locked {
		t.Error("write IsLocked while only readers hold")
	}
	if n, err := r1.HoldCount(a); n != 2 || err != nil {
		t.Errorf("HoldCount(a) = %d, %v, want 2", n, err)
	}
	if err := r1.Unlock(a); err != nil {
		t.Fatal(err)
	}
	if exists(t, raw, rwlock.LeaseKey(name, fa, 2)) {
		t.Error("the released level's lease key is still there")
	}
	// A writer waits for the readers, and gets in when the last leaves.
	got := lockAsync(rlock.WithOwner(t.Context(), "w"), c2.GetReadWriteLock(name).WriteLock())
	subscribed(t, raw, name, 1)
	if err := r1.Unlock(a); err != nil {
		t.Fatal(err)
	}
	notYet(t, got, "the writer, with b still reading")
	if err := r2.Unlock(b); err != nil {
		t.Fatal(err)
	}
	within(t, got, handoff, "the writer after the last reader left")
	wantHash(t, raw, name, map[string]string{"mode": "write", layout.Field(c2.ID(), "w") + ":write": "1"})
	for _, k := range []string{rwlock.LeaseKey(name, fa, 1), rwlock.LeaseKey(name, fb, 1)} {
		if exists(t, raw, k) {
			t.Errorf("lease key %s left after its hold was released", k)
		}
	}
	if err := c2.GetReadWriteLock(name).WriteLock().Unlock(rlock.WithOwner(t.Context(), "w")); err != nil {
		t.Fatal(err)
	}
	if exists(t, raw, name) {
		t.Error("the hash is left after every hold was released")
	}
}

func TestWriterExcludes(t *testing.T) {
	c1, c2 := relocktest.Client(t), relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	w := rlock.WithOwner(t.Context(), "w")
	o := rlock.WithOwner(t.Context(), "o")
	rw1, rw2 := c1.GetReadWriteLock(name), c2.GetReadWriteLock(name)
	if err := rw1.WriteLock().Lock(w); err != nil {
		t.Fatal(err)
	}
	for _, l := range []*rwlock.Lock{rw2.ReadLock(), rw2.WriteLock(), rw1.ReadLock(), rw1.WriteLock()} {
		if ok, err := l.TryLock(o, 0, 0); ok || err != nil {
			t.Errorf("TryLock by another owner while a writer holds = %v, %v, want false", ok, err)
		}
	}
	if locked, err := rw2.WriteLock().IsLocked(t.Context()); !locked || err != nil {
		t.Errorf("write IsLocked = %v, %v", locked, err)
	}
	if locked, _ := rw2.ReadLock().IsLocked(t.Context()); locked {
		t.Error("read IsLocked while only the writer holds")
	}
	if err := rw1.WriteLock().Unlock(w); err != nil {
		t.Fatal(err)
	}
	// A reader keeps writers out, even its own owner's write: no upgrade.
	if err := rw1.ReadLock().Lock(o); err != nil {
		t.Fatal(err)
	}
	for _, ctx := range []context.Context{w, o} {
		if ok, err := rw2.WriteLock().TryLock(ctx, 0, 0); ok || err != nil {
			t.Errorf("write TryLock while a reader holds = %v, %v, want false", ok, err)
		}
	}
	if err := rw1.ReadLock().Unlock(o); err != nil {
		t.Fatal(err)
	}
	if keys := keysOf(t, raw, name); len(keys) != 0 {
		t.Errorf("keys left: %q", keys)
	}
}

// TestWriterReadsItsOwn: the writer's owner takes read holds beside its
// write hold; releasing the write hold leaves the lock in read mode,
// which lets waiting readers in at once.
func TestWriterReadsItsOwn(t *testing.T) {
	c1, c2 := relocktest.Client(t), relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	w := rlock.WithOwner(t.Context(), "w")
	rw := c1.GetReadWriteLock(name)
	if err := rw.WriteLock().Lock(w); err != nil {
		t.Fatal(err)
	}
	if ok, err := rw.ReadLock().TryLock(w, 0, 0); !ok || err != nil {
		t.Fatalf("the writer's read TryLock = %v, %v, want true", ok, err)
	}
	fw := layout.Field(c1.ID(), "w")
	wantHash(t, raw, name, map[string]string{"mode": "write", fw + ":write": "1", fw: "1"})
	if locked, _ := rw.ReadLock().IsLocked(t.Context()); !locked {
		t.Error("read IsLocked = false while the writer reads")
	}
	got := lockAsync(rlock.WithOwner(t.Context(), "r"), c2.GetReadWriteLock(name).ReadLock())
	subscribed(t, raw, name, 1)
	notYet(t, got, "another owner's read while the writer holds")
	if err := rw.WriteLock().Unlock(w); err != nil {
		t.Fatal(err)
	}
	within(t, got, handoff, "a reader after the writer went down to a read hold")
	wantHash(t, raw, name, map[string]string{"mode": "read", fw: "1", layout.Field(c2.ID(), "r"): "1"})
	if ms := pttl(t, raw, name); ms <= 0 {
		t.Errorf("hash PTTL after the downgrade = %d, want the readers' lease", ms)
	}
	_ = rw.ReadLock().Unlock(w)
	_ = c2.GetReadWriteLock(name).ReadLock().Unlock(rlock.WithOwner(t.Context(), "r"))
	if exists(t, raw, name) {
		t.Error("hash left")
	}
}

// TestWriteReleaseWakesEveryReader: readers of two Clients wait for a
// writer; its release lets all of them in at once (not one by one, at
// their leases' ends).
func TestWriteReleaseWakesEveryReader(t *testing.T) {
	c1, c2, c3 := relocktest.Client(t), relocktest.Client(t), relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	w := rlock.WithOwner(t.Context(), "w")
	writer := c1.GetReadWriteLock(name).WriteLock()
	if err := writer.Lock(w); err != nil {
		t.Fatal(err)
	}
	var readers []<-chan error
	for i, c := range []*rlock.Client{c2, c2, c2, c3, c3, c3} {
		readers = append(readers, lockAsync(rlock.WithOwner(t.Context(), fmt.Sprint("r", i)), c.GetReadWriteLock(name).ReadLock()))
	}
	subscribed(t, raw, name, 2)
	// Every reader has made its attempts and sleeps (its wait hint is the
	// writer's 30s lease).
	relocktest.Eventually(t, handoff, "the readers to sleep", func() bool {
		return len(relocktest.HGetAll(t, raw, name)) == 2
	})
	start := time.Now()
	if err := writer.Unlock(w); err != nil {
		t.Fatal(err)
	}
	for i, got := range readers {
		within(t, got, handoff, fmt.Sprint("reader ", i))
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the readers got in %v after the release, want at once", d)
	}
	if n := len(relocktest.HGetAll(t, raw, name)); n != 7 {
		t.Errorf("hash has %d fields, want mode and 6 readers", n)
	}
}

// TestReadHoldsRenewed: read holds on the watchdog lease keep their lease
// keys and the hash alive through many leases, and the renewal stops at
// the final Unlock.
func TestReadHoldsRenewed(t *testing.T) {
	const lease = 300 * time.Millisecond
	c := relocktest.Client(t, rlock.WithWatchdogTimeout(lease))
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	a := rlock.WithOwner(t.Context(), "a")
	rw := c.GetReadWriteLock(name)
	for range 2 {
		if err := rw.ReadLock().Lock(a); err != nil {
			t.Fatal(err)
		}
	}
	fa := layout.Field(c.ID(), "a")
	keys := []string{name, rwlock.LeaseKey(name, fa, 1), rwlock.LeaseKey(name, fa, 2)}
	start := time.Now()
	// Renewals, every third of the lease, put every key's PTTL back up
	// after it ran down; wait for 4 of them (well over a lease's length).
	low, high := (lease * 5 / 6).Milliseconds(), (lease * 17 / 20).Milliseconds()
	for i := range 4 {
		relocktest.Eventually(t, 5*lease, fmt.Sprint("the lease to run down before renewal ", i), func() bool {
			return pttl(t, raw, keys[1]) < low
		})
		relocktest.Eventually(t, 5*lease, fmt.Sprint("renewal ", i), func() bool {
			for _, k := range keys {
				if pttl(t, raw, k) < high {
					return false
				}
			}
			return true
		})
	}
	if time.Since(start) < lease {
		t.Fatalf("4 renewals in %v, under one lease", time.Since(start))
	}
	select {
	case <-rw.ReadLock().Done(a):
		t.Fatal("the hold ended")
	default:
	}
	for range 2 {
		if err := rw.ReadLock().Unlock(a); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range keys {
		if exists(t, raw, k) {
			t.Errorf("%s left after the final Unlock", k)
		}
	}
}

// TestReadHoldLostWhenItsLeaseKeyGoes: a renewal that finds a level's lease
// key gone (the hold ran out) reports the hold lost.
func TestReadHoldLostWhenItsLeaseKeyGoes(t *testing.T) {
	const lease = 300 * time.Millisecond
	c := relocktest.Client(t, rlock.WithWatchdogTimeout(lease))
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	a := rlock.WithOwner(t.Context(), "a")
	r := c.GetReadWriteLock(name).ReadLock()
	if err := r.Lock(a); err != nil {
		t.Fatal(err)
	}
	hold := r.HoldContext(a)
	if err := raw.Do(t.Context(), raw.B().Del().Key(rwlock.LeaseKey(name, layout.Field(c.ID(), "a"), 1)).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-hold.Done():
	case <-time.After(5 * lease):
		t.Fatal("the hold was not reported lost")
	}
	if cause := context.Cause(hold); !errors.Is(cause, rlock.ErrLockLost) {
		t.Errorf("cause = %v, want ErrLockLost", cause)
	}
}

// TestAnonymousReaders: without owners, read holds work like
// sync.RWMutex's RLock and RUnlock: several at once on one Client, each
// ownerless Unlock releasing one of them, also concurrently.
func TestAnonymousReaders(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	ctx := t.Context()
	const n = 8
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if err := c.GetReadWriteLock(name).ReadLock().Lock(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := len(relocktest.HGetAll(t, raw, name)); got != n+1 {
		t.Fatalf("hash has %d fields, want mode and %d readers", got, n)
	}
	if ok, err := c.GetReadWriteLock(name).WriteLock().TryLock(ctx, 0, 0); ok || err != nil {
		t.Fatalf("write TryLock among readers = %v, %v", ok, err)
	}
	for range n {
		wg.Go(func() {
			if err := c.GetReadWriteLock(name).ReadLock().Unlock(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if exists(t, raw, name) {
		t.Errorf("hash left after %d ownerless Unlocks: %v", n, relocktest.HGetAll(t, raw, name))
	}
	if err := c.GetReadWriteLock(name).ReadLock().Unlock(ctx); !errors.Is(err, rlock.ErrNotHeld) {
		t.Errorf("one Unlock too many = %v, want ErrNotHeld", err)
	}
	// The write side's anonymous hold is its own.
	if err := c.GetReadWriteLock(name).WriteLock().Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.GetReadWriteLock(name).ReadLock().Unlock(ctx); !errors.Is(err, rlock.ErrNotHeld) {
		t.Errorf("read Unlock with only an anonymous write hold = %v, want ErrNotHeld", err)
	}
	if err := c.GetReadWriteLock(name).WriteLock().Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestBadInputWritesNothing(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	ctx := t.Context()
	rw := c.GetReadWriteLock(name)
	bad := []struct {
		what string
		call func() error
	}{
		{"empty name", func() error { return c.GetReadWriteLock("").ReadLock().Lock(ctx) }},
		{"broken hash tag", func() error { return c.GetReadWriteLock("a{b").WriteLock().Lock(ctx) }},
		{"owner ending in :write", func() error { return rw.ReadLock().Lock(rlock.WithOwner(ctx, "x:write")) }},
		{"owner ending in :write, unlock", func() error { return rw.ReadLock().Unlock(rlock.WithOwner(ctx, "x:write")) }},
		{"empty owner", func() error { return rw.WriteLock().Lock(rlock.WithOwner(ctx, "")) }},
		{"negative wait", func() error { _, err := rw.ReadLock().TryLock(ctx, -time.Second, 0); return err }},
		{"lease under 1ms", func() error { return rw.WriteLock().LockLease(ctx, time.Microsecond) }},
		{"zero lease", func() error { return rw.ReadLock().LockLease(ctx, 0) }},
		{"nil function", func() error { return rw.ReadLock().Do(ctx, nil) }},
	}
	for _, b := range bad {
		if err := b.call(); !errors.Is(err, rlock.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", b.what, err)
		}
	}
	if keys := keysOf(t, raw, name); len(keys) != 0 {
		t.Errorf("bad calls wrote %q", keys)
	}
}

func TestCloseEndsWait(t *testing.T) {
	c1 := relocktest.Client(t)
	// c2 counts its acquire scripts: a waiter sleeps after two of them
	// (before and after subscribing).
	faulty := relocktest.NewFaulty(redistest.Shared(t).Client(t))
	attempts := faulty.Inject(&relocktest.Rule{SHA1s: []string{lua.RWReadAcquire.SHA1, lua.RWWriteAcquire.SHA1},
		N: -1, Run: true, Keep: true})
	c2, err := rlock.New(faulty)
	if err != nil {
		t.Fatal(err)
	}
	name := relocktest.Name(t)
	w := rlock.WithOwner(t.Context(), "w")
	if err := c1.GetReadWriteLock(name).WriteLock().Lock(w); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 2)
	go func() { got <- c2.GetReadWriteLock(name).ReadLock().Lock(t.Context()) }()
	go func() { got <- c2.GetReadWriteLock(name).WriteLock().Lock(t.Context()) }()
	relocktest.Eventually(t, handoff, "both waiters to sleep", func() bool { return attempts.Hits() == 4 })
	if err := c2.Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case err := <-got:
			if !errors.Is(err, rlock.ErrNotAcquired) || !errors.Is(err, rlock.ErrClosed) {
				t.Errorf("wait ended by Close = %v, want ErrNotAcquired and ErrClosed", err)
			}
		case <-time.After(handoff):
			t.Fatal("Close did not end the wait")
		}
	}
	if err := c1.GetReadWriteLock(name).WriteLock().Unlock(w); err != nil {
		t.Fatal(err)
	}
}

func TestForceUnlockBySide(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	a := rlock.WithOwner(t.Context(), "a")
	rw := c.GetReadWriteLock(name)
	if err := rw.ReadLock().Lock(a); err != nil {
		t.Fatal(err)
	}
	if ok, err := rw.WriteLock().ForceUnlock(t.Context()); ok || err != nil {
		t.Errorf("write ForceUnlock in read mode = %v, %v, want false", ok, err)
	}
	hold := rw.ReadLock().HoldContext(a)
	if ok, err := rw.ReadLock().ForceUnlock(t.Context()); !ok || err != nil {
		t.Errorf("read ForceUnlock = %v, %v, want true", ok, err)
	}
	if exists(t, raw, name) {
		t.Error("hash left")
	}
	if cause := context.Cause(hold); !errors.Is(cause, rlock.ErrLockLost) {
		t.Errorf("the forced read hold's cause = %v, want ErrLockLost", cause)
	}
	if err := rw.WriteLock().Lock(a); err != nil {
		t.Fatal(err)
	}
	if ok, err := rw.WriteLock().ForceUnlock(t.Context()); !ok || err != nil {
		t.Errorf("write ForceUnlock = %v, %v, want true", ok, err)
	}
	if d, err := rw.ReadLock().RemainingLease(t.Context()); d != 0 || err != nil {
		t.Errorf("RemainingLease of a free lock = %v, %v", d, err)
	}
}

// TestDoOnReadSide: Do runs under a read hold, with its owner in fn's
// context, and releases it.
func TestDoOnReadSide(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	r := c.GetReadWriteLock(name).ReadLock()
	err := r.Do(t.Context(), func(ctx context.Context) error {
		if n, err := r.HoldCount(ctx); n != 1 || err != nil {
			t.Errorf("HoldCount in Do = %d, %v", n, err)
		}
		if d, err := r.RemainingLease(ctx); d <= 0 || err != nil {
			t.Errorf("RemainingLease in Do = %v, %v", d, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if exists(t, raw, name) {
		t.Error("hash left after Do")
	}
}
