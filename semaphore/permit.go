package semaphore

import (
	"context"
	"fmt"
	"time"

	"github.com/relock-go/relock/internal/lockcore"
)

// Permit is a permit this Client took with AcquirePermit or
// TryAcquirePermit: its ID, the way to give it back, and a context that
// ends when the permit is no longer held, as a lock's HoldContext does.
// A Permit is safe for concurrent use.
type Permit struct {
	s   *Semaphore
	id  string
	ctx context.Context
	// cancel ends ctx at Release, for a permit on a fixed lease (one on
	// the watchdog lease ends with its hold).
	cancel context.CancelFunc
}

// AcquirePermit is Acquire that returns the permit as a Permit.
func (s *Semaphore) AcquirePermit(ctx context.Context, lease time.Duration) (*Permit, error) {
	if lease != 0 {
		if err := lockcore.CheckLease(lease); err != nil {
			return nil, err
		}
	}
	a, err := s.acquire(ctx, -1, lease)
	if err != nil {
		return nil, err
	}
	return s.newPermit(a), nil
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
	a, err := s.acquire(ctx, wait, lease)
	if a == nil {
		return nil, err
	}
	return s.newPermit(a), nil
}

// newPermit makes the Permit of what a won.
func (s *Semaphore) newPermit(a *acquisition) *Permit {
	p := &Permit{s: s, id: a.id, ctx: a.life}
	if p.ctx == nil {
		// A fixed lease: the permit is held until it ends, counted from
		// before the script that took it was sent (so the context never
		// outlives the lease in Redis), or until Release or Close.
		p.ctx, p.cancel = context.WithDeadlineCause(s.core.Life(), a.sent.Add(a.lease),
			fmt.Errorf("%w: %q: the lease of permit %s ended", ErrLockLost, s.name, a.id))
	}
	return p
}

// ID is the permit's ID, as Acquire returns it.
func (p *Permit) ID() string { return p.id }

// Release gives the permit back (see Semaphore.Release) and ends its
// context.
func (p *Permit) Release(ctx context.Context) error {
	err := p.s.Release(ctx, p.id)
	if p.cancel != nil {
		p.cancel()
	}
	return err
}

// Context returns a context that ends when the permit is no longer held:
// after Release (context.Cause is context.Canceled), when it is lost
// (a cause matching ErrLockLost: the watchdog found it gone, or a fixed
// lease ended), or at Close (ErrClosed). It carries no values. Work that
// needs the permit should run under it.
func (p *Permit) Context() context.Context { return p.ctx }

// Done is Context().Done().
func (p *Permit) Done() <-chan struct{} { return p.ctx.Done() }
