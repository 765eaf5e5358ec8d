// Package fairlock implements a fair (FIFO) distributed lock on Redis, in
// the layout of Redisson's RFairLock, so Go and Java waiters queue together.
//
// Waiters acquire in the order they first asked. Besides the lock hash
// (<name>: field "<clientID>:<owner>" -> hold count) a fair lock keeps
//
//	redisson_lock_queue:{<name>}       list: waiter fields, head first
//	redisson_lock_timeout:{<name>}     sorted set: waiter field -> deadline (ms)
//	relock_lock_alive:{<name>}         sorted set: relock waiter field -> heartbeat (server ms)
//	redisson_lock__channel:{<name>}:<field>   each waiter's own channel
//
// An unlock publishes "0" on the head waiter's channel only, so a release
// wakes one waiter, not a herd. Every relock call that finds the lock free
// with another waiter at the head (an attempt, an unlock, a waiter giving
// up, a force-unlock) publishes there too, so a head that missed its
// wake-up goes on.
//
// Grant on release (rlock's, on unless rlock.WithoutGrantOnRelease): when
// the head of the queue is a goroutine of the releasing Client that
// sleeps waiting, the last Unlock hands the lock to it in the release
// itself: the release writes the head's hold (a count of 1, its lease the
// confirmation window, 3s, until the Client confirms it), takes it out of
// the queue, its deadline and its heartbeat (and the thread wait time off
// the deadlines behind, as an acquisition does), and wakes nobody (it
// publishes relock's mark "3" on the lock's channel, where no fair waiter
// listens, for relock top); the waiter returns holding the lock with no
// round trip of its own. A
// head of another Client, or Redisson's, is woken as before, and so is a
// head of the Client that is between two attempts: a release grants only
// to the head, so the order is the queue's either way. A grant whose
// waiter left before it arrived is given back and the next head woken.
//
// A name holds one kind: a fair acquisition or re-entry that finds a
// read-write lock's hash fails with an error matching relock.ErrWrongKind,
// and a plain or fenced acquisition that finds this lock's queue of
// waiters fails so too (it would take the lock past the queue, and its
// release would not wake the head). A fair lock held with nobody queued
// looks like a plain lock in Redis, so a fair acquisition of a plain
// lock's name is not refused: it queues, and the plain lock's acquisitions
// are refused from then on. While the name's other form ("a" for "{a}", which derives
// the same queue) is in use, an acquisition fails with
// relock.ErrNameConflict. Both change nothing, and a waiting call ends at
// once with them.
//
// # Deadlines
//
// The deadlines are Redisson's, kept by Redisson's rule on both sides so
// that a mixed queue treats every waiter alike: a waiter that joins gets
// the deadline of the waiter queued before it (the first: now plus the
// holder's remaining lease) plus the thread wait time; every acquisition
// takes the thread wait time off every deadline still queued, and a waiter
// that gives up takes it off the deadlines behind it. A waiter whose
// deadline has passed is dropped when it reaches the head. relock's
// waiters use the Client's thread wait time (rlock.WithFairLockWaitTimeout,
// 5 minutes by default), which must equal the Redisson clients'
// fairLockWaitTimeout (that option says what a mismatch costs); a Redisson
// waiter in tryLock uses its wait instead, as in Redisson. Each waiter
// takes off what it added, so the arithmetic holds across both sides.
//
// relock writes deadlines from the server's clock (TIME inside the
// scripts), Redisson from its client's wall clock: a Java client whose
// clock is off by d moves its waiters' deadlines by d. The queue keys get
// no expiry, as in Redisson (an expiry set by relock could drop a Redisson
// waiter that joined later with a later deadline): what waiters that died
// leave behind is pruned by the next call on the lock.
//
// # Heartbeats
//
// relock's waiters are found dead by a heartbeat, not by their deadline: a
// waiting relock call refreshes its heartbeat every RefreshInterval, and a
// waiter that has not refreshed for WaiterTimeout is dropped when it
// reaches the head, whatever its deadline, by the next relock call on the
// lock. relock's calls never drop a relock waiter whose heartbeat is live,
// even past its deadline, and drop Redisson's waiters by Redisson's rule
// only (their deadline), so a Redisson waiter is never dropped sooner than
// in a Redisson-only queue. Redisson's scripts know nothing of heartbeats:
// they drop a relock waiter, as their own, when its deadline passes (a
// queue that stalls for longer than the thread wait time); a relock waiter
// dropped while it lives rejoins at the tail at its next refresh.
//
// Other ways to find a dead relock waiter were weighed. Short deadlines
// refreshed by the waiter (relock's former way) break Redisson's
// arithmetic: Redisson builds a newcomer's deadline on the one before it
// and takes 5 minutes off every deadline when it acquires, so its waiters
// were dropped while they lived. The subscriber count of the waiter's
// channel (PUBSUB NUMSUB) costs no write, but a waiter joins the queue
// before it subscribes and subscribes again after a reconnect, and would
// be dropped while alive in those windows; and a process that hangs, or
// is cut off, keeps its connection open for minutes. A heartbeat costs
// one write in the refresh a waiter makes anyway, in a key of the lock's
// hash slot that only relock reads, and catches a hung or cut-off process
// as well as a dead one.
//
// # Liveness
//
// When the lock is free, its head takes it: a relock head at once when
// woken, else within RefreshInterval; a Redisson head when woken, or when
// the sleep on the holder's lease it last read ends. What a failure costs:
//
//   - A holder that dies: the lock is free when its lease runs out (the
//     watchdog lease, 30s by default, after its last renewal, or the fixed
//     lease it took); a relock head takes it within RefreshInterval, as
//     does a Redisson head while a relock waiter is queued (its refresh
//     wakes the head); a Redisson head among Redisson waiters only, when
//     its sleep on that lease ends.
//   - A relock waiter that dies (its process killed, hung or cut off): in
//     a queue of relock waiters, about a second once the lock is free
//     (WaiterTimeout after its last refresh, plus a RefreshInterval). In a
//     mixed queue, the same while a live relock waiter is queued behind it
//     (its refresh drops the dead one and wakes the new head) or another
//     relock call runs on the lock; with only Redisson waiters behind it,
//     what a dead Redisson waiter costs.
//   - A Redisson waiter that dies: until its deadline, as in Redisson
//     itself: about the thread wait time (5 minutes by default) once the
//     waiters queued before it have gone on; a relock waiter behind it then
//     takes the lock within RefreshInterval.
//
// A waiter whose context ends, or that hits any error, leaves the queue at
// once, also while Redis is out of memory (so does one whose Client
// closes, when Redis still answers it; if not, its heartbeat runs out, and
// until then the waiter keeps its place should its owner ask again); if
// the lock is free, the head is woken.
//
// Where it differs from Redisson's fair lock beyond this: unlock by an
// owner that holds nothing is ErrNotHeld (Redisson's fair lock returns
// silently); a force-unlock also publishes on the lock's own channel, where
// the holders of relock listen for it.
//
// Owners, leases, the watchdog and errors are as in package rlock.
package fairlock
