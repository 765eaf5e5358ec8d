package rlock_test

import (
	"time"

	"testing"

	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/lua"
)

// TestCheckerGrantAcrossClients is the checker (see TestRandomizedHolds)
// on grants across Clients (issue 35): Lock and FencedLock with wake-one
// on every Client (and child), so that a release often finds every
// waiter of the lock registered and grants it to another Client's waiter
// through the registry; faults, deaths and stops hit those grants as they
// hit acquisitions. The model knows nothing of grants, as in
// TestCheckerGrant. A run in which no grant through the registry was
// landed is followed by another, and the test fails if three runs in a
// row landed none.
func TestCheckerGrantAcrossClients(t *testing.T) {
	kinds := remoteGrantKinds()
	for range 3 {
		before := lockcore.GrantsLanded()
		runChecker(t, kinds, false, 2*chkWave4Run, chkWave4Run)
		if t.Failed() || t.Skipped() {
			return
		}
		if n := lockcore.GrantsLanded() - before; n > 0 {
			t.Logf("%d grants through the registry landed (%d given back, %d parked before their waiter read its reply, in all so far)",
				n, lockcore.GrantsReturned(), lockcore.GrantsParked())
			return
		}
		t.Log("no grant through the registry landed in this run: another run")
	}
	t.Error("no grant through the registry landed in three runs: the checker did not cover grants across Clients")
}

// remoteGrantKinds are the kinds of TestCheckerGrantAcrossClients: Lock
// and FencedLock with wake-one on every Client.
func remoteGrantKinds() []*chkKind {
	all := func(int) bool { return true }
	return []*chkKind{
		{name: "WakeOneAll", slots: 3, wakeOne: all,
			acquireScripts: []string{lua.LockAcquire.SHA1, lua.LockReenter.SHA1},
			model: func(e *engine) model {
				return newHoldsModel(e, func(s *slot, name string, _ side) checkedLock { return s.c.GetLock(name) }, false, false)
			}},
		{name: "WakeOneFenced", slots: 2, wakeOne: all,
			acquireScripts: []string{lua.FencedAcquire.SHA1, lua.LockReenter.SHA1},
			model: func(e *engine) model {
				return newHoldsModel(e, func(s *slot, name string, _ side) checkedLock { return s.c.GetFencedLock(name) }, false, false)
			}},
	}
}

// allWakeOne reports whether every Client of the kind has wake-one: then
// every live waiter is registered, and none hears the unlock message a
// release sends for the waiters that are not.
func (k *chkKind) allWakeOne() bool {
	if k.wakeOne == nil {
		return false
	}
	for i := range k.slots {
		if !k.wakeOne(i) {
			return false
		}
	}
	return true
}

// grantedChild tells the model that the waiting child ch, stopped or
// killed at at, may have been granted the lock through the wake-one
// registry by a release up to last (grant across Clients): its field may
// then be in Redis for the grant's window (the child's lease, the
// watchdog's, when shorter than 3s), and nobody else holds meanwhile.
// When every Client of the kind has wake-one, every live waiter is
// registered and hears no release that woke or granted the child: it
// goes on within its retry bound (2s) after that window, which is
// excused. e.mu is not held.
func (m *holdsModel) grantedChild(ch *child, at, last time.Time) {
	e := m.e
	if e.kind.wakeOne == nil || !ch.spec.WakeOne || m.fair || m.rw {
		return
	}
	end := last.Add(min(3*time.Second, chkLease) + chkSettle)
	e.mu.Lock()
	defer e.mu.Unlock()
	f := field(ch.id, ch.spec.Owner)
	m.spans = append(m.spans, hspan{key: f, side: sW, field: f, from: at, to: end,
		why: "child " + ch.who + " may have been granted the lock while registered"})
	if e.kind.allWakeOne() {
		e.excuse(at, end.Add(2*time.Second), "child "+ch.who+" stopped or killed while registered")
	}
}
