package watchdog

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// ErrNotHeld is returned by a RenewFunc for a lease whose holder no longer
// holds it (renewal found the hold gone). The lease is then lost at once.
var ErrNotHeld = errors.New("watchdog: lease no longer held")

// ErrExpired is the loss cause when no renewal succeeded before the lease ran
// out. When a renewal had failed, the cause wraps both ErrExpired and the
// last renewal error (on one line), so errors.Is matches both.
var ErrExpired = errors.New("watchdog: lease expired before a renewal succeeded")

// ErrClosed is returned by Add after Close.
var ErrClosed = errors.New("watchdog: closed")

// errNotSent marks the result of a renewal that was not sent because its
// context had ended (Close, or a lease of the batch ran out first).
var errNotSent = errors.New("watchdog: renewal not sent")

// errNoResult stands for the result of a lease that a RenewFunc left out of
// its answer (it returned fewer errors than leases). It is transient.
var errNoResult = errors.New("watchdog: RenewFunc returned no result for the lease")

// Defaults for the zero fields of a Config.
const (
	DefaultTick     = 10 * time.Millisecond
	DefaultSlots    = 512
	DefaultMaxBatch = 1000
)

// RenewFunc renews the given leases together (the caller pipelines them) and
// returns one error per lease, in order:
//   - nil: renewed; the lease now runs for its full duration from when the
//     call started;
//   - an error matching ErrNotHeld: the hold is gone, and the lease is lost;
//   - any other error: transient; the renewal is retried.
//
// A missing result (fewer errors than leases) counts as a transient error.
//
// It is called on a goroutine of the watchdog, never on the wheel goroutine,
// so a slow call never blocks the wheel; calls for different batches may run
// concurrently. ctx is cancelled at Close, and has a deadline no later than
// the earliest deadline (last success + lease) of the leases in the batch, so
// a renewal never outlives a lease.
//
// It must not modify the slice, and must not call Lease.Stop or
// Watchdog.Close (both wait for the call to return).
type RenewFunc func(ctx context.Context, leases []*Lease) []error

// Config configures a Watchdog. Only Renew is required.
type Config struct {
	// Renew renews leases. Required.
	Renew RenewFunc
	// Tick is the resolution of the wheel: renewals start at most one
	// tick late. Zero (or less) means DefaultTick.
	Tick time.Duration
	// Slots is the number of slots of the wheel; the wheel turns once
	// every Slots*Tick. Zero (or less) means DefaultSlots.
	Slots int
	// MaxBatch caps the number of leases given to one RenewFunc call;
	// more leases due at the same tick are split into several calls.
	// Zero (or less) means DefaultMaxBatch.
	MaxBatch int
}

// Watchdog renews leases on a hashed timing wheel run by one goroutine.
// Create it with New and release it with Close. Its methods are safe for
// concurrent use.
type Watchdog struct {
	renew    RenewFunc
	tick     time.Duration
	maxBatch int
	epoch    time.Time // tick 0 of the wheel

	ctx    context.Context // parent of every renewal context; cancelled by Close
	cancel context.CancelFunc
	quit   chan struct{} // closed by Close; stops the wheel goroutine
	wake   chan struct{} // buffered (1): a lease is due before the wheel's next wake-up
	wg     sync.WaitGroup

	mu       sync.Mutex
	notBusy  sync.Cond // on mu; broadcast when leases stop being busy
	closed   bool
	slots    []*Lease // heads of the lists of scheduled leases, by dueTick % len(slots)
	cursor   int64    // last tick processed: every scheduled lease has dueTick > cursor
	wakeTick int64    // tick the wheel goroutine sleeps until; math.MaxInt64 when idle
	inWheel  int      // leases in slots
	active   int      // leases added and not yet stopped or lost (Len)
	inFlight map[*batch]struct{}
	wakeups  uint64 // times the wheel goroutine woke up (tests)
}

// batch is one RenewFunc call.
type batch struct {
	leases   []*Lease
	deadline time.Time // earliest deadline of leases
}

// New returns a Watchdog that renews leases with cfg.Renew. It starts the
// wheel goroutine, which stays parked until a lease is added; Close stops it.
// New panics if cfg.Renew is nil.
func New(cfg Config) *Watchdog {
	if cfg.Renew == nil {
		panic("watchdog: Config.Renew is nil")
	}
	if cfg.Tick <= 0 {
		cfg.Tick = DefaultTick
	}
	if cfg.Slots <= 0 {
		cfg.Slots = DefaultSlots
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = DefaultMaxBatch
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &Watchdog{
		renew:    cfg.Renew,
		tick:     cfg.Tick,
		maxBatch: cfg.MaxBatch,
		epoch:    time.Now(),
		ctx:      ctx,
		cancel:   cancel,
		quit:     make(chan struct{}),
		wake:     make(chan struct{}, 1),
		slots:    make([]*Lease, cfg.Slots),
		wakeTick: math.MaxInt64,
		inFlight: make(map[*batch]struct{}),
	}
	w.notBusy.L = &w.mu
	w.wg.Go(w.run)
	return w
}

// Add registers a lease of the given duration, running from now, and renews
// it lease/3 after Add and then lease/3 after the start of each successful
// renewal, until Stop, loss or Close. The interval is never shorter than one
// tick, so a lease should be at least a few ticks long. value is returned by
// Lease.Value, for the RenewFunc to know what to renew. Add returns an error
// if lease is not positive, and ErrClosed after Close.
//
// onLost, which may be nil, is called at most once, on a goroutine of the
// watchdog, after the lease is lost (Done closed, Err set), with the same
// cause as Err. It is not called if the lease is stopped (by Stop or Close)
// before it is lost, nor if Stop is called after the loss but before onLost
// was started. onLost must not block, and must not call Stop on its own
// lease nor Close: both wait for a running onLost to return. A lost lease
// is already out of the watchdog and needs no Stop.
func (w *Watchdog) Add(lease time.Duration, value any, onLost func(cause error)) (*Lease, error) {
	if lease <= 0 {
		return nil, fmt.Errorf("watchdog: lease duration %v is not positive", lease)
	}
	now := time.Now()
	l := &Lease{
		w:        w,
		value:    value,
		duration: lease,
		interval: max(lease/3, w.tick),
		onLost:   onLost,
		deadline: now.Add(lease),
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil, ErrClosed
	}
	w.active++
	w.schedule(l, now.Add(l.interval), now)
	return l, nil
}

// Rearm registers l again, with its duration running from now, after it
// was stopped or lost, so that a holder that takes a lease again and again
// allocates nothing. It reports whether it could: not while l is still
// registered, a renewal of it is in flight, or its onLost is running or
// still to run, nor after Close. A lease rearmed after a loss has a new
// Done channel and no Err.
func (w *Watchdog) Rearm(l *Lease) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || l.w != w || l.busy || l.onLostPending || (l.state != stateStopped && l.state != stateLost) {
		return false
	}
	now := time.Now()
	l.deadline = now.Add(l.duration)
	l.lastErr, l.err, l.again, l.lost = nil, nil, false, nil
	w.active++
	w.schedule(l, now.Add(l.interval), now)
	return true
}

// Len returns the number of leases currently registered: added and not yet
// stopped or lost.
func (w *Watchdog) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.active
}

// Close stops all leases without calling their onLost, cancels the context
// of renewals in flight, and waits for every goroutine the Watchdog started
// to return, including RenewFunc calls in flight and onLost callbacks of
// leases lost before Close. Results of renewals that return after Close are
// ignored. Close is idempotent; Add fails with ErrClosed after it.
func (w *Watchdog) Close() {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		for i, l := range w.slots {
			for l != nil {
				next := l.next
				l.prev, l.next = nil, nil
				l.state = stateStopped
				l = next
			}
			w.slots[i] = nil
		}
		w.inWheel = 0
		for b := range w.inFlight {
			for _, l := range b.leases {
				if l.state == stateRenewing {
					l.state = stateStopped
				}
			}
		}
		w.active = 0
		w.cancel()
		close(w.quit)
	}
	w.mu.Unlock()
	w.wg.Wait()
}

// renewBatch makes the RenewFunc call for b and applies its results. It runs
// on a goroutine of its own, and calls onLost for the leases found lost.
func (w *Watchdog) renewBatch(b *batch) {
	ctx, cancel := context.WithDeadline(w.ctx, b.deadline)
	start := time.Now()
	errs := w.call(ctx, b.leases)
	cancel()
	now := time.Now()

	var lost []*Lease
	w.mu.Lock()
	delete(w.inFlight, b)
	for i, l := range b.leases {
		l.busy = false
		if l.state != stateRenewing { // stopped meanwhile
			continue
		}
		err := errNoResult
		if i < len(errs) {
			err = errs[i]
		}
		if w.applyResult(l, err, start, now) {
			lost = append(lost, l)
		}
	}
	w.notBusy.Broadcast()
	w.mu.Unlock()
	w.notify(lost)
}

// applyResult applies to l the result err of a renewal call started at
// start and returned at now: it schedules l's next renewal or retry, or
// marks l lost and reports true. w.mu is held.
func (w *Watchdog) applyResult(l *Lease, err error, start, now time.Time) (lost bool) {
	switch {
	case err == nil:
		l.deadline = start.Add(l.duration)
		l.lastErr = nil
		next := start.Add(l.interval)
		if l.again {
			l.again = false
			next = now
		}
		w.schedule(l, next, now)
		return false
	case errors.Is(err, ErrNotHeld):
		w.lose(l, err)
		return true
	}
	if l.lastErr == nil || !errors.Is(err, errNotSent) {
		// A call that never started says nothing new: the last real
		// renewal error stays the one reported.
		l.lastErr = err
	}
	if !now.Before(l.deadline) {
		w.lose(l, expiredCause(l.lastErr))
		return true
	}
	retry := now.Add(max(w.tick, l.duration/30))
	if retry.After(l.deadline) {
		retry = l.deadline // no point retrying later: it is found lost then
	}
	w.schedule(l, retry, now)
	return false
}

// call calls the RenewFunc, unless ctx has already ended (Close, or the
// earliest lease of the batch ran out before the call could start): then
// every lease gets ctx's error.
func (w *Watchdog) call(ctx context.Context, leases []*Lease) []error {
	if err := ctx.Err(); err != nil {
		errs := make([]error, len(leases))
		for i := range errs {
			errs[i] = fmt.Errorf("%w: %w", errNotSent, err)
		}
		return errs
	}
	return w.renew(ctx, leases)
}

// lose marks l, which is out of the wheel and not busy, as lost with cause,
// and leaves its onLost for notify to call. w.mu is held.
func (w *Watchdog) lose(l *Lease, cause error) {
	l.state = stateLost
	l.err = cause
	l.onLostPending = l.onLost != nil
	w.active--
	if l.lost != nil {
		close(l.lost)
	}
}

// notify calls onLost for leases that lose has marked lost, except those
// stopped before their turn came. l is busy while its onLost runs, so that
// Stop waits for it. w.mu is not held.
func (w *Watchdog) notify(lost []*Lease) {
	for _, l := range lost {
		w.mu.Lock()
		call := l.onLostPending
		l.onLostPending = false
		l.busy = call
		w.mu.Unlock()
		if !call {
			continue
		}
		l.onLost(l.err) // l.err is set once, before l is handed here
		w.mu.Lock()
		l.busy = false
		w.notBusy.Broadcast()
		w.mu.Unlock()
	}
}

// expiredCause is the loss cause of a lease that ran out; last is the last
// renewal error, if any.
func expiredCause(last error) error {
	if last == nil {
		return ErrExpired
	}
	return fmt.Errorf("%w: last renewal error: %w", ErrExpired, last)
}
