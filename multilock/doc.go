// Package multilock implements locks made of other locks: MultiLock, held
// only while every one of its locks is held, and RedLock, the Redlock
// algorithm, held while a majority of its locks, each on an independent
// Redis master, is held. Both work on the small Locker interface, which
// *rlock.Lock, *rlock.FencedLock, *fairlock.Lock and *rwlock.Lock satisfy, and satisfy it
// themselves, so they compose: a MultiLock of a RedLock and a Lock, a
// RedLock of MultiLocks.
//
//	a, b := c.GetLock("account:1"), c.GetLock("account:2")
//	transfer := multilock.New(a, b) // both accounts, or neither
//	err := transfer.Do(ctx, func(ctx context.Context) error { ... })
//
//	// One rlock.Client per independent master.
//	rl := multilock.NewRedLock(c1.GetLock("job"), c2.GetLock("job"), c3.GetLock("job"))
//	ok, err := rl.TryLock(ctx, time.Second, 0)
//
// # Owners
//
// Owners travel in the context, as in rlock. A MultiLock or RedLock calls
// its locks with the caller's owner, or, for a context without one, with a
// fresh owner (of the reserved form "anon-<n>") that it remembers as its current
// anonymous hold, which Unlock without an owner releases. Holding the same
// owner again re-enters every lock. Do puts its owner in fn's context.
//
// # MultiLock
//
// A MultiLock takes its locks one by one in name order, waiting for a busy
// lock while holding those before it, so MultiLocks over the same locks
// never deadlock each other (nested MultiLocks are expanded into the same
// order). wait is spread over the whole set: each lock waits for what is
// left of it, in its own queue, so a MultiLock is not overtaken again and
// again as it would be if it dropped everything and retried. A failure
// releases, in reverse order, exactly the locks the call took, and Unlock
// releases every lock, going on past failures. With a fixed lease the set
// counts as held only while the first lock's lease (less drift) lasts; a
// set that took longer to gather is released and taken again.
//
// # RedLock
//
// A round asks every lock at once (the calling goroutine asks one, a
// goroutine each the others), every attempt bounded by a per-instance
// timeout (a tenth of the lease, between 5ms and 50ms, or
// WithInstanceTimeout), so a slow or dead master costs a round that
// timeout. The round waits for every attempt, so none outlives
// it (an attempt cut off in flight takes back what it may have won). It
// wins when Quorum locks (len/2+1) were taken and the validity, the lease
// minus the round's duration minus a drift of 1% of the lease plus 2ms, is
// still positive. A lost round is undone on every lock, including those
// that seemed to fail (their reply may have been lost), and retried after
// a random pause until the wait ends; wait 0 is one round.
//
// Releases (Unlock, and undoing a lost round) go to every lock in parallel
// and wait for the answers a bounded time: 500ms (or ten per-instance
// timeouts) for Unlock, one per-instance timeout for an undo (rlock gives
// each release at least 250ms). A release to a dead or hung master then
// fails, and the master's lease ends the hold.
//
// The goroutines of a round or a release belong to the call that started
// them: the call waits for each of them, and none is left when it
// returns, except the release of a Locker that is not relock's and
// ignores its context, which a release stops waiting for after its
// bounded wait (it is reported as not answered). The calling goroutine
// makes one release itself only on one of relock's locks, whose release
// keeps to its context's deadline. A RedLock left alone has no goroutine,
// and has nothing to close.
//
// An acquisition without an owner in its context gets a made-up owner of
// the reserved form "anon-<n>@". Once its hold is released, and every call
// made with that owner answered (a success, or ErrNotHeld for a release),
// the owner goes back to a list of the process and a later anonymous
// acquisition of any RedLock uses it again: the locks' Clients keep their
// record of it, as for an owner given with rlock.WithOwner, and find it
// again. An owner whose attempt, undo or release failed may still hold a
// lock somewhere, and is never used again.
//
// With lease 0 (Lock, Do) each lock holds on its own Client's watchdog
// lease and is renewed by it; the validity is computed from
// WithWatchdogTimeout (30s by default: set it to the Clients' watchdog
// timeout). While held, the RedLock watches its locks through their Done
// channels (the Watchable interface, which *rlock.Lock implements): as soon
// as fewer than a majority are held, the hold is lost, RedLock.Done closes
// and Do's context is cancelled with a cause matching ErrLockLost. A MultiLock on the
// watchdog lease is lost as soon as any one of its locks is. The watching
// starts with the first Done, HoldContext or Do of the hold (at once when
// there is an observer, so that it hears of a loss when it happens), and
// sees the losses from before at once; a hold that nobody watched learns
// of its loss at its final Unlock, from what its locks answer, and that
// Unlock then reports ErrLockLost all the same. Watching a lock of relock
// makes its Client listen for a force-unlock of it, which costs a
// subscription and a message per release: an acquisition and release that
// nobody watches cost none of that.
//
// # Observing
//
// A MultiLock or a RedLock reports its acquisitions, releases and holds
// (kind multi or redlock) to the observer of the first of its locks that
// has one (rlock.WithObserver), beside its locks' own reports; a RedLock
// that retries rounds counts as a waiter. RedLock.With(WithObserver(o))
// gives a RedLock another observer.
//
// # What RedLock needs and what it does not guarantee
//
// RedLock is only as safe as the deployment under it:
//
//   - The masters must be independent: separate machines (or at least
//     processes) that fail separately, with no replication between them.
//     Locks on one server, or on a master and its replicas, give no more
//     safety than one lock. Use at least three (five tolerate two failures).
//   - A master must not forget a lock it granted. Either run it with
//     persistence that survives a crash (appendonly yes with appendfsync
//     always), or keep a crashed master down for longer than the longest
//     lease (the watchdog timeout included) before it rejoins, so that every
//     lock it forgot has expired. Otherwise a restarted master can grant a
//     second majority while the first holder still runs.
//   - Leases are relative times kept by each server's clock and measured by
//     this process's clock; the algorithm assumes the clocks run at about
//     the same rate (the drift allowance covers 1%), not that they agree.
//     A server clock that jumps (an administrator, a VM migration) breaks
//     it.
//
// Even then a lock is not enough to protect a resource from a late write.
// The holder can pause (a long GC, swapping, a stopped VM) or be cut off
// past its validity, another owner then takes the majority, and the first
// one's write arrives afterwards. With one Redis, rlock.FencedLock answers
// this with a token that the resource checks; RedLock has no single counter
// across its masters, so it cannot hand out such a token. Where a late write
// would do harm, the resource must reject it by other means (a fencing
// token from a consensus system, a compare-and-set on the data itself).
package multilock
