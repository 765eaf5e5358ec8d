package lockcore

import (
	"context"
	"github.com/relock-go/relock/internal/layout"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/pubsub"
)

// Wake-one (Config.WakeOne). Without it, a release publishes on the lock's
// channel, and every Client with a waiter for the lock wakes one of them:
// with N waiting processes, N scripts race for one grant. With it:
//
//   - A Client whose waiter goes on waiting registers in the lock's wake
//     registry, relock_wakers:{name} (a sorted set: client ID -> deadline),
//     with every attempt of its waiters, and listens on its own wake
//     channel, relock_wake:{name}:<id>, beside the lock's channel. When
//     its last waiter of the lock gives up, it leaves the registry at once
//     (a waiter that got the lock leaves it registered: its own release
//     skips it, and it hands on what reaches it).
//   - A release by a Client with wake-one on wakes the registered Client
//     that registered longest ago (each attempt registers again, so the
//     turn goes round), on its wake channel, and then publishes on the
//     lock's channel, always (unless it granted the lock to that Client's
//     waiter instead, when every subscriber is registered: see
//     remotegrant.go): first the mark RegistrantWokenMessage, then
//     the unlock message. Every waiter that is not registered hears the
//     unlock message (Redisson's, those of Clients without wake-one or
//     without a registered waiter), whoever else subscribes: the release counts no subscribers against registrants,
//     so no registrant that has left the lock's channel, stopped or died
//     can hide a release from them. A Client with registered waiters lets
//     an unlock message that follows the mark pass (Mute: one script sends
//     both, so they are adjacent on the channel), since the release woke
//     a registered Client on its own channel: that keeps the point of
//     wake-one, one script per release instead of one per waiting Client,
//     at the cost of two more messages per release, which only the Clients
//     subscribed to the lock read. Any other release (Redisson's, a Client
//     without wake-one, a force-unlock, a wake-one release that found
//     nobody registered) publishes the unlock message alone, which every
//     waiter hears.
//   - A Client woken when it has no waiter left for the lock hands the
//     wake-up on (lock_wake.lua), to the next registered Client or, when
//     there is none, on the lock's channel; so does one whose registration
//     outlives its waiters (it keeps listening until the registration has
//     expired).
//   - A Client that closes leaves every registry at once. One that dies
//     without Close is dropped by the next release, which finds no
//     subscriber on its wake channel (the server closed its connection),
//     and wakes the next Client instead (wake.lua).
//   - A registrant that lives but cannot act (a stopped process, a cut
//     network link the server has not noticed yet) swallows the wake-ups
//     meant for it until its registration expires (wakeTTL after its last
//     attempt). Every waiter of a Client with wake-one (registered or
//     not: its Client may let the unlock message pass) therefore never
//     sleeps longer than wakeCap plus a random part of it (under
//     2*wakeCap = 2s) without trying again: a lock left free that way is
//     taken by a live waiter within 2s of its release. The waiters of
//     other Clients are woken by the release itself.
const (
	wakeTTL = 3 * time.Second
	wakeCap = time.Second
)

var wakeTTLArg = strconv.FormatInt(wakeTTL.Milliseconds(), 10)

// waker is a Client's registration for the wake-ups of one lock: how many
// of its waiters count on it, the listener of its wake channel, and the
// timer that ends the listener once the registration has expired.
//
// lock is a listener of the lock's channel, subscribed before the wake
// channel and left after it: while the Client listens on its wake channel
// (which makes its registration live, see wake.lua), it subscribes to the
// lock's channel too, even when none of its waiters does any more (one
// got the lock: its registration stays until its deadline). A release
// that grants through the registry counts the live registrations
// against the lock channel's subscribers (lock_unlock.lua): a live
// registrant not subscribed there would let another subscriber (a
// Redisson waiter) go uncounted, and be passed over.
type waker struct {
	n        int
	listener waiter
	lock     waiter
	idle     *time.Timer
}

// wakeOner is implemented by the kinds whose scripts take part in
// wake-one (the reentrant and the fenced lock).
type wakeOner interface{ wakeOne() }

func (Reentrant) wakeOne() {}

// wakePolicy is the hub's policy (see policy.go), with wake-one on: the
// mark of a wake-one release on a lock's channel mutes the unlock message
// after it when the Client has registered waiters for the lock (the
// release woke a registered Client on its own channel; the unlock message
// is for the waiters that are not registered).
func (c *Core) wakePolicy(channel, payload string) pubsub.Wake {
	wake := wakePolicy(channel, payload)
	if payload != layout.RegistrantWokenMessage || !c.wakeOne {
		return wake
	}
	c.mu.Lock()
	n := c.wakeChans[channel]
	c.mu.Unlock()
	if n > 0 {
		return pubsub.Mute
	}
	return wake
}

// joinWake counts a waiter of m in the Client's registration for the
// lock's wake-ups, and, for the first, subscribes the Client's wake
// channel (waiting, on ctx, until the server confirmed it, so that no
// wake-up sent after the registration is missed). The registration in
// Redis is made by the waiter's attempts from then on. It reports whether
// the waiter joined.
func (m *Mutex) joinWake(ctx context.Context) bool {
	c := m.core
	c.mu.Lock()
	w := c.wakers[m.name]
	if w != nil && w.listener != nil {
		w.n++
		c.wakeChans[m.channel]++
		if w.idle != nil {
			w.idle.Stop()
			w.idle = nil
		}
		c.mu.Unlock()
		return true
	}
	c.mu.Unlock()
	lk, err := c.Hub.ListenAndWait(ctx, m.channel, func() {})
	if err != nil {
		return false
	}
	l, err := c.listenWake(ctx, m)
	if err != nil {
		lk.Leave(false)
		return false
	}
	c.mu.Lock()
	w = c.wakers[m.name]
	if w == nil {
		w = &waker{}
		c.wakers[m.name] = w
	}
	w.n++
	c.wakeChans[m.channel]++
	if w.idle != nil {
		w.idle.Stop()
		w.idle = nil
	}
	var extra, extraLock waiter
	if w.listener == nil && c.CheckOpen() == nil {
		w.listener, w.lock = l, lk
	} else {
		extra, extraLock = l, lk // another waiter made it first
	}
	c.mu.Unlock()
	if extra != nil {
		extra.Leave(false)
		extraLock.Leave(false)
	}
	return true
}

// leaveWake undoes joinWake; gaveUp says the waiter ends without the
// lock. When the last waiter of the Client gives up, the Client leaves the
// registry at once: no release picks it to wake any more (one that
// already did finds it listening, and it hands the wake-up on). The
// listener stays wakeTTL more (a registration may have been made by an
// attempt in flight as the waiter gave up, and last that long), to hand
// on what reaches it meanwhile, then goes.
func (m *Mutex) leaveWake(ctx context.Context, gaveUp bool) {
	c := m.core
	c.mu.Lock()
	w := c.wakers[m.name]
	if w == nil {
		c.mu.Unlock()
		return
	}
	w.n--
	if c.wakeChans[m.channel]--; c.wakeChans[m.channel] <= 0 {
		delete(c.wakeChans, m.channel)
	}
	if w.n > 0 || c.CheckOpen() != nil {
		c.mu.Unlock()
		return
	}
	w.idle = time.AfterFunc(wakeTTL, func() {
		c.mu.Lock()
		if c.wakers[m.name] != w || w.n > 0 {
			c.mu.Unlock()
			return
		}
		delete(c.wakers, m.name)
		l, lk := w.listener, w.lock
		c.mu.Unlock()
		if l != nil {
			l.Leave(false)
			lk.Leave(false)
		}
	})
	c.mu.Unlock()
	if gaveUp {
		// A waiter that joins meanwhile registers again with its next
		// attempt, within wakeCap*2 (see wakeRetry). The Client's grantees
		// entry goes with its registration: the grantees hash lives as
		// long as its latest entry, so an entry left behind would stay
		// while other Clients wait.
		ctx, cancel := cleanupContext(ctx)
		c.RDB.DoMulti(ctx, c.leaveCmds(m.name)...)
		cancel()
	}
}

// woken is the listener of the Client's wake channel for m's lock: it
// wakes one local waiter of the lock, and hands the wake-up on when there
// is none. It runs on the pub/sub reader goroutine and does not block.
func (m *Mutex) woken() {
	c := m.core
	if c.Hub.WakeOne(m.channel) {
		return
	}
	c.mu.Lock()
	if c.CheckOpen() != nil {
		c.mu.Unlock()
		return
	}
	c.background.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.background.Done()
		ctx, cancel := context.WithTimeout(c.root, releaseTimeout)
		defer cancel()
		_ = lua.LockWake.Exec(ctx, c.RDB, []string{m.name, m.channel, m.wakers},
			[]string{layout.UnlockMessage, c.publish, layout.WakeChannelPrefix(m.name), c.numsub, c.ID}).Error()
	}()
}

// stopWakers ends every registration (Close): the Client leaves each
// lock's registry at once, so that no release picks it to wake, and its
// listeners and timers end. (A Client that dies without Close is dropped
// by the next release that finds its wake channel without a subscriber.)
func (c *Core) stopWakers() {
	c.mu.Lock()
	var ls []waiter
	var leave rueidis.Commands
	for name, w := range c.wakers {
		if w.idle != nil {
			w.idle.Stop()
		}
		if w.listener != nil {
			ls = append(ls, w.listener, w.lock) // the lock's channel after the wake channel
		}
		leave = append(leave, c.leaveCmds(name)...)
		delete(c.wakers, name)
	}
	clear(c.wakeChans)
	c.mu.Unlock()
	if len(leave) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		c.RDB.DoMulti(ctx, leave...)
		cancel()
	}
	for _, l := range ls {
		l.Leave(false)
	}
}

// leaveCmds are the commands that take the Client out of the wake
// registry of the lock name: its registration, and its grantees entry
// (see remotegrant.go) when it may have one.
func (c *Core) leaveCmds(name string) rueidis.Commands {
	cmds := rueidis.Commands{c.RDB.B().Zrem().Key(layout.Wakers(name)).Member(c.ID).Build()}
	if !c.noGrant {
		cmds = append(cmds, c.RDB.B().Hdel().Key(layout.Grantees(name)).Field(c.ID).Build())
	}
	return cmds
}

// wakeRetry caps a registered waiter's sleep: see the notes above.
func wakeRetry(retry time.Duration) time.Duration {
	limit := wakeCap + rand.N(wakeCap)
	if retry <= 0 || retry > limit {
		return limit
	}
	return retry
}

// withWake appends to the keys and args of a release by r the wake-one
// registry key and arguments (lock_unlock.lua's KEYS[3], ARGV[6..10]),
// and returns them unchanged without wake-one: the script reads missing
// ones as off, and a release sends fewer bytes. Callers make keys and args
// with room for the additions, so that wake-one costs no allocation. The
// arguments say whether this Client has a waiter for the lock (else waking
// it would only hand the wake-up on).
func (c *Core) withWake(r Request, keys, args []string) ([]string, []string) {
	if !c.wakeOne {
		return keys, args
	}
	waiting := "0"
	c.mu.Lock()
	if w := c.wakers[r.Name]; w != nil && w.n > 0 {
		waiting = "1"
	}
	c.mu.Unlock()
	return append(keys, r.Wakers),
		append(args, layout.WakeChannelPrefix(r.Name), c.numsub, layout.RegistrantWokenMessage, c.ID, waiting)
}

// withKnock appends to the keys and args of an acquisition by r (after
// withJoin's) the record of refused clients and the caller's client ID
// with the record's lifetime, putting the lock's key and empty strings
// in the place of the registration when r does not register: an attempt
// that finds the lock held by another records the Client as refused (see
// layout.Knocks and lock_acquire.lua), so that another Client's releases
// do not grant the lock to their own waiters while this one may want it.
// Only callers that hear no release knock: a call that does not wait
// (TryLock with no wait) and a spin lock's waiter. A waiting call of a
// Lock or a FencedLock subscribes to the lock's channel, where a release
// counts it (when both Clients use the same kind of pub/sub).
func (c *Core) withKnock(r Request, keys, args []string) ([]string, []string) {
	if !r.Join {
		keys, args = append(keys, r.Name), append(args, "", "")
	}
	return append(keys, layout.Knocks(r.Name)), append(args, c.ID, knockTTLArg)
}

// KnockTTL is how long a Client refused a plain or fenced lock stays
// recorded as wanting it (see layout.Knocks): another Client's releases
// publish instead of granting to their own waiters for that long. It is
// far over a spin waiter's longest sleep between attempts (SpinMax), and
// leaves a caller that polls with TryLock room between its tries.
const KnockTTL = 2500 * time.Millisecond

var knockTTLArg = strconv.FormatInt(KnockTTL.Milliseconds(), 10)

// withJoin appends to the keys and args of an attempt by r the wake-one
// registry key and the registration arguments (the client ID and the
// registration's lifetime) when r registers, and returns them unchanged
// when it does not (callers make room, as for withWake). With r.Grantee,
// the grantees key and the entry follow, after the place of the knocks
// (the key and two empty strings: a registering call does not knock).
func (c *Core) withJoin(r Request, keys, args []string) ([]string, []string) {
	if !r.Join {
		return keys, args
	}
	if r.Grantee != "" {
		return append(keys, r.Wakers, r.Name, layout.Grantees(r.Name)),
			append(args, c.ID, wakeTTLArg, "", "", r.Grantee)
	}
	return append(keys, r.Wakers), append(args, c.ID, wakeTTLArg)
}
