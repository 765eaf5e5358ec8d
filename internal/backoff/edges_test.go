package backoff_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/relock-go/relock/internal/backoff"
)

// TestSleepZeroAfterDone: a Sleep of 0 after done closed reports false
// every time (it must not race a timer against done).
func TestSleepZeroAfterDone(t *testing.T) {
	done := make(chan struct{})
	close(done)
	for i := range 100 {
		assert.False(t, backoff.Sleep(done, 0), "Sleep(0) with done closed, call %d", i)
	}
}

// TestDelayEdges: a Max equal to Min keeps every delay at Min; a zero
// delay stays zero with jitter (and does not panic); jitter spreads the
// delays over [d/2, 3d/2), not at d alone.
func TestDelayEdges(t *testing.T) {
	ms := time.Millisecond
	same := backoff.Policy{Min: 100 * ms, Max: 100 * ms}
	for n := 1; n < 5; n++ {
		assert.Equal(t, 100*ms, same.Delay(n), "Delay(%d) with Max = Min", n)
	}
	zero := backoff.Policy{Jitter: true}
	for n := 1; n < 3; n++ {
		assert.Equal(t, time.Duration(0), zero.Delay(n), "jittered Delay(%d) of 0", n)
	}
	jit := backoff.Policy{Min: 100 * ms, Jitter: true}
	lo, hi := time.Hour, time.Duration(0)
	for range 1000 {
		d := jit.Delay(1)
		lo, hi = min(lo, d), max(hi, d)
	}
	// Uniform over [50ms, 150ms): 1000 draws that all miss [50ms, 80ms),
	// or all miss (120ms, 150ms), would happen about once in 10^154 runs.
	assert.Less(t, lo, 80*ms, "the shortest of 1000 jittered delays")
	assert.Greater(t, hi, 120*ms, "the longest of 1000 jittered delays")
}
