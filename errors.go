package relock

import "errors"

// The errors every kind of relock returns, compared with errors.Is. Every
// package of relock returns these same values (rlock, fairlock, rwlock,
// semaphore and latch name them too), so errors.Is(err, ErrNotHeld) holds
// whichever kind returned err. Each message starts with "relock: " once,
// followed by what was being done and why.
var (
	// ErrNotAcquired: a wait ended without the lock or permit. When the
	// context ended the wait, the error also matches the context's error;
	// when Close did, it also matches ErrClosed.
	ErrNotAcquired = errors.New("relock: not acquired")
	// ErrNotHeld: a release (Unlock, Release) or a question about a hold
	// (Token) by an owner that holds nothing, or of a permit that is not
	// held. When the hold was lost while held, the error also matches
	// ErrLockLost.
	ErrNotHeld = errors.New("relock: not held")
	// ErrLockLost: a hold (a lock's, a permit's) ended while held: its key
	// expired or was deleted, it was force-unlocked, or no renewal
	// succeeded before its lease ran out.
	ErrLockLost = errors.New("relock: hold lost")
	// ErrClosed: the Client is closed.
	ErrClosed = errors.New("relock: client closed")
	// ErrInvalidArgument: an empty or malformed name or owner, a negative
	// wait, a negative lease or one under 1ms, a nil function. A call that
	// returns it has sent nothing to Redis.
	ErrInvalidArgument = errors.New("relock: invalid argument")
	// ErrNameConflict: a name whose other form is in use. Redisson's rule
	// wraps a name in braces to make its other keys ("a" gives
	// "redisson_lock__channel:{a}"), but leaves a name that has a '{' as
	// it is, so the names "a" and "{a}" derive the same keys and channels
	// (a fair lock's queue, a semaphore's permits, a fenced lock's token
	// counter, the unlock channel) and would corrupt each other. A call
	// that creates or takes state under one of them (an acquisition of any
	// lock kind, a semaphore's or a counting semaphore's set, add, acquire
	// or drain, any call of a rate limiter, a latch's set) is refused while
	// the other holds state under its own name: the key of its hash, count
	// or configuration exists. The error names both names; the
	// call changed nothing, and a waiting call ends at once with it.
	ErrNameConflict = errors.New("relock: name conflict")
	// ErrWrongKind: a name that holds a lock of another kind. The hash of
	// a reentrant lock (plain, fenced or fair) and that of a read-write
	// lock look alike to the commands that count holds, so a plain Lock
	// of a name held as a read-write lock would add to a read hold, as
	// Redis answers WRONGTYPE across data types. An acquisition (or
	// re-entry) that finds a read-write lock's hash (its "mode" field) for
	// a plain, fenced or fair lock, a lock's hash for a read-write lock,
	// a fair lock's queue of waiters for a plain or fenced lock, a rate
	// limiter's hash (its "rate" field) for any lock, or a lock's hash for
	// a rate limiter is refused; the error names the kind found, the call
	// changed nothing, and a waiting call ends at once with it.
	ErrWrongKind = errors.New("relock: wrong kind")
	// ErrReplicaSync: an acquisition that too few replicas confirmed in
	// time (by default, on a server with replicas, none of them within 1s;
	// with rlock.WithReplicaSync(n, timeout), fewer than n); it was
	// released, and the error also matches ErrNotAcquired.
	ErrReplicaSync = errors.New("relock: too few replicas confirmed the acquisition")
	// ErrDeadlock: a wait that closed a cycle of owners (A holds L1 and
	// waits for L2, B holds L2 and waits for L1; any length, across
	// Clients, processes and lock kinds) and was chosen to end it (see
	// rlock.WithDeadlockDetection). The error also matches ErrNotAcquired
	// and names the cycle (owners, names, kinds). The call holds nothing
	// more than before it; its caller releases what it holds, so that the
	// others of the cycle go on, and may try again, as after a database's
	// deadlock error.
	ErrDeadlock = errors.New("relock: deadlock")
)
