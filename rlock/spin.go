package rlock

import (
	"github.com/relock-go/relock/handle"
	"github.com/relock-go/relock/internal/lockcore"
)

// SpinLock is a handle on a spin lock (Redisson's RSpinLock): a reentrant
// lock in the plain lock's layout (the Redis hash <name>, one field
// "<clientID>:<owner>" -> hold count), with the same acquisitions, leases
// and watchdog, whose waiters use no pub/sub: between attempts a waiter
// sleeps an exponential backoff with jitter (Redisson's default: 1ms,
// doubling plus a random few ms, at most 128ms; never past the holder's
// lease end), so a waiter costs no subscription, and about 8 attempts a
// second once it has waited a quarter second. Nor does a hold listen on
// the lock's channel: a force-unlock is found by the hold's next renewal.
//
// A release that frees the lock publishes on the lock's channel, as
// Lock's does (Redisson's spin lock publishes nothing), so that waiters of
// a Lock or a FencedLock on the same name, relock's or Redisson's, go on
// at once; a spinner is not slowed by it. A release of Redisson's spin
// lock publishes nothing: relock's Lock and FencedLock waiters look again
// within 2s whatever the holder's lease (see the package documentation).
//
// Get one with Client.GetSpinLock. Its methods are those of the
// handle.Mutex it embeds, as for Lock (declared here too, for go doc). It shares its name with a Lock, a
// FencedLock and Redisson's RLock and RSpinLock of that name: they
// exclude each other.
type SpinLock struct {
	*handle.Mutex
}

// GetSpinLock returns a handle on the spin lock name. It does no I/O; a
// bad name is reported by the handle's methods.
func (c *Client) GetSpinLock(name string) *SpinLock {
	return &SpinLock{newHandle(lockcore.NewMutex(c.core, c.core.Map(name), lockcore.Spin{}))}
}
