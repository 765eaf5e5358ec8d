package rlock_test

import (
	"slices"
	"testing"

	"github.com/relock-go/relock/internal/lockcore"
)

// TestCheckerGrant is the checker (see TestRandomizedHolds) on the kinds
// whose releases grant the lock to a waiter of their own Client (issue
// 35): Lock and FencedLock, one run of chkWave4Run each. Each Client has
// two owners with two goroutines each and an ownerless actor with three,
// so that a release often finds a waiter of its Client asleep, and
// another Client's waiter (or none) on the lock's channel; faults and
// deaths hit grants in flight as they hit acquisitions. The model knows
// nothing of grants: a granted waiter is an acquisition that returned
// nil, a granted fenced hold must have a token greater than every
// earlier one, and a lock that came free with a waiter must go to one
// within the bound. The test fails if no release granted.
func TestCheckerGrant(t *testing.T) {
	kinds := slices.DeleteFunc(lockKinds(), func(k *chkKind) bool { return k.name != "Lock" && k.name != "FencedLock" })
	before := lockcore.GrantsMade()
	runChecker(t, kinds, false, 2*chkWave4Run, chkWave4Run)
	if t.Failed() || t.Skipped() {
		return
	}
	if n := lockcore.GrantsMade() - before; n == 0 {
		t.Error("no release granted the lock: the checker did not cover the grant on release")
	} else {
		t.Logf("%d releases granted the lock", n)
	}
}
