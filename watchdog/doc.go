// Package watchdog implements lease renewal on a hashed timing wheel.
//
// A Watchdog keeps leases alive by calling a RenewFunc for each of them
// every third of its duration, and reports a lease as lost when the holder
// no longer holds it (the RenewFunc says ErrNotHeld) or when no renewal
// succeeded before the lease ran out (ErrExpired). It knows nothing of what
// a lease protects: the caller stores what it needs in the lease's value and
// does the actual renewal in its RenewFunc.
//
// # Design
//
// One goroutine runs the wheel for all leases of a Watchdog. Each lease sits
// in the slot of the tick at which its next renewal falls due; the wheel
// sleeps until the next occupied slot, so an empty wheel does not wake at
// all and a sparse one wakes rarely. Leases falling due at the same tick are
// handed to one RenewFunc call (split into batches of at most
// Config.MaxBatch), made on a goroutine of its own, so that a slow renewal
// never holds up the wheel or other leases, and the caller can pipeline a
// whole batch in one round trip.
//
// Timing, for a lease of duration d added or last renewed at time t (the
// start of the successful RenewFunc call):
//
//   - the lease runs until its deadline t+d;
//   - the next renewal falls due at t+d/3 (at least one tick after t), and
//     is started at the first tick at or after that time;
//   - after a transient error (any error but ErrNotHeld), the renewal is
//     retried after max(tick, d/30), but never later than the deadline;
//   - a lease that comes due at or after its deadline is lost with a cause
//     matching ErrExpired, without calling the RenewFunc.
//
// # Synchronization
//
// Lease.Stop is synchronous: when it returns, no renewal of the lease is in
// flight or will start, and its loss callback is not running and will not
// run. A caller may therefore release what the lease protected right after
// Stop, knowing that no late renewal can revive it.
//
// Time is read only through the time package (time.Now and timers), so the
// package can be tested with testing/synctest.
package watchdog
