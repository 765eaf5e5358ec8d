package lockcore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/pubsub"
)

// NoLimit is the wait of Lock and LockLease: until the context ends.
const NoLimit time.Duration = -1

// attemptTimeout bounds one acquire script. The script runs on a context
// detached from the caller's, so that a caller whose context ends while the
// script is in flight still learns whether it won (and then gives the hold
// back) instead of leaving a hold nobody knows of. When the caller's context
// has a deadline, the script may outlive it by a grace of a quarter of the
// time it had (between 2ms and 100ms): a reply that comes later leaves an
// unknown outcome, which the lease bounds.
const (
	attemptTimeout  = 5 * time.Second
	attemptGraceMin = 2 * time.Millisecond
	attemptGraceMax = 100 * time.Millisecond
	// resolveTimeout bounds the look that settles an attempt whose reply
	// did not come in time.
	resolveTimeout = 100 * time.Millisecond
)

// Mutex is the generic reentrant lock behind every lock kind. A handle is
// cheap: it does no I/O until a method is called.
type Mutex struct {
	core *Core
	name string
	kind Kind

	mu   sync.Mutex
	anon string // the owner of the handle's current anonymous hold
}

// NewMutex returns a handle on the lock name of kind k.
func NewMutex(c *Core, name string, k Kind) *Mutex {
	return &Mutex{core: c, name: name, kind: k}
}

// Name is the lock's name.
func (m *Mutex) Name() string { return m.name }

// Core is the Client state the handle belongs to.
func (m *Mutex) Core() *Core { return m.core }

func (m *Mutex) check() error {
	if err := m.core.CheckOpen(); err != nil {
		return err
	}
	return CheckName(m.name)
}

// ctxOwner returns the owner in ctx, checked, and whether there was one.
func ctxOwner(ctx context.Context) (string, bool, error) {
	owner, ok := OwnerFrom(ctx)
	if !ok {
		return "", false, nil
	}
	if err := CheckOwner(owner); err != nil {
		return "", true, err
	}
	return owner, true, nil
}

// holder returns the owner that Unlock and the queries act for: the one in
// ctx, else the handle's current anonymous hold ("" when there is none).
func (m *Mutex) holder(ctx context.Context) (string, error) {
	owner, ok, err := ctxOwner(ctx)
	if err != nil || ok {
		return owner, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.anon, nil
}

func (m *Mutex) request(field string, lease time.Duration) Request {
	return Request{Core: m.core, Name: m.name, Field: field, LeaseMs: Millis(lease)}
}

// Lock waits until it holds the lock on the watchdog lease or ctx ends.
func (m *Mutex) Lock(ctx context.Context) error {
	_, _, err := m.Acquire(ctx, NoLimit, 0)
	return err
}

// LockLease waits until it holds the lock on a fixed lease or ctx ends.
func (m *Mutex) LockLease(ctx context.Context, lease time.Duration) error {
	if err := CheckLease(lease); err != nil {
		return err
	}
	_, _, err := m.Acquire(ctx, NoLimit, lease)
	return err
}

// TryLock tries once (wait 0) or waits up to wait.
func (m *Mutex) TryLock(ctx context.Context, wait, lease time.Duration) (bool, error) {
	_, ok, err := m.TryAcquire(ctx, wait, lease)
	return ok, err
}

// TryAcquire is TryLock that also returns the hold's fencing token.
func (m *Mutex) TryAcquire(ctx context.Context, wait, lease time.Duration) (int64, bool, error) {
	if err := CheckWait(wait); err != nil {
		return 0, false, err
	}
	if lease != 0 {
		if err := CheckLease(lease); err != nil {
			return 0, false, err
		}
	}
	return m.Acquire(ctx, wait, lease)
}

// Acquire takes the lock for the owner in ctx (or a fresh anonymous owner),
// waiting up to wait (NoLimit: until ctx ends; 0: one attempt). lease 0
// means the watchdog lease. Arguments other than the owner are assumed
// checked. It returns (token, true, nil) on success, (0, false, nil) when
// the wait ended with ctx live, and an error otherwise; after an error or
// a false result the owner holds nothing it did not hold before and no
// waiter state is left behind.
func (m *Mutex) Acquire(ctx context.Context, wait, lease time.Duration) (int64, bool, error) {
	if err := m.check(); err != nil {
		return 0, false, err
	}
	owner, named, err := ctxOwner(ctx)
	if err != nil {
		return 0, false, err
	}
	if err := ctx.Err(); err != nil {
		return 0, false, notAcquired(err)
	}
	if !named {
		owner = m.core.AnonymousOwner()
	}
	renew := lease == 0
	if renew {
		lease = m.core.WatchdogTimeout
	}
	r := m.request(Field(m.core.ID, owner), lease)
	h, err := m.core.beginAcquire(m.name, r.Field, owner)
	if err != nil {
		return 0, false, notAcquired(err)
	}
	armed := func(h *Hold) *Hold { // the hold to renew, for a watchdog lease
		if renew {
			return h
		}
		return nil
	}
	if m.holdsLevels(r) {
		// A re-entry adds a level to the hold this Client knows of. If
		// that hold is gone, it was lost: report it, and acquire anew.
		re := r
		re.Reenter = true
		a, err := m.attempt(ctx, re, armed(h), false)
		if a.Acquired || err != nil {
			m.core.endAcquire(h, a.Acquired, lease, renew)
			return a.Token, a.Acquired, err
		}
		h.end(fmt.Errorf("%w: %q: the hold was gone when its owner re-entered it", ErrLockLost, m.name))
		m.core.endAcquire(h, false, lease, renew)
		if h, err = m.core.beginAcquire(m.name, r.Field, owner); err != nil {
			return 0, false, notAcquired(err)
		}
	}
	a, err := m.wait(ctx, r, wait, armed(h), m.core.takeUnresolved(m.name, r.Field))
	m.core.endAcquire(h, a.Acquired, lease, renew)
	if a.Acquired && !named {
		m.mu.Lock()
		m.anon = owner
		m.mu.Unlock()
	}
	return a.Token, a.Acquired, err
}

// notAcquired is the error of a wait that ended with cause.
func notAcquired(cause error) error {
	return errors.Join(ErrNotAcquired, cause)
}

// wait is the acquire-wait loop every lock kind uses. After a failed
// attempt it subscribes to the kind's wait channel, attempts again (so an
// unlock between the two is never missed), then sleeps until a
// notification, the holder's remaining lease, the wait limit, ctx's end or
// Close, and attempts again.
//
// A waiting call rides out transient failures (a dropped connection, a
// failover, LOADING, READONLY, BUSY, OOM): it retries every retryBackoff
// until the wait ends, and the error it then returns includes the last
// failure. A single attempt (wait 0) returns the failure at once.
func (m *Mutex) wait(ctx context.Context, r Request, wait time.Duration, renew *Hold, unknown bool) (Attempt, error) {
	var limit <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		limit = t.C
	}
	r.Waiting = wait != 0
	var (
		sub     *pubsub.Waiter
		woken   bool  // a wake-up was taken and not yet used by an attempt
		lastErr error // the last transient failure
		failing bool  // the last attempt failed (transiently)
	)
	// unknown: an attempt's outcome is unknown, so look before trying
	// again. Left unknown when the call ends, it is recorded for the
	// owner's next acquisition.
	defer func() {
		if unknown {
			m.core.markUnresolved(r.Name, r.Field, time.Now().Add(time.Duration(r.LeaseMs)*time.Millisecond))
		}
	}()
	defer func() {
		if sub != nil {
			sub.Leave(woken)
		}
	}()
	var retry *time.Timer // made on the first sleep: most calls never sleep
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	for {
		a, err := m.attempt(ctx, r, renew, unknown)
		failing = false
		switch {
		case err == nil:
			unknown = false
		case outcomeUnknown(err) && !errors.Is(err, ErrNotAcquired) && !m.holdsLevels(r):
			unknown = true
		}
		if err != nil && r.Waiting && m.transient(ctx, err) {
			failing = true
			lastErr, err = err, nil
			a = Attempt{Retry: retryBackoff}
		}
		if err != nil && ctx.Err() != nil {
			// The context ended: say so, and what failed before.
			if !errors.Is(err, ErrNotAcquired) {
				err = notAcquired(errors.Join(ctx.Err(), err))
			}
			if lastErr != nil {
				err = errors.Join(err, lastErr)
			}
		}
		if err != nil || a.Acquired || wait == 0 {
			if err != nil && r.Waiting {
				m.abandon(ctx, r)
			}
			if a.Acquired {
				woken = false
			}
			return a, err
		}
		woken = false
		if sub == nil {
			// Subscribe after the first failed attempt, then attempt
			// again at once: an unlock in between is not missed.
			if sub, err = m.core.Hub.Subscribe(ctx, m.kind.WaitChannel(r)); err == nil {
				continue
			}
			err = m.core.closedOr(redisError("subscribe", m.name, err))
			if ctx.Err() != nil || !m.transient(ctx, err) {
				m.abandon(ctx, r)
				return Attempt{}, notAcquired(errors.Join(ctx.Err(), err))
			}
			lastErr = err
			a.Retry = retryBackoff
		}
		var retryC <-chan time.Time
		if a.Retry > 0 {
			if retry == nil {
				retry = time.NewTimer(a.Retry)
			} else {
				retry.Reset(a.Retry)
			}
			retryC = retry.C
		}
		var wake <-chan struct{}
		if sub != nil {
			wake = sub.C()
		}
		select {
		case <-wake:
			woken = true
		case <-retryC:
		case <-limit:
			m.abandon(ctx, r)
			if failing {
				// The wait ended in an outage: that is an error, not a
				// lock held by someone else.
				return Attempt{}, notAcquired(lastErr)
			}
			return Attempt{}, nil
		case <-ctx.Done():
			m.abandon(ctx, r)
			return Attempt{}, notAcquired(errors.Join(ctx.Err(), lastErr))
		case <-m.core.closed:
			m.abandon(ctx, r)
			return Attempt{}, notAcquired(ErrClosed)
		}
		if retry != nil {
			retry.Stop()
		}
	}
}

// retryBackoff is how long a waiting call sleeps after a transient failure.
const retryBackoff = 100 * time.Millisecond

// releaseBackoff is how long a release waits before resending a script
// that the server refused to run.
const releaseBackoff = 50 * time.Millisecond

// notRun reports whether err is an error reply that means the script did
// not run.
func (m *Mutex) notRun(err error) bool {
	var re *rueidis.RedisError
	return errors.As(err, &re) && notRunReply(re.Error())
}

// transient reports whether a failed attempt may be retried by a waiting
// call: the Client is open, ctx is live, and the failure is a connection
// error or an error reply that means the script did not run.
func (m *Mutex) transient(ctx context.Context, err error) bool {
	if ctx.Err() != nil || m.core.CheckOpen() != nil || errors.Is(err, ErrInvalidArgument) ||
		errors.Is(err, ErrReplicaSync) {
		return false
	}
	return outcomeUnknown(err) || m.notRun(err)
}

// notRunReply reports whether an error reply means the script did not
// run (or stopped before writing): the server was busy, loading, read-only
// or out of memory, or not serving the slot yet.
func notRunReply(msg string) bool {
	for _, prefix := range []string{"LOADING", "READONLY", "BUSY", "OOM", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "NOSCRIPT"} {
		if strings.HasPrefix(msg, prefix) {
			return true
		}
	}
	return false
}

// attempt runs the acquire script once. The script runs on a detached,
// bounded context: if ctx ends meanwhile and the lock was won, the level is
// given back and ctx's error returned, as if the attempt had not been made.
// When the reply is lost (a connection error), a first acquisition of the
// owner finds out from Redis whether it won.
func (m *Mutex) attempt(ctx context.Context, r Request, renew *Hold, look bool) (a Attempt, err error) {
	if err := ctx.Err(); err != nil {
		return Attempt{}, notAcquired(err)
	}
	if renew != nil {
		if err := m.core.arm(renew); err != nil {
			return Attempt{}, notAcquired(err)
		}
		defer func() {
			if !a.Acquired {
				m.core.disarm(renew)
			}
		}()
	}
	now := time.Now()
	deadline := now.Add(attemptTimeout)
	if d, ok := ctx.Deadline(); ok {
		grace := min(max(d.Sub(now)/4, attemptGraceMin), attemptGraceMax)
		if d.Add(grace).Before(deadline) {
			deadline = d.Add(grace)
		}
	}
	actx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	defer cancel()
	if look && !m.holdsLevels(r) {
		// An earlier attempt's reply was lost and could not be settled
		// then: if it won, running the script again would add a level.
		won, lerr := m.resolve(ctx, r)
		if lerr != nil {
			return Attempt{}, m.core.closedOr(redisError("acquire", m.name, lerr))
		}
		if won.Acquired {
			return m.won(ctx, r, won)
		}
	}
	if r.Reenter {
		a, err = m.core.reenter(actx, r)
	} else {
		a, err = m.kind.Acquire(actx, r)
	}
	if err != nil {
		if _, isReply := rueidis.IsRedisErr(err); !isReply && m.core.CheckOpen() == nil && !r.Reenter && !m.holdsLevels(r) {
			if won, lerr := m.resolve(ctx, r); lerr == nil && won.Acquired {
				a, err = won, nil
			}
		}
	}
	if err != nil {
		return Attempt{}, m.core.closedOr(redisError("acquire", m.name, err))
	}
	return m.won(ctx, r, a)
}

// won finishes an attempt: a lock won after ctx ended, or without the
// replicas required, is given back.
func (m *Mutex) won(ctx context.Context, r Request, a Attempt) (Attempt, error) {
	if a.Acquired && ctx.Err() != nil {
		m.giveBack(ctx, r)
		return Attempt{}, notAcquired(ctx.Err())
	}
	if a.Acquired && a.Unsynced != nil {
		m.giveBack(ctx, r)
		return Attempt{}, notAcquired(fmt.Errorf("%q: %w", m.name, a.Unsynced))
	}
	return a, nil
}

// outcomeUnknown reports whether a failed attempt may have run its script:
// a connection error or a timeout, not an error reply.
func outcomeUnknown(err error) bool {
	var re *rueidis.RedisError
	return !errors.As(err, &re)
}

// holdsLevels reports whether this Client already counts levels of r's
// hold (a re-entry): then a lost reply cannot be resolved by looking.
func (m *Mutex) holdsLevels(r Request) bool {
	m.core.mu.Lock()
	defer m.core.mu.Unlock()
	h := m.core.holds[holdKey{r.Name, r.Field}]
	return h != nil && h.count > 0
}

// resolve finds out whether an attempt whose reply was lost (or came too
// late) won the lock: the owner held nothing before, so it holds the lock
// now exactly when its field is in the hash. It asks on a detached context
// bounded by resolveTimeout, and returns an error when Redis could not
// tell.
func (m *Mutex) resolve(ctx context.Context, r Request) (Attempt, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resolveTimeout)
	defer cancel()
	token, err := lua.FencedToken.Exec(ctx, m.core.RDB,
		[]string{r.Name, Derived(TokenPrefix, r.Name)}, []string{r.Field}).AsInt64()
	switch {
	case rueidis.IsRedisNil(err):
		return Attempt{}, nil // not won
	case err != nil:
		return Attempt{}, err
	}
	return Attempt{Acquired: true, Token: token}, nil
}

// giveBack releases the level an attempt won after its caller gave up.
func (m *Mutex) giveBack(ctx context.Context, r Request) {
	dctx, cancel := detached(ctx)
	defer cancel()
	_, _ = m.kind.Release(dctx, r, m.core.requestID())
}

// abandon tells the kind that a waiting acquisition gave up.
func (m *Mutex) abandon(ctx context.Context, r Request) {
	dctx, cancel := detached(ctx)
	defer cancel()
	_ = m.kind.Abandon(dctx, r)
}

// Unlock releases one hold level of the owner in ctx (or of the handle's
// anonymous hold). It runs on a detached context, so it works when ctx has
// already ended.
func (m *Mutex) Unlock(ctx context.Context) error {
	if err := m.check(); err != nil {
		return err
	}
	owner, err := m.holder(ctx)
	if err != nil {
		return err
	}
	if owner == "" {
		return fmt.Errorf("%w: %q: no owner in the context and no anonymous hold on this handle", ErrNotHeld, m.name)
	}
	field := Field(m.core.ID, owner)
	dctx, cancel := detached(ctx)
	defer cancel()
	h, lease := m.core.beginRelease(m.name, field)
	req, id := m.request(field, lease), m.core.requestID()
	remaining, err := m.kind.Release(dctx, req, id)
	for err != nil && m.notRun(err) && !strings.HasPrefix(err.Error(), "BUSY") && dctx.Err() == nil {
		// The script did not run (LOADING, OOM, READONLY...): resending
		// it with the same request ID is safe, so try again until the
		// release's context ends. Not after BUSY: resending this
		// retryable script into a busy server trips rueidis (v1.0.79)
		// into a protocol panic; that release fails and the lease ends
		// the hold.
		select {
		case <-time.After(releaseBackoff):
		case <-dctx.Done():
		}
		remaining, err = m.kind.Release(dctx, req, id)
	}
	for orphans := m.core.endRelease(h, remaining, err); orphans > 0; orphans-- {
		// Levels won unseen by re-entries whose reply was lost: release
		// them too, or the lock would stay held by nobody's intent.
		if _, oerr := m.kind.Release(dctx, req, m.core.requestID()); oerr != nil {
			break
		}
	}
	if err != nil {
		return m.core.closedOr(redisError("unlock", m.name, err))
	}
	if remaining <= 0 {
		m.mu.Lock()
		if m.anon == owner {
			m.anon = ""
		}
		m.mu.Unlock()
	}
	if remaining < 0 {
		return fmt.Errorf("%w: %q by owner %q", ErrNotHeld, m.name, owner)
	}
	return nil
}

// ForceUnlock deletes the lock whoever holds it, on a detached context.
// Holds of this Client on the lock end as lost.
func (m *Mutex) ForceUnlock(ctx context.Context) (bool, error) {
	if err := m.check(); err != nil {
		return false, err
	}
	dctx, cancel := detached(ctx)
	defer cancel()
	ok, err := m.kind.ForceRelease(dctx, m.core, m.name)
	if err != nil {
		return false, m.core.closedOr(redisError("force unlock", m.name, err))
	}
	if ok {
		m.core.endAll(m.name, fmt.Errorf("%w: %q was force-unlocked", ErrLockLost, m.name))
	}
	return ok, nil
}

// IsLocked reports whether anyone holds the lock.
func (m *Mutex) IsLocked(ctx context.Context) (bool, error) {
	if err := m.check(); err != nil {
		return false, err
	}
	n, err := m.core.RDB.Do(ctx, m.core.RDB.B().Exists().Key(m.name).Build()).AsInt64()
	if err != nil {
		return false, m.core.closedOr(redisError("exists", m.name, err))
	}
	return n == 1, nil
}

// HoldCount is the hold count of the owner in ctx (or of the handle's
// anonymous hold); 0 when it holds nothing.
func (m *Mutex) HoldCount(ctx context.Context) (int, error) {
	if err := m.check(); err != nil {
		return 0, err
	}
	owner, err := m.holder(ctx)
	if err != nil || owner == "" {
		return 0, err
	}
	n, err := m.core.RDB.Do(ctx, m.core.RDB.B().Hget().Key(m.name).Field(Field(m.core.ID, owner)).Build()).AsInt64()
	if rueidis.IsRedisNil(err) {
		return 0, nil
	}
	if err != nil {
		return 0, m.core.closedOr(redisError("hold count", m.name, err))
	}
	return int(n), nil
}

// IsHeldByOwner reports whether the owner in ctx (or the handle's anonymous
// hold) holds the lock.
func (m *Mutex) IsHeldByOwner(ctx context.Context) (bool, error) {
	n, err := m.HoldCount(ctx)
	return n > 0, err
}

// RemainingLease is the lock's remaining lease: 0 when it is not locked, a
// negative duration when the key has no expiry (not written by relock).
func (m *Mutex) RemainingLease(ctx context.Context) (time.Duration, error) {
	if err := m.check(); err != nil {
		return 0, err
	}
	ms, err := m.core.RDB.Do(ctx, m.core.RDB.B().Pttl().Key(m.name).Build()).AsInt64()
	if err != nil {
		return 0, m.core.closedOr(redisError("pttl", m.name, err))
	}
	switch {
	case ms == -2:
		return 0, nil
	case ms < 0:
		return -1, nil
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// Done returns a channel that is closed when the current hold of the owner
// in ctx (or the handle's anonymous hold) ends: by its final Unlock, by
// loss, or by Close. When the owner holds nothing this Client knows of, the
// channel is already closed.
func (m *Mutex) Done(ctx context.Context) <-chan struct{} {
	owner, err := m.holder(ctx)
	if err == nil && owner != "" {
		if h := m.core.lookup(m.name, Field(m.core.ID, owner)); h != nil {
			return h.Done()
		}
	}
	return closedChan
}

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Do acquires the lock on the watchdog lease, runs fn, and releases it.
// fn's context is cancelled with cause ErrLockLost as soon as the hold is
// known to be lost (or ErrClosed at Close); Do then returns fn's error
// joined with that cause. If acquiring fails, fn does not run.
// With no owner in ctx, Do acts for a fresh owner and puts it in fn's
// context, so calls made with that context re-enter.
func (m *Mutex) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	if fn == nil {
		return invalid("nil function given to Do")
	}
	if _, ok := OwnerFrom(ctx); !ok {
		ctx = WithOwner(ctx, m.core.AnonymousOwner())
	}
	if _, _, err := m.Acquire(ctx, NoLimit, 0); err != nil {
		return err
	}
	owner, _ := OwnerFrom(ctx)
	fnCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	unwatch := func() {}
	if h := m.core.lookup(m.name, Field(m.core.ID, owner)); h != nil {
		unwatch = h.watch(cancel)
	} else {
		cancel(fmt.Errorf("%w: %q", ErrLockLost, m.name))
	}
	err := fn(fnCtx)
	unwatch()
	cause := context.Cause(fnCtx)
	if !errors.Is(cause, ErrLockLost) && !errors.Is(cause, ErrClosed) {
		cause = nil
	}
	uerr := m.Unlock(ctx)
	if cause == nil && errors.Is(uerr, ErrNotHeld) {
		// The release found the hold gone: it was lost while fn ran.
		cause, uerr = fmt.Errorf("%w: %q: found gone at release", ErrLockLost, m.name), nil
	}
	switch {
	case cause != nil:
		return joinNew(err, cause)
	case uerr != nil:
		return errors.Join(err, uerr)
	}
	return err
}

// joinNew joins err and cause unless err already matches cause.
func joinNew(err, cause error) error {
	if err == nil {
		return cause
	}
	if errors.Is(err, cause) {
		return err
	}
	return errors.Join(err, cause)
}

// requestID names one release request for the unlock latch.
func (c *Core) requestID() string {
	return c.ID + ":" + strconv.FormatUint(c.requests.Add(1), 10)
}

// endAll ends every hold of this Client on name with cause.
func (c *Core) endAll(name string, cause error) {
	c.mu.Lock()
	var hs []*Hold
	for k, h := range c.holds {
		if k.name == name && h.count > 0 {
			hs = append(hs, h)
		}
	}
	c.mu.Unlock()
	for _, h := range hs {
		h.end(cause)
	}
}

// Token is the fencing token of the current hold of the owner in ctx (or
// of the handle's anonymous hold).
func (m *Mutex) Token(ctx context.Context) (int64, error) {
	if err := m.check(); err != nil {
		return 0, err
	}
	owner, err := m.holder(ctx)
	if err != nil {
		return 0, err
	}
	if owner != "" {
		token, err := lua.FencedToken.Exec(ctx, m.core.RDB,
			[]string{m.name, Derived(TokenPrefix, m.name)}, []string{Field(m.core.ID, owner)}).AsInt64()
		if err == nil {
			return token, nil
		}
		if !rueidis.IsRedisNil(err) {
			return 0, m.core.closedOr(redisError("token", m.name, err))
		}
	}
	return 0, fmt.Errorf("%w: %q: no hold, so no token", ErrNotHeld, m.name)
}
