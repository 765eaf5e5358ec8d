// Package observe defines what relock tells an observer about its locks:
// each acquisition and release (with a start, so that a tracer can put a
// span around it), each hold from its start to its end (released, lost or
// closed), each lease renewal, and each wait. rlock.WithObserver installs
// an Observer on a Client; MultiLock and RedLock report to their locks'
// observer (see multilock). The module
// github.com/relock-go/relock/relockotel records these events as
// OpenTelemetry metrics and spans.
//
// The package is a leaf: it imports nothing of relock, so that every lock
// kind can report to the same interface.
//
// # Calls
//
// Every call is synchronous, on the goroutine where the event happens: the
// caller's for acquisitions, releases and waits, the watchdog's for
// renewals and the losses they find, Close's for holds that end at Close.
// An Observer must be safe for concurrent use, return quickly, never block,
// and never call methods of relock's locks or Clients. With no observer,
// relock makes none of these calls and builds none of the events.
//
// For each call that starts (AcquireStart, ReleaseStart, HoldStart,
// WaitStart) the matching end comes exactly once, after it, for the same
// lock and owner: the up-down counts they feed go back to zero once every
// lock is released or its Client closed.
package observe

import (
	"context"
	"time"
)

// Kinds of lock, the Lock.Kind of every event. In a semaphore's events
// the Owner is the permit ID; a permit on the watchdog lease is a hold
// (HoldStart to HoldEnd), one on a fixed lease is not (its Client does not
// learn when the lease ends).
const (
	KindLock      = "lock"      // rlock.Lock, the reentrant lock
	KindFenced    = "fenced"    // rlock.FencedLock
	KindFair      = "fair"      // fairlock.Lock
	KindRead      = "read"      // the read side of a read-write lock
	KindWrite     = "write"     // the write side of a read-write lock
	KindSemaphore = "semaphore" // a permit of a semaphore
	KindMulti     = "multi"     // multilock.MultiLock
	KindRedLock   = "redlock"   // multilock.RedLock
	KindSpin      = "spin"      // rlock.SpinLock

	// KindCountingSemaphore: permits of a semaphore.Counting. Its events
	// are acquisitions (Owner: the call's request ID) and releases (Owner
	// ""); its permits are not holds, since no Client keeps track of who
	// has them.
	KindCountingSemaphore = "counting_semaphore"
	// KindRateLimiter: grants of a ratelimit.Limiter. Its events are
	// acquisitions only (Owner: the call's grant ID, in hex): a grant is
	// not a hold, it leaves the window by itself.
	KindRateLimiter = "rate_limiter"
)

// Outcome says how an acquisition, a release, a hold or a renewal ended.
type Outcome string

// Outcomes. Each event type names the ones it uses.
const (
	// Acquire.Outcome: the call returned holding the lock.
	OutcomeAcquired Outcome = "acquired"
	// Acquire.Outcome: the call returned without the lock because others
	// held it until its wait ran out or its context ended (TryLock's
	// (false, nil), or an error matching the context's, with no Redis
	// failure seen during the wait).
	OutcomeNotAcquired Outcome = "not_acquired"
	// Acquire.Outcome and Release.Outcome: anything else, such as a Redis
	// failure (also one that outlasted the wait), a closed Client, an
	// invalid owner. Err says what.
	OutcomeError Outcome = "error"

	// Release.Outcome: a level was released. Hold.Outcome: the hold ended
	// with its final release.
	OutcomeReleased Outcome = "released"
	// Release.Outcome: the owner held nothing (the error matches
	// ErrNotHeld; also when Redis said the hold was gone).
	OutcomeNotHeld Outcome = "not_held"

	// Hold.Outcome: the hold was lost (Err matches ErrLockLost).
	// Renewal.Outcome: a renewal found the hold gone, or none succeeded
	// before the lease ran out.
	OutcomeLost Outcome = "lost"
	// Hold.Outcome: the hold ended because its Client was closed.
	OutcomeClosed Outcome = "closed"

	// Renewal.Outcome: the lease was renewed.
	OutcomeOK Outcome = "ok"
	// Renewal.Outcome: a renewal failed (Redis did not answer or refused)
	// and will be retried while the lease lasts.
	OutcomeFailed Outcome = "failed"
)

// Lock names the lock an event is about.
type Lock struct {
	// Kind is one of the Kind constants.
	Kind string
	// Name is the lock's name (for a MultiLock, its Name:
	// "multilock[<names>]").
	Name string
}

// Acquire is one acquisition call: Lock, LockLease, TryLock, or the
// acquisition in Do. AcquireStart gets the fields up to Lease;
// AcquireEnd gets them all. Calls refused before any I/O (an invalid
// argument, a closed Client, a context that had already ended) are not
// reported.
type Acquire struct {
	Lock Lock
	// Owner is the owner the call acts for: the context's, or the one
	// relock made up for an anonymous acquisition ("anon-<n>").
	Owner string
	// Wait is how long the call may wait: -1 until its context ends
	// (Lock, LockLease, Do), 0 a single attempt.
	Wait time.Duration
	// Lease is the fixed lease asked for, 0 for the watchdog lease.
	Lease time.Duration

	// Outcome is OutcomeAcquired, OutcomeNotAcquired or OutcomeError.
	Outcome Outcome
	// Duration is the time from the call's start to its end: the time it
	// took to acquire, or to give up.
	Duration time.Duration
	// Err is what the call returned (nil when acquired, and for TryLock's
	// (false, nil)).
	Err error
}

// Release is one Unlock call (also the release inside Do), or a
// semaphore's Release. ReleaseStart gets Lock and Owner; ReleaseEnd gets
// them all.
type Release struct {
	Lock Lock
	// Owner is the owner the call acts for; "" when the context carries
	// none and there was no anonymous hold to release.
	Owner string

	// Outcome is OutcomeReleased, OutcomeNotHeld or OutcomeError.
	Outcome Outcome
	// Duration is how long the call took.
	Duration time.Duration
	// Held is how long the owner's hold had lasted when the call began
	// (0 when it held nothing, and for a semaphore permit on a fixed
	// lease, whose start its Client does not keep).
	Held time.Duration
	// Err is what the call returned.
	Err error
}

// Hold is one hold, from the acquisition that gave the owner its first
// level to the end of its last: re-entries and partial releases do not
// start or end a hold. HoldStart gets Lock and Owner; HoldEnd gets them
// all. A loss is reported as a HoldEnd with OutcomeLost.
type Hold struct {
	Lock  Lock
	Owner string

	// Outcome is OutcomeReleased, OutcomeLost or OutcomeClosed.
	Outcome Outcome
	// Held is how long the hold lasted.
	Held time.Duration
	// Err is the loss (it matches ErrLockLost) for OutcomeLost, ErrClosed
	// for OutcomeClosed, nil for OutcomeReleased.
	Err error
}

// Renewal is one renewal of a hold's watchdog lease, or the loss the
// watchdog found.
type Renewal struct {
	Lock  Lock
	Owner string
	// Outcome is OutcomeOK, OutcomeFailed or OutcomeLost.
	Outcome Outcome
	// Err is the failure (OutcomeFailed) or the loss (OutcomeLost).
	Err error
}

// Wait is the part of an acquisition spent waiting: from its first
// attempt that did not get the lock (when the call may wait) to the
// call's end. WaitStart gets Lock and Owner; WaitEnd gets them all.
type Wait struct {
	Lock  Lock
	Owner string
	// Waited is how long the wait lasted.
	Waited time.Duration
}

// Observer is told of the life of a Client's locks. See the package
// documentation for how and when its methods are called. Embed Base to
// implement only some of them (and keep compiling when methods are
// added).
type Observer interface {
	// AcquireStart is called when an acquisition call starts. It returns
	// the context the call goes on with: ctx, or one derived from it (for
	// example carrying a span). That context reaches AcquireEnd, the wait
	// events, and every Redis call the acquisition makes.
	AcquireStart(ctx context.Context, a Acquire) context.Context
	// AcquireEnd is called when the acquisition call returns.
	AcquireEnd(ctx context.Context, a Acquire)
	// ReleaseStart is called when a release call starts; it returns the
	// context the call goes on with, as AcquireStart does.
	ReleaseStart(ctx context.Context, r Release) context.Context
	// ReleaseEnd is called when the release call returns.
	ReleaseEnd(ctx context.Context, r Release)
	// HoldStart is called when an owner starts holding a lock.
	HoldStart(h Hold)
	// HoldEnd is called when the hold ends: by its final release, its
	// loss, or Close.
	HoldEnd(h Hold)
	// Renewal is called for each renewal of a watchdog lease, and when
	// the watchdog finds a hold lost.
	Renewal(r Renewal)
	// WaitStart is called when an acquisition starts waiting, with the
	// acquisition's context.
	WaitStart(ctx context.Context, w Wait)
	// WaitEnd is called when a waiting acquisition returns.
	WaitEnd(ctx context.Context, w Wait)
}

// Base is an Observer that does nothing. Embed it in an observer that
// implements only the methods it needs.
type Base struct{}

var _ Observer = Base{}

// AcquireStart returns ctx.
func (Base) AcquireStart(ctx context.Context, _ Acquire) context.Context { return ctx }

// AcquireEnd does nothing.
func (Base) AcquireEnd(context.Context, Acquire) {}

// ReleaseStart returns ctx.
func (Base) ReleaseStart(ctx context.Context, _ Release) context.Context { return ctx }

// ReleaseEnd does nothing.
func (Base) ReleaseEnd(context.Context, Release) {}

// HoldStart does nothing.
func (Base) HoldStart(Hold) {}

// HoldEnd does nothing.
func (Base) HoldEnd(Hold) {}

// Renewal does nothing.
func (Base) Renewal(Renewal) {}

// WaitStart does nothing.
func (Base) WaitStart(context.Context, Wait) {}

// WaitEnd does nothing.
func (Base) WaitEnd(context.Context, Wait) {}
