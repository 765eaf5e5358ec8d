// Package rwlock implements Redisson's RReadWriteLock on Redis: a lock
// with a read side that any number of owners hold at once and a write side
// that one owner holds alone. Get one with rlock.Client.GetReadWriteLock;
// its ReadLock and WriteLock are *Lock values with the methods, owner
// rules and errors of rlock.Lock.
//
//	rw := c.GetReadWriteLock("catalog")
//	if err := rw.ReadLock().Lock(ctx); err != nil { ... }
//	defer rw.ReadLock().Unlock(ctx)
//
// # Who may hold it
//
// Owners read together while no other owner writes; a writer waits until
// no other owner holds either side. The writer's owner may also take read
// holds, and when it then releases its write hold the lock stays held for
// reading (a downgrade). A read hold is never upgraded: an owner that
// holds a read level and asks for the write side waits for itself, as
// with sync.RWMutex: a deadlock, which the Client's detection ends after
// its delay (1s by default, rlock.WithDeadlockDetection) with an error
// matching ErrDeadlock; with detection off, the wait lasts until its
// context ends. Both sides are reentrant per
// owner. Without an owner in the context, read holds behave like
// sync.RWMutex's RLock and RUnlock: a Client may hold any number of
// anonymous read holds, and each ownerless Unlock of the read side releases
// one of them.
//
// # Redis layout
//
// The layout is Redisson's, so a Java service's read and write locks and
// ours exclude each other on the same name:
//
//	<name>                                      hash: "mode" -> "read" or "write",
//	                                            "<clientID>:<owner>" -> read hold count,
//	                                            "<clientID>:<owner>:write" -> write hold count
//	{<name>}:<clientID>:<owner>:rwlock_timeout:<n>
//	                                            one key per read hold level n (1..count),
//	                                            "1" with the level's lease (PEXPIRE)
//	redisson_rwlock:{<name>}                    pub/sub: "0" after a read release
//	                                            freed the lock (wakes one waiter
//	                                            per Client), "1" after a write
//	                                            release (wakes every waiter)
//
// A name that already contains "{" is not wrapped again: the lease keys
// are then <name>:<clientID>:<owner>:rwlock_timeout:<n> and the channel
// redisson_rwlock:<name>, so every key of a lock shares its hash slot and
// the lock works on Redis Cluster. An owner may not end with ":write" (its
// read field would be another owner's write field).
//
// A hash holds one kind: an acquisition or re-entry of either side that
// finds a lock's hash without "mode" (a plain, fenced or fair lock, which
// the same owner could otherwise re-enter as a read hold) fails with an
// error matching relock.ErrWrongKind, and a plain, fenced or fair lock
// refuses this lock's hash in the same way. While the name's other form
// ("a" for "{a}", which derives the same channel and lease keys) is in
// use, an acquisition fails with relock.ErrNameConflict. Both change
// nothing, and a waiting call ends at once with them.
//
// The hash lives as long as its longest hold: a write hold's lease, or the
// longest lease among the read levels' keys. When a read hold is released
// (or re-entered with a shorter lease) and other readers remain, the hash
// takes the longest lease among their keys; when none of their keys is
// alive (their processes died and their leases ended) the hash is
// deleted, as Redisson does.
//
// # Waiting
//
// A waiter sleeps until a message on the channel or the end of the hash's
// lease as its last attempt saw it (the last read lease ends without a
// message). Every script that makes the hash's lease shorter without
// freeing the lock (a read release that leaves shorter read holds, a
// re-entry with a shorter lease) publishes "1", so that a waiting writer
// looks again instead of sleeping past the new end. So when the lock
// becomes free for a waiter, it goes on within a round trip of the
// release that freed it; when the holders died, within a round trip of
// the end of their last lease (the watchdog timeout, 30s by default, for
// holds on the watchdog lease).
//
// # Leases and the watchdog
//
// Lock, and TryLock with lease 0, hold on the watchdog lease, renewed by
// the Client every third of it until the final Unlock: a read hold's
// renewal resets the lease of every one of its level keys and keeps the
// hash at least as long; a write hold's resets the hash's lease (never
// below the owner's own read levels). A renewal that finds the hold's field
// gone, or one of its level keys expired, reports the hold lost (Done,
// HoldContext, Do's context). A fixed lease (LockLease, TryLock with
// lease > 0) is never renewed. As with rlock, a re-entry resets the
// hold's lease: every level of a read hold gets the new lease.
//
// Where this lock does more than Redisson's: a write release that leaves
// the writer's own read holds (a downgrade) publishes "1", so that waiting
// readers come in at once (Redisson publishes nothing, and its waiters
// retry when the lease they were told of ends); a write hold is never cut
// below its owner's read levels' leases.
//
// # Fairness: writers can starve
//
// Neither Redisson's read-write lock nor this one is fair. A read is
// granted whenever no other owner holds the write side, even while a
// writer waits, so a steady stream of overlapping readers keeps a writer
// out for as long as it lasts: the writer's wait ends only with its
// context. Writers and readers woken together also race for the lock.
// This is the price of Redisson compatibility: a waiting writer cannot
// stop Redisson's readers, which know of no marker but the hash's "mode".
//
// The remedy that stays compatible is a gate in front of the lock, a fair
// lock (rlock.Client.GetFairLock, Redisson's RFairLock) that serves its
// waiters in the order they came: a writer takes the gate, then the write
// side, and lets the gate go once it holds the write side; a reader takes
// the gate and lets it go at once, then takes the read side. While a
// writer holds the gate, new readers queue behind it, the readers inside
// drain, and the writer gets in. Every process using the lock must follow
// it (a Java service with Redisson's RFairLock and RReadWriteLock can), and
// a reader that already holds a read level must re-enter the read side
// directly, not through the gate (the gate may be held by a writer that
// waits for that very read hold). It costs each reader two round trips
// more. See the example of ReadWriteLock.
//
// # Safety
//
// As with every lease-based lock, a hold can end while its owner still
// works (a long pause, a partition), and a failover can lose a recent
// acquisition: see package rlock's safety note.
package rwlock
