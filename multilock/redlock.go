package multilock

import (
	"context"
	"errors"
	"fmt"
	"github.com/relock-go/relock"
	"sync"
	"time"

	"github.com/relock-go/relock/internal/backoff"
	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/observe"
)

// Defaults of a RedLock's options.
const (
	// DefaultWatchdogTimeout is the lease a RedLock assumes its locks hold
	// on when taken with lease 0: rlock's default watchdog timeout.
	DefaultWatchdogTimeout = 30 * time.Second
	// DefaultRetryDelay is the mean pause between two rounds.
	DefaultRetryDelay = 20 * time.Millisecond

	minInstanceTimeout = 5 * time.Millisecond
	maxInstanceTimeout = 50 * time.Millisecond
)

// RedLock is the Redlock algorithm over locks on independent Redis
// masters: it is held while a majority, len(locks)/2+1, of its locks is
// held by the owner, and only as long as the validity of the acquisition
// lasts. It needs at least three independent masters to tolerate the
// loss of one (five to tolerate two); with one or two locks it works, but
// every lock is then needed. Read the package documentation for the
// deployment it needs and what it does not guarantee.
//
// A RedLock does no I/O until a method is called and is safe for concurrent
// use.
type RedLock struct {
	g       *group
	cfg     config
	fanouts sync.Pool // of *fanout (fanout.go)
	// bounded()[i] is set when lock i is one of relock's handles, whose
	// Unlock keeps to its context's deadline (at least 250ms): the caller
	// may make such a release itself (see fanout.start). Worked out at
	// the first call, not by NewRedLock.
	bounded func() []bool
}

type config struct {
	watchdog        time.Duration
	instanceTimeout time.Duration // 0: derived from the lease
	retryDelay      time.Duration
	err             error
	observer        observe.Observer // with observerSet, replaces the locks' (observe.go)
	observerSet     bool
}

// Option configures a RedLock; see RedLock.With.
type Option func(*config)

// WithWatchdogTimeout sets the lease a RedLock assumes its locks hold on
// when it takes them with lease 0 (Lock, Do, TryLock with lease 0): the
// watchdog timeout of their clients (rlock.WithWatchdogTimeout). It is the
// lease the validity of such an acquisition is computed from, and the
// default per-instance timeout is derived from it. The default is 30s,
// rlock's default; d must be at least 1ms.
func WithWatchdogTimeout(d time.Duration) Option {
	return func(c *config) {
		if err := lockcore.CheckLease(d); err != nil {
			c.err = lockcore.JoinList(c.err, fmt.Errorf("WithWatchdogTimeout: %w", err))
		}
		c.watchdog = d
	}
}

// WithInstanceTimeout sets how long one attempt on one lock may take in a
// round. An instance that has not answered by then counts as failed for
// that round, so a slow or hung master costs a round at most d. The
// default is a tenth of the
// lease (the fixed lease, or the watchdog timeout with lease 0), but at
// least 5ms and at most 50ms; d must be at least 1ms.
func WithInstanceTimeout(d time.Duration) Option {
	return func(c *config) {
		if d < time.Millisecond {
			c.err = lockcore.JoinList(c.err, invalid("WithInstanceTimeout %v is under 1ms", d))
		}
		c.instanceTimeout = d
	}
}

// WithRetryDelay sets the mean pause between two rounds of an acquisition
// that waits: each pause is random, between d/2 and 3d/2, so that
// contenders that failed together do not retry together. The default is
// 20ms; d must be at least 1ms.
func WithRetryDelay(d time.Duration) Option {
	return func(c *config) {
		if d < time.Millisecond {
			c.err = lockcore.JoinList(c.err, invalid("WithRetryDelay %v is under 1ms", d))
		}
		c.retryDelay = d
	}
}

// NewRedLock returns a RedLock over locks, one per independent Redis
// master, usually of the same name on each (each with its own
// rlock.Client). No locks, a nil lock, or two of relock's locks that share
// a Client or a Redis server (a node address) is an error that every
// method returns (matching ErrInvalidArgument): a RedLock is safe only on
// masters that fail independently. NewRedLock does no I/O.
func NewRedLock(locks ...Locker) *RedLock {
	r := &RedLock{cfg: config{watchdog: DefaultWatchdogTimeout, retryDelay: DefaultRetryDelay}}
	if err := checkLocks("redlock", locks); err != nil {
		r.g = &group{kind: "redlock", err: err}
		return r
	}
	if err := checkIndependent(locks); err != nil {
		r.g = &group{kind: "redlock", err: err}
		return r
	}
	locks = append([]Locker(nil), locks...)
	r.g = newGroup("redlock", locks, len(locks)/2+1)
	r.bounded = sync.OnceValue(func() []bool { return boundedReleases(locks) })
	r.g.name = r.g.names[0]
	for _, n := range r.g.names[1:] {
		if n != r.g.name {
			r.g.name = fmt.Sprintf("redlock%q", r.g.names)
			break
		}
	}
	return r
}

// checkIndependent rejects a RedLock two of whose locks live on one Redis
// server: one failing server could then take away the majority, and the
// algorithm's safety rests on the servers failing independently.
func checkIndependent(locks []Locker) error {
	as := make([]any, len(locks))
	for i, l := range locks {
		as[i] = l
	}
	i, j, addr, shared := lockcore.SharedServer(as)
	switch {
	case !shared:
		return nil
	case addr == "":
		return invalid("redlock: locks %d and %d share a Client; a RedLock needs independent Redis masters, one Client each (for several locks on one server, use New)", i, j)
	}
	return invalid("redlock: locks %d and %d are on the same Redis server %s; a RedLock needs independent Redis masters (for several locks on one server, use New)", i, j, addr)
}

// boundedReleases reports, for each of locks, whether it is one of
// relock's own handles: a lock shares a Client with itself only then.
func boundedReleases(locks []Locker) []bool {
	b := make([]bool, len(locks))
	for i, l := range locks {
		_, _, _, b[i] = lockcore.SharedServer([]any{l, l})
	}
	return b
}

// With returns a RedLock over the same locks with opts applied on top of
// r's options. It shares no holds with r: configure a RedLock before using
// it. An invalid option is an error (matching ErrInvalidArgument) that
// every method of the result returns.
func (r *RedLock) With(opts ...Option) *RedLock {
	cfg := r.cfg
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.err != nil && !errors.Is(cfg.err, ErrInvalidArgument) {
		cfg.err = fmt.Errorf("%w: %w", ErrInvalidArgument, cfg.err)
	}
	n := &RedLock{cfg: cfg, g: &group{kind: "redlock", err: r.g.err}}
	if r.g.err == nil {
		n.g = newGroup("redlock", r.g.locks, r.g.needed)
		n.bounded = r.bounded
		n.g.name = r.g.name
		if cfg.observerSet {
			n.g.obs = cfg.observer
		}
	}
	return n
}

// Name is the name its locks share, or, when they differ,
// "redlock[<names>]".
func (r *RedLock) Name() string { return r.g.name }

// Quorum is how many locks must be held: len(locks)/2+1.
func (r *RedLock) Quorum() int { return r.g.needed }

// Lock acquires the RedLock for the owner in ctx, retrying rounds until
// it holds it or ctx ends. Its locks hold on their watchdog lease. If Lock
// returns an error, the owner holds none of the locks this call took; when
// ctx ended the wait, the error matches both ErrNotAcquired and ctx.Err().
func (r *RedLock) Lock(ctx context.Context) error {
	_, err := r.acquire(ctx, noLimit, 0)
	return err
}

// LockLease is Lock with a fixed lease (at least 1ms) on every lock. The
// RedLock is then held for the validity of the acquisition: lease minus the
// time the successful round took minus drift (1% of lease plus 2ms).
func (r *RedLock) LockLease(ctx context.Context, lease time.Duration) error {
	if err := r.check(0, lease, true); err != nil {
		return err
	}
	_, err := r.acquire(ctx, noLimit, lease)
	return err
}

// TryLock acquires the RedLock for the owner in ctx (a context without an
// owner makes a fresh one, as in rlock) in rounds.
//
// A round tries every lock once, all in parallel, each attempt bounded by
// the per-instance timeout (WithInstanceTimeout). It succeeds when at least
// Quorum locks were taken and the validity, lease minus the round's
// duration minus drift (1% of lease plus 2ms), is still positive; with
// lease 0 the lease is the watchdog timeout (WithWatchdogTimeout) and the
// locks' watchdogs keep them held. A round that fails is undone at once: an
// Unlock goes to every lock, also to those whose attempt seemed to fail
// (a reply may have been lost), except locks the owner held before this
// call and that did not report success. Then, after a random pause
// (WithRetryDelay), the next round starts, until wait (0: one round) or
// ctx ends. However short the wait, the first round is made, and a round
// started within the wait is judged on its answers.
//
// It returns (true, nil) when the owner holds the RedLock; (false, nil)
// when the wait ended without it while ctx is live, and so few locks failed
// with errors that the others were busy; (false, err) otherwise: err
// matches ErrNotAcquired and joins a *NodeError for each lock that failed
// with an error in the last round.
func (r *RedLock) TryLock(ctx context.Context, wait, lease time.Duration) (bool, error) {
	if err := r.check(wait, lease, false); err != nil {
		return false, err
	}
	return r.acquire(ctx, wait, lease)
}

func (r *RedLock) check(wait, lease time.Duration, fixed bool) error {
	if r.g.err != nil {
		return r.g.err
	}
	if r.cfg.err != nil {
		return r.cfg.err
	}
	if fixed && lease == 0 {
		return invalid("LockLease needs a lease of at least 1ms")
	}
	return checkAcquire(wait, lease)
}

// instanceTimeout bounds one attempt on one lock.
func (r *RedLock) instanceTimeout(lease time.Duration) time.Duration {
	if r.cfg.instanceTimeout > 0 {
		return r.cfg.instanceTimeout
	}
	return min(max(lease/10, minInstanceTimeout), maxInstanceTimeout)
}

func (r *RedLock) acquire(ctx context.Context, wait, lease time.Duration) (ok bool, err error) {
	if err := r.check(0, 0, false); err != nil {
		return false, err
	}
	octx, owner, anon, err := r.g.acquirer(ctx)
	if err != nil {
		return false, err
	}
	var obs *acquireObs
	ctx, octx, obs = r.g.observeAcquire(ctx, octx, owner, anon, wait, lease)
	defer obs.end(&ok, &err)
	if err := ctx.Err(); err != nil {
		return false, notAcquired(err)
	}
	valid := lease
	if lease == 0 {
		valid = r.cfg.watchdog
	}
	timeout := r.instanceTimeout(valid)
	var deadline time.Time
	if wait > 0 {
		deadline = time.Now().Add(wait)
	}
	f := r.getFanout()
	defer func() { r.putFanout(f) }()
	held := r.g.takenInto(owner, f.before)
	// clean: the owner was made up here and no call with it has failed
	// so far; when the acquisition fails, it is given back for reuse.
	clean := anon
	defer func() {
		if clean && !ok {
			r.g.reuseAnon(owner)
		}
	}()
	for {
		start := time.Now()
		res := r.round(f, octx, lease, timeout)
		n := 0
		for i, x := range res {
			f.took[i] = x.ok
			if x.ok {
				n++
			}
			if x.err != nil {
				clean = false
			}
		}
		if n >= r.g.needed && validity(valid, start) > 0 {
			r.g.grant(octx, owner, anon, f.took, lease == 0)
			if clean {
				r.g.markReuse(owner)
			}
			return true, nil
		}
		// The round's answers are read before the undo, which reuses f.
		permanent, failed := r.failures(res)
		var undone bool
		f, undone = r.undo(f, octx, held, timeout)
		clean = clean && undone
		if err := ctx.Err(); err != nil {
			return false, notAcquired(err)
		}
		if wait == 0 || permanent {
			return false, failed
		}
		obs.waiting()
		if wait > 0 {
			left := time.Until(deadline)
			if left <= 0 {
				return false, failed
			}
			if !backoff.Sleep(ctx.Done(), min(r.pause(), left)) {
				return false, notAcquired(ctx.Err())
			}
			if !time.Now().Before(deadline) {
				return false, failed
			}
		} else if !backoff.Sleep(ctx.Done(), r.pause()) {
			return false, notAcquired(ctx.Err())
		}
	}
}

// pause is a random delay between two rounds.
func (r *RedLock) pause() time.Duration {
	return backoff.Policy{Min: r.cfg.retryDelay, Jitter: true}.Delay(1)
}

// round tries every lock once, in parallel, on f, all attempts bounded by
// one context that ends after timeout (the locks' TryLock honours the
// context's deadline). It returns when every attempt has answered, so none
// outlives the round; the answers are f.res, valid until f is reused.
func (r *RedLock) round(f *fanout, octx context.Context, lease, timeout time.Duration) []result {
	ictx, cancel := context.WithTimeout(octx, timeout)
	defer cancel()
	f.askAll()
	f.start(ictx, false, lease, true)
	<-f.done
	return f.res
}

// undo releases what a failed round may have taken: it unlocks every lock
// except those the owner held before (held, then f.before[i]) whose
// attempt did not report success (f.took[i]), all in parallel, and waits
// for the answers for at most timeout. Errors are expected here
// (ErrNotHeld where nothing was taken, failures from the masters that
// failed the attempt) and ignored: a lock that stays taken expires by its
// lease. It returns the fanout to go on with: f, or a new one when an
// Unlock did not answer in time; and whether every lock was asked and
// answered with a release or ErrNotHeld (clean: the owner holds none of
// them).
func (r *RedLock) undo(f *fanout, octx context.Context, held bool, timeout time.Duration) (*fanout, bool) {
	for i := range f.ask {
		f.ask[i] = f.took[i] || !held || !f.before[i]
	}
	clean := releasedAll(r.unlockEach(f, octx, timeout))
	if f.abandoned {
		g := r.getFanout()
		copy(g.before, f.before)
		return g, false
	}
	return f, clean
}

// releasedAll reports whether every answer to a release is a release or
// ErrNotHeld: the owner holds none of the locks any more, and no call of
// the release is left in flight.
func releasedAll(res []result) bool {
	for _, x := range res {
		if x.err != nil && (!errors.Is(x.err, ErrNotHeld) || errors.Is(x.err, errNoAnswer)) {
			return false
		}
	}
	return true
}

// errNoAnswer stands for the answer of an Unlock still in flight when
// unlockEach stopped waiting.
var errNoAnswer = errors.New("no answer")

// unlockEach unlocks, in parallel, each lock marked in f.ask, on a context
// that ends after limit (rlock bounds a release by a live context's
// deadline), and collects the answers. A Locker that ignores its context
// is waited for a little longer only: its Unlock is then left to finish by
// itself, f is abandoned to it, and the answers are in a slice of their
// own. Locks not asked and locks that did not answer have errNoAnswer
// (joined with context.DeadlineExceeded) in the result.
func (r *RedLock) unlockEach(f *fanout, octx context.Context, limit time.Duration) []result {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(octx), limit)
	defer cancel()
	for i, a := range f.ask {
		if !a {
			f.res[i] = result{i: i, err: errNoAnswer}
		}
	}
	// The caller makes one release itself, on one of relock's locks: it
	// keeps to uctx's deadline (at least 250ms), within the wait below.
	f.start(uctx, true, 0, true)
	// The wait goes on past uctx's end for those that ignore it: rlock
	// gives a release at least 250ms even on a shorter deadline.
	var (
		ended   = uctx.Done()
		timeout <-chan time.Time
	)
	for {
		select {
		case <-f.done:
			return f.res
		case <-ended:
			ended = nil
			t := time.NewTimer(max(limit, 250*time.Millisecond) + limit/4 + 50*time.Millisecond - limit)
			defer t.Stop()
			timeout = t.C
		case <-timeout:
			return r.abandon(f, limit)
		}
	}
}

// abandon is what unlockEach returns when it stops waiting: a copy of the
// answers that came (read only from the locks marked answered), and
// errNoAnswer for the others. f is left to its goroutines.
func (r *RedLock) abandon(f *fanout, limit time.Duration) []result {
	f.abandoned = true
	res := make([]result, len(f.res))
	for i := range res {
		switch {
		case f.answered[i].Load():
			res[i] = f.res[i]
		case f.ask[i]:
			res[i] = result{i: i, err: fmt.Errorf("%w within %v, the release goes on in the background: %w",
				errNoAnswer, limit, context.DeadlineExceeded)}
		default:
			res[i] = result{i: i, err: errNoAnswer}
		}
	}
	return res
}

// failures is the error of a failed round: nil when the locks that failed
// with an error were few enough that the others could have made a quorum
// (it failed because they were busy), else ErrNotAcquired joined with a
// *NodeError per failure. permanent reports that the quorum is out of reach
// for good (invalid arguments, closed clients).
func (r *RedLock) failures(res []result) (permanent bool, err error) {
	var errs []error
	dead := 0
	for _, x := range res {
		if x.err == nil {
			continue
		}
		errs = append(errs, r.g.nodeError(x.i, x.err))
		if errors.Is(x.err, ErrInvalidArgument) || errors.Is(x.err, relock.ErrClosed) {
			dead++
		}
	}
	n := len(res)
	if len(errs) <= n-r.g.needed {
		return false, nil
	}
	return dead > n-r.g.needed, fmt.Errorf("%w: redlock %q: %d of %d locks failed, %d needed: %w",
		ErrNotAcquired, r.g.name, len(errs), n, r.g.needed, lockcore.JoinList(errs...))
}

// Unlock releases one hold level of the owner in ctx (without an owner:
// this RedLock's current anonymous hold) on every lock, in parallel. It
// works when ctx has ended. It waits for the answers for at most ten times
// the per-instance timeout, and at least 500ms: the release on a lock whose
// master is down or hung goes on in the background (rlock bounds it by 5s),
// and that lock's lease ends its hold if the release never arrives.
//
// It returns an error matching ErrNotHeld when every lock answered and none
// released a level. ErrNotHeld from some locks is expected (the ones the
// acquisition did not get) and ignored; other failures, and missing
// answers, of locks that the hold had taken (and not seen lost, through
// Watchable) are returned, each as a *NodeError. When the hold was lost before its final Unlock, the error
// also matches ErrLockLost.
func (r *RedLock) Unlock(ctx context.Context) (err error) {
	if err := lockcore.JoinList(r.g.err, r.cfg.err); err != nil {
		return err
	}
	octx, owner, err := r.g.holder(ctx)
	if err != nil {
		return err
	}
	var obs *releaseObs
	_, octx, obs = r.g.observeRelease(ctx, octx, owner)
	defer obs.end(&err)
	if owner == "" {
		return r.g.notHeld("")
	}
	f := r.getFanout()
	defer func() { r.putFanout(f) }()
	held := r.g.takenInto(owner, f.took)
	h := r.g.beginRelease(owner)
	f.askAll()
	res := r.unlockEach(f, octx, r.unlockWait())
	cause := r.g.endRelease(owner, h, func(i int) error { return res[i].err })
	r.g.releasedAnon(owner, h, cause == nil && releasedAll(res))
	released, answered := 0, 0
	var errs []error
	for _, x := range res {
		if !errors.Is(x.err, errNoAnswer) {
			answered++
		}
		switch {
		case x.err == nil:
			released++
		case errors.Is(x.err, ErrNotHeld):
		case !held || f.took[x.i]:
			errs = append(errs, r.g.nodeError(x.i, x.err))
		}
	}
	if released == 0 && answered == len(res) {
		errs = append([]error{r.g.notHeld(owner)}, errs...)
	}
	return lockcore.Join(cause, lockcore.JoinList(errs...))
}

// unlockWait is how long Unlock waits for the locks' answers.
func (r *RedLock) unlockWait() time.Duration {
	valid := r.cfg.watchdog
	return max(10*r.instanceTimeout(valid), 500*time.Millisecond)
}

// Do acquires the RedLock like Lock (watchdog lease), runs fn, then
// unlocks. fn's context is derived from ctx and carries the owner (a fresh
// one when ctx has none); it is cancelled with context.Cause matching
// ErrLockLost as soon as fewer than Quorum of its locks are held: the locks
// must implement Watchable for their loss to be seen. Do returns fn's
// error; if the hold was lost while fn ran, the error also matches
// ErrLockLost. If acquiring fails, fn does not run and Do returns that
// error. The release works even when ctx has ended. A nil fn is
// ErrInvalidArgument.
func (r *RedLock) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	if err := r.check(0, 0, false); err != nil {
		return err
	}
	return r.g.do(ctx, fn, r.Lock, r.Unlock)
}

// Done returns a channel that is closed when the hold of the owner in ctx
// (without one: the current anonymous hold) ends: by its final Unlock, or,
// for a hold on the watchdog lease, as soon as fewer than Quorum of its
// locks are held, as their Done channels (Watchable) report. A hold on a
// fixed lease is not watched. The channel is already closed when this
// RedLock has no record of a hold of the owner.
func (r *RedLock) Done(ctx context.Context) <-chan struct{} {
	return r.g.holdContext(ctx).Done()
}

// HoldContext returns a context that ends when the hold of the owner in
// ctx (without one: the current anonymous hold) ends, like Done; its
// context.Cause is context.Canceled after the final Unlock and matches
// ErrLockLost after a loss. When this value has no record of a hold of the
// owner, it has already ended with a cause matching ErrNotHeld.
func (r *RedLock) HoldContext(ctx context.Context) context.Context {
	return r.g.holdContext(ctx)
}
