package lockcore

import "strings"

// Prefixes of the keys and channels derived from a lock name, as Redisson
// names them.
const (
	ChannelPrefix = "redisson_lock__channel"
	QueuePrefix   = "redisson_lock_queue"
	TimeoutPrefix = "redisson_lock_timeout"
	TokenPrefix   = "redisson_lock_token"
	LatchPrefix   = "redisson_unlock_latch"
	// WakersPrefix and WakePrefix are relock's own: the registry of the
	// Clients waiting for a lock with wake-one on, and their channels.
	WakersPrefix = "relock_wakers"
	WakePrefix   = "relock_wake"

	// RWLockChannelPrefix names a read-write lock's channel
	// (redisson_rwlock:{name}).
	RWLockChannelPrefix = "redisson_rwlock"
	// SemaphoreChannelPrefix names a semaphore's channel
	// (redisson_sc:{name}).
	SemaphoreChannelPrefix = "redisson_sc"
	// CountDownLatchChannelPrefix is the start of a count-down latch's
	// channel, redisson_countdownlatch__channel__{name}: always followed by
	// the name in braces, whatever the name holds.
	CountDownLatchChannelPrefix = "redisson_countdownlatch__channel__"
)

// Messages published on a lock's channel.
const (
	// UnlockMessage wakes one waiter: the lock was released.
	UnlockMessage = "0"
	// WakeAllMessage wakes every waiter (Redisson's read-lock release).
	WakeAllMessage = "1"
)

// Derived returns the key or channel prefix derives from name, by Redisson's
// rule: "prefix:{name}", or "prefix:name" when name already has a hash tag
// (contains '{'), so that the user's tag decides the slot. Either way the
// derived key shares the lock key's hash slot.
func Derived(prefix, name string) string {
	if strings.Contains(name, "{") {
		return prefix + ":" + name
	}
	return prefix + ":{" + name + "}"
}

// Suffixed returns the key name derives with suffix, by Redisson's rule:
// "{name}:suffix", or "name:suffix" when name already has a hash tag
// (contains '{'). Either way it shares name's hash slot.
func Suffixed(name, suffix string) string {
	if strings.Contains(name, "{") {
		return name + ":" + suffix
	}
	return "{" + name + "}:" + suffix
}

// Channel is the lock's unlock notification channel.
func Channel(name string) string { return Derived(ChannelPrefix, name) }

// Field is the hash field of an owner of a Client: "<clientID>:<owner>".
func Field(clientID, owner string) string { return clientID + ":" + owner }
