package fairlock_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/rlock"
)

// TestReview12ConfirmationOfAnEndedGrant: the confirmation of a granted
// hold on a fixed lease is on its way when the owner releases that hold
// and takes the lock again on a shorter fixed lease. The confirmation,
// which was for the hold that ended, does not set the rest of that
// hold's lease on the new one: the new hold ends when its own lease
// does. Nor on a re-entry on the shorter lease made meanwhile.
func TestReview12ConfirmationOfAnEndedGrant(t *testing.T) {
	for _, reenter := range []bool{false, true} {
		t.Run(map[bool]string{false: "locked again", true: "re-entered"}[reenter], func(t *testing.T) {
			confirmationOfAnEndedGrant(t, reenter)
		})
	}
}

func confirmationOfAnEndedGrant(t *testing.T, reenter bool) {
	g := newGrantFixture(t)
	h := rlock.WithOwner(t.Context(), "holder")
	w := rlock.WithOwner(t.Context(), "w")
	wField := fairField(g.c, "w")
	reached, proceed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	renew := g.f.Inject(&relocktest.Rule{SHA1s: []string{lua.LockRenew.SHA1}, N: 1, Run: true, Keep: true,
		Match: func(args []string) bool { return slices.Contains(args, wField) },
		Before: func([]string) {
			once.Do(func() {
				close(reached)
				// Until the owner has taken the lock again, or
				// a moment (a release that waits for the
				// confirmation cannot come first).
				select {
				case <-proceed:
				case <-time.After(time.Second):
				}
			})
		}})
	const lease = 8 * time.Second
	grantedOnce(t, g, h, func() error { return g.l.LockLease(w, lease) },
		func() { require.NoError(t, g.l.Unlock(w)) }, wField)
	relocktest.Receive(t, reached, 5*time.Second, "the confirmation sent")
	const short = 500 * time.Millisecond
	relocked := make(chan error, 1)
	go func() {
		defer close(proceed)
		if !reenter {
			if err := g.l.Unlock(w); err != nil {
				relocked <- err
				return
			}
		}
		relocked <- g.l.LockLease(w, short)
	}()
	require.NoError(t, relocktest.Receive(t, relocked, 5*time.Second, "Unlock and LockLease"))
	relocktest.Eventually(t, 5*time.Second, "the confirmation answered", func() bool { return renew.Hits() == 1 })
	assert.LessOrEqual(t, g.pttl(t), short.Milliseconds(), "the new hold's lease after the old grant's confirmation")
	for {
		if err := g.l.Unlock(w); err != nil {
			break
		}
	}
	g.clean(t)
}
