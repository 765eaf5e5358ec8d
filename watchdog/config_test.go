package watchdog_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/watchdog"
)

// TestConfigTick: a Config without a tick gets DefaultTick, and a tick
// that is given is kept: a lease whose third is shorter than a tick is
// renewed once a tick.
func TestConfigTick(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cfg, renew time.Duration // the Config's tick; the renewal interval wanted
	}{
		{"default", 0, watchdog.DefaultTick},
		{"given", 100 * time.Millisecond, 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := &renewer{}
				w := watchdog.New(watchdog.Config{Renew: r.renew, Tick: tc.cfg})
				defer w.Close()
				start := time.Now()
				mustAdd(t, w, 2*tc.renew, "a", nil)
				sleep(10*tc.renew + tc.renew/2)
				at := r.callsFor("a")
				require.Len(t, at, 10, "renewals in 10 ticks of %v", tc.renew)
				for i, a := range at {
					assert.Equal(t, time.Duration(i+1)*tc.renew, a.Sub(start), "renewal %d", i)
				}
			})
		})
	}
}

// TestAddDueAtTheWheelsWakeUp: a lease added due at the tick the wheel
// already sleeps until does not wake the wheel goroutine (a wake-up is a
// goroutine switch on the hot path of Lock); both leases are renewed
// together at that tick.
func TestAddDueAtTheWheelsWakeUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &renewer{}
		w := newWatchdog(r)
		defer w.Close()
		// Due within the wheel's first turn (512 ticks), so that the
		// wheel sleeps until the lease's own tick.
		const short = 3 * time.Second
		mustAdd(t, w, short, "a", nil)
		synctest.Wait()
		before := watchdog.Wakeups(w)
		mustAdd(t, w, short, "b", nil) // no time passed: the same tick
		synctest.Wait()
		assert.Equal(t, before, watchdog.Wakeups(w), "wake-ups of the wheel after the second Add")
		sleep(short/3 + tick)
		calls := r.Calls()
		require.Len(t, calls, 1, "renewal calls")
		assert.ElementsMatch(t, []any{"a", "b"}, calls[0].values, "the leases renewed together")
	})
}
