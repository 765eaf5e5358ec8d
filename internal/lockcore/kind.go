package lockcore

import (
	"context"
	"github.com/relock-go/relock/internal/layout"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/lua"
)

// Request names one call on a hold: the lock, the field of its owner, and
// what the call asks.
type Request struct {
	Core  *Core
	Name  string
	Field string
	// LeaseMs is the lease to set, in whole milliseconds (> 0), and
	// LeaseArg the same as the scripts take it.
	LeaseMs  int64
	LeaseArg string
	// Chan is the lock's channel, Channel(Name), and Wakers its wake
	// registry, layout.Wakers(Name).
	Chan   string
	Wakers string
	// Waiting is set when the caller goes on waiting if this attempt fails
	// (a fair lock then keeps its place in the queue).
	Waiting bool
	// Join is set, with wake-one on, when a failed attempt registers its
	// Client for the lock's wake-ups (see wake.go).
	Join bool
	// Target is the count a re-entry or a release leaves the field at: the
	// count the owner was granted plus one for a re-entry, minus one for an
	// unlock, or just that count to take back a level won unseen.
	Target int
	// GrantField and GrantLeaseArg, on a release of a Kind that grants
	// (see grant.go), name a waiter of the Client that the release gives
	// the lock to if it frees it, and the granted hold's lease in ms.
	GrantField    string
	GrantLeaseArg string
	// Grantee, on an attempt that registers its Client (Join), is the
	// grant a release may make to the caller through the wake-one
	// registry (see remotegrant.go), recorded with the registration; ""
	// for none.
	Grantee string
}

// Attempt is the outcome of one acquire script.
type Attempt struct {
	Acquired bool
	// Token is the fencing token of the hold, for the kinds that have one.
	Token int64
	// Unsynced is set when the lock was taken but fewer replicas than
	// required confirmed it: the caller gives it back and fails.
	Unsynced error
	// Retry is how long to sleep at most before the next attempt when no
	// notification comes (the holder's remaining lease); 0 means only a
	// notification, the wait limit or the context ends the sleep.
	Retry time.Duration
}

// Kind is what differs between lock kinds: the scripts that take, re-enter,
// release and force open a lock, and where a waiter listens. It is how the
// hold lifecycle and the wait loop talk to Redis, so their tests can put a
// model of Redis in its place.
//
// Every script that changes a hold moves its count by HINCRBY, one level,
// only from the count the client expects before the call, to r.Target
// (see package lua), so a request sent twice has the effect of sending it
// once.
type Kind interface {
	// Acquire makes one attempt to take the lock for an owner that holds
	// none of it; a level of the field that is already there (won by an
	// attempt whose reply was lost) is taken over with a count of 1.
	Acquire(ctx context.Context, r Request) (Attempt, error)
	// Reenter brings the count of the owner's existing hold up to
	// r.Target (one level) and resets its lease. It reports Acquired false when the field holds
	// nothing (the hold was lost), changing nothing.
	Reenter(ctx context.Context, r Request) (Attempt, error)
	// Release brings the field's count down to r.Target (never up),
	// resetting the lease when levels remain and waking a waiter when the
	// lock comes free. It returns the count left, or -1 when the field held
	// nothing.
	Release(ctx context.Context, r Request) (int64, error)
	// ForceRelease deletes the lock whoever holds it; true if there was a hold.
	ForceRelease(ctx context.Context, c *Core, name string) (bool, error)
	// Abandon is called when a waiting acquisition gives up without the lock.
	Abandon(ctx context.Context, r Request) error
	// WaitChannel is the channel a waiter of r listens on.
	WaitChannel(r Request) string
}

// KindRenewer is a Kind whose holds on the watchdog lease are renewed by a
// call of its own (the others by lock_renew.lua: the hash's lease, while
// the field holds it). r names the hold; r.LeaseMs is the lease to set.
// The call must reply 1 when it renewed and 0 when the hold is gone.
type KindRenewer interface {
	RenewCall(r Request) Call
}

// Reentrant is the Kind of Redisson's RLock.
type Reentrant struct{}

var _ Kind = Reentrant{}

// Acquire runs lock_acquire.lua. A call that does not wait records its
// Client as refused when the lock is held (see withKnock).
func (Reentrant) Acquire(ctx context.Context, r Request) (Attempt, error) {
	return acquireLock(ctx, r, !r.Waiting)
}

// acquireLock runs lock_acquire.lua; knock: a refused attempt records
// its Client (see withKnock).
func acquireLock(ctx context.Context, r Request, knock bool) (Attempt, error) {
	keys, args := r.Core.withJoin(r,
		append(make([]string, 0, 6), r.Name, layout.OtherKey(r.Name), layout.Queue(r.Name)),
		append(make([]string, 0, 7), r.LeaseArg, r.Field))
	if knock {
		keys, args = r.Core.withKnock(r, keys, args)
	}
	res, unsynced := r.Core.RunAcquire(ctx, lua.LockAcquire, keys, args)
	ttl, err := res.AsInt64()
	if rueidis.IsRedisNil(err) {
		return Attempt{Acquired: true, Unsynced: unsynced}, nil
	}
	if err != nil {
		return Attempt{}, err
	}
	return Attempt{Retry: quietRetry(retryAfter(ttl))}, nil
}

// Reenter runs lock_reenter.lua (the same for every kind that keeps its
// holds in the lock hash).
func (Reentrant) Reenter(ctx context.Context, r Request) (Attempt, error) {
	return r.Core.reenter(ctx, r)
}

// Release runs lock_unlock.lua; with wake-one and grants on, with the
// grant arguments, so that a release that frees the lock may grant it to
// another Client's registered waiter (see remotegrant.go).
func (Reentrant) Release(ctx context.Context, r Request) (int64, error) {
	if r.Core.remoteGrants() {
		n, _, _, _, err := r.Core.releaseGrant(ctx, r, false)
		return n, err
	}
	keys, args := r.Core.withWake(r, append(make([]string, 0, 3), r.Name, r.Chan),
		append(make([]string, 0, 10), layout.UnlockMessage, r.LeaseArg, r.Field, r.Core.publish, strconv.Itoa(r.Target)))
	return r.Core.RunRelease(ctx, lua.LockUnlock, keys, args).AsInt64()
}

// ForceRelease runs lock_force_unlock.lua.
func (Reentrant) ForceRelease(ctx context.Context, c *Core, name string) (bool, error) {
	n, err := lua.LockForceUnlock.Exec(ctx, c.RDB, []string{name, layout.Channel(name)},
		[]string{layout.UnlockMessage, c.publish}).AsInt64()
	return n == 1, err
}

// Abandon has nothing to undo for a reentrant lock.
func (Reentrant) Abandon(context.Context, Request) error { return nil }

// WaitChannel is the lock's unlock channel.
func (Reentrant) WaitChannel(r Request) string { return r.Chan }

// retryAfter turns a holder's PTTL into the longest sleep before the next
// attempt: just past the lease's end. A key without expiry (-1) gives 0:
// wait for a notification only. The reentrant and the fenced lock cap it
// further (quietRetry): a holder may release without publishing (a
// Redisson spin lock's).
func retryAfter(pttl int64) time.Duration {
	if pttl < 0 {
		return 0
	}
	return time.Duration(pttl)*time.Millisecond + time.Millisecond
}

// Fenced is the Kind of a FencedLock: a reentrant lock whose every new
// acquisition increments a counter.
type Fenced struct{ Reentrant }

// Acquire runs fenced_acquire.lua.
func (Fenced) Acquire(ctx context.Context, r Request) (Attempt, error) {
	keys, args := r.Core.withJoin(r,
		append(make([]string, 0, 7), r.Name, layout.Token(r.Name), layout.OtherKey(r.Name), layout.Queue(r.Name)),
		append(make([]string, 0, 7), r.LeaseArg, r.Field))
	if !r.Waiting {
		keys, args = r.Core.withKnock(r, keys, args)
	}
	res, unsynced := r.Core.RunAcquire(ctx, lua.FencedAcquire, keys, args)
	vals, err := res.AsIntSlice()
	if err != nil {
		return Attempt{}, err
	}
	if len(vals) != 2 {
		return Attempt{}, errUnexpected("fenced acquire", vals)
	}
	if vals[0] == 1 {
		return Attempt{Acquired: true, Token: vals[1], Unsynced: unsynced}, nil
	}
	return Attempt{Retry: quietRetry(retryAfter(vals[1]))}, nil
}

// reenter runs lock_reenter.lua for r.
func (c *Core) reenter(ctx context.Context, r Request) (Attempt, error) {
	res, unsynced := c.RunAcquire(ctx, lua.LockReenter, []string{r.Name, layout.Token(r.Name), layout.Channel(r.Name)},
		[]string{r.LeaseArg, r.Field, strconv.Itoa(r.Target), c.publish})
	token, err := res.AsInt64()
	switch {
	case rueidis.IsRedisNil(err):
		return Attempt{}, nil
	case err != nil:
		return Attempt{}, err
	}
	return Attempt{Acquired: true, Token: token, Unsynced: unsynced}, nil
}

// Reenter is lock_reenter.lua, for kinds defined outside this package
// (the fair lock) that keep their holds in the lock hash.
func (c *Core) Reenter(ctx context.Context, r Request) (Attempt, error) { return c.reenter(ctx, r) }
