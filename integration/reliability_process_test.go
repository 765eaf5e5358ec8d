package integration_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
			require.FailNowf(w.t, "timed out", "processes not all waiting for the lock after %v", timeout)
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
	if !assert.Zero(t, res.overlaps, "overlapping holds without any fault (the longest %v)", res.longestOverlap) {
		res.dump(t)
	}
	assert.Zero(t, res.losses, "holds lost without any fault")
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
		require.Positive(t, remaining, "the lock's lease right after the kill")
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
		assert.False(t, took.Before(expiry.Add(-2*time.Millisecond)), "%s took over %v before the dead holder's lease ran out", next.Proc, expiry.Sub(took))
		assert.LessOrEqual(t, unavailable, relLease+time.Second, "the takeover after the kill: at most the watchdog timeout plus 1s")
		assert.LessOrEqual(t, took.Sub(expiry), 500*time.Millisecond, "the takeover after the lease ran out: about at once")
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
	assert.Equal(t, checker.Stale, pz.late.Result, "the paused holder's late write (%s): rejected as stale", pz.late.Err)
	assert.Contains(t, pz.lost.Err, rlock.ErrLockLost.Error(), "how the paused holder's Do context ended")
	assert.LessOrEqual(t, time.Unix(0, pz.lost.Return).Sub(pz.resumed), relLease/3+time.Second,
		"the loss, after SIGCONT: within a renewal interval (+1s)")
	if pz.ranOut {
		// Its renewals came too late on a loaded machine: the lock was
		// another's (or nobody's) when the stop came, and its lease end
		// is not known. The rest holds all the same.
		t.Logf("reliability: p0's hold had run out before it was stopped: the takeover is not judged against its lease")
	} else {
		expiry := pz.pttlAt.Add(pz.remaining)
		assert.False(t, time.Unix(0, pz.takeover.Return).Before(expiry.Add(-2*time.Millisecond)),
			"%s took the lock %v before the paused holder's lease ran out", pz.takeover.Proc, expiry.Sub(time.Unix(0, pz.takeover.Return)))
	}
	res.requireSafe(t)
	assert.NotZero(t, res.fencing.Stale, "stale writes rejected")
	e.canary(t)
}
