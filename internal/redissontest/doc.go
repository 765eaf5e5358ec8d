// Package redissontest is a stand-in for a Redisson client, for the tests
// that put relock beside Java processes. It runs scripts that do what
// Redisson's scripts do (written here from what they do, not taken from
// them), with Redisson's arguments, and it waits as Redisson waits.
//
// What it stands for, per kind (the classes are Redisson's, read at
// commit 66863978b4a92093b97c1f8c96f182a77e81d50e of redisson/redisson):
//
//	RLock                      RedissonLock, RedissonBaseLock, LockPubSub
//	RFencedLock                RedissonFencedLock
//	RFairLock                  RedissonFairLock
//	RReadWriteLock             RedissonReadLock, RedissonWriteLock
//	RPermitExpirableSemaphore  RedissonPermitExpirableSemaphore, SemaphorePubSub
//	RSemaphore                 RedissonSemaphore, SemaphorePubSub
//	RRateLimiter               RedissonRateLimiter
//	RCountDownLatch            RedissonCountDownLatch, CountDownLatchPubSub
//	RSpinLock                  RedissonSpinLock, LockOptions (read at commit
//	                           0482efe14713f6ef660cccbd66118154d72f1425)
//	the watchdog               renewal.LockTask, renewal.ReadLockTask
//
// A Client is one Redisson instance: a UUID (Redisson's ServiceManager id),
// the hash field of a thread is "<id>:<threadId>", the watchdog lease is
// 30s and renewed every third of it, the fair lock's thread wait time is
// 5 minutes, and the fair lock and the semaphore read the Client's wall
// clock (Clock), as Redisson reads System.currentTimeMillis. Threads are
// plain int64 IDs chosen by the test.
//
// Waiting is Redisson's: a spin lock's waiter tries and sleeps its
// back-off, with no subscription; any other waiter tries, subscribes to the kind's channel
// (one server subscription per channel per Client, shared by its local
// waiters, as Redisson's PublishSubscribe shares an entry), tries again,
// and then sleeps on the entry until a message or the time the script
// returned (a lock holder's TTL, a semaphore's nearest lease end), and
// tries again. Messages are decoded as integers, as Redisson's LongCodec
// decodes them; what each message does is Redisson's:
//
//   - a lock channel: "0" releases one permit of the entry's counting
//     semaphore (one local waiter goes on), "1" releases as many permits as
//     waiters are queued on it (every local waiter goes on);
//   - a semaphore channel: n releases min(n, local subscribers) permits;
//   - a latch channel: "0" opens the entry's gate, "1" closes it.
//
// A message that does not decode as an integer is dropped and counted
// (Client.Undecodable), as Redisson would log and drop it.
//
// Redisson's lock() waits until the lock is taken; the stand-in's waits
// also end with their context, so a test never hangs. A waiter that gives
// up that way does what Redisson does when its thread is interrupted in
// lock(): it unsubscribes and leaves nothing else (a fair-lock waiter stays
// queued until its deadline); tryLock's wait, when it runs out, calls the
// kind's acquireFailed as Redisson does.
package redissontest
