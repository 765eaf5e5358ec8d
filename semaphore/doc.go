// Package semaphore implements Redisson's RPermitExpirableSemaphore on
// Redis: a count of permits, each taken on a lease and given back by its
// ID. Get one with rlock.Client.GetSemaphore. It also implements
// Redisson's RSemaphore, a counting semaphore without permit IDs or
// leases: Counting, from rlock.Client.GetCountingSemaphore (see "The
// counting semaphore" below).
//
//	s := c.GetSemaphore("exports")
//	_, _ = s.TrySetPermits(ctx, 4)     // once, by whoever comes first
//	id, err := s.Acquire(ctx, 0)       // waits; the watchdog renews the permit
//	if err != nil { ... }
//	defer s.Release(ctx, id)
//	ps, err := s.AcquirePermits(ctx, 2, time.Minute) // two at once, or none
//
// # Redis layout
//
// The layout is Redisson's, so Java and Go processes share a semaphore:
//
//	<name>                       string: the number of permits available
//	{<name>}:timeout             sorted set: permit ID (16 raw bytes) -> the end
//	                             of its lease (unix ms)
//	redisson_sc:{<name>}         pub/sub: the number of permits that came free
//	                             (or the new available count), published when
//	                             permits come free
//
// plus three keys of relock's own, which Redisson ignores: {<name>}:relock_queue
// (sorted set: each permit ID a queued waiter asks for -> when it joined) and
// {<name>}:relock_queue_timeout (its deadline to refresh its place), which
// both expire with the latest deadline, and {<name>}:relock_holders (hash:
// permit ID -> "<clientID>:<owner>", who took the permit: the owner in the
// acquiring call's context, as rlock.WithOwner sets it, or
// "anon-<n>@<client name>"; a call for several permits records each),
// whose entry goes with the permit's release, or, after its lease ended,
// with the next acquisition, and which lives as long as the longest lease
// it records (renewals and UpdateLease extend it). relock status
// and scan show it. A name that contains "{" is not wrapped
// again ("<name>:timeout", "redisson_sc:<name>"), so every key shares the
// name's hash slot and the semaphore works on Redis Cluster.
//
// So the semaphores "a" and "{a}" would share their leases and their
// queue (a permit of one whose lease ended would come back to the
// other's count). While one of them has its count, every call of the
// other that reads the leases or writes a count (TrySetPermits,
// AddPermits, Acquire and its forms, Release, AvailablePermits, Delete,
// UpdateLease, RemainingLease, the renewals) fails with an error
// matching relock.ErrNameConflict that names both names, and changes
// nothing; the same holds against a lock or a latch under the other form. A waiting Acquire ends at once with it.
//
// A permit ID is 16 random bytes, given to callers as 32 lowercase hex
// characters, and kept in Redis as the raw bytes (as current Redisson
// does). A permit belongs to nobody in particular: any Client, or a
// Redisson instance, may release it by its ID.
//
// # Leases and the watchdog
//
// Acquire and TryAcquire with lease 0 hold the permit on the watchdog
// lease (30s by default, rlock.WithWatchdogTimeout), renewed by the Client
// every third of it until Release; Close stops the renewals, and the
// permits of a Client that closed (or died) come back when their lease
// ends. A fixed lease (> 0) is never renewed. Every script that looks at
// the permits first gives back those whose lease ended. Lease ends are on
// the Redis server's clock; Redisson writes its client's clock, so when
// Java and Go share a semaphore a lease ends early or late by the offset
// between that client's clock and the server's.
//
// A permit on the watchdog lease is a hold of its Client, like a lock's:
// when a renewal finds it gone (the semaphore was deleted, a Redisson
// process released it by its ID, a restart lost it) or none succeeds
// before its lease ends, it is lost, and the loss is reported to the
// handler of rlock.WithLostHandler (with the semaphore's name and the
// permit ID), to the observer, and through the context of the Permit that
// AcquirePermit returns. A Release that finds it gone reports the loss
// too, and its error matches ErrLockLost beside ErrNotHeld.
//
// Release of a permit that is not held (unknown, released before, or past
// its lease: then it came back by itself) returns ErrNotHeld.
//
// # Several permits, and a permit's lease
//
// AcquirePermits and TryAcquirePermits take n permits in one script, all
// or none, each with an ID and a lease of its own (as Redisson's
// acquire(permits, leaseTime) does): on the watchdog lease with lease 0,
// each a hold of the Client. n must be at least 1 and at most the
// semaphore's permits, available and held; a call for more is refused
// with ErrInvalidArgument (while the count is set; a semaphore never set
// is waited for). The permits are released one by one, by anyone.
//
// UpdateLease gives a held permit a fixed lease from now, longer or
// shorter, as Redisson's updateLeaseTime does; RemainingLease reads what
// is left of it, as Redisson's getLeaseTime does (NeverExpires for a
// permit without a lease). A permit this Client holds on the watchdog
// leaves it then: its renewals stop, and its Permit's context ends with
// the new lease (as a lock hold's on a fixed lease does: a loss, told to
// the lost handler) unless it is released or updated again first. The
// context of a Permit on a fixed lease follows Permit.UpdateLease. A
// lease made shorter publishes '1' on the channel, so that a waiter
// sleeping until the old end (see below) looks again: one of each
// relock Client, and of each Redisson client, whose entry lets one
// waiter try again for a message of 1 (Redisson's own updateLeaseTime
// publishes nothing).
// AddPermits and Release are not resent after a lost reply (a resent
// AddPermits would add twice); when they return a connection error, the
// outcome is unknown, and a permit not given back returns with its lease.
//
// # Waiting and fairness
//
// A waiter never polls. It subscribes to the channel (one subscription per
// name per Client, shared by its waiters), tries again, and sleeps until a
// message, the earliest lease end (a process that died publishes nothing),
// its time to join or refresh its place in the queue, or its context's end.
// Each message wakes one waiter of each Client; a waiter that takes a
// permit and sees more available hands a wake-up on to the next, and so
// does one that is refused while permits are available (they are kept for
// queued waiters ahead of it, perhaps another waiter of its Client), so a
// release wakes as many waiters as permits came free, not all of them, and
// reaches the waiter whose turn it is.
//
// So a waiter that may take a permit goes on within a round trip of the
// release (or AddPermits) that freed it; a permit whose holder died comes
// back when its lease ends (the watchdog timeout, 30s by default, for a
// permit on the watchdog lease), and a waiter then goes on within
// RefreshInterval; a queued waiter that died delays the waiters behind it
// by at most WaiterTimeout plus RefreshInterval (about 1s).
//
// Waiters are not served in the order they came, but none starves while
// permits keep coming free: a waiter that has waited longer than
// QueueAfter joins relock's queue, and queued waiters come first, in the
// order they joined. A waiter for n permits is n members of the queue,
// one per permit ID, so that each member holds one permit back: the
// member at place k (0 first) may take a permit only while more than k
// are available, a waiter for n only while at least n more are
// available than members are queued ahead of its first member, and any
// other caller only while at least as many more as it
// asks for are available than members are queued. So once queued, a
// waiter gets the next permits that nobody queued before it takes,
// however slow its link, and a waiter for many is not passed over by
// later waiters for fewer; in turn, permits that come free while it
// waits for the rest are held back for it (head-of-line: a waiter for
// all the permits holds every one back until all are free). Waiters that
// join in the same millisecond are ordered by their IDs' bytes (those of
// two waiters for several may interleave: the one whose first member
// comes first goes first). A queued
// waiter refreshes its place every RefreshInterval; one that stops (its
// process died) is dropped after WaiterTimeout. Redisson's clients know
// nothing of the queue: where they compete, they may still take permits
// ahead of relock's waiters.
//
// # The counting semaphore
//
// Counting keeps Redisson's RSemaphore layout: the count in <name> (the
// same key as the available count above) and the channel
// redisson_sc:{<name>}, on which every script that gives permits
// publishes the new count. Acquire and TryAcquire take n permits at once,
// all or none; Release gives n back, whoever took them; AddPermits adds
// or takes away; DrainPermits takes every permit free. Permits have no
// lease, so a process that dies holding permits never gives them back.
//
// relock adds one key, which Redisson ignores: {<name>}:relock_grants, a
// sorted set of the grants made in the last GrantMemory (10s), by request
// ID. Every attempt of a call sends the same request ID, so an attempt
// resent after a lost reply takes nothing twice, and a call that gives up
// (its context ended, its reply was lost) gives back exactly what it took.
//
// The counting semaphores "a" and "{a}" would share their grants and their
// channel, as the semaphores above share their leases. While the other
// form of the name holds state under its own key (a count, a lock, a rate
// limiter...), TrySetPermits, AddPermits, Release, DrainPermits, Acquire
// and TryAcquire fail with an error matching relock.ErrNameConflict that
// names both names, and change nothing; a waiting Acquire ends at once
// with it. (AvailablePermits only reads the count under the name. The
// give-back of a call's own grant is not refused: it returns to the
// name's count what the call took from it.)
//
// A waiter never polls: it subscribes to the channel and sleeps until a
// message (nothing else can free a permit) or its context's end. A message
// wakes one waiter of each Client; one that took its permits and sees
// more free, or was refused while some are free (too few for it, perhaps
// enough for another), hands the wake-up on, so a waiter that may take
// its permits goes on within a round trip of the release that freed them.
// Waiters are not served in order: a request for many permits can be
// passed over by smaller ones for as long as they keep coming.
package semaphore
