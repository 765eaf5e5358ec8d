package lockcore

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/pubsub"
)

// Grant on release across Clients (wake-one with grants on: Config.WakeOne
// without Config.NoGrant). grant.go hands a lock to a waiter of the
// releasing Client; wake-one (wake.go) wakes one registered Client, which
// then sends an attempt. Together, the release hands the lock to the
// registered Client's waiter itself, and its message is the grant:
//
//   - A waiting call's refused attempt that registers its Client also
//     records, in the lock's grantees (layout.Grantees: client ID ->
//     "<kind> <window> <stamp> <field>"), that a release may grant the
//     lock to it: its field, its kind (a fenced lock's hold takes a
//     token; the letter's case is the name's form, see grantPlain), its
//     confirmation window (grantWindowFor its lease) and a
//     stamp, the Client's own clock when the attempt was sent (ms since
//     the Core was made). Only a call whose owner holds nothing of the
//     lock records one, as only such a call offers itself to its Client's
//     releases (grant.go). A Client that waits for replicas (a fixed
//     number, or the server has replicas and it counts them) records
//     none: a grant is not confirmed on them. The entry goes with the
//     registration: when the Client leaves the registry (leaveWake,
//     stopWakers) or a release drops it (wake.lua), so that entries do
//     not pile up in a hash that other Clients' attempts keep alive.
//   - A release that frees the lock and picks a registered Client to wake
//     (its turn) grants the lock to the waiter that Client's entry names,
//     instead of waking it, when every subscriber of the lock's channel
//     is a live registration (no Redisson waiter, no Client without
//     wake-one, no relock top: a registered Client subscribes to the
//     lock's channel while it listens on its wake channel, see waker), no
//     Client knocked lately, and the entry is one a Client could have
//     written for the released name (its own field, a kind in the
//     name's form, a window of at most grantWindow).
//     The waiter's field is written with the window as its lease, the
//     entry is used up, and the grant message ("g <kind> <token> <stamp>
//     <field>") goes to the Client's wake channel, and nothing to the
//     lock's channel: the server writes to the caller and to the granted
//     Client only, not to every subscriber, before the waiter goes on
//     (lock_unlock.lua). The granted Client then publishes the mark
//     GrantedMessage there for those who watch the lock (tellGranted).
//     When the turn is the releasing Client's own and the release carries
//     a claimed offer (grant.go), that offer's waiter is granted, the
//     release publishes the mark, and its reply says so as for any grant
//     to its own waiter.
//   - The Client that hears the grant hands it to the waiter it names
//     when that waiter's call still sleeps on the offer its attempt was
//     followed by (the entry's stamp is that attempt's), no other call of
//     the owner took the owner's call slot since (a call of the same
//     owner could have taken the granted field over, or settled it
//     away), and less than three quarters of the window have passed since
//     the stamp (a registered waiter attempts again within 2s):
//     the offer is claimed and resolved as granted in one step, and the
//     waiter takes the hold as from its own Client's release, its lease
//     counted from the stamp (an earlier moment than the release's: the
//     Client's end of the hold is never later than Redis's), and the
//     Client confirms it within the window (confirmGrant).
//   - A grant for the entry of the owner's latest attempt that comes
//     before the call acted on that attempt's reply is parked for it
//     (earlyGrant), and landed as above when the call goes to sleep on
//     that attempt; given back when the call goes on otherwise.
//   - Otherwise (the call woke, gave up, attempted again, or is gone; the
//     Client has no waiter left) the Client gives the grant back at once:
//     the owner's count in Redis goes back to what the owner holds, under
//     its call slot (settleOnce), which frees the lock and wakes the next
//     Client when the owner holds nothing, and leaves it when a call of
//     the owner took the granted field over meanwhile (its attempt found
//     the field and kept it, as it keeps a level whose reply was lost).
//   - A Client that died, or closed, between the grant and the message
//     holds the lock for at most the window (grantWindow, 3s): the field's
//     lease. The other Clients' registered waiters try again within
//     2*wakeCap of their last attempt, and find the lock free then.
//
// A release by a Client without wake-one, or with grants off, and
// Redisson's, wake as before; so does any release that finds the
// registered Client without an entry.

// grantFenced and grantPlain are the kinds of hold a grant makes, as the
// grantees entry and the grant message name them.
//
// An entry's kind also says which form of the name its waiter waits for
// (see grantee): lower case for a name without a '{' ("x"), upper case for
// a name that has one ("{x}", "a{b}"). The names "x" and "{x}" share the
// grantees, the wake registry and the channels (layout.OtherForm), and a
// release grants only an entry of its own form: a release of "{x}" that
// granted a waiter of "x" would write its field in the hash "{x}", and
// the waiter's Lock of "x" would return holding nothing of "x"
// (lock_unlock.lua uses such an entry up and wakes the Client instead).
// The grant message names the kind as the entry does.
const (
	grantFenced       = "f"
	grantPlain        = "r"
	grantFencedBraced = "F"
	grantPlainBraced  = "R"
)

// remoteGrants reports whether the Client's releases grant to other
// Clients' registered waiters: wake-one and grants on.
func (c *Core) remoteGrants() bool { return c.wakeOne && !c.noGrant }

// stamp is t on the Client's own clock, in whole ms since the Core was
// made (rounded down: stampTime(stamp(t)) is never after t).
func (c *Core) stamp(t time.Time) int64 { return int64(t.Sub(c.epoch) / time.Millisecond) }

// stampTime is the moment a stamp names.
func (c *Core) stampTime(s int64) time.Time { return c.epoch.Add(time.Duration(s) * time.Millisecond) }

// grantee returns the grantees entry for an attempt of the call sent at
// sent, and records the attempt in the call (its stamp and the owner's
// call slot count), or "" when the call cannot be granted to through the
// registry (a Client that waits for replicas records none: nothing
// confirms a grant on them). The caller holds the owner's call slot and
// is the call's goroutine.
func (a *acquisition) grantee(ctx context.Context, sent time.Time) string {
	c := a.m.core
	if !a.joined || c.noGrant || c.waitsForReplicas(ctx, a.m.name) {
		return ""
	}
	// A name that is its own hash tag says so in its entry's kind, since
	// the name without its braces shares the grantees (see grantPlain).
	braced := layout.SelfTagged(a.m.name)
	var kind string
	switch a.m.kind.(type) {
	case Fenced:
		kind = grantFenced
		if braced {
			kind = grantFencedBraced
		}
	case Reentrant:
		kind = grantPlain
		if braced {
			kind = grantPlainBraced
		}
	default:
		return ""
	}
	stamp := c.stamp(sent)
	if stamp < a.h.nextStamp {
		// An attempt of the owner in the same ms wrote an entry: a grant
		// for the stamp could not tell the two apart, and one of them
		// may have taken the granted field over unseen (its reply lost),
		// leaving a count in Redis the grant's taker does not know of.
		return ""
	}
	a.h.nextStamp = stamp + 1
	a.stamp, a.slots = stamp, a.h.slots.Load()
	window := Millis(grantWindowFor(a.lease))
	a.h.attemptWindow.Store(window)
	a.h.attempting.Store(a.stamp + 1)
	return kind + " " + strconv.FormatInt(window, 10) + " " +
		strconv.FormatInt(a.stamp, 10) + " " + a.h.field
}

// waitsForReplicas reports whether the Client's acquisitions of the lock
// name wait for replicas to confirm them.
func (c *Core) waitsForReplicas(ctx context.Context, name string) bool {
	switch c.replicaMode {
	case ReplicasFixed:
		return c.replicas > 0
	case ReplicasCounted:
		return c.replicaCount(ctx, name).n.Load() > 0
	}
	return false
}

// listenWake subscribes the Client's wake channel for m's lock (see
// joinWake): a message is a wake-up, or a grant.
func (c *Core) listenWake(ctx context.Context, m *Mutex) (*pubsub.Waiter, error) {
	return c.Hub.ListenPayload(ctx, layout.WakeChannelPrefix(m.name)+c.ID, m.wakeMessage, m.woken)
}

// wakeMessage is the listener of the Client's wake channel for m's lock:
// a grant message lands a grant (grantArrived), any other wakes one
// waiter (woken). It runs on the pub/sub reader goroutine and does not
// block.
//
// The names "x" and "{x}" share the wake channel, and a Client waiting on
// both has a listener for each: the grant's kind names the form it is
// for (see grantPlain), whose listener lands it. A listener of the other
// form passes it on only when that form has none (its waiters left): the
// grant is then given back on its own hash.
func (m *Mutex) wakeMessage(payload string) {
	if g, ok := strings.CutPrefix(payload, layout.GrantMessagePrefix); ok {
		if kind, braced, token, stamp, field, ok := parseGrant(g); ok {
			target := m
			if braced != layout.SelfTagged(m.name) {
				target = m.core.otherFormGrantee(m, kind)
			}
			if target != nil {
				m.core.grantArrived(target, kind, token, stamp, field)
			}
			return
		}
	}
	m.woken()
}

// otherFormGrantee returns a handle on the other form of m's name (of
// kind kind) for a grant to it that m's listener heard, or nil when the
// Client listens on that form itself (its listener lands the grant) or
// the name has no other form.
func (c *Core) otherFormGrantee(m *Mutex, kind Kind) *Mutex {
	other, ok := layout.OtherForm(m.name)
	if !ok {
		return nil
	}
	c.mu.Lock()
	w := c.wakers[other]
	listens := w != nil && w.listener != nil
	c.mu.Unlock()
	if listens {
		return nil
	}
	return NewMutex(c, other, kind)
}

// parseGrant reads a grant message after its prefix: "<kind> <token>
// <stamp> <field>"; braced reports the kind in upper case (a grant for
// a name with a '{').
func parseGrant(g string) (kind Kind, braced bool, token, stamp int64, field string, ok bool) {
	k, rest, ok1 := strings.Cut(g, " ")
	t, rest, ok2 := strings.Cut(rest, " ")
	s, field, ok3 := strings.Cut(rest, " ")
	if !ok1 || !ok2 || !ok3 || field == "" {
		return nil, false, 0, 0, "", false
	}
	switch k {
	case grantPlain, grantPlainBraced:
		kind = Reentrant{}
	case grantFenced, grantFencedBraced:
		kind = Fenced{}
	default:
		return nil, false, 0, 0, "", false
	}
	braced = k == grantPlainBraced || k == grantFencedBraced
	token, err1 := strconv.ParseInt(t, 10, 64)
	stamp, err2 := strconv.ParseInt(s, 10, 64)
	if err1 != nil || err2 != nil {
		return nil, false, 0, 0, "", false
	}
	return kind, braced, token, stamp, field, true
}

// grantArrived lands a grant through the registry: to the waiter it names
// when that waiter may take it, else given back (see the notes above).
func (c *Core) grantArrived(m *Mutex, kind Kind, token, stamp int64, field string) {
	sent := c.stampTime(stamp)
	c.mu.Lock()
	if c.CheckOpen() != nil {
		// The granted hold ends with its window.
		c.mu.Unlock()
		return
	}
	for _, o := range c.offers[grantKey{m.name, kind}] {
		// The owner may have several calls asleep: the entry is the
		// latest attempt's, whose offer is the owner's last.
		if o.a.h.field != field {
			continue
		}
		if c.takesGrantLocked(o, stamp, sent) {
			// Claimed and resolved in one step: the waiter never sees
			// the offer claimed, so it never leaves a give-back to this
			// goroutine (the pub/sub reader's, which must not wait on
			// Redis): a call that ends now gives the grant back itself
			// (takeGrant).
			done := c.landOfferLocked(o, token, sent)
			c.mu.Unlock()
			c.grantLanded(m, done)
			return
		}
	}
	owner, ok := strings.CutPrefix(field, c.ID+":")
	if !ok || m.suffix != "" {
		c.mu.Unlock()
		return
	}
	// Parked for the call whose attempt wrote the entry, when its reply
	// has not been acted on yet (see earlyGrant). earlyN is counted
	// before the look at the owner's attempt: a call that stops waiting
	// for its reply's grant then either is seen doing so here, or sees
	// the count and collects what is parked (takeEarly).
	c.earlyN.Add(1)
	if h := c.holds[m.holdKey(owner)]; h != nil && h.attempting.Load() == stamp+1 && c.early[h].m == nil {
		// Parked no longer than a sleeping call's offer would take it
		// (see takesGrantLocked): a call that is slow to come for it
		// (its goroutine not run, a short fixed lease's window) would
		// otherwise find it too old, when its field had expired in
		// Redis unheard, and every waiter slept on past a free lock.
		window := time.Duration(h.attemptWindow.Load()) * time.Millisecond
		if d := time.Until(sent.Add(window * 3 / 4)); d > 0 {
			if c.early == nil {
				c.early = make(map[*hold]earlyGrant)
			}
			e := earlyGrant{m: m, kind: kind, token: token, stamp: stamp, sent: sent}
			e.timer = time.AfterFunc(d, func() { c.parkTimeout(h, stamp, sent) })
			c.early[h] = e
			grantsParked.Add(1)
			c.mu.Unlock()
			return
		}
	}
	c.earlyN.Add(-1)
	c.returnGrantLocked(m, owner)
	c.mu.Unlock()
}

// takesGrantLocked reports whether the sleeping call of offer o takes a
// grant through the registry made for its entry of stamp stamp, sent at
// sent (see the notes above): the offer follows that attempt, no call of
// the owner took its call slot since, the owner has no settle or grant in
// progress, and less than three quarters of the window have passed.
// c.mu is held.
func (c *Core) takesGrantLocked(o *grantOffer, stamp int64, sent time.Time) bool {
	a := o.a
	return o.stamp == stamp && a.h.slots.Load() == o.slots && a.h.want == 0 && a.h.settling == 0 &&
		time.Since(sent) < grantWindowFor(a.lease)*3/4
}

// landOfferLocked resolves the open offer o as granted, by a grant through
// the registry with token token sent at sent, and returns its channel,
// for the caller to close once c.mu is let go (grantLanded). c.mu is held.
func (c *Core) landOfferLocked(o *grantOffer, token int64, sent time.Time) chan struct{} {
	a := o.a
	o.gen = a.h.gen
	a.h.granting++
	o.counted = a.h
	c.dropOfferLocked(o)
	o.state = offerResolved
	o.granted, o.unknown, o.token, o.sent, o.unsynced = true, false, token, sent, nil
	c.background.Add(1) // for tellGranted
	return o.done
}

// grantLanded lets the waiter of an offer resolved by landOfferLocked go
// on (closes done), and publishes the mark of the grant.
func (c *Core) grantLanded(m *Mutex, done chan struct{}) {
	// Counted before the waiter goes on: a test reads the count once its
	// call returned.
	grantsLanded.Add(1)
	close(done)
	go c.tellGranted(m.channel)
}

// returnGrantLocked gives back, in the background, a grant through the
// registry to owner that no call of the Client takes. c.mu is held.
func (c *Core) returnGrantLocked(m *Mutex, owner string) {
	c.background.Add(1)
	grantsReturned.Add(1)
	go func() {
		defer c.background.Done()
		h := c.enterGrantee(m, owner)
		r := Request{Core: c, Name: m.name, Field: h.field, LeaseMs: Millis(c.WatchdogTimeout),
			LeaseArg: c.watchdogArg, Chan: m.channel, Wakers: m.wakers}
		c.giveBackGone(m, h, r, grantWindow, true)
	}()
}

// earlyGrant is a grant through the registry that reached the Client
// before its waiter's call acted on the reply to the attempt whose
// entry the grant answers. The server answered that attempt before it ran
// the release, but the reply and the grant come on different connections,
// and the Client may read the grant first: the call has no offer yet.
// Such a grant is parked for the call (Core.early, under the owner's
// hold record) instead of given back: when the call then sleeps and
// offers itself for that attempt, it takes the grant at once, as if it
// had come a moment later (offerGrant); a call that goes on otherwise
// (it attempts again, or ends) gives it back (takeEarly). A grant is
// parked only while the owner's latest attempt is the one it answers
// (hold.attempting), and no longer than three quarters of that attempt's
// window from its stamp (as an offer takes it): then it is given back
// (parkTimeout), before its field can expire in Redis unheard.
type earlyGrant struct {
	m     *Mutex // nil: no grant
	kind  Kind
	token int64
	stamp int64
	sent  time.Time
	timer *time.Timer // gives it back when no call came for it in time
}

// parkTimeout gives back the grant parked for h's attempt of stamp stamp
// if it is still parked: no call came for it within three quarters of
// its window, after which a sleeping call would not take it either.
func (c *Core) parkTimeout(h *hold, stamp int64, sent time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.early[h]
	if !ok || e.stamp != stamp || !e.sent.Equal(sent) {
		return
	}
	delete(c.early, h)
	c.earlyN.Add(-1)
	c.giveBackEarlyLocked(e, h)
}

// takeEarlyLocked is the point where the call stops waiting for a grant
// of its latest attempt's entry without an offer: it sleeps (offered or
// not), or ends. It returns the grant parked for that entry when claim is
// set and the call may take it (its kind, an open Client); else it gives
// back that grant, and any parked grant no call of the owner can take any
// more (of an earlier attempt). c.mu is held.
func (a *acquisition) takeEarlyLocked(claim bool) *earlyGrant {
	c := a.m.core
	if !a.replyActedOn() {
		return nil
	}
	e, ok := c.early[a.h]
	if !ok {
		return nil
	}
	mine := a.stamp >= 0 && e.stamp == a.stamp
	if !mine && a.h.attempting.Load() == e.stamp+1 {
		return nil // another call of the owner's, which will come for it
	}
	delete(c.early, a.h)
	c.earlyN.Add(-1)
	e.timer.Stop()
	if mine && claim && e.kind == a.m.kind && c.CheckOpen() == nil {
		return &e
	}
	c.giveBackEarlyLocked(e, a.h)
	return nil
}

// dropEarly is takeEarlyLocked(false) for a call that does not hold c.mu:
// it takes c.mu only when a grant may be parked. A grant that arrives
// meanwhile is either parked before the call's entry stops counting (and
// then seen in earlyN here) or not parked at all (see grantArrived).
func (a *acquisition) dropEarly() {
	if !a.replyActedOn() {
		return
	}
	c := a.m.core
	c.mu.Lock()
	a.takeEarlyLocked(false)
	c.mu.Unlock()
}

// replyActedOn marks the call's latest entry as no longer awaiting its
// attempt's reply (a grant for it that comes later is not parked), and
// reports whether a grant may be parked in the Client. The order matters
// without c.mu: see grantArrived.
func (a *acquisition) replyActedOn() bool {
	if a.stamp >= 0 {
		a.h.attempting.CompareAndSwap(a.stamp+1, 0)
	}
	return a.m.core.earlyN.Load() != 0
}

// giveBackEarlyLocked gives back a parked grant that no call takes; on a
// closed Client the granted hold ends with its window. c.mu is held.
func (c *Core) giveBackEarlyLocked(e earlyGrant, h *hold) {
	if c.CheckOpen() == nil {
		c.returnGrantLocked(e.m, h.key.owner)
	}
}

// tellGranted publishes the mark of a grant (layout.GrantedMessage) on
// the lock's channel, for those who watch it (a Watch, relock top): the
// release that granted the lock through the registry published nothing
// there. The caller counted it in c.background.
func (c *Core) tellGranted(channel string) {
	defer c.background.Done()
	ctx, cancel := context.WithTimeout(c.root, releaseTimeout)
	defer cancel()
	cmd := c.RDB.B().Publish().Channel(channel).Message(layout.GrantedMessage).Build()
	if c.publish != "publish" {
		cmd = c.RDB.B().Spublish().Channel(channel).Message(layout.GrantedMessage).Build()
	}
	_ = c.RDB.Do(ctx, cmd).Error()
}

// enterGrantee is enter for the owner of a grant that the Client gives
// back, so that the give-back and every call of the owner on m's lock
// share one record (its call slot): the owner's record of the lock when
// one is in use; else, for an owner of an ownerless acquisition that
// ended, its free record, taken out of the free list (enterAnon does not
// reuse the owner for the lock while it is in use here); else a new one.
func (c *Core) enterGrantee(m *Mutex, owner string) *hold {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.holds[m.holdKey(owner)] == nil {
		for i, h := range c.anonFree {
			if h.key.owner == owner {
				c.anonFree = slices.Delete(c.anonFree, i, i+1)
				c.adoptAnonLocked(h, m)
				return h
			}
		}
	}
	r, _ := m.kind.(KindRenewer)
	return c.enterFieldLocked(m.holdKey(owner), "", r, m.shared, m)
}

// grantsLanded and grantsReturned count the grants through the registry
// that the process's Clients handed to their waiters, and gave back;
// grantsParked those that came early and were parked (see earlyGrant).
var grantsLanded, grantsReturned, grantsParked atomic.Int64

// GrantsLanded is the number of grants made by another Client's release
// (through the wake-one registry) that a Client of the process handed to
// its waiter; GrantsReturned the number it gave back. For the tests.
func GrantsLanded() int64 { return grantsLanded.Load() }

// GrantsReturned: see GrantsLanded.
func GrantsReturned() int64 { return grantsReturned.Load() }

// GrantsParked is the number of grants through the registry that reached
// a Client of the process before its waiter had read its attempt's
// reply, and were kept for it (see earlyGrant). For the tests.
func GrantsParked() int64 { return grantsParked.Load() }
