package multilock

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/relock-go/relock/internal/backoff"
	"github.com/relock-go/relock/internal/lockcore"
)

// MultiLock is a lock made of several locks, held only while every one of
// them is held: one hold over several resources, possibly on several Redis
// servers. A MultiLock does no I/O until a method is called and is safe for
// concurrent use.
//
// It takes its locks in one fixed order, sorted by name, holding the ones
// it has while it waits for the next, so that MultiLocks over the same locks
// never deadlock each other, whatever order their locks were given in; see
// TryLock for how the wait is spread.
type MultiLock struct {
	g     *group
	order []int // indexes of g.locks sorted by name; ties keep their positions
}

// New returns a MultiLock over locks. A MultiLock among locks is expanded
// into its own locks, so that nested MultiLocks share the one global order
// too. No locks, or a nil lock, is an error that every method returns
// (matching ErrInvalidArgument). New does no I/O.
func New(locks ...Locker) *MultiLock {
	flat, err := flatten(locks)
	if err == nil {
		err = checkLocks("multilock", flat)
	}
	if err != nil {
		return &MultiLock{g: &group{kind: "multilock", err: err}}
	}
	g := newGroup("multilock", flat, len(flat))
	order := make([]int, len(flat))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return strings.Compare(g.names[a], g.names[b]) })
	sorted := make([]string, len(order))
	for i, j := range order {
		sorted[i] = g.names[j]
	}
	g.name = "multilock[" + strings.Join(sorted, ",") + "]"
	return &MultiLock{g: g, order: order}
}

func flatten(locks []Locker) ([]Locker, error) {
	var flat []Locker
	for _, l := range locks {
		m, ok := l.(*MultiLock)
		if !ok || m == nil {
			flat = append(flat, l)
			continue
		}
		if m.g.err != nil {
			return nil, m.g.err
		}
		flat = append(flat, m.g.locks...)
	}
	return flat, nil
}

// Name is "multilock[<names>]", the names of its locks in the order they
// are taken.
func (m *MultiLock) Name() string { return m.g.name }

// Lock acquires every lock for the owner in ctx, waiting until it has them
// all or ctx ends. Each lock is held on the watchdog lease. If Lock returns
// an error, the owner holds none of the locks it took for this call; when
// ctx ended the wait, the error matches both ErrNotAcquired and ctx.Err().
func (m *MultiLock) Lock(ctx context.Context) error {
	_, err := m.acquire(ctx, noLimit, 0)
	return err
}

// LockLease is Lock with a fixed lease (at least 1ms) on every lock. The
// set is held for lease minus the time acquiring took (from the first
// lock's attempt to the last one's success); if that is not positive, the
// locks are released and taken again.
func (m *MultiLock) LockLease(ctx context.Context, lease time.Duration) error {
	if err := m.check(0, lease, true); err != nil {
		return err
	}
	_, err := m.acquire(ctx, noLimit, lease)
	return err
}

// TryLock acquires every lock, all or nothing, for the owner in ctx (a
// context without an owner makes a fresh one, as in rlock).
//
// The locks are taken one after the other in name order. wait is the total
// wait for the whole set (0: one attempt on each lock): the MultiLock waits
// for a busy lock while holding the ones before it, in that lock's own
// queue, with what is left of wait. However short the wait, it makes the
// attempts wait 0 makes, and a lock granted by a reply that comes after
// the wait ended counts, as in the locks' own TryLock. This is deadlock-free among MultiLocks,
// since all take their locks in the same order, and it does not starve: a
// MultiLock keeps its place in the queue of the lock it waits for instead
// of dropping everything and racing again. Code that takes some of the same
// locks one by one should take them in name order too, or bound its waits.
//
// lease 0 holds every lock on its watchdog lease; the hold is then lost,
// and Do's context cancelled with a cause matching ErrLockLost, as soon as one lock
// that implements Watchable reports its hold ended. lease > 0 is a fixed
// lease on each lock; the set counts as held only while the first lock's
// lease, less drift (1% plus 2ms), has not run out, and a set that took
// longer than that to gather is released and taken again within wait.
//
// It returns (true, nil) when the owner holds every lock; (false, nil) when
// wait ended without them while ctx is live; (false, err) otherwise, err
// joining a *NodeError for the lock that failed and for each release that
// failed. After a false result, the locks taken for this call have been
// released, in reverse order.
func (m *MultiLock) TryLock(ctx context.Context, wait, lease time.Duration) (bool, error) {
	if err := m.check(wait, lease, false); err != nil {
		return false, err
	}
	return m.acquire(ctx, wait, lease)
}

func (m *MultiLock) check(wait, lease time.Duration, fixed bool) error {
	if m.g.err != nil {
		return m.g.err
	}
	if fixed && lease == 0 {
		return invalid("LockLease needs a lease of at least 1ms")
	}
	return checkAcquire(wait, lease)
}

// acquire takes every lock in order, waiting for each with what is left of
// wait; noLimit waits until ctx ends.
func (m *MultiLock) acquire(ctx context.Context, wait, lease time.Duration) (ok bool, err error) {
	if m.g.err != nil {
		return false, m.g.err
	}
	octx, owner, anon, err := m.g.acquirer(ctx)
	if err != nil {
		return false, err
	}
	var obs *acquireObs
	ctx, octx, obs = m.g.observeAcquire(ctx, octx, owner, anon, wait, lease)
	defer obs.end(&ok, &err)
	if err := ctx.Err(); err != nil {
		return false, notAcquired(err)
	}
	var deadline time.Time
	if wait > 0 {
		deadline = time.Now().Add(wait)
	}
	for {
		start := time.Now()
		ok, err := m.takeAll(octx, wait, deadline, lease)
		if err != nil || !ok {
			return false, err
		}
		if lease == 0 || validity(lease, start) > 0 {
			m.g.grant(octx, owner, anon, all(len(m.order)), lease == 0)
			return true, nil
		}
		// The first lock's lease ran out while the last was being
		// taken: the set was never held as a whole.
		if err := m.release(octx, len(m.order), true, nil); err != nil {
			return false, err
		}
		if wait == 0 || (wait > 0 && !time.Now().Before(deadline)) {
			return false, nil
		}
		// Pause before gathering again, about as long as gathering took
		// (at least 1ms), so that a set that cannot be gathered in time
		// never spins.
		pause := backoff.Policy{Min: max(time.Since(start), time.Millisecond), Jitter: true}.Delay(1)
		if wait > 0 {
			pause = min(pause, time.Until(deadline))
		}
		if !backoff.Sleep(ctx.Done(), pause) {
			return false, notAcquired(ctx.Err())
		}
	}
}

func all(n int) []bool {
	t := make([]bool, n)
	for i := range t {
		t[i] = true
	}
	return t
}

// takeAll takes the locks in order. On a failure it releases what it took,
// in reverse, and returns (false, nil) when the wait ran out, or the
// error.
func (m *MultiLock) takeAll(octx context.Context, wait time.Duration, deadline time.Time, lease time.Duration) (bool, error) {
	for k, i := range m.order {
		w := time.Duration(0)
		switch {
		case wait == noLimit:
			w = maxWait
		case wait > 0:
			w = max(time.Until(deadline), 0)
		}
		ok, err := m.g.locks[i].TryLock(octx, w, lease)
		if err == nil && ok {
			continue
		}
		var errs []error
		if err != nil {
			errs = append(errs, m.g.nodeError(i, err))
		}
		// With a fixed lease, a lock taken early may have expired while a
		// later one was awaited.
		if rerr := m.release(octx, k, lease > 0, nil); rerr != nil {
			errs = append(errs, rerr)
		}
		return false, lockcore.JoinList(errs...)
	}
	return true, nil
}

// release unlocks the first n locks of the order, in reverse, on every
// one whatever the others answered, and joins the errors. With expired
// set (a set whose fixed leases may have run out), ErrNotHeld is expected
// and ignored. When answers is not nil, answers[i] is set to what lock i
// answered.
func (m *MultiLock) release(octx context.Context, n int, expired bool, answers []error) error {
	var errs []error
	for k := n - 1; k >= 0; k-- {
		i := m.order[k]
		err := m.g.locks[i].Unlock(octx)
		if answers != nil {
			answers[i] = err
		}
		if err != nil && !(expired && errors.Is(err, ErrNotHeld)) {
			errs = append(errs, m.g.nodeError(i, err))
		}
	}
	return lockcore.JoinList(errs...)
}

// Unlock releases one hold level of every lock for the owner in ctx
// (without an owner: this MultiLock's current anonymous hold), in reverse
// name order. It goes on past failures and returns them joined, one
// *NodeError per lock; the error matches ErrNotHeld when a lock was not
// held. It works when ctx has ended: each lock's Unlock detaches from it.
// When the hold was lost before its final Unlock, the error also matches
// ErrLockLost.
func (m *MultiLock) Unlock(ctx context.Context) (err error) {
	if m.g.err != nil {
		return m.g.err
	}
	octx, owner, err := m.g.holder(ctx)
	if err != nil {
		return err
	}
	var obs *releaseObs
	_, octx, obs = m.g.observeRelease(ctx, octx, owner)
	defer obs.end(&err)
	if owner == "" {
		return m.g.notHeld("")
	}
	h := m.g.beginRelease(owner)
	answers := make([]error, len(m.g.locks))
	rerr := m.release(octx, len(m.order), false, answers)
	cause := m.g.endRelease(owner, h, func(i int) error { return answers[i] })
	return lockcore.Join(cause, rerr)
}

// Do acquires every lock like Lock (watchdog lease), runs fn, then unlocks.
// fn's context is derived from ctx and carries the owner (a fresh one when
// ctx has none); it is cancelled with context.Cause matching ErrLockLost as
// soon as one lock's hold is known to have ended. Do returns fn's error; if
// the hold was lost while fn ran, the error also matches ErrLockLost. If
// acquiring fails, fn does not run and Do returns that error. The release
// works even when ctx has ended. A nil fn is ErrInvalidArgument.
func (m *MultiLock) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	return m.g.do(ctx, fn, m.Lock, m.Unlock)
}

// Done returns a channel that is closed when the hold of the owner in ctx
// (without one: the current anonymous hold) ends: by its final Unlock, or,
// for a hold on the watchdog lease, as soon as one of its locks reports its
// hold ended. It is already closed when this MultiLock has no record of a
// hold of the owner.
func (m *MultiLock) Done(ctx context.Context) <-chan struct{} {
	return m.g.holdContext(ctx).Done()
}

// HoldContext returns a context that ends when the hold of the owner in
// ctx (without one: the current anonymous hold) ends, like Done; its
// context.Cause is context.Canceled after the final Unlock and matches
// ErrLockLost after a loss. When this value has no record of a hold of the
// owner, it has already ended with a cause matching ErrNotHeld.
func (m *MultiLock) HoldContext(ctx context.Context) context.Context {
	return m.g.holdContext(ctx)
}
