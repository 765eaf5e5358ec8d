package rlock

import (
	"github.com/relock-go/relock/fairlock"
	"github.com/relock-go/relock/latch"
	"github.com/relock-go/relock/ratelimit"
	"github.com/relock-go/relock/rwlock"
	"github.com/relock-go/relock/semaphore"
)

// GetReadWriteLock returns a handle on the read-write lock name (Redisson's
// RReadWriteLock layout): ReadLock is shared, WriteLock exclusive. It does
// no I/O; a bad name is reported by the handles' methods.
func (c *Client) GetReadWriteLock(name string) *rwlock.ReadWriteLock {
	return get[*rwlock.ReadWriteLock](c, name)
}

// GetSemaphore returns a handle on the semaphore name (Redisson's
// RPermitExpirableSemaphore layout): permits taken on a lease and given
// back by their ID. It does no I/O; a bad name is reported by the
// handle's methods.
func (c *Client) GetSemaphore(name string) *semaphore.Semaphore {
	return get[*semaphore.Semaphore](c, name)
}

// GetCountingSemaphore returns a handle on the counting semaphore name
// (Redisson's RSemaphore layout): a count of permits without IDs or
// leases, shared with Java's getSemaphore(name). It does no I/O; a bad
// name is reported by the handle's methods.
func (c *Client) GetCountingSemaphore(name string) *semaphore.Counting {
	return get[*semaphore.Counting](c, name)
}

// GetRateLimiter returns a handle on the rate limiter name (Redisson's
// RRateLimiter layout, rate type OVERALL): at most its rate of permits in
// any window of its interval, shared with Java's getRateLimiter(name). It
// does no I/O; a bad name is reported by the handle's methods.
func (c *Client) GetRateLimiter(name string) *ratelimit.Limiter {
	return get[*ratelimit.Limiter](c, name)
}

// GetCountDownLatch returns a handle on the count-down latch name
// (Redisson's RCountDownLatch layout). It does no I/O; a bad name is
// reported by the handle's methods.
func (c *Client) GetCountDownLatch(name string) *latch.CountDownLatch {
	return get[*latch.CountDownLatch](c, name)
}

// GetFairLock returns a handle on the fair (FIFO) lock name. It does no
// I/O; a bad name is reported by the handle's methods.
func (c *Client) GetFairLock(name string) *fairlock.Lock {
	return get[*fairlock.Lock](c, name)
}
