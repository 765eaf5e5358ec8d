package semaphore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/relock-go/relock/internal/lockcore"
)

// Permit is a permit this Client took with AcquirePermit,
// TryAcquirePermit or their forms for several permits: its ID, the way to
// give it back or change its lease, and a context that ends when the
// permit is no longer held, as a lock's HoldContext does. A Permit is
// safe for concurrent use.
type Permit struct {
	s   *Semaphore
	id  string
	ctx context.Context
	// fixed is the end of a permit on a fixed lease (nil for one on the
	// watchdog lease, whose context is its hold's life).
	fixed *leaseEnd
}

// AcquirePermit is Acquire that returns the permit as a Permit.
func (s *Semaphore) AcquirePermit(ctx context.Context, lease time.Duration) (*Permit, error) {
	if lease != 0 {
		if err := lockcore.CheckLease(lease); err != nil {
			return nil, err
		}
	}
	a, err := s.acquire(ctx, 1, false, -1, lease)
	if err != nil {
		return nil, err
	}
	return s.newPermits(a)[0], nil
}

// TryAcquirePermit is TryAcquire that returns the permit as a Permit: nil
// and no error when the wait ended without one while ctx is live. The wait
// is TryAcquire's: an attempt sent within it counts.
func (s *Semaphore) TryAcquirePermit(ctx context.Context, wait, lease time.Duration) (*Permit, error) {
	if err := lockcore.CheckWait(wait); err != nil {
		return nil, err
	}
	if lease != 0 {
		if err := lockcore.CheckLease(lease); err != nil {
			return nil, err
		}
	}
	a, err := s.acquire(ctx, 1, false, wait, lease)
	if a == nil {
		return nil, err
	}
	return s.newPermits(a)[0], nil
}

// newPermits makes the Permits of what a won.
func (s *Semaphore) newPermits(a *acquisition) []*Permit {
	ps := make([]*Permit, len(a.ids))
	for i, id := range a.ids {
		p := &Permit{s: s, id: id}
		if a.lives != nil {
			p.ctx = a.lives[i]
		} else {
			// A fixed lease: the permit is held until it ends, counted
			// from before the script that took it was sent (so the
			// context never outlives the lease in Redis), or until
			// Release or Close.
			p.fixed = newLeaseEnd(s.core.Life(), a.sent.Add(a.lease),
				fmt.Errorf("%w: %q: the lease of permit %s ended", ErrLockLost, s.name, id))
			p.ctx = p.fixed
		}
		ps[i] = p
	}
	return ps
}

// ID is the permit's ID, as Acquire returns it.
func (p *Permit) ID() string { return p.id }

// Release gives the permit back (see Semaphore.Release) and ends its
// context.
func (p *Permit) Release(ctx context.Context) error {
	err := p.s.Release(ctx, p.id)
	if p.fixed != nil {
		p.fixed.stop(context.Canceled)
	}
	return err
}

// Context returns a context that ends when the permit is no longer held:
// after Release (context.Cause is context.Canceled), when it is lost
// (a cause matching ErrLockLost: the watchdog found it gone, or a fixed
// lease ended), or at Close (ErrClosed). It carries no values. For a
// permit on a fixed lease its Deadline is the lease's end (as far as this
// Client can tell: counted from before the call that set the lease was
// sent); Permit.UpdateLease moves it. Work that needs the permit should
// run under it.
func (p *Permit) Context() context.Context { return p.ctx }

// Done is Context().Done().
func (p *Permit) Done() <-chan struct{} { return p.ctx.Done() }

// leaseEnd is the context of a Permit on a fixed lease: it ends at the
// lease's end (its Deadline), which UpdateLease moves, at Release, or at
// Close (its parent's end). Done, Err, Value and context.Cause are those
// of a context.WithCancelCause child of the parent; the timer that ends
// it at the lease's end is a runtime timer (no goroutine while it waits).
type leaseEnd struct {
	context.Context
	end  context.CancelCauseFunc
	lost error

	mu       sync.Mutex
	deadline time.Time
	timer    *time.Timer
}

func newLeaseEnd(parent context.Context, deadline time.Time, lost error) *leaseEnd {
	ctx, end := context.WithCancelCause(parent)
	e := &leaseEnd{Context: ctx, end: end, lost: lost, deadline: deadline}
	e.mu.Lock()
	e.timer = time.AfterFunc(time.Until(deadline), e.expire)
	e.mu.Unlock()
	return e
}

// Deadline is the end of the lease, as far as this Client can tell.
func (e *leaseEnd) Deadline() (time.Time, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.deadline, true
}

// expire is the timer's function: the lease ran out, unless it was
// moved meanwhile.
func (e *leaseEnd) expire() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if time.Now().Before(e.deadline) {
		return
	}
	e.end(e.lost)
}

// move makes the context end at deadline instead. It reports false, and
// moves nothing, when the context has ended.
func (e *leaseEnd) move(deadline time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.Err() != nil {
		return false
	}
	e.deadline = deadline
	e.timer.Reset(time.Until(deadline))
	return true
}

// stop ends the context with cause and its timer.
func (e *leaseEnd) stop(cause error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.timer.Stop()
	e.end(cause)
}
