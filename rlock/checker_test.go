package rlock_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/rlock"
)

// TestRandomizedHolds is the checker: a randomized, model-based test of
// every kind relock offers, against real redis-server processes that it
// hits with faults, with Clients that die along the way. A model follows
// what every call was told and says what may and what must happen.
//
// # What it models
//
// Each kind runs on a server of its own, with two or three Clients in the
// test process and, in some rounds, a child process (the test binary run
// again) with one Client that holds or waits and is then killed with
// SIGKILL, or first stopped with SIGSTOP. The last Client of every kind
// reaches the server through a TCP proxy in the test process
// (relocktest.Proxy), which adds 1ms each way. Every Client has a
// watchdog timeout of 900ms. The kinds:
//
//   - Lock, FencedLock and FairLock: per Client, two named owners with two
//     goroutines each (an owner's calls interleave), an ownerless actor
//     with three goroutines on one handle, and the owners Do makes up for
//     a call without one;
//   - WakeOne: Lock, with WithWakeOne on Clients 0 and 2 and not on 1;
//   - ReadWrite: the same owners on the read and write sides of a
//     read-write lock (the ownerless actor with one goroutine);
//   - Semaphore: three actors per Client holding permits by ID;
//   - Latch: waiters in every Client (and a child) while the count goes
//     down to 0.
//
// In random rounds every actor makes one call: an acquisition that waits
// or not (some waits shorter than a round trip, 1µs to 2ms), on the
// watchdog lease or a fixed one (some end while held), a re-entry, a
// release, Do (returning an error, panicking, re-entering), ForceUnlock,
// Token; for the semaphore Acquire, TryAcquire, Release (also of a stale
// ID, or of another Client's permit) and AddPermits. Now and then a fault
// hits the server meanwhile: a SIGSTOP shorter than the lease, one
// longer, CLIENT KILL of every connection, real OOM replies (maxmemory
// 1), or OOM replies to acquisitions only (injected under the Client, so
// that releases go through); or the proxy's connections, in one of three
// forms: 10ms to 40ms more each way, a stall of a third of the lease
// (nothing crosses, then all of it), a cut (a stall, then every
// connection closed, what the stall kept dropped). Shaped rounds set up what random ones rarely do: a
// hand-off under injected OOM, during which the lock's braced name
// ("{name}", whose derived keys are the lock's) and the other kind of
// lock on its name (a read-write lock on a plain lock's name, a plain
// lock on a read-write lock's) are tried; a holder that dies, killed or
// its Client closed, while others wait; a holder that is stopped, for
// longer than its lease or shorter, while others wait; a waiter that
// dies or is stopped while it waits (queued in a fair lock or a
// semaphore, registered for wake-one) before the holder releases; a
// wake-one registrant that gives up a TryLock and is then stopped, while
// a waiter of a Client without wake-one waits (stop-registrant); a holder
// on the watchdog lease that re-enters with a shorter fixed lease and
// lets it run out; a hold on a short fixed lease taken with TryAcquire
// and watched (its Hold's Context and HoldContext) while another owner
// waits (lease-end); acquisitions of a free lock, or of a free permit,
// by the proxied Client with waits shorter than a round trip
// (short-wait); readers on the watchdog lease and on a short fixed lease
// with a writer waiting, one of them trying the plain lock of the name;
// waiters that join a fair lock's queue one after the other; four queued
// semaphore waiters in one Client while permits come free one by one,
// the semaphore's braced name set meanwhile; the semaphore deleted under
// its permits; a latch set again the moment it opens; a latch that opens,
// and is set again at once, between the first read and the subscription
// of a waiter whose Client has 50ms each way (proxy-opening); Clients
// closed while waiting.
//
// # What it checks
//
// Safety: no two owners certainly hold conflicting sides at once (a write
// hold conflicts with every hold of another owner; a dead holder holds
// until its lease ends); a semaphore never has more permits held than it
// has; a fencing token grows with every new hold and stays the same on
// re-entry; a fair lock grants in the order its waiters joined the queue,
// among those that stayed; Await returns only if the count may have been
// 0 while it ran. A name whose derived keys are those of a name in use
// (the braced form of the lock's, of the semaphore's) is refused with an
// error matching ErrNameConflict, and a lock of another kind on the
// name of a lock held (read-write and plain) with one matching
// ErrWrongKind.
//
// The promise: a hold that returned nil ends only by its release or a
// reported loss (Done and HoldContext, Do's error, the lost handler), and
// so does a permit on the watchdog lease (the lost handler is called with
// the semaphore's name and the permit ID, and a cause matching
// ErrLockLost); no loss is reported without a cause (a cause is a fault
// or event that may end a hold, or a stall of the test process itself as
// long as a renewal interval within the lease, after which the Client
// reports that no renewal was even sent in time: a watchdog that does not
// run cannot renew, and the promise is then the report); no release says "not
// held" of a hold that was not lost. A hold on a fixed lease ends at its
// lease's end, with no call of its owner: the contexts taken when it was
// acquired (a Hold's Context, HoldContext) end by then and 300ms more.
// After every round Redis has the
// holds, counts and permits the model has, and nothing else but what a
// truly unknowable outcome may have left, each only until its lease ends
// (a script held up in a paused server after its call gave up, a release
// whose reply was lost, the holds of a Client that died; and, by the
// read-write lock's layout, a reader's field in a hash that other readers
// keep alive, a write field its owner's read hold keeps alive).
//
// Liveness, as strictly: after every round, whenever the model says a
// waiter could have gone on (the lock free, or readable, for it; a permit
// available; the latch opened after it subscribed), some waiter went on
// within the bound: 300ms, or 150ms for the semaphore (below its waiters'
// 250ms refresh, so that a wake-up lost on the way is seen). An
// acquisition that did not wait long enough to see the lock change, but
// had it free (or a permit) for its whole call with no other call in
// flight, must have taken it, however short its wait: an attempt that was
// sent counts. A latch waiter whose Await had reached Redis (two one-way
// delays after it started) when the count-down that opened the latch
// started goes on, though the latch was set again at once. Only these
// excuse a longer wait, each for as long as it can cause one: a fault,
// while it lasts and 150ms more (the retry after it); a queued waiter
// that gave up during a fault, whose place may be left behind, and a dead
// queued fair-lock or semaphore waiter, or a stopped one: the kind's
// waiter timeout and one refresh interval (1s); a semaphore permit that
// came back by its lease,
// which publishes nothing: one refresh interval; a child that died as it
// started its call: a lease. A dead holder's hold ends with its lease (at
// most 900ms after its last renewal, or its fixed lease), and so does a
// stopped holder's, unless it goes on before; a dead wake-one registrant
// delays nobody, nor does a stopped one that gave up. A latch waiter may
// miss an opening that came while a fault had its subscription down (a
// CLIENT KILL or a cut, or within 150ms after) if the latch was set again
// in that time: Redis keeps no record of an opening. Latency is no excuse:
// the bounds hold through the proxy.
//
// One known defect is excused unless RELOCK_CHECK_STRICT names it
// (stale-opening): an Await that joins its Client's subscription of the
// latch while the "0" of an opening that ended just before it started is
// on its way to that Client (through the proxy, or held up by a fault)
// goes on, though the latch was set again before it started. Each time is
// counted (latch:stale-opening).
//
// At the end every hold is released or left to expire, and nothing of the
// kind is left in Redis, subscribed, or running (TestMain).
//
// # Counts and time
//
// By default the kinds share 65s equally (about 75s in all under -race:
// the first rounds of a run may overrun it), in runs of about 10s with
// a seed each (a share under 10s is one shorter run); a kind given more
// time (a longer RELOCK_CHECK_DURATION, or fewer kinds) makes more runs,
// with more seeds. A run makes every
// shape and every fault once first, in an order of its seed, then rounds
// at random; the shapes of issue 32's items 2, 4, 5 and 6
// (stop-registrant, short-wait, lease-end, proxy-opening) come at random
// only, as each has a test of its own that makes it every time on the
// kinds where it found a defect (TestSeamStopRegistrant,
// TestSeamShortWait, TestSeamLeaseEnd, TestSeamProxyOpening, about 5s in
// all). A run fails unless it made every shape it makes first, every
// fault and every death of its kind (a child killed holding and waiting,
// a Client closed holding and waiting; the latch has no holders) at least
// once, got the stopped children's shapes to their claims (a child
// stopped), judged the braced name and the other kind (lock kinds and
// the semaphore), and made at least 60 calls. The counts are logged per
// run and per kind.
//
// # Replaying
//
// RELOCK_CHECK_DURATION (a Go duration) sets the time of all the kinds
// together; RELOCK_CHECK_KINDS (names, comma-separated) runs some kinds
// only (also the kinds of issue 33, below); RELOCK_CHECK_SEED replays a run, as its log says: the order of its
// rounds, shapes and faults, and its calls' choices as far as its
// goroutines draw in the same order (the server's timing is not
// replayed). RELOCK_CHECK_SKIP names shapes (handoff, kill-holder,
// close-holder, kill-waiter, close-waiter, reenter-shorter, reader-leases,
// fair-order, queue, delete, reset, stop-holder, stop-waiter,
// stop-registrant, short-wait (also the short waits of random rounds),
// lease-end, proxy-opening), checks (braced, two-kinds, anon-shared: the
// ownerless actor's extra goroutines) and faults (pause<lease,
// pause>lease, client-kill, oom, oom-injected, net, and the forms of net:
// net-delay, net-stall, net-cut) to leave out, to look past a known
// failure; RELOCK_CHECK_HISTORY prints every run's history, not only a
// failed one's. The kinds' names are Lock, FencedLock, FairLock, WakeOne,
// ReadWrite, Semaphore and Latch.
//
// # The kinds of issue 33
//
// The spin lock, the counting semaphore and the rate limiter run on the
// same engine in tests of their own, which say their models' rules and
// bounds: TestCheckerSpinLock (SpinLock), TestCheckerCountingSemaphore
// (CountingSemaphore) and TestCheckerRateLimiter (RateLimiter), one run
// of chkWave4Run each by default; RELOCK_CHECK_KINDS names them, to
// these tests or to this one, and the variables above apply to them.
func TestRandomizedHolds(t *testing.T) {
	runChecker(t, chkKinds(), false, chkDefaultDuration, chkRunLength)
}

// runChecker runs the kinds for total in all (RELOCK_CHECK_DURATION
// replaces it), in runs of runLength at most, a seed each.
// RELOCK_CHECK_KINDS names the kinds to run instead, of every kind the
// checker knows; a test of one kind (own) runs only if it names it.
func runChecker(t *testing.T, kinds []*chkKind, own bool, total, runLength time.Duration) {
	if s := os.Getenv("RELOCK_CHECK_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		require.NoError(t, err, "RELOCK_CHECK_DURATION")
		total = d
	}
	if s := os.Getenv("RELOCK_CHECK_KINDS"); s != "" {
		all := allChkKinds()
		var sel []*chkKind
		for _, n := range strings.Split(s, ",") {
			i := slices.IndexFunc(all, func(k *chkKind) bool { return strings.EqualFold(k.name, strings.TrimSpace(n)) })
			require.GreaterOrEqual(t, i, 0, "RELOCK_CHECK_KINDS: no kind %q (kinds: %s)", n, kindNames(all))
			sel = append(sel, all[i])
		}
		if own && !slices.ContainsFunc(sel, func(k *chkKind) bool { return k.name == kinds[0].name }) {
			t.Skipf("RELOCK_CHECK_KINDS does not name %s", kinds[0].name)
		}
		kinds = sel
	}
	base := uint64(time.Now().UnixNano()) &^ 0xffff
	replay := false
	if s := os.Getenv("RELOCK_CHECK_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "RELOCK_CHECK_SEED")
		base, replay = v, true
	}
	// Every kind gets the same share of the time, in runs of runLength
	// (a seed each).
	share := total / time.Duration(len(kinds))
	runs := max(1, int(share/runLength))
	runLen := share / time.Duration(runs)
	if replay {
		runs, runLen = 1, max(runLen, runLength)
	}
	for i, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			counts := map[string]int{}
			for j := range runs {
				seed := base + uint64(100*i+j)
				if replay {
					seed = base
				}
				ok := t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
					t.Logf("RELOCK_CHECK_SEED=%d RELOCK_CHECK_KINDS=%s replays this run (the choices, not the server's timing)", seed, k.name)
					e := newEngine(t, k, seed)
					e.run(runLen)
					e.mu.Lock()
					defer e.mu.Unlock()
					for n, v := range e.counts {
						counts[n] += v
					}
					t.Logf("counts: %s", countLine(e.counts))
				})
				if !ok {
					break
				}
			}
			t.Logf("%s: %d runs of %v: %s", k.name, runs, runLen, countLine(counts))
		})
	}
}

const (
	// chkDefaultDuration is the time of every kind's rounds together.
	chkDefaultDuration = 65 * time.Second
	// chkRunLength is the length of one run (one seed).
	chkRunLength = 10 * time.Second
)

// chkKinds are the kinds TestRandomizedHolds covers.
func chkKinds() []*chkKind {
	return append(lockKinds(), semKind(), latchKind())
}

// allChkKinds are every kind the checker covers: those of
// TestRandomizedHolds and those of issue 33, each run by a test of its
// own (TestCheckerSpinLock, TestCheckerCountingSemaphore,
// TestCheckerRateLimiter).
func allChkKinds() []*chkKind {
	return append(append(chkKinds(), spinKind(), countingKind(), rateKind()), remoteGrantKinds()...)
}

func kindNames(ks []*chkKind) string {
	var ns []string
	for _, k := range ks {
		ns = append(ns, k.name)
	}
	return strings.Join(ns, ",")
}

func countLine(c map[string]int) string {
	var b strings.Builder
	for _, n := range slices.Sorted(maps.Keys(c)) {
		fmt.Fprintf(&b, "%s=%d ", n, c[n])
	}
	return strings.TrimSpace(b.String())
}

// TestRandomizedChild is the body of the checker's child processes: it
// skips unless RELOCK_CHECK_CHILD says what to do (see childSpec).
func TestRandomizedChild(t *testing.T) {
	v := os.Getenv(childEnv)
	if v == "" {
		t.Skip("only in a child process of TestRandomizedHolds")
	}
	spec, err := decodeChildSpec(v)
	if err != nil {
		relocktest.ChildSay("error %v", err)
		return
	}
	runChild(spec)
}

// runChild runs one Client for the parent, which kills the process.
func runChild(spec childSpec) {
	opt := rueidis.ClientOption{InitAddress: []string{spec.Addr}, PipelineMultiplex: -1, DisableCache: true}
	rdb, err := rueidis.NewClient(opt)
	if err != nil {
		relocktest.ChildSay("error %v", err)
		return
	}
	defer rdb.Close()
	var mu sync.Mutex
	var gets int
	evals := map[string]int{}
	tap := relocktest.NewTap(rdb, countReplies(spec.Name, &mu, &gets, evals))
	opts := []rlock.Option{rlock.WithWatchdogTimeout(chkLease)}
	if spec.WakeOne {
		opts = append(opts, rlock.WithWakeOne())
	}
	c, err := rlock.New(tap, opts...)
	if err != nil {
		relocktest.ChildSay("error %v", err)
		return
	}
	defer c.Close()
	relocktest.ChildSay("client %s", c.ID())
	ctx := rlock.WithOwner(context.Background(), spec.Owner)
	replies := func(shas ...string) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, s := range shas {
			n += evals[s]
		}
		return n
	}
	var k *chkKind
	for _, x := range allChkKinds() {
		if x.name == spec.Kind {
			k = x
		}
	}
	if k == nil {
		relocktest.ChildSay("error no kind %q", spec.Kind)
		return
	}
	start := time.Now()
	switch {
	case spec.Kind == "Semaphore":
		s := c.GetSemaphore(spec.Name)
		if spec.Act == "hold" {
			id, err := s.Acquire(ctx, spec.Lease)
			if err != nil {
				relocktest.ChildSay("error %v", err)
				return
			}
			relocktest.ChildSay("held %d %s", start.UnixNano(), id)
			break
		}
		go func() {
			if _, err := s.Acquire(ctx, spec.Lease); err == nil {
				relocktest.ChildSay("error acquired, not waiting")
			}
		}()
		// Waiting, and in the queue once an attempt that asked to join it
		// had its reply.
		if !until(5*time.Second, func() bool { return replies(lua.SemAcquire.SHA1+"/join") >= 1 }) {
			relocktest.ChildSay("error not queued")
			return
		}
		relocktest.ChildSay("waiting")
	case spec.Kind == "CountingSemaphore":
		s := c.GetCountingSemaphore(spec.Name)
		if spec.Act == "hold" {
			if err := s.Acquire(ctx, spec.Expect); err != nil {
				relocktest.ChildSay("error %v", err)
				return
			}
			relocktest.ChildSay("held %d", start.UnixNano())
			break
		}
		go func() {
			if err := s.Acquire(ctx, spec.Expect); err == nil {
				relocktest.ChildSay("error acquired, not waiting")
			}
		}()
		// Waiting once it attempted, subscribed and attempted again.
		if !until(5*time.Second, func() bool { return replies(lua.CountingAcquire.SHA1) >= 2 }) {
			relocktest.ChildSay("error not waiting")
			return
		}
		relocktest.ChildSay("waiting")
	case spec.Kind == "RateLimiter":
		l := c.GetRateLimiter(spec.Name)
		go func() {
			if err := l.Acquire(ctx, spec.Expect); err == nil {
				relocktest.ChildSay("error acquired, not waiting")
			}
		}()
		// Waiting once it was refused, subscribed and was refused again.
		if !until(5*time.Second, func() bool { return replies(lua.RateAcquire.SHA1) >= 2 }) {
			relocktest.ChildSay("error not waiting")
			return
		}
		relocktest.ChildSay("waiting")
	case spec.Kind == "Latch":
		l := c.GetCountDownLatch(spec.Name)
		go func() {
			if err := l.Await(ctx); err == nil {
				relocktest.ChildSay("error opened")
			}
		}()
		// Subscribed once it read the count a second time.
		if !until(5*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return gets >= 2 }) {
			relocktest.ChildSay("error not waiting")
			return
		}
		relocktest.ChildSay("waiting")
	default:
		var l checkedLock
		sd := sW
		if spec.Side == "r" {
			sd = sR
		}
		switch spec.Kind {
		case "Lock", "WakeOne", "WakeOneAll":
			l = c.GetLock(spec.Name)
		case "FencedLock", "WakeOneFenced":
			l = c.GetFencedLock(spec.Name)
		case "SpinLock":
			l = c.GetSpinLock(spec.Name)
		case "FairLock":
			l = c.GetFairLock(spec.Name)
		case "ReadWrite":
			rw := c.GetReadWriteLock(spec.Name)
			l = rw.WriteLock()
			if sd == sR {
				l = rw.ReadLock()
			}
		}
		if spec.Act == "hold" {
			if spec.Lease > 0 {
				err = l.LockLease(ctx, spec.Lease)
			} else {
				err = l.Lock(ctx)
			}
			if err != nil {
				relocktest.ChildSay("error %v", err)
				return
			}
			relocktest.ChildSay("held %d", start.UnixNano())
			break
		}
		if spec.Act == "try" {
			// A waiter that gives up: TryLock must not get the lock.
			ok, err := l.TryLock(ctx, spec.Wait, spec.Lease)
			switch {
			case err != nil:
				relocktest.ChildSay("error %v", err)
				return
			case ok:
				relocktest.ChildSay("error acquired, not given up")
				return
			}
			relocktest.ChildSay("gave up %d", start.UnixNano())
			break
		}
		go func() {
			if err := l.Lock(ctx); err == nil {
				relocktest.ChildSay("error acquired, not waiting")
			}
		}()
		// Waiting once it attempted, subscribed and attempted again (and
		// so joined the queue, or registered for wake-one).
		if !until(5*time.Second, func() bool { return replies(k.acquireScripts...) >= 2 }) {
			relocktest.ChildSay("error not waiting")
			return
		}
		relocktest.ChildSay("waiting")
	}
	relocktest.ChildWait()
}
