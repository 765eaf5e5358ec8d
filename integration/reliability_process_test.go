package integration_test

import (
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock/integration/checker"
	"github.com/relock-go/relock/rlock"
)

// waitAcquisitions waits until n more new acquisitions than at from have
// been recorded.
func (w *relWorkload) waitAcquisitions(from, n int, timeout time.Duration) int {
	w.t.Helper()
	for range n {
		_, from = w.waitFor(from, timeout, "an acquisition", func(r checker.Record) bool {
			return r.Kind == checker.Acquire && r.Phase == checker.Return && r.Result == checker.OK && !r.Reentry
		})
	}
	return from
}

// waitBlocked waits until every live process but except is waiting for the
// lock: its last acquire has a call record and no return yet.
func (w *relWorkload) waitBlocked(except *relProc, timeout time.Duration) {
	w.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		w.mu.Lock()
		waiting := make(map[string]bool)
		for _, r := range w.recs {
			if r.Kind == checker.Acquire && !r.Reentry {
				waiting[r.Proc] = r.Phase == checker.Call
			}
		}
		changed := w.changed
		w.mu.Unlock()
		all := true
		for _, p := range w.procs {
			if p != except && !p.killed.Load() && !waiting[p.id] {
				all = false
			}
		}
		if all {
			return
		}
		select {
		case <-changed:
		case <-time.After(time.Until(deadline)):
			w.t.Fatalf("processes not all waiting for the lock after %v", timeout)
		}
	}
}

// TestReliabilityContention: processes take turns on a fenced lock, with
// re-entries, Do and LockAndGetToken, and no fault. The history is safe
// and linearizable and no two holds overlap.
func TestReliabilityContention(t *testing.T) {
	e := newRelEnv(t)
	// A long watchdog timeout, so that no renewal misses its lease on a
	// loaded machine: any loss here is the library's.
	w := e.start(t, relConfig{procs: 4, watchdog: 3 * time.Second})
	w.waitAcquisitions(0, 150, 30*time.Second)
	res := w.finish(t.Name())
	res.log(t)
	res.requireSafe(t)
	if res.overlaps != 0 {
		t.Errorf("%d overlapping holds without any fault, the longest %v", res.overlaps, res.longestOverlap)
		res.dump(t)
	}
	if res.losses != 0 {
		t.Errorf("%d holds lost without any fault", res.losses)
	}
}

// TestReliabilityHolderKilled kills (SIGKILL) the process that holds the
// lock while the others wait for it, twice. A waiter takes over once the
// dead holder's lease runs out: never earlier, and within the watchdog
// timeout plus 1s of the kill.
func TestReliabilityHolderKilled(t *testing.T) {
	e := newRelEnv(t)
	w := e.start(t, relConfig{procs: 4, stallers: 2, stallAt: 3, stall: time.Minute})
	var longest time.Duration
	from := 0
	for range 2 {
		// p0 and p1 stall at their third round, whichever gets there first.
		st, i := w.waitFor(from, 30*time.Second, "a process to stall while holding", func(r checker.Record) bool {
			return r.Kind == checker.Stall && !w.proc(r.Proc).killed.Load()
		})
		victim := w.proc(st.Proc)
		w.waitBlocked(victim, 10*time.Second)
		killed := w.kill(victim)
		remaining, asked := w.remainingLease()
		if remaining <= 0 {
			t.Fatalf("the lock's lease right after the kill = %v, want some left", remaining)
		}
		next, j := w.waitFor(i, relLease+5*time.Second, "a waiter to take over", func(r checker.Record) bool {
			return r.Kind == checker.Acquire && r.Phase == checker.Return && r.Result == checker.OK && !r.Reentry
		})
		from = j
		took := time.Unix(0, next.Return)
		expiry := asked.Add(remaining)
		unavailable := took.Sub(killed)
		longest = max(longest, unavailable)
		t.Logf("reliability: holder %s killed with %v of lease left; %s took over %v after the kill (%v after the lease ran out)",
			victim.id, remaining, next.Proc, unavailable.Round(time.Millisecond), took.Sub(expiry).Round(time.Millisecond))
		if took.Before(expiry.Add(-2 * time.Millisecond)) {
			t.Errorf("%s took over %v before the dead holder's lease ran out", next.Proc, expiry.Sub(took))
		}
		if lim := relLease + time.Second; unavailable > lim {
			t.Errorf("takeover %v after the kill, want at most the watchdog timeout plus 1s (%v)", unavailable, lim)
		}
		if late := took.Sub(expiry); late > 500*time.Millisecond {
			t.Errorf("takeover %v after the lease ran out, want about at once", late)
		}
	}
	w.waitAcquisitions(from, 10, 30*time.Second)
	res := w.finish(t.Name())
	res.log(t)
	t.Logf("reliability: longest unavailability after a holder crash: %v (watchdog timeout %v)", longest.Round(time.Millisecond), relLease)
	relTotals.Lock()
	relTotals.longestCrashGap = max(relTotals.longestCrashGap, longest)
	relTotals.Unlock()
	res.requireSafe(t)
	e.canary(t)
}

// TestReliabilityHolderPaused stops (SIGSTOP) the process that holds the
// lock for longer than its lease, until another process has taken the lock
// and written, then lets it go on (SIGCONT). Its late write with the old
// token is rejected, and its Do context is cancelled with ErrLockLost.
func TestReliabilityHolderPaused(t *testing.T) {
	e := newRelEnv(t)
	w := e.start(t, relConfig{procs: 3, stallAt: 3, stall: 2 * time.Second})
	pz := w.pauseHolder()
	res := w.finish(t.Name())
	res.log(t)
	t.Logf("reliability: holder paused for %v with %v of lease left; takeover after %v; loss noticed %v after SIGCONT",
		pz.resumed.Sub(pz.stopped).Round(time.Millisecond), pz.remaining,
		time.Unix(0, pz.takeover.Return).Sub(pz.stopped).Round(time.Millisecond),
		time.Unix(0, pz.lost.Return).Sub(pz.resumed).Round(time.Millisecond))
	if pz.late.Result != checker.Stale {
		t.Errorf("the paused holder's late write = %v (%s), want it rejected as stale", pz.late.Result, pz.late.Err)
	}
	if !strings.Contains(pz.lost.Err, rlock.ErrLockLost.Error()) {
		t.Errorf("the paused holder's Do context ended with %q, want ErrLockLost", pz.lost.Err)
	}
	if d := time.Unix(0, pz.lost.Return).Sub(pz.resumed); d > relLease/3+time.Second {
		t.Errorf("loss noticed %v after SIGCONT, want within a renewal interval (+1s)", d)
	}
	if expiry := pz.pttlAt.Add(pz.remaining); time.Unix(0, pz.takeover.Return).Before(expiry.Add(-2 * time.Millisecond)) {
		t.Errorf("%s took the lock %v before the paused holder's lease ran out", pz.takeover.Proc,
			expiry.Sub(time.Unix(0, pz.takeover.Return)))
	}
	res.requireSafe(t)
	if res.fencing.Stale == 0 {
		t.Error("no stale write rejected")
	}
	e.canary(t)
}
