package lockcore

import (
	"github.com/relock-go/relock/internal/layout"
	"strings"
	"sync"

	"github.com/relock-go/relock/pubsub"
)

// Which local waiters a message wakes. On a lock's channel (every lock
// kind), "0" (an unlock) wakes one local waiter, "2" (the mark of a
// wake-one release, see wake.go) none, and any other message (Redisson's
// read release, "1": a lease made shorter) all of them. A kind whose
// channel carries other messages registers its own policy, for the
// channels that start with its prefix, in its init.

var policies struct {
	sync.RWMutex
	byPrefix []policy
}

type policy struct {
	prefix string
	wake   func(payload string) pubsub.Wake
}

// RegisterWakePolicy makes a message on a channel that starts with prefix
// wake the local waiters wake(payload) says. It is called from init
// functions.
func RegisterWakePolicy(prefix string, wake func(payload string) pubsub.Wake) {
	policies.Lock()
	defer policies.Unlock()
	policies.byPrefix = append(policies.byPrefix, policy{prefix, wake})
}

// wakePolicy is the hub's policy: see above.
func wakePolicy(channel, payload string) pubsub.Wake {
	policies.RLock()
	for _, p := range policies.byPrefix {
		if strings.HasPrefix(channel, p.prefix) {
			policies.RUnlock()
			return p.wake(payload)
		}
	}
	policies.RUnlock()
	switch payload {
	case layout.UnlockMessage:
		return pubsub.WakeOne
	case layout.RegistrantWokenMessage, layout.GrantedMessage:
		return pubsub.Ignore
	}
	return pubsub.WakeAll
}
