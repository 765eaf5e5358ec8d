package rlock_test

import (
	"slices"
	"testing"

	"github.com/relock-go/relock/internal/lockcore"
)

// TestCheckerGrant is the checker (see TestRandomizedHolds) on the kinds
// whose releases grant the lock to a waiter of their own Client (issue
// 35): Lock, FencedLock and FairLock (whose releases grant only to the
// head of the queue, which the fair model checks), one run of
// chkWave4Run each. Each Client has
// two owners with two goroutines each and an ownerless actor with three,
// so that a release often finds a waiter of its Client asleep, and
// another Client's waiter (or none) on the lock's channel; faults and
// deaths hit grants in flight as they hit acquisitions. The model knows
// nothing of grants: a granted waiter is an acquisition that returned
// nil, a granted fenced hold must have a token greater than every
// earlier one, and a lock that came free with a waiter must go to one
// within the bound. A run grants a few times (2-6 in most runs): one in
// which no release granted (the releases found another Client's waiter on
// the channel each time) is followed by another, and the test fails if
// three runs in a row granted nothing.
func TestCheckerGrant(t *testing.T) {
	kinds := slices.DeleteFunc(lockKinds(), func(k *chkKind) bool { return !slices.Contains([]string{"Lock", "FencedLock", "FairLock"}, k.name) })
	for range 3 {
		before := lockcore.GrantsMade()
		runChecker(t, kinds, false, 2*chkWave4Run, chkWave4Run)
		if t.Failed() || t.Skipped() {
			return
		}
		if n := lockcore.GrantsMade() - before; n > 0 {
			t.Logf("%d releases granted the lock", n)
			return
		}
		t.Log("no release granted the lock in this run: another run")
	}
	t.Error("no release granted the lock in three runs: the checker did not cover the grant on release")
}
