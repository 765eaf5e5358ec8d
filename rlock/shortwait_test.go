package rlock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/handle"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
	"github.com/relock-go/relock/semaphore"
)

// lockShortWaiter is the ShortWaiter of a lock's TryLock.
func lockShortWaiter(l relocktest.Lockable) relocktest.ShortWaiter {
	return relocktest.ShortWaiter{
		TryLock:   func(ctx context.Context, wait time.Duration) (bool, error) { return l.TryLock(ctx, wait, 0) },
		Unlock:    l.Unlock,
		Exclusive: true,
	}
}

// TestShortWait: a wait shorter than a round trip takes a free lock, as
// wait 0 does, for every kind and every call that takes a wait (it used to
// return false, nil every time: the wait's end cut the first attempt off,
// or gave back the grant it brought back).
func TestShortWait(t *testing.T) {
	kinds := []struct {
		name string
		get  func(c *rlock.Client, name string) relocktest.ShortWaiter
	}{
		{"Lock", func(c *rlock.Client, n string) relocktest.ShortWaiter { return lockShortWaiter(c.GetLock(n)) }},
		{"FencedLock", func(c *rlock.Client, n string) relocktest.ShortWaiter { return lockShortWaiter(c.GetFencedLock(n)) }},
		{"FencedLock.TryLockAndGetToken", func(c *rlock.Client, n string) relocktest.ShortWaiter {
			l := c.GetFencedLock(n)
			return relocktest.ShortWaiter{
				TryLock: func(ctx context.Context, wait time.Duration) (bool, error) {
					tok, ok, err := l.TryLockAndGetToken(ctx, wait, 0)
					if ok && tok <= 0 {
						return ok, fmt.Errorf("TryLockAndGetToken = token %d, true", tok)
					}
					return ok, err
				},
				Unlock: l.Unlock, Exclusive: true,
			}
		}},
		{"FairLock", func(c *rlock.Client, n string) relocktest.ShortWaiter { return lockShortWaiter(c.GetFairLock(n)) }},
		{"ReadLock", func(c *rlock.Client, n string) relocktest.ShortWaiter {
			w := lockShortWaiter(c.GetReadWriteLock(n).ReadLock())
			w.Exclusive = false
			return w
		}},
		{"WriteLock", func(c *rlock.Client, n string) relocktest.ShortWaiter {
			return lockShortWaiter(c.GetReadWriteLock(n).WriteLock())
		}},
		{"Lock.TryLock fixed lease", func(c *rlock.Client, n string) relocktest.ShortWaiter {
			l := c.GetLock(n)
			w := lockShortWaiter(l)
			w.TryLock = func(ctx context.Context, wait time.Duration) (bool, error) {
				return l.TryLock(ctx, wait, 10*time.Second)
			}
			return w
		}},
		{"Lock.TryAcquire", func(c *rlock.Client, n string) relocktest.ShortWaiter {
			l := c.GetLock(n)
			var h *handle.Hold
			return relocktest.ShortWaiter{
				TryLock: func(ctx context.Context, wait time.Duration) (bool, error) {
					var err error
					h, err = l.TryAcquire(ctx, wait, 0)
					return h != nil, err
				},
				Unlock: func(ctx context.Context) error { return h.Release(ctx) }, Exclusive: true,
			}
		}},
		{"Lock.TryDo", func(c *rlock.Client, n string) relocktest.ShortWaiter {
			l := c.GetLock(n)
			return relocktest.ShortWaiter{
				TryLock: func(ctx context.Context, wait time.Duration) (bool, error) {
					return l.TryDo(ctx, wait, func(context.Context) error { return nil })
				},
				Unlock: func(context.Context) error { return nil }, // TryDo released it
			}
		}},
		{"Semaphore.TryAcquire", func(c *rlock.Client, n string) relocktest.ShortWaiter {
			s := semaphoreOfOne(t, c, n)
			var id string
			return relocktest.ShortWaiter{
				TryLock: func(ctx context.Context, wait time.Duration) (bool, error) {
					var ok bool
					var err error
					id, ok, err = s.TryAcquire(ctx, wait, 0)
					return ok, err
				},
				Unlock:    func(ctx context.Context) error { return s.Release(ctx, id) },
				Exclusive: true,
			}
		}},
		{"Semaphore.TryAcquirePermit fixed lease", func(c *rlock.Client, n string) relocktest.ShortWaiter {
			s := semaphoreOfOne(t, c, n)
			var p *semaphore.Permit
			return relocktest.ShortWaiter{
				TryLock: func(ctx context.Context, wait time.Duration) (bool, error) {
					var err error
					p, err = s.TryAcquirePermit(ctx, wait, 10*time.Second)
					return p != nil, err
				},
				Unlock:    func(ctx context.Context) error { return p.Release(ctx) },
				Exclusive: true,
			}
		}},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) { relocktest.CheckShortWait(t, k.get) })
	}
}

// semaphoreOfOne is the semaphore n with one permit.
func semaphoreOfOne(t *testing.T, c *rlock.Client, n string) *semaphore.Semaphore {
	s := c.GetSemaphore(n)
	_, err := s.TrySetPermits(t.Context(), 1)
	require.NoError(t, err)
	return s
}
