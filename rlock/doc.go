// Package rlock implements reentrant distributed locks on Redis in the
// style of Redisson's RLock, on top of github.com/redis/rueidis.
//
// A Client is the entry point: it owns a rueidis client (or uses yours),
// one watchdog goroutine that renews leases, and one pub/sub connection on
// which waiters sleep. Handles from GetLock are cheap and do no I/O.
//
//	c, err := rlock.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
//	if err != nil { ... }
//	defer c.Close()
//	l := c.GetLock("orders:42")
//	if err := l.Lock(ctx); err != nil { ... }
//	defer l.Unlock(ctx)
//
// # Owners
//
// The owner of a hold travels in the context: ctx = rlock.WithOwner(ctx,
// "job-42"). Every call made with that context is the same owner, so taking
// a lock it holds re-enters it and raises its hold count; each Unlock
// releases one level. A context without an owner gets a fresh owner for each
// acquisition, so the lock then behaves like sync.Mutex; Unlock without an
// owner releases the handle's current anonymous hold.
//
// # Redis layout
//
// The layout is Redisson's, so a Go process and a Java process using
// Redisson exclude each other on the same lock name:
//
//	<name>                             hash: "<clientID>:<owner>" -> hold count
//	redisson_lock__channel:{<name>}    pub/sub: "0" published at each release
//	redisson_lock_token:{<name>}       fencing counter of a FencedLock
//	redisson_unlock_latch:{<name>}:<request>  an unlock's answer, kept 6s
//
// A name that already contains "{" is not wrapped again (prefix:<name>), so a
// user's own hash tag decides the slot. Every key a script touches shares
// the lock's hash slot. Scripts only use HINCRBY, PEXPIRE, PTTL, DEL and
// PUBLISH on the hash, and leases are relative (PEXPIRE on the server).
//
// # Leases and the watchdog
//
// Lock, and TryLock with lease 0, hold on the watchdog lease (30s by
// default, WithWatchdogTimeout). The Client's watchdog renews it every
// third of that while the owner holds the lock, and stops, synchronously,
// at the final Unlock. If a renewal finds the hold gone, or none succeeds
// before the lease runs out, the hold is lost: Do's context is cancelled
// with cause ErrLockLost, the channel from Done closes, and the handler of
// WithLostHandler runs. A fixed lease (LockLease, TryLock with lease > 0) is
// never renewed. Close stops every renewal; locks still held then expire.
//
// # Waiting
//
// A waiter never polls. After a failed attempt it subscribes to the lock's
// channel (one subscription per name per Client, shared by all its local
// waiters), tries again, and sleeps until an unlock message, the holder's
// remaining lease (a crashed holder publishes nothing), or its context's
// end. Each unlock wakes one local waiter.
//
// # Failures
//
// A waiting call (Lock, LockLease, TryLock with wait > 0) rides out a
// dropped connection, a failover and error replies that mean the script did
// not run (LOADING, READONLY, BUSY, OOM): it retries every 100ms until its
// wait ends, and then returns the last failure with ErrNotAcquired. A
// single attempt returns the failure at once. Acquire scripts are never
// resent blindly, since a resent HINCRBY adds a level: when a first
// acquisition's reply is lost, the owner's next attempt first looks whether
// it won. A re-entry whose hold turns out to be gone reports that hold lost
// (Done, Do, WithLostHandler) and acquires anew. Levels that re-entries with
// lost replies may have added unseen are released with the owner's last
// Unlock. Unlocks are latched per request, so they are resent safely.
//
// # Safety
//
// A lease can run out while its holder is paused (a long GC, swapping, a
// stopped VM) or cut off from Redis, and another owner then takes the lock
// while the first still believes it holds it. A Redis failover can also
// lose a recent acquisition. The lock alone therefore cannot protect a
// resource from a late write: use a FencedLock and have the resource
// reject writes whose token is older than one it has seen.
package rlock
