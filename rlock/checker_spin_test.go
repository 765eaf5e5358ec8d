package rlock_test

import (
	"testing"
	"time"

	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/rlock"
)

// The spin lock's kind: the lock model (checker_holds_test.go) as for
// Lock, with the spin lock's waiting: no subscription, a backoff between
// attempts.

// spinBound is the spin lock's liveness bound: its backoff's cap (a
// waiter looks again at least that often, or at the holder's lease end
// if sooner), and the lock kinds' bound for the attempt that then finds
// the lock free (chkBound: its round trip, and the scheduler of a loaded
// machine; with 150ms, five spinners of two Clients were seen held up
// together 480ms on a machine loaded seven times over).
const spinBound = lockcore.SpinMax + chkBound

func spinKind() *chkKind {
	return &chkKind{name: "SpinLock", slots: 2, bound: spinBound,
		acquireScripts: []string{lua.LockAcquire.SHA1, lua.LockReenter.SHA1},
		deaths:         []string{"death:kill hold", "death:kill wait", "death:close holding", "death:close waiting"},
		model: func(e *engine) model {
			return newHoldsModel(e, func(s *slot, name string, _ side) checkedLock { return s.c.GetSpinLock(name) }, false, false)
		}}
}

var _ checkedLock = (*rlock.SpinLock)(nil)

// TestCheckerSpinLock is the checker (see TestRandomizedHolds) on the
// spin lock: a lock (no two owners hold it at once, a hold ends only by
// its release or a reported loss, Redis has what the model has), whose
// waiters, which never subscribe, go on within spinBound of the lock
// coming free. One run of chkWave4Run by default (RELOCK_CHECK_DURATION
// sets a longer time, in runs of that length).
func TestCheckerSpinLock(t *testing.T) {
	runChecker(t, []*chkKind{spinKind()}, true, chkWave4Run, chkWave4Run)
}

// chkWave4Run is the time and the length of a run of the tests of the
// kinds of issue 33 (TestCheckerSpinLock, TestCheckerCountingSemaphore,
// TestCheckerRateLimiter): one run each by default, which overruns it to
// make every shape and fault once (about 8s each in all under -race).
const chkWave4Run = 6 * time.Second
