package ratelimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/observe"
	"github.com/relock-go/relock/pubsub"
)

// The errors of every kind of relock (the values of package relock).
var (
	ErrNotAcquired     = relock.ErrNotAcquired
	ErrClosed          = relock.ErrClosed
	ErrInvalidArgument = relock.ErrInvalidArgument
)

// ErrNoRate is returned by Acquire, TryAcquire and AvailablePermits on a
// rate limiter whose rate was never set (TrySetRate or SetRate, or
// Redisson's trySetRate), at once: a waiting call does not wait for a
// rate. It matches ErrInvalidArgument too.
var ErrNoRate = fmt.Errorf("%w: the rate limiter has no rate", relock.ErrInvalidArgument)

// cleanupTimeout bounds the give-back of a grant a call will not use.
const cleanupTimeout = time.Second

// Limiter is a handle on a rate limiter in the layout of Redisson's
// RRateLimiter: at most rate permits in any window of its interval,
// shared by every Client and Redisson instance that uses the name. Get
// one with rlock.Client.GetRateLimiter. Handles are cheap and safe for
// concurrent use.
type Limiter struct {
	core *lockcore.Core
	name string
}

func init() {
	lockcore.Provide(func(c *lockcore.Core, name string) *Limiter { return &Limiter{core: c, name: name} })
	// A rate set anew, or a grant given back, wakes one waiter of each
	// Client, which passes it on while permits are left.
	lockcore.RegisterWakePolicy(layout.RateLimiterChannelPrefix+":", func(string) pubsub.Wake { return pubsub.WakeOne })
}

// Name is the rate limiter's name as it was given to the Client. The key
// of its configuration is that name after the Client's key prefix
// (rlock.WithKeyPrefix; none by default).
func (l *Limiter) Name() string { return l.core.Unmap(l.name) }

func (l *Limiter) check() error {
	if err := l.core.CheckOpen(); err != nil {
		return err
	}
	return lockcore.CheckName(l.name)
}

// fail wraps a Redis error with what was being done (a script's refusal
// of the name becomes relock.ErrNameConflict or relock.ErrWrongKind);
// after Close it also matches ErrClosed.
func (l *Limiter) fail(op string, err error) error {
	err = lockcore.ScriptError(layout.KindRateLimiter, op, l.name, err)
	if l.core.CheckOpen() != nil {
		err = lockcore.Join(err, ErrClosed)
	}
	return err
}

// keys are the keys of the window scripts: the client's own value and
// grants are this Client's, for a rate of type PER_CLIENT (set by
// Redisson); the last is the key of the name's other form, which the
// scripts refuse while it is in use.
func (l *Limiter) keys() []string {
	k := layout.RateLimiter(l.name)
	return []string{k.Config, k.Value, k.ClientValue(l.core.ID), k.Permits, k.ClientPermits(l.core.ID), k.Channel,
		layout.OtherKey(l.name)}
}

// checkRate refuses a rate under 1 or an interval under 1ms.
func checkRate(rate int, interval time.Duration) error {
	if rate < 1 {
		return fmt.Errorf("%w: rate %d (at least 1)", ErrInvalidArgument, rate)
	}
	if rate > 1<<31-1 {
		return fmt.Errorf("%w: rate %d (at most %d)", ErrInvalidArgument, rate, 1<<31-1)
	}
	if interval < time.Millisecond {
		return fmt.Errorf("%w: interval %v (at least 1ms)", ErrInvalidArgument, interval)
	}
	if interval > lockcore.MaxLease {
		return fmt.Errorf("%w: interval %v is longer than %v", ErrInvalidArgument, interval, lockcore.MaxLease)
	}
	return nil
}

// TrySetRate sets the rate, rate permits per interval (at least 1 and
// 1ms; the interval counts in whole ms, rounded up), if the limiter has
// none, and reports whether it did. The rate is of Redisson's type
// OVERALL: one window shared by every client. A name whose key is a hash
// of another kind (a lock's) is refused with an error matching
// relock.ErrWrongKind, and one whose other form is in use with
// relock.ErrNameConflict (see the package documentation); either way
// nothing changes.
func (l *Limiter) TrySetRate(ctx context.Context, rate int, interval time.Duration) (bool, error) {
	if err := l.check(); err != nil {
		return false, err
	}
	if err := checkRate(rate, interval); err != nil {
		return false, err
	}
	ok, err := l.set(ctx, rate, interval, "1")
	if err != nil {
		return false, l.fail("set rate", err)
	}
	return ok, nil
}

// SetRate sets the rate, as TrySetRate, whether the limiter had one or
// not, and starts an empty window (the grants made so far no longer
// count), as Redisson's setRate does; waiting calls of relock look again
// at once.
func (l *Limiter) SetRate(ctx context.Context, rate int, interval time.Duration) error {
	if err := l.check(); err != nil {
		return err
	}
	if err := checkRate(rate, interval); err != nil {
		return err
	}
	if _, err := l.set(ctx, rate, interval, "0"); err != nil {
		return l.fail("set rate", err)
	}
	return nil
}

func (l *Limiter) set(ctx context.Context, rate int, interval time.Duration, once string) (bool, error) {
	k := layout.RateLimiter(l.name)
	n, err := lua.RateSet.Exec(ctx, l.core.RDB, []string{k.Config, k.Value, k.Permits, k.Channel, layout.OtherKey(l.name)},
		[]string{l.core.PublishCommand(), strconv.Itoa(rate), strconv.FormatInt(lockcore.Millis(interval), 10), once}).AsInt64()
	return n == 1, err
}

// AvailablePermits is the number of permits left in the window now. It
// returns an error matching ErrNoRate when the limiter has no rate.
func (l *Limiter) AvailablePermits(ctx context.Context) (int, error) {
	if err := l.check(); err != nil {
		return 0, err
	}
	vals, err := lua.RateAvailable.Exec(ctx, l.core.RDB, l.keys(), nil).AsIntSlice()
	if err != nil {
		return 0, l.fail("available permits", err)
	}
	if err := l.refused(vals, 0); err != nil {
		return 0, err
	}
	return int(max(vals[1], 0)), nil
}

// refused is the error of a window script's reply that says the limiter
// has no rate, or that n permits are more than its rate; nil for others.
func (l *Limiter) refused(vals []int64, n int) error {
	switch {
	case len(vals) != 3:
		return fmt.Errorf("relock: rate limiter %q: unexpected reply %v", l.name, vals)
	case vals[0] == -1:
		return fmt.Errorf("%w: %q (set it with TrySetRate)", ErrNoRate, l.name)
	case vals[0] == -2:
		return fmt.Errorf("%w: %d permits of rate limiter %q, whose rate is %d: never granted", ErrInvalidArgument, n, l.name, vals[1])
	}
	return nil
}

// Acquire takes n permits (at least 1) of the window, all at once,
// waiting until they are in it (the oldest grants have left it) or ctx
// ends. If Acquire returns an error, it took nothing; when ctx ended the
// wait, the error matches both ErrNotAcquired and ctx.Err(). n more than
// the rate is ErrInvalidArgument (it is never granted); a limiter with no
// rate, ErrNoRate; a name refused (relock.ErrNameConflict,
// relock.ErrWrongKind, see the package documentation) ends a waiting call
// at once too.
func (l *Limiter) Acquire(ctx context.Context, n int) error {
	if err := checkPermits(n); err != nil {
		return err
	}
	_, err := l.acquire(ctx, n, lockcore.NoLimit)
	return err
}

// TryAcquire takes n permits like Acquire but gives up after wait: wait 0
// makes one attempt. It returns (false, nil) when the wait ended without
// the permits while ctx is live, and (false, err) for errors, a context
// that ended among them.
func (l *Limiter) TryAcquire(ctx context.Context, n int, wait time.Duration) (bool, error) {
	if err := checkPermits(n); err != nil {
		return false, err
	}
	if err := lockcore.CheckWait(wait); err != nil {
		return false, err
	}
	return l.acquire(ctx, n, wait)
}

func checkPermits(n int) error {
	if n < 1 || n > 1<<31-1 {
		return fmt.Errorf("%w: %d permits (at least 1)", ErrInvalidArgument, n)
	}
	return nil
}

func (l *Limiter) acquire(ctx context.Context, n int, wait time.Duration) (bool, error) {
	if err := l.check(); err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, lockcore.NotAcquired(err)
	}
	var id [16]byte
	_, _ = rand.Read(id[:]) // never fails (crypto/rand)
	a := &acquisition{l: l, n: n, id: string(id[:])}
	return l.core.Wait(&lockcore.Wait{Ctx: ctx, Limit: wait, Acquire: true, Owner: hex.EncodeToString(id[:]),
		Lock: observe.Lock{Kind: observe.KindRateLimiter, Name: l.name}}, a)
}

// acquisition is one call of Acquire or TryAcquire: the rate limiter's
// Waiter. Every attempt sends the same grant ID, so a resent attempt
// takes nothing twice.
type acquisition struct {
	l       *Limiter
	n       int
	id      string // 16 raw bytes
	unknown bool   // an attempt may have been granted unseen
}

// WaitChannel is the rate limiter's channel (relock's own): a rate set
// anew or a grant given back is published there.
func (a *acquisition) WaitChannel() string { return layout.RateLimiter(a.l.name).Channel }

// Attempt runs the acquire script once. After a refusal the sleep is
// bounded by the time until enough grants leave the window, which the
// script returns: the waiter sleeps until then, or until a message (a
// rate set anew, a grant given back), not on a poll interval. A call
// whose wait limit ends before then sleeps until its limit, as
// Redisson's tryAcquire does, and returns false.
func (a *acquisition) Attempt(w *lockcore.Wait) (lockcore.Outcome, error) {
	if err := w.Over(); err != nil {
		return lockcore.Outcome{}, err
	}
	res, unsynced := a.l.core.RunGrant(w.ScriptContext(), lua.RateAcquire, a.l.keys(),
		[]string{strconv.Itoa(a.n), a.id})
	vals, err := res.AsIntSlice()
	if err != nil {
		if !lockcore.IsReply(err) {
			a.unknown = true
		}
		return lockcore.Outcome{}, a.l.fail("acquire", err)
	}
	a.unknown = false
	if err := a.l.refused(vals, a.n); err != nil {
		return lockcore.Outcome{}, err
	}
	if vals[0] != 1 {
		return lockcore.Outcome{Retry: time.Duration(vals[1]) * time.Millisecond, PassOn: vals[2] > 0}, nil
	}
	if err := w.Cancelled(); err != nil {
		a.giveBack(w.Ctx)
		return lockcore.Outcome{}, err
	}
	if unsynced != nil {
		a.giveBack(w.Ctx)
		return lockcore.Outcome{}, lockcore.NotAcquired(fmt.Errorf("%q: %w", a.l.name, unsynced))
	}
	return lockcore.Outcome{Done: true, PassOn: vals[1] > 0}, nil
}

// giveBack returns the call's grant to the window. When Redis does not
// answer, the call's end tries again.
func (a *acquisition) giveBack(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	err := lua.RateUndo.Exec(ctx, a.l.core.RDB, a.l.keys(),
		[]string{a.l.core.PublishCommand(), a.id, strconv.Itoa(a.n)}).Error()
	a.unknown = err != nil && !rueidis.IsRedisNil(err)
}

// End gives back the grant an unanswered attempt of a call that did not
// acquire may have made.
func (a *acquisition) End(w *lockcore.Wait, done bool) {
	if !done && a.unknown {
		a.giveBack(w.Ctx)
	}
}
