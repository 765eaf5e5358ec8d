package lockcore

import (
	"context"
	"errors"
	"fmt"
	"github.com/relock-go/relock"
	"time"
)

// HoldContext returns a context that ends when the current hold of the
// owner in ctx (or the Client's anonymous hold of the lock) ends: by its
// final Unlock (context.Cause is then context.Canceled), by its loss (a
// cause matching relock.ErrLockLost) or by Close (relock.ErrClosed). When the owner
// holds nothing this Client knows of, it has already ended with a cause
// matching relock.ErrNotHeld. It carries no values and no deadline. From the
// first call on, a hold on the watchdog lease hears of a force-unlock
// within a round trip (see Core.watch), and one on a fixed lease ends when
// that lease ends (see hold.armExpiryLocked).
func (m *Mutex) HoldContext(ctx context.Context) context.Context {
	owner, _, err := m.holder(ctx)
	if err == nil && owner != "" {
		if life := m.core.watch(m.holdKey(owner), m.lossChannel()); life != nil {
			return life
		}
	}
	return notHeldContext
}

// LossChanneler is implemented by a Kind whose force-unlocks are
// published on another channel than layout.Channel(name).
type LossChanneler interface {
	LossChannel(name string) string
}

// lossChannel is where a force-unlock of the lock is published.
func (m *Mutex) lossChannel() string {
	if lc, ok := m.kind.(LossChanneler); ok {
		return lc.LossChannel(m.name)
	}
	return m.channel
}

// notHeldContext is the HoldContext of an owner that holds nothing.
var notHeldContext = func() context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(fmt.Errorf("%w: no current hold", relock.ErrNotHeld))
	return ctx
}()

// Done returns a channel that is closed when the current hold of the owner
// in ctx (or the Client's anonymous hold) ends: by its final Unlock, by
// loss, or by Close. When the owner holds nothing this Client knows of,
// the channel is already closed.
func (m *Mutex) Done(ctx context.Context) <-chan struct{} {
	return m.HoldContext(ctx).Done()
}

// Lost reports whether cause, the cause of a hold's end, is a loss or
// Close rather than a release.
func Lost(cause error) bool {
	return errors.Is(cause, relock.ErrLockLost) || errors.Is(cause, relock.ErrClosed)
}

// Do acquires the lock on the watchdog lease, runs fn, and releases it.
// fn's context is cancelled with a cause matching relock.ErrLockLost as soon as the hold is
// known to be lost (or relock.ErrClosed at Close); Do then returns fn's error
// joined with that cause. If acquiring fails, fn does not run. The release
// runs in a deferred call: if fn panics (or calls runtime.Goexit), the
// lock is released and the panic goes on with its own value.
// With no owner in ctx, Do acts for a fresh owner and puts it in fn's
// context, so calls made with that context re-enter.
func (m *Mutex) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	_, err := m.do(ctx, NoLimit, fn)
	return err
}

// TryDo is Do that waits for the lock no longer than wait (0: one
// attempt; an attempt sent within the wait counts), and reports whether
// fn ran.
func (m *Mutex) TryDo(ctx context.Context, wait time.Duration, fn func(ctx context.Context) error) (bool, error) {
	if err := CheckWait(wait); err != nil {
		return false, err
	}
	return m.do(ctx, wait, fn)
}

func (m *Mutex) do(ctx context.Context, wait time.Duration, fn func(ctx context.Context) error) (bool, error) {
	if fn == nil {
		return false, invalid("nil function given to Do")
	}
	if _, ok := OwnerFrom(ctx); !ok {
		ctx = WithReservedOwner(ctx, m.core.anonymousOwner())
	}
	if _, ok, err := m.Acquire(ctx, wait, 0); !ok {
		return false, err
	}
	return true, RunHeld(ctx, m.HoldContext(ctx), fn, m.Unlock, m.name)
}

// RunHeld is the part of Do that every lock kind shares, once the lock is
// held: it runs fn with a context that is cancelled with the hold's cause
// as soon as hold (the hold's life, see HoldContext) ends by loss or
// Close, then calls unlock. unlock runs in a deferred call, so a panic in
// fn releases the lock and goes on. It returns fn's error, joined with
// the loss if there was one; a release that finds the hold gone (an
// error matching relock.ErrLockLost) also counts as a loss.
func RunHeld(ctx context.Context, hold context.Context, fn func(context.Context) error,
	unlock func(context.Context) error, name string) (err error) {
	fnCtx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(hold, func() {
		if cause := context.Cause(hold); Lost(cause) {
			cancel(cause)
		}
	})
	done := false
	defer func() {
		if done {
			return
		}
		// fn panicked or called runtime.Goexit: release, and let it go on.
		stop()
		cancel(nil)
		_ = unlock(ctx)
	}()
	ferr := fn(fnCtx)
	done = true
	stop()
	cause := context.Cause(fnCtx)
	if !Lost(cause) {
		cause = nil
	}
	cancel(nil)
	uerr := unlock(ctx)
	if cause == nil && errors.Is(uerr, relock.ErrLockLost) {
		// The release found the hold gone: it was lost while fn ran.
		cause, uerr = uerr, nil
	}
	switch {
	case cause != nil:
		return joinNew(ferr, cause)
	case uerr != nil:
		return Join(ferr, uerr)
	}
	return ferr
}

// joinNew joins err and cause unless err already matches cause.
func joinNew(err, cause error) error {
	if err == nil {
		return cause
	}
	if errors.Is(err, cause) {
		return err
	}
	return Join(err, cause)
}
