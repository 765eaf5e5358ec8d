// Package ratelimit implements Redisson's RRateLimiter on Redis: at most
// rate permits in any window of an interval, shared by every Client and
// every Redisson instance that uses the name. Get one with
// rlock.Client.GetRateLimiter.
//
//	l := c.GetRateLimiter("geocoder")
//	_, _ = l.TrySetRate(ctx, 10, time.Second) // once, by whoever comes first
//	if err := l.Acquire(ctx, 1); err != nil { ... } // waits for room in the window
//	callGeocoder()
//
// # Redis layout
//
// The layout is Redisson's, rate type OVERALL, so Java and Go processes
// count in one window:
//
//	<name>                  hash: rate, interval (ms), type ("0" OVERALL,
//	                        "1" PER_CLIENT), keepAliveTime (ms, 0: none)
//	{<name>}:value          string: the permits left in the window
//	{<name>}:permits        sorted set: one member per grant -> when it was
//	                        granted (unix ms); a member is Redisson's packing
//	                        (Lua struct "Bc0I"): a byte with the length of an
//	                        ID, the ID (16 random bytes), and the permits as a
//	                        4-byte little-endian integer
//	relock_ratelimiter:{<name>}  pub/sub (relock's own, Redisson has none):
//	                        a rate set anew or a grant given back
//
// A name that contains "{" is not wrapped again ("<name>:value"), so every
// key shares the name's hash slot and the limiter works on Redis Cluster.
// So the rate limiters "a" and "{a}" would share their window and their
// channel, differing only in the hash under the name: while the other
// form of the name holds state under its own key (a rate limiter's hash,
// a lock, a semaphore's count...), every call (TrySetRate, SetRate,
// Acquire and TryAcquire, AvailablePermits) fails with an error matching
// relock.ErrNameConflict that names both names, and changes nothing; a
// waiting Acquire ends at once with it. A hash under the name that is no
// rate limiter's (a lock's, a read-write lock's) is refused the same way
// with relock.ErrWrongKind, and a lock of any kind refuses the rate
// limiter's hash, so the two never share a name.
// A rate of type PER_CLIENT, which only Redisson sets, keeps a window per
// client in {<name>}:value:<client ID> and {<name>}:permits:<client ID>;
// relock counts in its Client's own (its ID), so each Client has the
// whole rate.
//
// # The window
//
// A grant counts from the time it was made until interval later. An
// acquisition of n permits (all or none) is granted when the grants in
// the window (now - interval, now] leave room for n; the window never
// holds grants of more than the rate. n above the rate is never granted
// (ErrInvalidArgument). SetRate starts an empty window, as Redisson's
// setRate does; TrySetRate changes nothing when a rate is set.
//
// # Clocks
//
// relock's scripts stamp their grants with the Redis server's clock (TIME)
// and read the window on it. Redisson stamps its grants with its client's
// clock (System.currentTimeMillis). Mixing the two is as safe as mixing
// Redisson clients: the window is only as exact as the clocks that stamp
// it agree, and relock is one more clock, the server's. A Java client
// whose clock is d ahead of the server's makes its grants stay in the
// window d longer as relock reads it (relock admits fewer), and reads
// relock's grants as d older (it admits up to their permits d early); one
// that is behind, the other way round. With clocks kept by NTP to a few
// ms, the window is a few ms short or long at worst. Between relock
// Clients there is no skew at all: they all read the server's clock, so
// the window is exact; relock does not depend on its hosts' clocks.
// (The scripts call TIME and then write: this needs scripts replicated by
// their effects, the default since Redis 5 and the only way since Redis 7.)
//
// # Waiting
//
// A waiter never polls. A refused attempt learns from the script how
// long until enough grants leave the window, and sleeps that long (or
// until its context ends); it also subscribes to relock's channel, so a
// SetRate, or a grant given back, wakes it at once. Redisson's clients
// sleep on their own until a grant leaves; they do not hear of a relock
// SetRate. A grant that an attempt made while its call was ending (its
// context ended, its reply was lost) is given back; every attempt of a
// call sends the same grant ID, so a resent attempt takes nothing twice.
//
// # Replicas
//
// A grant does not wait for replicas by default: the Client's replica
// sync (on by default, rlock.WithReplicaSync) is for lock and permit
// operations, and Redisson's rate limiter does not wait either. A grant
// that a failover loses lets, at worst, that many more permits through
// in the window on the new master: the rate is exceeded once, nothing is
// held twice. With rlock.WithReplicaSync(n, timeout), a grant waits for
// n replicas like an acquisition, and one that fewer confirmed is given
// back and fails with relock.ErrReplicaSync.
package ratelimit
