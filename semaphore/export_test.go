package semaphore

import (
	"testing"
	"time"
)

// SetTiming sets when a waiter joins the queue and how often a queued one
// refreshes its place, until t ends. Tests that call it must not run in
// parallel.
func SetTiming(t testing.TB, queueAfter, refresh time.Duration) {
	old := timing
	timing.queueAfter, timing.refresh, timing.waiterTimeout = queueAfter, refresh, 3*refresh
	t.Cleanup(func() { timing = old })
}
