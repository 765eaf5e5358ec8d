package lockcore

import (
	"context"
	"fmt"
	"time"

	"github.com/relock-go/relock/watchdog"
)

type holdKey struct{ name, field string }

// Hold is this Client's record of one owner's hold on one lock: the hold
// levels it knows were granted, the lease that partial unlocks re-arm, the
// watchdog renewal, and who must hear when the hold ends.
// Every field is guarded by Core.mu.
type Hold struct {
	core  *Core
	key   holdKey
	owner string

	count   int // hold levels confirmed by Redis
	pending int // acquisitions in flight
	lease   time.Duration
	renewal *watchdog.Lease

	done    chan struct{} // closed when the hold ends
	cause   error         // why it ended: nil (released), ErrLockLost, ErrClosed
	ended   bool
	cancels map[*cancelFunc]struct{}
}

type cancelFunc = context.CancelCauseFunc

// beginAcquire records an acquisition about to be attempted (and waited
// for). The watchdog renewal is registered by arm, right before each
// attempt's script, not for the whole wait: a waiter holds nothing to renew.
func (c *Core) beginAcquire(name, field, owner string) (*Hold, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.CheckOpen(); err != nil {
		return nil, err
	}
	k := holdKey{name, field}
	h := c.holds[k]
	if h == nil {
		h = &Hold{core: c, key: k, owner: owner, done: make(chan struct{})}
		c.holds[k] = h
	}
	h.pending++
	return h, nil
}

// arm registers h's watchdog renewal, if it has none, before an acquire
// script runs: whatever happens between the script's success and
// endAcquire, the hold is renewed. The first renewal is due a third of
// the lease later, long after the script's reply.
func (c *Core) arm(h *Hold) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h.renewal != nil || h.ended {
		return nil
	}
	l, err := c.Watchdog.Add(c.WatchdogTimeout, h, h.lost)
	if err != nil {
		return ErrClosed
	}
	h.renewal = l
	return nil
}

// disarm stops h's renewal after an attempt that did not acquire, unless
// h holds levels already (a re-entry that waits keeps its renewal).
func (c *Core) disarm(h *Hold) {
	c.mu.Lock()
	var stop *watchdog.Lease
	if h.count == 0 {
		stop, h.renewal = h.renewal, nil
	}
	c.mu.Unlock()
	if stop != nil {
		stop.Stop()
	}
}

// endAcquire records the outcome of an acquisition begun by beginAcquire.
func (c *Core) endAcquire(h *Hold, acquired bool, lease time.Duration, renew bool) {
	c.mu.Lock()
	h.pending--
	if acquired && !h.ended {
		h.count++
		h.lease = lease
		if renew && h.renewal == nil {
			// A concurrent final Unlock stopped the renewal registered
			// before the script; this acquisition needs it again.
			if l, err := c.Watchdog.Add(c.WatchdogTimeout, h, h.lost); err == nil {
				h.renewal = l
			}
		}
	}
	var stop *watchdog.Lease
	if h.count == 0 && h.pending == 0 {
		stop = h.renewal
		h.renewal = nil
		c.dropLocked(h)
	}
	c.mu.Unlock()
	if stop != nil {
		stop.Stop()
	}
}

// dropLocked forgets h if nothing is held or in flight. c.mu is held.
func (c *Core) dropLocked(h *Hold) {
	if h.count == 0 && h.pending == 0 && c.holds[h.key] == h {
		delete(c.holds, h.key)
	}
}

// lookup returns the record of a hold, or nil.
func (c *Core) lookup(name, field string) *Hold {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.holds[holdKey{name, field}]
}

// beginRelease prepares the release of one level. When it is the last
// level this Client knows of, the watchdog renewal is stopped first,
// synchronously, so that no renewal can reach Redis after the release.
// It returns the lease that remaining levels re-arm.
func (c *Core) beginRelease(name, field string) (h *Hold, lease time.Duration) {
	c.mu.Lock()
	h = c.holds[holdKey{name, field}]
	lease = c.WatchdogTimeout
	var stop *watchdog.Lease
	if h != nil {
		if h.lease > 0 {
			lease = h.lease
		}
		if h.count <= 1 {
			stop = h.renewal
			h.renewal = nil
		}
	}
	c.mu.Unlock()
	if stop != nil {
		stop.Stop()
	}
	return h, lease
}

// endRelease records what the release script answered: remaining is the
// field's hold count left in Redis (-1: it held nothing). It returns the
// orphan levels: levels Redis still counts after this Client released the
// last one it knows of, with no acquisition of the owner in flight. They
// come from re-entries whose reply was lost (the outcome unknown), and the
// caller releases them, or they would keep the lock held.
func (c *Core) endRelease(h *Hold, remaining int64, err error) (orphans int64) {
	if h == nil {
		return 0
	}
	c.mu.Lock()
	switch {
	case err != nil:
		if h.count > 1 {
			// A level other than the last: nothing changed locally.
			c.mu.Unlock()
			return 0
		}
		// The last level: the outcome is unknown. The hold is no longer
		// renewed and expires by its lease; locally it has ended.
		h.count = 0
	case remaining < 0:
		// Redis says the owner held nothing: the hold was lost before.
		if h.count > 0 {
			h.count = 0
			c.mu.Unlock()
			h.end(ErrLockLost)
			return 0
		}
	default:
		h.count--
		if remaining == 0 {
			h.count = 0
		}
		if h.count <= 0 && remaining > 0 && h.pending == 0 {
			orphans = remaining
		}
	}
	var stop *watchdog.Lease
	ended := false
	if h.count <= 0 {
		h.count = 0
		stop = h.renewal
		h.renewal = nil
		ended = true
	}
	c.mu.Unlock()
	if stop != nil {
		stop.Stop()
	}
	if ended {
		h.end(nil)
	}
	return orphans
}

// lost is the watchdog's report that the hold is gone. It runs on a
// watchdog goroutine and must not block. A record with no confirmed level
// (only an acquisition in flight) has lost nothing: its renewal just ends.
func (h *Hold) lost(cause error) {
	h.core.mu.Lock()
	h.renewal = nil // already out of the wheel
	held := h.count > 0
	h.core.mu.Unlock()
	if held {
		h.end(fmt.Errorf("%w: %q: %w", ErrLockLost, h.key.name, cause))
	}
}

// end closes the hold: it leaves the Client's record, Done channels close,
// and Do contexts are cancelled with cause when it is not nil.
func (h *Hold) end(cause error) {
	c := h.core
	c.mu.Lock()
	if h.ended {
		c.mu.Unlock()
		return
	}
	h.ended = true
	h.cause = cause
	h.count = 0
	if c.holds[h.key] == h {
		delete(c.holds, h.key)
	}
	stop := h.renewal
	h.renewal = nil
	cancels := h.cancels
	h.cancels = nil
	close(h.done)
	c.mu.Unlock()
	if stop != nil && cause != ErrClosed {
		// Not reached from the watchdog's own loss report (lost clears
		// renewal first), so waiting for the wheel here cannot deadlock.
		stop.Stop()
	}
	if cause == nil {
		return
	}
	for cf := range cancels {
		(*cf)(cause)
	}
	if c.onLost != nil && cause != ErrClosed {
		c.onLost(h.key.name, h.owner, cause)
	}
}

// watch arranges for cancel to be called with the cause when h ends by
// loss or Close. It returns a function that undoes it.
func (h *Hold) watch(cancel context.CancelCauseFunc) (unwatch func()) {
	c := h.core
	c.mu.Lock()
	if h.ended {
		cause := h.cause
		c.mu.Unlock()
		if cause != nil {
			cancel(cause)
		}
		return func() {}
	}
	if h.cancels == nil {
		h.cancels = make(map[*cancelFunc]struct{})
	}
	p := &cancel
	h.cancels[p] = struct{}{}
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		delete(h.cancels, p)
		c.mu.Unlock()
	}
}

// Done is closed when the hold ends.
func (h *Hold) Done() <-chan struct{} { return h.done }
