package semaphore_test

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/rlock"
	"github.com/relock-go/relock/semaphore"
)

// handoff bounds a wake-up that a notification brings: far under the
// 30s lease a waiter would otherwise sleep for.
const handoff = 5 * time.Second

func available(t *testing.T, s *semaphore.Semaphore) int {
	t.Helper()
	n, err := s.AvailablePermits(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func setPermits(t *testing.T, s *semaphore.Semaphore, n int) {
	t.Helper()
	if ok, err := s.TrySetPermits(t.Context(), n); !ok || err != nil {
		t.Fatalf("TrySetPermits(%d) = %v, %v", n, ok, err)
	}
}

// leases returns the lease sorted set: raw permit ID -> end of lease.
func leases(t *testing.T, raw rueidis.Client, name string) map[string]float64 {
	t.Helper()
	zs, err := raw.Do(t.Context(), raw.B().Zrange().Key(semaphore.KeysOf(name).Leases).Min("0").Max("-1").Withscores().Build()).AsZScores()
	if err != nil {
		t.Fatal(err)
	}
	m := make(map[string]float64, len(zs))
	for _, z := range zs {
		m[z.Member] = z.Score
	}
	return m
}

func serverMillis(t *testing.T, raw rueidis.Client) float64 {
	t.Helper()
	now, err := raw.Do(t.Context(), raw.B().Time().Build()).AsIntSlice()
	if err != nil || len(now) != 2 {
		t.Fatalf("TIME: %v %v", now, err)
	}
	return float64(now[0]*1000 + now[1]/1000)
}

func unhex(t *testing.T, id string) string {
	t.Helper()
	b, err := hex.DecodeString(id)
	if err != nil || len(b) != 16 {
		t.Fatalf("permit ID %q is not 16 bytes in hex", id)
	}
	return string(b)
}

func acquireAsync(ctx context.Context, s *semaphore.Semaphore, lease time.Duration) <-chan string {
	got := make(chan string, 1)
	go func() {
		id, err := s.Acquire(ctx, lease)
		if err != nil {
			id = "error: " + err.Error()
		}
		got <- id
	}()
	return got
}

func within(t *testing.T, got <-chan string, d time.Duration, what string) string {
	t.Helper()
	select {
	case id := <-got:
		if len(id) != 32 {
			t.Fatalf("%s: %s", what, id)
		}
		return id
	case <-time.After(d):
		t.Fatalf("%s: no permit within %v", what, d)
	}
	return ""
}

// sleeping counts the acquire scripts c's Client sends: a waiter sleeps
// after two of them (before and after subscribing).
func countingClient(t *testing.T, opts ...rlock.Option) (*rlock.Client, *relocktest.Rule) {
	t.Helper()
	faulty := relocktest.NewFaulty(redistest.Shared(t).Client(t))
	attempts := faulty.Inject(&relocktest.Rule{SHA1s: []string{lua.SemAcquire.SHA1}, N: -1, Run: true, Keep: true})
	c, err := rlock.New(faulty, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, attempts
}

func TestRedissonLayout(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	s := c.GetSemaphore(name)
	k := semaphore.KeysOf(name)
	if k.Leases != "{"+name+"}:timeout" || k.Channel != "redisson_sc:{"+name+"}" {
		t.Fatalf("keys = %+v", k)
	}
	if tagged := semaphore.KeysOf("jobs:{user:7}"); tagged.Leases != "jobs:{user:7}:timeout" || tagged.Channel != "redisson_sc:jobs:{user:7}" {
		t.Errorf("keys of a name with a hash tag = %+v", tagged)
	}
	if n := available(t, s); n != 0 {
		t.Errorf("AvailablePermits of an unset semaphore = %d", n)
	}
	setPermits(t, s, 3)
	if ok, err := s.TrySetPermits(t.Context(), 5); ok || err != nil {
		t.Errorf("second TrySetPermits = %v, %v, want false", ok, err)
	}
	before := serverMillis(t, raw)
	id, err := s.Acquire(t.Context(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := raw.Do(t.Context(), raw.B().Get().Key(name).Build()).ToString(); v != "2" {
		t.Errorf("available count %q, want 2", v)
	}
	ls := leases(t, raw, name)
	end, ok := ls[unhex(t, id)]
	if len(ls) != 1 || !ok {
		t.Fatalf("leases = %v, want the raw bytes of %s", ls, id)
	}
	if end < before+9_000 || end > before+11_000 {
		t.Errorf("lease ends at %.0f, want about %.0f", end, before+10_000)
	}
	if err := s.Release(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if n := available(t, s); n != 3 {
		t.Errorf("AvailablePermits after Release = %d, want 3", n)
	}
	if len(leases(t, raw, name)) != 0 {
		t.Error("lease left after Release")
	}
	if err := s.AddPermits(t.Context(), -5); err != nil {
		t.Fatal(err)
	}
	if n := available(t, s); n != -2 {
		t.Errorf("AvailablePermits after AddPermits(-5) = %d, want -2", n)
	}
	if _, ok, err := s.TryAcquire(t.Context(), 0, 0); ok || err != nil {
		t.Errorf("TryAcquire below 0 = %v, %v, want false", ok, err)
	}
	if ok, err := s.Delete(t.Context()); !ok || err != nil {
		t.Errorf("Delete = %v, %v", ok, err)
	}
	if keys, _ := raw.Do(t.Context(), raw.B().Keys().Pattern("*"+name+"*").Build()).AsStrSlice(); len(keys) != 0 {
		t.Errorf("keys left after Delete: %q", keys)
	}
	if ok, err := s.Delete(t.Context()); ok || err != nil {
		t.Errorf("second Delete = %v, %v, want false", ok, err)
	}
}

// TestNeverOverCommitted: goroutines of three Clients take and give back
// permits; no more than the permits ever hold one at once, and every
// permit is back at the end.
func TestNeverOverCommitted(t *testing.T) {
	const permits, perClient, rounds = 3, 6, 25
	name := relocktest.Name(t)
	raw := relocktest.Raw(t)
	clients := []*rlock.Client{relocktest.Client(t), relocktest.Client(t), relocktest.Client(t)}
	setPermits(t, clients[0].GetSemaphore(name), permits)
	var (
		held, most atomic.Int64
		wg         sync.WaitGroup
	)
	for ci, c := range clients {
		for g := range perClient {
			wg.Go(func() {
				s := c.GetSemaphore(name)
				for r := range rounds {
					lease := time.Duration(0)
					if (ci+g+r)%2 == 1 {
						lease = 10 * time.Second
					}
					id, err := s.Acquire(t.Context(), lease)
					if err != nil {
						t.Error(err)
						return
					}
					n := held.Add(1)
					for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
					}
					time.Sleep(100 * time.Microsecond) // the permit's work
					held.Add(-1)
					if err := s.Release(t.Context(), id); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	if m := most.Load(); m > permits {
		t.Errorf("%d permits held at once, want at most %d", m, permits)
	}
	if n := available(t, clients[0].GetSemaphore(name)); n != permits {
		t.Errorf("AvailablePermits at the end = %d, want %d", n, permits)
	}
	if ls := leases(t, raw, name); len(ls) != 0 {
		t.Errorf("%d leases left", len(ls))
	}
}

// TestPermitRenewedUntilRelease: a permit taken with lease 0 is renewed by
// the watchdog through many leases, and renewing stops at Release.
func TestPermitRenewedUntilRelease(t *testing.T) {
	const lease = 300 * time.Millisecond
	c := relocktest.Client(t, rlock.WithWatchdogTimeout(lease))
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	s := c.GetSemaphore(name)
	setPermits(t, s, 1)
	id, err := s.Acquire(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	member := unhex(t, id)
	start := time.Now()
	last := leases(t, raw, name)[member]
	for i := range 5 {
		relocktest.Eventually(t, 5*lease, fmt.Sprint("renewal ", i), func() bool {
			end, ok := leases(t, raw, name)[member]
			if !ok {
				t.Fatal("the permit's lease ended")
			}
			if end > last {
				last = end
				return true
			}
			return false
		})
	}
	if time.Since(start) < lease {
		t.Fatalf("5 renewals in %v, under one lease", time.Since(start))
	}
	if err := s.Release(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if n := available(t, s); n != 1 {
		t.Errorf("AvailablePermits after Release = %d", n)
	}
}

// TestLeasedPermitComesBackAfterClose: a Client that closes without
// releasing stops renewing its permit; the permit comes back when its
// lease ends, and a waiter of another Client gets it then.
func TestLeasedPermitComesBackAfterClose(t *testing.T) {
	const lease = 300 * time.Millisecond
	c1 := relocktest.Client(t)
	c2, err := rlock.NewClient(redistest.Shared(t).ClientOption(), rlock.WithWatchdogTimeout(lease))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c2.Close() })
	name := relocktest.Name(t)
	setPermits(t, c1.GetSemaphore(name), 1)
	if _, err := c2.GetSemaphore(name).Acquire(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	got := acquireAsync(t.Context(), c1.GetSemaphore(name), 10*time.Second)
	if err := c2.Close(); err != nil {
		t.Fatal(err)
	}
	closed := time.Now()
	within(t, got, handoff, "the waiter after the closed Client's lease ended")
	if d := time.Since(closed); d > lease+2*time.Second {
		t.Errorf("permit back %v after Close, want about the %v lease", d, lease)
	}
}

func TestStalePermit(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	s := c.GetSemaphore(name)
	setPermits(t, s, 2)
	id, err := s.Acquire(t.Context(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Release(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(t.Context(), id); !errors.Is(err, semaphore.ErrNotHeld) {
		t.Errorf("second Release = %v, want ErrNotHeld", err)
	}
	if err := s.Release(t.Context(), "0123456789abcdef0123456789abcdef"); !errors.Is(err, semaphore.ErrNotHeld) {
		t.Errorf("Release of an unknown permit = %v, want ErrNotHeld", err)
	}
	short, err := s.Acquire(t.Context(), 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	relocktest.Eventually(t, handoff, "the short lease to end", func() bool { return available(t, s) == 2 })
	if err := s.Release(t.Context(), short); !errors.Is(err, semaphore.ErrNotHeld) {
		t.Errorf("Release of an expired permit = %v, want ErrNotHeld", err)
	}
	if n := available(t, s); n != 2 {
		t.Errorf("AvailablePermits = %d, want 2: an expired permit comes back once", n)
	}
	if len(leases(t, raw, name)) != 0 {
		t.Error("leases left")
	}
}

// TestReleaseWakesWaiterPromptly: a waiter sleeps on the channel, not on
// the holder's lease, and a release hands the permit over at once.
func TestReleaseWakesWaiterPromptly(t *testing.T) {
	// The queue timers out of the way: only the release's message can
	// wake the waiter within the hand-off (the permit's lease is 30s).
	semaphore.SetTiming(t, time.Minute, time.Minute)
	c1 := relocktest.Client(t)
	c2, attempts := countingClient(t)
	name := relocktest.Name(t)
	s := c1.GetSemaphore(name)
	setPermits(t, s, 1)
	id, err := s.Acquire(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	got := acquireAsync(t.Context(), c2.GetSemaphore(name), 0)
	relocktest.Eventually(t, handoff, "the waiter to sleep", func() bool { return attempts.Hits() >= 2 })
	start := time.Now()
	if err := s.Release(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	within(t, got, handoff, "the waiter")
	if d := time.Since(start); d > time.Second {
		t.Errorf("hand-off took %v, want at once", d)
	}
}

// TestReleaseWakesOneWaiterPerPermit: permits that come free wake as many
// of a Client's waiters as there are permits, not all of them. (The queue
// timers are set out of the way, so that every attempt counted is one a
// wake-up made.)
func TestReleaseWakesOneWaiterPerPermit(t *testing.T) {
	semaphore.SetTiming(t, time.Hour, time.Hour)
	c1 := relocktest.Client(t)
	c2, attempts := countingClient(t)
	name := relocktest.Name(t)
	setPermits(t, c1.GetSemaphore(name), 0)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	const waiters = 6
	got := make(chan string, waiters)
	// One at a time, so that each is asleep before the next comes: the
	// first attempts, subscribes and attempts again; the others find the
	// channel subscribed and attempt once.
	for i := range waiters {
		go func() {
			id, _ := c2.GetSemaphore(name).Acquire(ctx, 0)
			got <- id
		}()
		relocktest.Eventually(t, handoff, "the waiter to sleep", func() bool { return attempts.Hits() == int64(i+2) })
	}
	base := attempts.Hits()
	if err := c1.GetSemaphore(name).AddPermits(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	within(t, got, handoff, "a waiter after AddPermits(1)")
	if n := attempts.Hits(); n != base+1 {
		t.Errorf("%d attempts after one permit came free, want %d: one waiter woken", n, base+1)
	}
	if err := c1.GetSemaphore(name).AddPermits(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	within(t, got, handoff, "a waiter after AddPermits(2)")
	within(t, got, handoff, "a second waiter after AddPermits(2)")
	// The first woken passed its wake-up on (a permit was left), the
	// second found none left: one more attempt each, and a third waiter
	// is woken by neither.
	relocktest.Eventually(t, handoff, "the last attempt", func() bool { return attempts.Hits() >= base+3 })
	if n := attempts.Hits(); n != base+3 {
		t.Errorf("%d attempts after two more permits, want %d", n, base+3)
	}
	cancel()
	for range waiters - 3 {
		if id := <-got; id != "" {
			t.Errorf("a cancelled waiter got %q", id)
		}
	}
}

// TestNoStarvationUnderChurn: holders of two Clients take permits back as
// soon as they release them, and a newcomer sits behind a link 20ms slower
// than theirs, so its attempts come too late for any permit a release
// frees (the holders' waiters are there first) and competing alone, it
// would win only when a permit happened to be free for that long. Once it
// has waited QueueAfter it joins the queue: then a permit that comes free
// is kept for it, however late its attempt comes. Each of its waits must
// end with a permit, well within the test's bound, while the churn goes on.
func TestNoStarvationUnderChurn(t *testing.T) {
	const permits, churners, waits = 2, 6, 5
	c1, c2 := relocktest.Client(t), relocktest.Client(t)
	slow := relocktest.NewFaulty(redistest.Shared(t).Client(t))
	slow.Inject(&relocktest.Rule{SHA1s: []string{lua.SemAcquire.SHA1}, N: -1, Run: true, Keep: true,
		Before: func([]string) { time.Sleep(20 * time.Millisecond) }}) // the slow link
	c3, err := rlock.New(slow)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c3.Close() })
	name := relocktest.Name(t)
	setPermits(t, c1.GetSemaphore(name), permits)
	stop := make(chan struct{})
	var (
		wg    sync.WaitGroup
		churn atomic.Int64
	)
	for i := range churners {
		c := []*rlock.Client{c1, c2}[i%2]
		wg.Go(func() {
			s := c.GetSemaphore(name)
			for {
				select {
				case <-stop:
					return
				default:
				}
				id, err := s.Acquire(t.Context(), 10*time.Second)
				if err != nil {
					t.Error(err)
					return
				}
				churn.Add(1)
				time.Sleep(2 * time.Millisecond) // the permit's work
				if err := s.Release(t.Context(), id); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	defer func() {
		close(stop)
		wg.Wait()
	}()
	relocktest.Eventually(t, handoff, "the churn to start", func() bool { return churn.Load() > 100 })
	s := c3.GetSemaphore(name)
	for i := range waits {
		from := churn.Load()
		start := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		id, err := s.Acquire(ctx, 10*time.Second)
		cancel()
		if err != nil {
			t.Fatalf("wait %d starved: %v after %v, while the churners took %d permits", i, err, time.Since(start), churn.Load()-from)
		}
		t.Logf("wait %d: a permit after %v, while the churners took %d", i, time.Since(start).Round(time.Millisecond), churn.Load()-from)
		if err := s.Release(t.Context(), id); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCloseEndsWait(t *testing.T) {
	c1 := relocktest.Client(t)
	c2, attempts := countingClient(t)
	name := relocktest.Name(t)
	setPermits(t, c1.GetSemaphore(name), 0)
	got := make(chan error, 2)
	go func() { _, err := c2.GetSemaphore(name).Acquire(t.Context(), 0); got <- err }()
	go func() {
		_, _, err := c2.GetSemaphore(name).TryAcquire(t.Context(), time.Minute, time.Second)
		got <- err
	}()
	relocktest.Eventually(t, handoff, "both waiters to sleep", func() bool { return attempts.Hits() >= 4 })
	if err := c2.Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case err := <-got:
			if !errors.Is(err, semaphore.ErrNotAcquired) || !errors.Is(err, semaphore.ErrClosed) {
				t.Errorf("wait ended by Close = %v, want ErrNotAcquired and ErrClosed", err)
			}
		case <-time.After(handoff):
			t.Fatal("Close did not end the wait")
		}
	}
	if _, err := c2.GetSemaphore(name).Acquire(t.Context(), 0); !errors.Is(err, semaphore.ErrClosed) {
		t.Errorf("Acquire after Close = %v, want ErrClosed", err)
	}
}

// TestContextEndsWait: a waiter whose context ends leaves nothing behind,
// also after it joined the queue.
func TestContextEndsWait(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	s := c.GetSemaphore(name)
	setPermits(t, s, 0)
	ctx, cancel := context.WithTimeout(t.Context(), 3*semaphore.QueueAfter)
	defer cancel()
	_, err := s.Acquire(ctx, 0)
	if !errors.Is(err, semaphore.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Acquire until the deadline = %v, want ErrNotAcquired and DeadlineExceeded", err)
	}
	id, ok, err := s.TryAcquire(t.Context(), 2*semaphore.QueueAfter, 0)
	if ok || err != nil || id != "" {
		t.Errorf("TryAcquire with a wait = %q, %v, %v, want \"\", false, nil", id, ok, err)
	}
	k := semaphore.KeysOf(name)
	if n, _ := raw.Do(t.Context(), raw.B().Exists().Key(k.Leases, k.Queue, k.QueueDeadlines).Build()).AsInt64(); n != 0 {
		t.Errorf("%d of the semaphore's keys left after the waits ended", n)
	}
}

func TestBadInputWritesNothing(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	ctx := t.Context()
	s := c.GetSemaphore(name)
	bad := []struct {
		what string
		call func() error
	}{
		{"empty name", func() error { _, err := c.GetSemaphore("").Acquire(ctx, 0); return err }},
		{"broken hash tag", func() error { return c.GetSemaphore("a}b").AddPermits(ctx, 1) }},
		{"negative permits", func() error { _, err := s.TrySetPermits(ctx, -1); return err }},
		{"lease under 1ms", func() error { _, err := s.Acquire(ctx, time.Microsecond); return err }},
		{"negative lease", func() error { _, _, err := s.TryAcquire(ctx, 0, -time.Second); return err }},
		{"negative wait", func() error { _, _, err := s.TryAcquire(ctx, -time.Second, 0); return err }},
		{"short permit ID", func() error { return s.Release(ctx, "abc") }},
		{"upper-case permit ID", func() error { return s.Release(ctx, "0123456789ABCDEF0123456789ABCDEF") }},
		{"not hex", func() error { return s.Release(ctx, "0123456789abcdef0123456789abcdeg") }},
	}
	for _, b := range bad {
		if err := b.call(); !errors.Is(err, semaphore.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", b.what, err)
		}
	}
	if keys, _ := raw.Do(ctx, raw.B().Keys().Pattern("*"+name+"*").Build()).AsStrSlice(); len(keys) != 0 {
		t.Errorf("bad calls wrote %q", keys)
	}
}
