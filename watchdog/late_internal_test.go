package watchdog

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLateBatchKeepsLastRenewalError: the wheel takes a lease as due just
// before its deadline, and the goroutine of its renewal runs only after
// the deadline (a loaded machine), so the renewal is not sent. The lease is
// lost, and its cause is the last renewal error Redis gave, not the
// context's end that kept the late call from being sent.
func TestLateBatchKeepsLastRenewalError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const tick, d = 10 * time.Millisecond, 300 * time.Millisecond
		injected := errors.New("injected: connection reset")
		w := New(Config{Tick: tick, Renew: func(_ context.Context, leases []*Lease) []error {
			errs := make([]error, len(leases))
			for i := range errs {
				errs[i] = injected
			}
			return errs
		}})
		defer w.Close()
		l, err := w.Add(d, "a", nil)
		require.NoError(t, err)
		// Every renewal from d/3 on fails; the retry after the one of
		// d-tick is due at the deadline.
		time.Sleep(d - tick/2) // fake clock: the scenario's time passing
		synctest.Wait()
		require.ErrorIs(t, l.lastErr, injected, "the renewals failed")

		// The wheel takes the lease as due (as advance does) before its
		// deadline...
		w.mu.Lock()
		require.Equal(t, stateScheduled, l.state, "the lease waits for its retry")
		w.unlink(l)
		l.state, l.busy = stateRenewing, true
		b := &batch{leases: []*Lease{l}, deadline: l.deadline}
		w.inFlight[b] = struct{}{}
		w.mu.Unlock()
		// ...and the batch's goroutine runs after it.
		time.Sleep(tick) // fake clock
		w.renewBatch(b)

		require.ErrorIs(t, l.Err(), ErrExpired, "Err")
		assert.ErrorIs(t, l.Err(), injected, "Err must carry the last renewal error, not the late call's")
		assert.NotErrorIs(t, l.Err(), errNotSent, "Err")
	})
}
