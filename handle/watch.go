package handle

import (
	"context"
	"time"

	"github.com/relock-go/relock/internal/lockcore"
)

// EventType says what a Watcher saw happen to one holder of a lock.
type EventType int

// The events of a Watcher.
const (
	// Acquired: an owner holds the lock that did not at the last read (a
	// new hold; re-entries and partial releases are not events).
	Acquired EventType = iota + 1
	// Released: an owner's hold is gone, and a release was heard: a
	// message on the lock's channel, or a keyspace notification of a
	// field or the key deleted (an Unlock, a ForceUnlock). Owner and
	// ClientID are "" when a release that freed the lock was heard but its
	// holder was not known (its acquisition was not heard: no keyspace
	// notifications).
	Released
	// Expired: an owner's hold is gone with the key, and the key's expiry
	// was heard (keyspace notifications): its lease ran out.
	Expired
	// Vanished: an owner's hold is gone and nothing heard says why: an
	// expiry when the server sends no keyspace notifications (found at the
	// next release heard), or a change made while the subscription
	// connection was down (found when it is back).
	Vanished
)

// String is the event type's name: acquired, released, expired, vanished.
func (t EventType) String() string {
	switch t {
	case Acquired:
		return "acquired"
	case Released:
		return "released"
	case Expired:
		return "expired"
	case Vanished:
		return "vanished"
	}
	return "unknown"
}

// Event is a change of one holder of a watched lock.
type Event struct {
	Type EventType
	// Owner is the holder's owner, as rlock.WithOwner named it (or the
	// "anon-<n>@<client name>" of an anonymous hold; for a Redisson
	// holder, its thread's number), and ClientID its Client's ID: the two
	// parts of the holder's hash field, "<clientID>:<owner>".
	Owner    string
	ClientID string
	// Write is set, for a read-write lock, for a write hold (whichever
	// side is watched: both sides share the name and see both).
	Write bool
	// At is when the watcher read the change.
	At time.Time
}

// Watcher reports the changes of the holders of a lock that the caller
// need not hold. Get one with Mutex.Watch.
type Watcher struct {
	events   chan Event
	stop     func()
	keyspace bool
}

// Watch starts watching the lock: who takes it and who leaves it, whoever
// they are (this Client's owners, other Clients', Redisson's), until ctx
// ends, Stop is called or the Client closes. It returns once the watch
// listens and has read the lock's holders once: every change after it
// returns is reported on Events (the holders it found are not).
//
// How it hears: releases are published on the lock's channel (plain,
// fenced, spin and read-write locks; a fair lock's release goes to its
// next waiter's own channel, which a watch does not hear); acquisitions
// and expiries are published by nothing but the server's keyspace
// notifications (notify-keyspace-events with K, h and x, or KA), which
// Watch listens to and never turns on: KeyspaceEvents says whether the
// server has them on (and the keyspace channel was not refused by an
// ACL). Without them a watch hears releases only (none of a
// fair lock), sees at each release the holders that came since (Acquired)
// and the ones gone unheard (Vanished), and does not hear an expiry when
// it happens; it never polls. On Redis Cluster, and with
// rlock.WithShardedPubSub, keyspace notifications are not heard (a
// node sends them to its own subscribers only).
//
// At every notification the watch reads the lock's holders (HKEYS of its
// hash) and reports the difference from its last read: changes that come
// and go between two reads (a hold taken and released within a round
// trip) are not seen, and notifications that come while a read is in
// flight, or while Events is not read, merge into the next read, so a
// slow reader loses no change of state, only its steps. A holder found
// gone waits up to 250ms for the notification that says why (its release
// or its expiry, which may come after the read's reply) before it is
// reported Vanished.
//
// Cost: at the start, CLIENT INFO and CONFIG GET (its database, and
// whether keyspace notifications are on; a refused CONFIG GET reads as
// off, and the watch listens all the same) and one read; two channels
// subscribed on the Client's pub/sub connection (the lock's channel, which
// the Client's waiters of the lock share, and the key's keyspace
// channel); one read per burst of notifications (renewals are not among
// them); one goroutine, ended with the watch. Many watches of one lock on
// one Client share the subscriptions but read each.
//
// A semaphore has no Watch: its permits have no holder in a lock's hash;
// its channel carries the permits that came free, which its waiters hear.
func (h *Mutex) Watch(ctx context.Context) (*Watcher, error) {
	w := &Watcher{events: make(chan Event, 16)}
	info, stop, err := h.m.Watch(ctx, func(ctx context.Context, ev lockcore.WatchEvent) bool {
		select {
		case w.events <- Event{Type: EventType(ev.Type), Owner: ev.Owner, ClientID: ev.ClientID, Write: ev.Write, At: ev.At}:
			return true
		case <-ctx.Done():
			return false
		}
	}, func() { close(w.events) })
	if err != nil {
		return nil, err
	}
	w.stop, w.keyspace = stop, info.Keyspace
	return w, nil
}

// Events returns the channel of the watch's events, closed when the watch
// ends (its context ended, Stop, the Client's Close).
func (w *Watcher) Events() <-chan Event { return w.events }

// KeyspaceEvents reports whether the server said, when the watch started,
// that it sends the keyspace notifications that make acquisitions and
// expiries heard (see Watch).
func (w *Watcher) KeyspaceEvents() bool { return w.keyspace }

// Stop ends the watch and waits for its goroutine; Events is then closed.
// Calling it again does nothing.
func (w *Watcher) Stop() { w.stop() }
