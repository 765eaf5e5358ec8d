// Package relock holds what every kind of relock shares: the errors its
// calls return, compared with errors.Is.
//
// relock is a library of distributed locks on Redis in the style of
// Redisson (the Java library), built on github.com/redis/rueidis. The
// locks are in the packages beside this one:
//
//	rlock      the Client, and the reentrant and fenced locks
//	fairlock   the fair (FIFO) lock
//	rwlock     the read-write lock
//	semaphore  the semaphore whose permits are held on a lease
//	latch      the count-down latch
//	multilock  MultiLock (all of N locks) and RedLock (a majority of N masters)
//	handle     the methods every lock handle shares
//
// Start with package rlock.
package relock
