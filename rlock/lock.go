package rlock

import (
	"github.com/relock-go/relock/handle"
	"github.com/relock-go/relock/internal/lockcore"
)

// Lock is a handle on a reentrant lock, held in the Redis hash <name> with
// one field "<clientID>:<owner>" -> hold count (Redisson's RLock layout).
// Get one with Client.GetLock. Its methods (Lock, LockLease, TryLock,
// Unlock, Acquire, TryAcquire, Do, TryDo, Done, HoldContext, ForceUnlock,
// IsLocked, IsHeldByOwner, HoldCount, RemainingLease, Watch and Name) are
// those of the handle.Mutex it embeds, which every lock kind shares,
// declared here too so that go doc shows them; the package documentation
// says what they promise. Handles are cheap and safe for concurrent use; any number of
// handles may name the same lock.
type Lock struct {
	*handle.Mutex
}

// newHandle wraps a lock in the handle every lock kind shares.
var newHandle func(*lockcore.Mutex) *handle.Mutex

func init() {
	newHandle = lockcore.Use[func(*lockcore.Mutex) *handle.Mutex]()
}

// GetLock returns a handle on the reentrant lock name. It does no I/O; a
// bad name is reported by the handle's methods.
func (c *Client) GetLock(name string) *Lock {
	return &Lock{newHandle(lockcore.NewMutex(c.core, c.core.Map(name), lockcore.Reentrant{}))}
}

// get returns the handle of kind T on name, made by the constructor its
// package registered, from the name in Redis (with the key prefix). Every
// Get* method made from a registered constructor goes through it.
func get[T any](c *Client, name string) T {
	return lockcore.Use[func(*lockcore.Core, string) T]()(c.core, c.core.Map(name))
}
