package lockcore

import (
	"reflect"
	"sync"

	"github.com/redis/rueidis"
)

// Clients on one rueidis client, with sharded pub/sub. Classic pub/sub
// takes a connection of its own per Client (pubsub's loop dedicates one),
// but sharded pub/sub subscribes on the connections rueidis picks for the
// channels' slots (pubsub's sharded receivers): Clients built with New on
// one rueidis client share them. SHARDNUMSUB then counts one subscriber
// of a lock's channel for all of them, and a release's grant to a waiter
// of its own Client, made while the channel has no subscriber but the
// releasing Client (grant.go), would pass over another such Client's
// waiter every time: that Client would never get the lock while the
// first's goroutines take turns. The process knows what the server cannot
// tell: a Client's release grants nothing while another Client on its
// rueidis client is subscribed to the lock's channel (sharesChannel).
//
// The same holds for grants across Clients (wake-one): a release grants
// through the registry while the lock's channel has no more subscribers
// than live registrations (lock_unlock.lua), and two Clients registered
// on one connection would count as two registrations and one subscriber,
// leaving room for a waiter that is not registered (a Redisson waiter, a
// Client without wake-one), which the release would pass over. So the
// waiters of a Client whose rueidis client another live Client shares do
// not register (sharingRDB): they wait as without wake-one, subscribed
// and counted, hearing every release.
//
// Two Clients on different wrappers of one rueidis client are not seen.
var shared struct {
	mu    sync.Mutex
	cores map[rueidis.Client][]*Core
}

// shareJoin records c among the Clients of its rueidis client, when its
// subscriptions ride that client's connections (sharded pub/sub).
func (c *Core) shareJoin() {
	if c.publish == "publish" || !reflect.TypeOf(c.RDB).Comparable() {
		return
	}
	c.sharesRDB = true
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.cores == nil {
		shared.cores = make(map[rueidis.Client][]*Core)
	}
	shared.cores[c.RDB] = append(shared.cores[c.RDB], c)
}

// shareLeave undoes shareJoin (Close).
func (c *Core) shareLeave() {
	if !c.sharesRDB {
		return
	}
	shared.mu.Lock()
	defer shared.mu.Unlock()
	list := shared.cores[c.RDB]
	for i, o := range list {
		if o == c {
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(shared.cores, c.RDB)
	} else {
		shared.cores[c.RDB] = list
	}
}

// sharingRDB reports whether another live Client shares c's rueidis
// client (sharded pub/sub).
func (c *Core) sharingRDB() bool {
	if !c.sharesRDB {
		return false
	}
	shared.mu.Lock()
	defer shared.mu.Unlock()
	return len(shared.cores[c.RDB]) > 1
}

// sharesChannel reports whether another Client on c's rueidis client
// (sharded pub/sub) is subscribed to channel, or about to be: its
// subscription would be counted as c's by the server. c.mu is not held
// (a Hub calls its Client's policy under its own lock).
func (c *Core) sharesChannel(channel string) bool {
	if !c.sharesRDB {
		return false
	}
	shared.mu.Lock()
	others := shared.cores[c.RDB]
	if len(others) < 2 {
		shared.mu.Unlock()
		return false
	}
	others = append([]*Core(nil), others...)
	shared.mu.Unlock()
	for _, o := range others {
		if o != c && o.Hub.Has(channel) {
			return true
		}
	}
	return false
}
