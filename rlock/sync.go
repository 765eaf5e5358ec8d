package rlock

import (
	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/latch"
	"github.com/relock-go/relock/rwlock"
	"github.com/relock-go/relock/semaphore"
)

// GetReadWriteLock returns a handle on the read-write lock name (Redisson's
// RReadWriteLock layout): ReadLock is shared, WriteLock exclusive. It does
// no I/O; a bad name is reported by the handles' methods.
func (c *Client) GetReadWriteLock(name string) *rwlock.ReadWriteLock {
	return lockcore.NewReadWriteLock(c.core, name).(*rwlock.ReadWriteLock)
}

// GetSemaphore returns a handle on the semaphore name (Redisson's
// RPermitExpirableSemaphore layout): permits taken on a lease and given
// back by their ID. It does no I/O; a bad name is reported by the
// handle's methods.
func (c *Client) GetSemaphore(name string) *semaphore.Semaphore {
	return lockcore.NewSemaphore(c.core, name).(*semaphore.Semaphore)
}

// GetCountDownLatch returns a handle on the count-down latch name
// (Redisson's RCountDownLatch layout). It does no I/O; a bad name is
// reported by the handle's methods.
func (c *Client) GetCountDownLatch(name string) *latch.CountDownLatch {
	return lockcore.NewCountDownLatch(c.core, name).(*latch.CountDownLatch)
}
