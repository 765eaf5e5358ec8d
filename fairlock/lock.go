package fairlock

import (
	"github.com/relock-go/relock"
	"github.com/relock-go/relock/handle"
	"github.com/relock-go/relock/internal/lockcore"
)

// The errors of every kind of relock (the values of package relock).
var (
	ErrNotAcquired     = relock.ErrNotAcquired
	ErrNotHeld         = relock.ErrNotHeld
	ErrLockLost        = relock.ErrLockLost
	ErrClosed          = relock.ErrClosed
	ErrInvalidArgument = relock.ErrInvalidArgument
)

// Lock is a handle on a fair lock: waiters acquire it in the order they
// first asked. Get one with rlock.Client.GetFairLock. Its methods are
// those of the handle.Mutex it embeds (declared here too, for go doc),
// with rlock.Lock's owner rules and errors; what differs is the order of
// the waiters (see the package documentation), and that TryLock with wait
// 0 fails while others are queued, even when the lock is free. Handles
// are cheap and safe for concurrent use.
type Lock struct {
	*handle.Mutex
}

func init() {
	newHandle := lockcore.Use[func(*lockcore.Mutex) *handle.Mutex]()
	lockcore.Provide(func(c *lockcore.Core, name string) *Lock {
		return &Lock{newHandle(lockcore.NewMutex(c, name, kind{}))}
	})
}
