package rlock

import "github.com/relock-go/relock/rwlock"

// GetReadWriteLock returns a handle on the read-write lock name (Redisson's
// RReadWriteLock layout): ReadLock is shared, WriteLock exclusive. It does
// no I/O; a bad name is reported by the handles' methods.
func (c *Client) GetReadWriteLock(name string) *rwlock.ReadWriteLock {
	return rwlock.New(c.core, name)
}
