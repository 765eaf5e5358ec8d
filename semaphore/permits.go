package semaphore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/lua"
)

// NeverExpires is the remaining lease RemainingLease reports for a permit
// that has no lease (one a Redisson client took without a lease: it is
// held until released by its ID).
const NeverExpires time.Duration = -1

// MaxPermitsPerCall is the most permits AcquirePermits and
// TryAcquirePermits take in one call: each permit has its own ID, sent
// with every attempt and kept by the Client while held, and the script
// that takes them runs, blocking the server, for all of them at once.
const MaxPermitsPerCall = 1 << 16

// AcquirePermits takes n permits in one step, all or none, waiting until
// n are free or ctx ends, and returns them. lease is Acquire's, for each
// permit: 0 holds each on the watchdog lease, renewed by the Client until
// its Release; > 0 is a fixed lease. The wait is Acquire's (see Waiting
// and fairness in the package documentation): a waiter for n permits
// that joined the queue holds n permits back, so it is not passed over by
// later waiters for fewer.
//
// n must be at least 1 and at most MaxPermitsPerCall, and no more than
// the semaphore's permits, available and held (checked by each attempt
// while the count is set: a semaphore whose permits were never set is
// waited for, as by Acquire);
// otherwise, and for a negative lease, it returns ErrInvalidArgument and
// changes nothing. If it returns an error, no permit is held and no
// waiter state is left behind; when ctx ended the wait, the error matches
// both ErrNotAcquired and ctx.Err(); when Close did, ErrNotAcquired and
// ErrClosed.
func (s *Semaphore) AcquirePermits(ctx context.Context, n int, lease time.Duration) ([]*Permit, error) {
	if err := checkManyPermits(n, lease); err != nil {
		return nil, err
	}
	a, err := s.acquireMany(ctx, n, lockcore.NoLimit, lease)
	if err != nil {
		return nil, err
	}
	return s.newPermits(a), nil
}

// TryAcquirePermits is AcquirePermits that gives up after wait, as
// TryAcquire does: wait 0 makes one attempt, and an attempt sent within
// the wait counts. It returns nil and no error when the wait ended
// without the permits while ctx is live.
func (s *Semaphore) TryAcquirePermits(ctx context.Context, n int, wait, lease time.Duration) ([]*Permit, error) {
	if err := lockcore.CheckWait(wait); err != nil {
		return nil, err
	}
	if err := checkManyPermits(n, lease); err != nil {
		return nil, err
	}
	a, err := s.acquireMany(ctx, n, wait, lease)
	if a == nil {
		return nil, err
	}
	return s.newPermits(a), nil
}

// acquireMany is acquire for the calls for n permits: every attempt runs
// the script for several permits (also for n == 1), which refuses more
// permits than the semaphore has.
func (s *Semaphore) acquireMany(ctx context.Context, n int, wait, lease time.Duration) (*acquisition, error) {
	return s.acquire(ctx, n, true, wait, lease)
}

// checkManyPermits checks the number of permits and the lease of a call for
// several permits.
func checkManyPermits(n int, lease time.Duration) error {
	if n < 1 || n > MaxPermitsPerCall {
		return fmt.Errorf("%w: %d permits asked for (at least 1, at most %d in one call)", ErrInvalidArgument, n, MaxPermitsPerCall)
	}
	if lease != 0 {
		return lockcore.CheckLease(lease)
	}
	return nil
}

// tooMany turns the refusal of a call for more permits than the semaphore
// has (lua.TooManyPermits) into an error matching ErrInvalidArgument; nil
// for any other error.
func (a *acquisition) tooMany(err error) error {
	re, ok := rueidis.IsRedisErr(err)
	if !ok {
		return nil
	}
	code, total, _ := strings.Cut(re.Error(), " ")
	if code != lua.TooManyPermits {
		return nil
	}
	return fmt.Errorf("%w: %d permits asked of semaphore %q, which has %s", ErrInvalidArgument, len(a.ids), a.s.name, total)
}

// UpdateLease gives the permit permitID, whichever Client (or Redisson
// instance) took it, a fixed lease of lease from now, longer or shorter
// than the one it had, as Redisson's updateLeaseTime does. It returns nil
// when the permit was held and took the new lease, and an error matching
// ErrNotHeld when no such permit is held (unknown, released, or its lease
// ended: a permit that came back is not taken again). lease must be
// between 1ms and 100 years (a permit cannot be put back on the watchdog,
// nor left without a lease); a permitID that is not 32 lowercase hex
// characters is ErrInvalidArgument.
//
// A permit this Client holds on the watchdog lease leaves the watchdog:
// its renewals stop, it is held on the new lease and no longer, and the
// context of its Permit ends when that lease does (with a cause matching
// ErrLockLost, which the lost handler is told, as for a lock on a fixed
// lease), unless a later UpdateLease moves the end or Release comes
// first. When the update finds such a permit gone, the loss is reported
// and the error matches ErrLockLost too. A permit that another Client
// renews on its watchdog is renewed by it again: there the new lease
// lasts until that Client's next renewal.
//
// The context of a Permit on a fixed lease follows an update made with
// its Permit.UpdateLease, not one made by ID: use that for a Permit.
//
// A shorter lease publishes on the semaphore's channel, so that a waiter
// sleeping until the end of the old lease looks again. UpdateLease may be
// resent after a lost reply (it sets the same lease again); when it
// returns a connection error, the permit has either lease. A permit this
// Client holds on the watchdog then stays on it, and is renewed at once
// (the new lease, if it was set, could end before the next renewal): it
// is held on the watchdog's lease again, or its loss is reported.
func (s *Semaphore) UpdateLease(ctx context.Context, permitID string, lease time.Duration) error {
	_, err := s.updateLease(ctx, permitID, lease)
	return err
}

// updateLease is UpdateLease; it also returns when the script that set
// the lease was sent.
func (s *Semaphore) updateLease(ctx context.Context, permitID string, lease time.Duration) (time.Time, error) {
	if err := s.check(); err != nil {
		return time.Time{}, err
	}
	if lease == 0 {
		return time.Time{}, fmt.Errorf("%w: lease 0: a permit's lease can only be changed to a fixed lease (the watchdog renews a permit on its lease without a call)", ErrInvalidArgument)
	}
	if err := lockcore.CheckLease(lease); err != nil {
		return time.Time{}, err
	}
	raw, err := decodeID(permitID)
	if err != nil {
		return time.Time{}, err
	}
	var sent time.Time
	k := KeysOf(s.name)
	err = s.core.UpdatePermit(ctx, s.name, permitID, lease, func(ctx context.Context) (bool, error) {
		sent = time.Now()
		// Waits for the replicas like a release (Redisson's updateLeaseTime
		// does too): the lease is changed on the master whatever they say.
		n, err := s.core.RunRelease(ctx, lua.SemUpdateLease, []string{k.Available, k.Leases, k.Channel, k.Holders, layout.OtherKey(s.name)},
			[]string{s.core.PublishCommand(), raw, strconv.FormatInt(lockcore.Millis(lease), 10)}).AsInt64()
		if err != nil {
			return false, s.fail("update lease", err)
		}
		return n == 1, nil
	}, func() error { return s.notHeld(permitID) })
	return sent, err
}

// notHeld is the error of a call on permit id that is not held.
func (s *Semaphore) notHeld(id string) error {
	return fmt.Errorf("%w: permit %s of semaphore %q (unknown, released, or its lease ran out)", ErrNotHeld, id, s.name)
}

// RemainingLease is how long the lease of the permit permitID, whichever
// Client (or Redisson instance) took it, has to run, by the Redis
// server's clock (Redisson's getLeaseTime): at least 1ms; NeverExpires
// for a permit without a lease. A permit on the watchdog lease reports
// what is left until its next renewal resets it. It returns an error
// matching ErrNotHeld when no such permit is held, and ErrInvalidArgument
// for a permitID that is not 32 lowercase hex characters. Like every call
// that looks at the permits, it first gives back those whose lease ended.
func (s *Semaphore) RemainingLease(ctx context.Context, permitID string) (time.Duration, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	raw, err := decodeID(permitID)
	if err != nil {
		return 0, err
	}
	k := KeysOf(s.name)
	ms, err := lua.SemLeaseLeft.Exec(ctx, s.core.RDB, []string{k.Available, k.Leases, k.Channel, layout.OtherKey(s.name)},
		[]string{s.core.PublishCommand(), raw}).AsInt64()
	switch {
	case err != nil:
		return 0, s.fail("remaining lease", err)
	case ms == 0:
		return 0, s.notHeld(permitID)
	case ms < 0:
		return NeverExpires, nil
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// UpdateLease gives the permit a fixed lease of lease from now (see
// Semaphore.UpdateLease), and makes its context end when that lease does.
// When the permit is no longer held, its context ends (if it has not
// already) and the error matches ErrNotHeld and ErrLockLost; an update
// of a Permit whose context has ended changes nothing and returns an
// error matching ErrNotHeld and the context's cause. Updates of one
// Permit on several goroutines are made one at a time. When the update
// returns a connection error, the permit has either lease, and its
// context ends at the sooner of their ends.
func (p *Permit) UpdateLease(ctx context.Context, lease time.Duration) error {
	if p.fixed == nil {
		return p.s.UpdateLease(ctx, p.id, lease)
	}
	p.updating.Lock()
	defer p.updating.Unlock()
	if p.ctx.Err() != nil {
		return lockcore.Join(p.s.notHeld(p.id), context.Cause(p.ctx))
	}
	sent, err := p.s.updateLease(ctx, p.id, lease)
	switch {
	case errors.Is(err, ErrNotHeld):
		lost := fmt.Errorf("%w: %q: permit %s was gone when its lease was updated", ErrLockLost, p.s.name, p.id)
		p.fixed.stop(lost)
		return lockcore.Join(err, lost)
	case err != nil:
		if !sent.IsZero() && !lockcore.IsReply(err) {
			// The script may have run: the permit may end at the new
			// end, if that is sooner.
			p.fixed.shorten(sent.Add(lease))
		}
		return err
	case !p.fixed.move(sent.Add(lease)):
		// Its lease ran out by this Client's clock (counted from before
		// the call that set it) while the update was under way, or Close
		// came: the Permit is over, and what Redis holds is given back.
		cause := context.Cause(p.ctx)
		dctx, cancel := detached(ctx)
		defer cancel()
		_ = p.s.Release(dctx, p.id)
		return lockcore.Join(p.s.notHeld(p.id), cause)
	}
	return nil
}

// RemainingLease is Semaphore.RemainingLease of the permit.
func (p *Permit) RemainingLease(ctx context.Context) (time.Duration, error) {
	return p.s.RemainingLease(ctx, p.id)
}
