// Package backoff is relock's one retry-delay policy, shared by the wait
// loop, the release retries, the pub/sub hub's reconnection and the
// MultiLock and RedLock rounds. It imports nothing of relock.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Policy gives the delay before each retry: Min before the first, doubling
// before each next one up to Max (a Max under Min keeps every delay at
// Min). With Jitter, each delay is spread uniformly over [d/2, 3d/2), so
// that processes that failed together do not retry together.
type Policy struct {
	Min, Max time.Duration
	Jitter   bool
}

// Delay is the delay before retry n (n >= 1).
func (p Policy) Delay(n int) time.Duration {
	d := p.Min
	for i := 1; i < n && d < p.Max; i++ {
		d *= 2
	}
	if p.Max > p.Min {
		d = min(d, p.Max)
	}
	if p.Jitter && d > 0 {
		d = d/2 + rand.N(d)
	}
	return d
}

// Sleep waits for d or until done is closed; it reports whether d passed.
// A d of 0 or less does not wait, and reports whether done is still open.
func Sleep(done <-chan struct{}, d time.Duration) bool {
	if d <= 0 {
		select {
		case <-done:
			return false
		default:
			return true
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-done:
		return false
	}
}
