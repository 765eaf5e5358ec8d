// Package fairlock implements a fair (FIFO) distributed lock on Redis, in
// the layout of Redisson's RFairLock, so Go and Java waiters queue together.
//
// Waiters acquire in the order they first asked. Besides the lock hash
// (<name>: field "<clientID>:<owner>" -> hold count) a fair lock keeps
//
//	redisson_lock_queue:{<name>}       list: waiter fields, head first
//	redisson_lock_timeout:{<name>}     sorted set: waiter field -> deadline (ms)
//	redisson_lock__channel:{<name>}:<field>   each waiter's own channel
//
// An unlock publishes "0" on the head waiter's channel only, so a release
// wakes one waiter, not a herd.
//
// Where it differs from Redisson's fair lock:
//
//   - Deadlines come from the server's clock (TIME inside the scripts),
//     never from a client's.
//   - A live waiter refreshes its deadline every RefreshInterval while it
//     waits, so it keeps its place however long it waits; a waiter whose
//     process died stops refreshing and is dropped when it reaches the head
//     and WaiterTimeout has passed. A dead waiter therefore delays the queue
//     by at most WaiterTimeout plus one RefreshInterval (about 1s), not
//     Redisson's five minutes.
//   - A waiter whose context ends, or that hits any error, leaves the queue
//     at once; if it was the head and the lock is free, the next waiter is
//     woken.
//   - When a holder's lease runs out (it crashed), the head waiter takes the
//     lock as soon as the lease ends: it sleeps at most until then.
//   - Unlock by an owner that holds nothing is ErrNotHeld (Redisson's fair
//     lock returns silently).
//
// Interop: Redisson's waiters use the same keys, channels and messages, so
// both queue together and exclude each other. Redisson shortens every
// queued deadline by its thread wait time (5 minutes by default) when one
// of its clients acquires; a relock waiter whose deadline that pushes into
// the past is dropped at the head and rejoins at the tail on its next
// refresh. Mixed queues are therefore safe but only roughly FIFO.
//
// Owners, leases, the watchdog and errors are as in package rlock.
package fairlock
