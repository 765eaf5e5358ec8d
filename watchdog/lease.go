package watchdog

import "time"

// leaseState is where a lease is in its life.
type leaseState uint8

const (
	stateScheduled leaseState = iota // in the wheel, waiting for its next renewal
	stateRenewing                    // in a RenewFunc call
	stateLost                        // lost: Err is set and Done closed
	stateStopped                     // stopped by Stop or Close
)

// Lease is one lease registered with a Watchdog by Add.
type Lease struct {
	w        *Watchdog
	value    any
	duration time.Duration
	interval time.Duration // between a successful renewal and the next
	onLost   func(cause error)

	// Guarded by w.mu.
	state         leaseState
	busy          bool          // a renewal is in flight, or onLost is running: Stop waits
	again         bool          // RenewNow during a renewal: renew again at once
	lost          chan struct{} // made by Done; closed when lost
	onLostPending bool          // lost, and onLost is still to be called
	deadline      time.Time     // start of the last successful renewal (or Add) + duration
	dueTick       int64         // tick of the next renewal, while scheduled
	prev, next    *Lease        // neighbours in the list of the slot, while scheduled
	lastErr       error         // last renewal error since the last success
	err           error         // loss cause
}

// Value returns the value given to Add.
func (l *Lease) Value() any { return l.value }

// Duration returns the lease duration given to Add.
func (l *Lease) Duration() time.Duration { return l.duration }

// Stop stops renewing l. It is synchronous and idempotent: when Stop
// returns, no renewal of l is in flight and none will start, and l's onLost
// is not running and will not be called. If the loss of l raced with Stop,
// either onLost has run to completion before Stop returns, or it never
// runs. Stop does not undo a loss: if l was lost before Stop, Done stays
// closed and Err keeps the cause, even when onLost was never called.
//
// Stop waits for a renewal of l in flight and for l's onLost if it is
// running, so it must not be called from the RenewFunc, nor from l's own
// onLost (a lost lease needs no Stop).
func (l *Lease) Stop() {
	w := l.w
	w.mu.Lock()
	defer w.mu.Unlock()
	switch l.state {
	case stateScheduled:
		w.unlink(l)
		w.active--
		l.state = stateStopped
	case stateRenewing:
		// The renewal in flight sees the state when it returns and
		// leaves l alone.
		w.active--
		l.state = stateStopped
	case stateLost:
		l.onLostPending = false // if its turn has not come, it never will
	}
	for l.busy {
		w.notBusy.Wait()
	}
}

// RenewNow brings l's next renewal forward to the wheel's next tick, for a
// holder that has reason to think its hold is gone (a renewal finds out).
// A renewal already in flight is followed at once by another. It does
// nothing once l is stopped or lost, and may be called from any goroutine,
// also from an onLost callback.
func (l *Lease) RenewNow() {
	w := l.w
	w.mu.Lock()
	defer w.mu.Unlock()
	switch l.state {
	case stateScheduled:
		now := time.Now()
		w.unlink(l)
		w.schedule(l, now, now)
	case stateRenewing:
		l.again = true
	}
}

// Limit brings l's deadline forward to deadline, if that is earlier: the
// holder knows that its lease in the store runs out then unless a renewal
// gets through first (a renewal that succeeds sets the deadline from its
// start, as always). A renewal that fails is retried before the deadline,
// and l is lost when none got through by then. It does nothing once l is
// stopped or lost, and may be called from any goroutine.
func (l *Lease) Limit(deadline time.Time) {
	w := l.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if (l.state == stateScheduled || l.state == stateRenewing) && deadline.Before(l.deadline) {
		l.deadline = deadline
	}
}

// Done returns a channel that is closed when the lease is lost. It is not
// closed when the lease is stopped by Stop or Close.
func (l *Lease) Done() <-chan struct{} {
	l.w.mu.Lock()
	defer l.w.mu.Unlock()
	if l.lost == nil {
		l.lost = make(chan struct{})
		if l.state == stateLost {
			close(l.lost)
		}
	}
	return l.lost
}

// Err returns nil until the lease is lost, and then the cause, which
// matches ErrNotHeld or ErrExpired.
func (l *Lease) Err() error {
	l.w.mu.Lock()
	defer l.w.mu.Unlock()
	return l.err
}
