package rlock

import (
	"context"
	"time"

	"github.com/relock-go/relock/handle"
	"github.com/relock-go/relock/internal/lockcore"
)

// FencedLock is a Lock whose every new acquisition (not a re-entry) gets a
// fencing token, strictly greater than every token handed out before for
// its name, even after the lock expired or was deleted. The counter is the
// Redis key redisson_lock_token:{name}, which never expires.
//
// A lease can run out while its holder is paused (a long GC, a stopped VM)
// and the holder then acts as if it still held the lock. Pass the token to
// the resource with every write and have the resource refuse a token older
// than one it has seen (package fence has such a register): that, not the
// lock alone, protects the resource.
//
// FencedLock has every method of Lock (those of the handle.Mutex it
// embeds, declared here too for go doc), plus the three below.
type FencedLock struct {
	*handle.Mutex
	m *lockcore.Mutex
}

// GetFencedLock returns a handle on the fenced lock name: a reentrant lock
// whose every new acquisition gets a fencing token.
func (c *Client) GetFencedLock(name string) *FencedLock {
	m := lockcore.NewMutex(c.core, c.core.Map(name), lockcore.Fenced{})
	return &FencedLock{Mutex: newHandle(m), m: m}
}

// LockAndGetToken is Lock that returns the hold's token. A re-entry
// returns the token of the hold it re-enters.
func (l *FencedLock) LockAndGetToken(ctx context.Context) (int64, error) {
	token, _, err := l.m.Acquire(ctx, lockcore.NoLimit, 0)
	return token, err
}

// TryLockAndGetToken is TryLock that returns the hold's token. The wait
// is TryLock's: an attempt sent within it counts.
func (l *FencedLock) TryLockAndGetToken(ctx context.Context, wait, lease time.Duration) (token int64, ok bool, err error) {
	return l.m.TryAcquire(ctx, wait, lease)
}

// Token is the token of the current hold of the owner in ctx (without one:
// the Client's anonymous hold of the lock). It returns an error matching
// ErrNotHeld if that owner holds nothing. It reads with a read-only script
// (EVALSHA_RO; EVALSHA on servers before Redis 7), which a rueidis client
// built with SendToReplicas may send to a replica: a replica that lags
// may then answer for an older hold, with an older token (which a fenced
// resource refuses as stale) or none.
func (l *FencedLock) Token(ctx context.Context) (int64, error) { return l.m.Token(ctx) }
