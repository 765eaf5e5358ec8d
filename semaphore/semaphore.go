package semaphore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"github.com/relock-go/relock/internal/layout"
	"strconv"
	"strings"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/pubsub"
)

// The errors of every kind of relock (the values of package relock).
var (
	ErrNotAcquired     = relock.ErrNotAcquired
	ErrNotHeld         = relock.ErrNotHeld
	ErrLockLost        = relock.ErrLockLost
	ErrClosed          = relock.ErrClosed
	ErrInvalidArgument = relock.ErrInvalidArgument
)

// Waiting: see the package documentation.
const (
	// QueueAfter is how long a waiting acquisition competes freely for
	// permits before it joins the semaphore's queue, where it comes before
	// every caller that joined after it.
	QueueAfter = 100 * time.Millisecond
	// WaiterTimeout is how long a queued waiter keeps its place without
	// refreshing it. A waiter whose process died is dropped after it.
	WaiterTimeout = 750 * time.Millisecond
	// RefreshInterval is how often a queued waiter refreshes its place
	// (and looks at the permits when no notification came).
	RefreshInterval = WaiterTimeout / 3
)

// timing is the queue's timing, changed only by tests.
var timing = struct{ queueAfter, refresh, waiterTimeout time.Duration }{QueueAfter, RefreshInterval, WaiterTimeout}

// NoLease is the lease score Redisson writes for a permit taken without
// a lease: it never expires.
const NoLease = layout.NoLease

// attemptTimeout bounds one script; retryBackoff is how long a waiting
// call sleeps after a transient failure; cleanupTimeout bounds the
// clean-up of a call that did not acquire.
const (
	attemptTimeout = 5 * time.Second
	retryBackoff   = lockcore.RetryBackoff
	cleanupTimeout = time.Second
)

// Semaphore is a handle on a semaphore whose permits are held on a lease:
// each permit taken has an ID, is given back with Release(ID), and comes
// back by itself when its lease ends (a process that died loses its
// permits then). Get one with rlock.Client.GetSemaphore. Handles are cheap
// and safe for concurrent use.
type Semaphore struct {
	core *lockcore.Core
	name string
	// watchdog is the lease of the permits taken with lease 0 (0: the
	// Client's watchdog timeout); watchdogErr says why it is refused.
	watchdog    time.Duration
	watchdogErr error
}

func init() {
	lockcore.Provide(func(c *lockcore.Core, name string) *Semaphore { return &Semaphore{core: c, name: name} })
	// Each message (permits came free) wakes one waiter of each Client;
	// a waiter passes it on while permits are left (see Waiting).
	lockcore.RegisterWakePolicy(layout.SemaphoreChannelPrefix+":", func(string) pubsub.Wake { return pubsub.WakeOne })
}

// Name is the semaphore's name as it was given to the Client. The key of
// its available count is that name after the Client's key prefix
// (rlock.WithKeyPrefix; none by default).
func (s *Semaphore) Name() string { return s.core.Unmap(s.name) }

// Keys are the Redis keys and the channel of the semaphore name.
type Keys struct {
	// Available holds the count of available permits (a string).
	Available string
	// Leases is the sorted set of the permits held: permit ID (16 raw
	// bytes) -> the end of its lease (unix ms).
	Leases string
	// Channel carries the counts of permits that came free.
	Channel string
	// Queue and QueueDeadlines are relock's queue of waiters that waited
	// longer than QueueAfter: permit ID -> when it joined, and permit ID
	// -> when it is dropped unless it refreshes its place (unix ms).
	Queue, QueueDeadlines string
	// Holders is relock's record of who took each permit: permit ID ->
	// "<clientID>:<owner>" (the owner in the acquiring call's context, or
	// "anon-<n>@<client name>" without one). Redisson's scripts ignore
	// it; an entry goes with its permit's release, and with the next
	// acquisition after its lease ended.
	Holders string
}

// KeysOf returns the keys of the semaphore name.
func KeysOf(name string) Keys {
	k := layout.Semaphore(name)
	return Keys{Available: k.Available, Leases: k.Leases, Channel: k.Channel, Queue: k.Queue, QueueDeadlines: k.QueueDeadlines,
		Holders: k.Holders}
}

func (s *Semaphore) check() error {
	if err := s.core.CheckOpen(); err != nil {
		return err
	}
	if s.watchdogErr != nil {
		return s.watchdogErr
	}
	return lockcore.CheckName(s.name)
}

// WithWatchdogTimeout returns a handle on the same semaphore whose permits
// taken with lease 0 are held on the watchdog lease d, renewed every d/3,
// instead of the Client's watchdog timeout (rlock.WithWatchdogTimeout),
// which its locks keep. A permit of a process that died comes back after
// d at most: pick it short for a pool that must recover quickly from a
// crashed worker. d must be between 30ms and 100 years; otherwise every
// call of the handle returns ErrInvalidArgument.
func (s *Semaphore) WithWatchdogTimeout(d time.Duration) *Semaphore {
	c := *s
	c.watchdog = d
	c.watchdogErr = lockcore.CheckWatchdogTimeout(d)
	return &c
}

// watchdogTimeout is the lease of the permits taken with lease 0.
func (s *Semaphore) watchdogTimeout() time.Duration {
	if s.watchdog > 0 {
		return s.watchdog
	}
	return s.core.WatchdogTimeout
}

// fail wraps a Redis error with what was being done (a script's refusal
// of the name becomes ErrNameConflict); after Close it also matches
// ErrClosed.
func (s *Semaphore) fail(op string, err error) error {
	err = lockcore.ScriptError(layout.KindSemaphore, op, s.name, err)
	if s.core.CheckOpen() != nil {
		err = lockcore.Join(err, ErrClosed)
	}
	return err
}

// TrySetPermits sets the number of permits if it was never set, and
// reports whether it did. permits must be at least 0.
func (s *Semaphore) TrySetPermits(ctx context.Context, permits int) (bool, error) {
	if err := s.check(); err != nil {
		return false, err
	}
	if permits < 0 {
		return false, fmt.Errorf("%w: negative permits %d", ErrInvalidArgument, permits)
	}
	k := KeysOf(s.name)
	n, err := lua.SemSet.Exec(ctx, s.core.RDB, []string{k.Available, k.Channel, layout.OtherKey(s.name)},
		[]string{s.core.PublishCommand(), strconv.Itoa(permits)}).AsInt64()
	if err != nil {
		return false, s.fail("set permits", err)
	}
	return n == 1, nil
}

// AddPermits adds n permits to the available count (n < 0 takes -n
// away; the count may then go below 0, and no permit is handed out until
// enough come back). Adding wakes as many waiters as there are new
// permits. n == 0 does nothing. The call is not resent: when it returns
// a connection error, the permits may or may not have been added.
func (s *Semaphore) AddPermits(ctx context.Context, n int) error {
	if err := s.check(); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	k := KeysOf(s.name)
	err := lua.SemAdd.Exec(ctx, s.core.RDB, []string{k.Available, k.Channel, layout.OtherKey(s.name)},
		[]string{s.core.PublishCommand(), strconv.Itoa(n)}).Error()
	if err != nil {
		return s.fail("add permits", err)
	}
	return nil
}

// AvailablePermits is the number of permits available now, after the
// permits whose lease ended came back; 0 when the semaphore was never set.
func (s *Semaphore) AvailablePermits(ctx context.Context) (int, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	k := KeysOf(s.name)
	n, err := lua.SemAvailable.Exec(ctx, s.core.RDB, []string{k.Available, k.Leases, k.Channel, layout.OtherKey(s.name)},
		[]string{s.core.PublishCommand()}).AsInt64()
	if err != nil {
		return 0, s.fail("available permits", err)
	}
	return int(n), nil
}

// Delete deletes the semaphore: its count, its permits' leases and its
// queue. It reports whether there was a count. While the name's other
// form is in use it deletes nothing and returns an error matching
// relock.ErrNameConflict (the leases and the queue are that form's too). Permits held are gone with
// it (Release then returns ErrNotHeld, and renewals report them lost);
// waiters go on waiting until the permits are set again.
func (s *Semaphore) Delete(ctx context.Context) (bool, error) {
	if err := s.check(); err != nil {
		return false, err
	}
	k := KeysOf(s.name)
	n, err := lua.SemDelete.Exec(ctx, s.core.RDB,
		[]string{k.Available, k.Leases, k.Queue, k.QueueDeadlines, k.Holders, layout.OtherKey(s.name)}, nil).AsInt64()
	if err != nil {
		return false, s.fail("delete", err)
	}
	return n == 1, nil
}

// Acquire takes one permit, waiting until one is free or ctx ends, and
// returns its ID. lease 0 holds it on the watchdog lease, renewed by the
// Client until Release (or Close, after which it ends with its lease);
// lease > 0 (at least 1ms) is a fixed lease, never renewed. If Acquire
// returns an error, no permit is held and no waiter state is left behind;
// when ctx ended the wait, the error matches both ErrNotAcquired and
// ctx.Err(); when Close did, ErrNotAcquired and ErrClosed.
func (s *Semaphore) Acquire(ctx context.Context, lease time.Duration) (permitID string, err error) {
	if lease != 0 {
		if err := lockcore.CheckLease(lease); err != nil {
			return "", err
		}
	}
	a, err := s.acquire(ctx, 1, false, -1, lease)
	if err != nil {
		return "", err
	}
	return a.ids[0], nil
}

// TryAcquire takes one permit like Acquire but gives up after wait: wait 0
// makes one attempt. It returns ("", false, nil) when the wait ended
// without a permit while ctx is live, and ("", false, err) for errors, a
// context that ended among them.
//
// An attempt that was sent counts. The wait ends only the sleeping
// between attempts: however short it is, TryAcquire makes the attempt
// wait 0 makes, and the reply of an attempt sent before the wait ended
// decides: a permit it took is the caller's, even when the reply comes
// after the wait (so TryAcquire may return up to a round trip after
// wait). ctx still ends an attempt: a permit taken by a reply that comes
// after ctx ended is given back.
func (s *Semaphore) TryAcquire(ctx context.Context, wait, lease time.Duration) (permitID string, ok bool, err error) {
	if err := lockcore.CheckWait(wait); err != nil {
		return "", false, err
	}
	if lease != 0 {
		if err := lockcore.CheckLease(lease); err != nil {
			return "", false, err
		}
	}
	a, err := s.acquire(ctx, 1, false, wait, lease)
	if a == nil {
		return "", false, err
	}
	return a.ids[0], true, nil
}

// Release gives the permit permitID back, whichever Client (or Redisson
// instance) took it, and wakes a waiter. It stops its renewal first, when
// this Client renews it. It returns an error matching ErrNotHeld when no
// such permit is held: unknown, released before, or its lease ended (the
// permit then came back by itself); when this Client held it on the
// watchdog lease, the error also matches ErrLockLost, and the loss is
// reported. A permitID that is not 32 lowercase hex characters is
// ErrInvalidArgument. Release runs on a context detached from ctx, so it
// works when ctx has ended. It is not resent: when it returns a
// connection error, the permit may or may not be back; if not, it comes
// back when its lease ends.
func (s *Semaphore) Release(ctx context.Context, permitID string) error {
	if err := s.check(); err != nil {
		return err
	}
	raw, err := decodeID(permitID)
	if err != nil {
		return err
	}
	dctx, cancel := detached(ctx)
	defer cancel()
	return s.core.ReleasePermit(dctx, s.name, permitID, func(ctx context.Context) (bool, error) {
		n, err := s.release(ctx, raw)
		if err != nil {
			return false, s.fail("release", err)
		}
		return n == 1, nil
	}, func() error {
		return fmt.Errorf("%w: permit %s of semaphore %q (unknown, released, or its lease ran out)", ErrNotHeld, permitID, s.name)
	})
}

func (s *Semaphore) release(ctx context.Context, raw string) (int64, error) {
	k := KeysOf(s.name)
	return s.core.RunRelease(ctx, lua.SemRelease, []string{k.Available, k.Leases, k.Channel, k.Holders, layout.OtherKey(s.name)},
		[]string{s.core.PublishCommand(), raw}).AsInt64()
}

// newID returns a fresh permit ID: 16 random bytes, and their hex form.
func newID() (raw, id string) {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return string(b[:]), hex.EncodeToString(b[:])
}

// decodeID returns the 16 raw bytes of a permit ID.
func decodeID(id string) (string, error) {
	if len(id) != 32 || strings.ToLower(id) != id {
		return "", fmt.Errorf("%w: permit ID %q is not 32 lowercase hex characters", ErrInvalidArgument, id)
	}
	b, err := hex.DecodeString(id)
	if err != nil {
		return "", fmt.Errorf("%w: permit ID %q is not 32 lowercase hex characters", ErrInvalidArgument, id)
	}
	return string(b), nil
}

// detached returns the context of a call that must run when ctx has
// ended: ctx's values, without its cancellation, for attemptTimeout.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), attemptTimeout)
}
