package lockcore

import "github.com/relock-go/relock/internal/layout"

// Prefixes of the keys and channels derived from a lock name: see
// internal/layout, their one source.
const (
	ChannelPrefix               = layout.ChannelPrefix
	QueuePrefix                 = layout.QueuePrefix
	TimeoutPrefix               = layout.TimeoutPrefix
	TokenPrefix                 = layout.TokenPrefix
	LatchPrefix                 = layout.UnlockLatchPrefix
	WakersPrefix                = layout.WakersPrefix
	WakePrefix                  = layout.WakePrefix
	RWLockChannelPrefix         = layout.RWLockChannelPrefix
	SemaphoreChannelPrefix      = layout.SemaphoreChannelPrefix
	CountDownLatchChannelPrefix = layout.CountDownLatchChannelPrefix
)

// Messages published on a lock's channel.
const (
	// UnlockMessage wakes one waiter: the lock was released.
	UnlockMessage = layout.UnlockMessage
	// WakeAllMessage wakes every waiter (Redisson's read-lock release).
	WakeAllMessage = layout.WakeAllMessage
)

// Derived is layout.Derived: "prefix:{name}", or "prefix:name" when name
// has a hash tag of its own.
func Derived(prefix, name string) string { return layout.Derived(prefix, name) }

// Suffixed is layout.Suffixed: "{name}:suffix", or "name:suffix" when name
// has a hash tag of its own.
func Suffixed(name, suffix string) string { return layout.Suffixed(name, suffix) }

// Channel is the lock's unlock notification channel.
func Channel(name string) string { return layout.Channel(name) }

// Field is the hash field of an owner of a Client: "<clientID>:<owner>".
func Field(clientID, owner string) string { return layout.Field(clientID, owner) }
