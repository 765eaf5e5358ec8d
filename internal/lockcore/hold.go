package lockcore

import (
	"context"
	"errors"
	"fmt"
	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/layout"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/observe"
	"github.com/relock-go/relock/watchdog"
)

// holdKey names a hold record: a lock, a role's field suffix (see Role:
// an owner's read and write holds of one read-write lock are two records),
// an owner of this Client, and whether the role is shared. A read lock
// and a plain, fenced or fair lock of one name have the same fields
// ("<clientID>:<owner>"), but they are two kinds of lock, renewed and
// released by scripts of their own, and Redis holds at most one of them
// (each kind refuses the other's hash): each has its own record, so that
// a hold is never renewed or settled as the other kind's.
type holdKey struct {
	name, suffix, owner string
	shared              bool
}

// holdKey is the key of owner's record of a hold of m.
func (m *Mutex) holdKey(owner string) holdKey {
	return holdKey{m.name, m.suffix, owner, m.shared}
}

// hold is this Client's record of one owner's hold on one lock: the one
// place where a hold's state lives. A hold is a small state machine:
//
//	free --grant--> held (want >= 1) --release to 0--> free (ends, cause nil)
//	                  |   ^ grant, partial release
//	                  +--loss (a renewal, re-entry or unlock found it
//	                  |        gone; ForceUnlock; the fixed lease of a
//	                  |        watched hold ran out)--> free (ends, relock.ErrLockLost)
//	                  +--Close--> ended (ends, relock.ErrClosed)
//
// want is the number of levels the owner was granted and has not
// released: successful acquisitions minus unlocks. Redis' count of the
// field is want, except after a call whose reply was lost: every script
// that changes a hold brings the count to a target made from want (one
// HINCRBY from where want puts it, or set when it is elsewhere), so the
// next call brings Redis back in line.
//
// sem makes the Redis calls that change the hold go one at a time, so
// that want is exact when a script is built from it, also when several
// goroutines share one owner.
//
// gen numbers the holds of the record: a call remembers the gen it saw,
// and a loss or a grant meant for an earlier hold changes nothing.
//
// life is a context that lives from the first level to the end of the
// hold; context.Cause tells how it ended. It is made when someone asks
// for it (HoldContext, Done, Do, MultiLock), so a hold nobody watches
// costs no context (and, on a fixed lease, no timer: see
// armExpiryLocked). Done channels, Do's function context and MultiLock's
// watch hang on it with context.AfterFunc: watching costs no goroutine.
//
// renewal is the hold's registration with the watchdog while it is on the
// watchdog lease (the mode of the latest acquisition: a re-entry resets
// the lease, as in Redisson); spare keeps a stopped one for the next hold.
//
// Fields other than sem are guarded by Core.mu. A record stays in
// Core.holds while it holds levels or a call uses it, and idle afterwards
// until enough idle records pile up to be swept (sweepIdleLocked), so an
// owner that takes the same lock again and again allocates nothing. An
// anonymous owner's record is forgotten as soon as it is idle (see leave),
// and its watchdog registration goes to the next hold that needs one.
type hold struct {
	core  *Core
	key   holdKey
	field string // "<clientID>:<owner>" and the role's suffix; a permit's ID
	// renewer renews the hold on the watchdog lease (nil:
	// lock_renew.lua; see KindRenewer).
	renewer KindRenewer
	// mutex is a handle on the lock, for the release that settles a hold
	// lost when no renewal answered in time (see settleReserved); nil for
	// a permit.
	mutex *Mutex

	sem chan struct{}
	// slots counts the times the call slot (sem) was taken: a grant
	// through the registry is taken only if no call took it since the
	// attempt it answers (see remotegrant.go).
	slots atomic.Uint64
	// attempting is the stamp plus one of the grantees entry of the
	// owner's latest attempt, until the call that sent it acted on its
	// reply (0: none): a grant through the registry for that entry that
	// comes before is parked for the call (see earlyGrant).
	attempting atomic.Int64
	// attemptWindow is the grant window (ms) of that entry, set before
	// attempting: a grant parked for it is given back before its window
	// runs out (see parkTimeout).
	attemptWindow atomic.Int64
	// nextStamp is one past the stamp of the owner's latest grantees
	// entry: each entry of the owner has its own stamp (see grantee).
	// Under the call slot.
	nextStamp int64

	want     int
	gen      uint64
	lease    time.Duration // of the latest acquisition; reset by partial releases
	leaseArg string        // lease in whole ms, as the scripts take it
	renewal  *renewal      // nil unless on the watchdog lease
	spare    *renewal      // a stopped registration, for the next arming
	life     context.Context
	end      context.CancelCauseFunc
	anonKey  string // set while the hold is one of the Client's anonymous holds of its lock
	listener waiter // hears force-unlocks while the hold is watched (see watch)
	users    int    // calls using the record
	// heard is set when a message heard on the lock's channel (where a
	// force-unlock is published) brought the hold's renewal forward, and
	// cleared by the next renewal sent (see Core.renew): a loss that
	// renewal finds was heard of. A renewal that finds the hold there
	// clears it, so that a message that was no force-unlock (a re-entry
	// that shortened the lease publishes one) does not mark a later loss.
	// A renewal brought forward because a message may have been missed
	// (the channel's subscription made) does not set it.
	heard atomic.Bool
	// shared: the lock's role may be held by several owners at once (see
	// Role.Shared). (The record's flags are kept together: a waiting call
	// keeps the record, and it is kept small.)
	shared    bool
	listening bool // set from the moment a listener is being made
	// anonymous marks the record of an ownerless acquisition, reused once
	// idle (see enterAnon).
	anonymous bool
	// fixed: the latest acquisition took a fixed lease (the hold is not
	// on the watchdog). leaseAt is when that lease was last set, as the
	// Client knows it: the send of the acquisition, re-entry or partial
	// release that set it and answered (Redis counts the lease from a
	// moment after). leaseMax is the latest the hold may last in Redis:
	// the latest end that any script of the hold sent may have set,
	// answered or not (see settleUntilLocked).
	fixed    bool
	leaseAt  time.Time
	leaseMax time.Time
	// grantSent is the send of the attempt that granted the hold (its
	// first level): of two holds of one lock whose grants Redis gave,
	// the one sent later was granted later (see replacedAnonLocked).
	grantSent time.Time
	// expiry ends the hold at leaseAt + lease while it is watched (its
	// life was made) on a fixed lease: see armExpiryLocked.
	expiry *time.Timer
	// lost is the cause of the record's last hold's end by loss, kept
	// until a release of the owner learns of it (takeLoss) or a new hold
	// begins.
	lost error
	// finishing counts ended holds whose renewal is still being stopped
	// (see endLocked): until it is, a renewal may be reading the record's
	// name and field, so the record is not idle and cannot be reused.
	finishing int
	// granting counts releases that claimed an offer of a call of the
	// record (see claimGrant) and whose grant the call has not landed
	// yet: until it has, the owner's count in Redis may be a level the
	// record does not show (want), and settleOnce, which sets the count
	// to want, sends nothing. settling counts settleOnce's sends in
	// flight: a release claims no offer of the record meanwhile (the
	// settle read want before the grant, and may run after it).
	granting int32
	settling int32
	// replaced is the gen + 1 of a hold that a later anonymous hold of
	// the Client took the lock from while a call was using the record
	// (0: none). The call in flight (most often the hold's own Unlock,
	// whose release let the later hold in) settles the hold; if it left
	// without doing so, the last user to leave ends it as lost (see
	// leftLocked).
	replaced uint64
	// granted is made for waiting calls of the owner, and closed at the
	// next grant, so that they re-enter at once.
	granted chan struct{}
	// confirmT confirms a hold that a release granted, within its
	// window (see confirmGrant).
	confirmT   *time.Timer
	confirmGen uint64 // the hold confirmT confirms
	// confirmBy is, until a granted hold's lease is confirmed, the end
	// of its window: the latest its lease in Redis surely lasts (zero
	// once confirmed, or for a hold no release granted).
	confirmBy time.Time

	// obs is for the Client's observer, if it has one (observe.go).
	obs *holdObs
}

// renewal is one registration of a hold with the watchdog. A loss report
// counts only while it is the hold's current renewal.
type renewal struct {
	h      *hold
	lease  *watchdog.Lease
	onLost func(cause error) // r.lost, made once
}

// minSweep is the number of records below which idle ones are kept.
const minSweep = 4096

// enter returns the record of owner's hold on name in the role with
// field suffix suffix, a lock of kind k (shared: see Role.Shared), making
// it if needed, and counts the caller as a user until leave.
func (c *Core) enter(m *Mutex, owner string) *hold {
	r, _ := m.kind.(KindRenewer)
	return c.enterField(m.holdKey(owner), "", r, m.shared, m)
}

// enterField is enter for a record whose field is field (when not
// empty) instead of "<clientID>:<owner><suffix>", renewed by r, on the
// lock of m (nil: a permit).
func (c *Core) enterField(key holdKey, field string, r KindRenewer, shared bool, m *Mutex) *hold {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.enterFieldLocked(key, field, r, shared, m)
}

// enterFieldLocked is enterField with c.mu held.
func (c *Core) enterFieldLocked(key holdKey, field string, r KindRenewer, shared bool, m *Mutex) *hold {
	h := c.holds[key]
	if h == nil {
		if len(c.holds) >= c.sweepAt {
			c.sweepIdleLocked()
		}
		if field == "" {
			field = layout.Field(c.ID, key.owner) + key.suffix
		}
		h = &hold{core: c, key: key, field: field, renewer: r, shared: shared, mutex: m, sem: make(chan struct{}, 1)}
		c.holds[key] = h
	}
	h.users++
	return h
}

// enterAnon is enter for a fresh anonymous owner of the Client: the
// record of an ownerless acquisition. It reuses the record, and so the
// owner, of an earlier anonymous hold that ended, when there is one: no
// call can reach that owner any more (it never left the Client: only the
// Client's map of anonymous holds named it, and it was dropped from there
// when the hold ended), so it is as fresh as a new one, and taking the
// same lock again with it only finds in Redis what that owner may have
// left, which was the Client's own. It saves the record, its owner and its
// field on the way of every ownerless Lock. A free record whose owner
// has a record of m's lock in use (a grant to it being given back, see
// enterGrantee) is dropped instead.
func (c *Core) enterAnon(m *Mutex) *hold {
	c.mu.Lock()
	for n := len(c.anonFree); n > 0; n = len(c.anonFree) {
		h := c.anonFree[n-1]
		c.anonFree[n-1] = nil
		c.anonFree = c.anonFree[:n-1]
		if c.holds[m.holdKey(h.key.owner)] == nil {
			c.adoptAnonLocked(h, m)
			c.mu.Unlock()
			return h
		}
	}
	c.mu.Unlock()
	// The owner is the tail of the field: one string for both.
	field := layout.Field(c.ID, c.anonymousOwner()) + m.suffix
	owner := field[len(c.ID)+1 : len(field)-len(m.suffix)]
	r, _ := m.kind.(KindRenewer)
	h := c.enterField(m.holdKey(owner), field, r, m.shared, m)
	c.mu.Lock()
	h.anonymous = true
	c.mu.Unlock()
	return h
}

// adoptAnonLocked makes h, a free record of an ownerless acquisition
// (taken out of Core.anonFree), the record of its owner's hold of m's
// lock, in use once. c.mu is held.
func (c *Core) adoptAnonLocked(h *hold, m *Mutex) {
	if h.key.suffix != m.suffix {
		h.field = layout.Field(c.ID, h.key.owner) + m.suffix
	}
	h.key.name, h.key.suffix, h.key.shared = m.name, m.suffix, m.shared
	h.renewer, _ = m.kind.(KindRenewer)
	h.shared, h.mutex = m.shared, m
	h.users = 1
	c.holds[h.key] = h
}

// maxAnonFree bounds Core.anonFree.
const maxAnonFree = 256

// findAnon is find for the Client's latest anonymous hold of m: its owner
// ("" when there is none) and its record (nil when there is none).
func (c *Core) findAnon(m *Mutex) (string, *hold) {
	c.mu.Lock()
	defer c.mu.Unlock()
	owner, ok := c.anon[m.anonKey]
	if !ok {
		owners := c.anonShared[m.anonKey]
		if len(owners) == 0 {
			return "", nil
		}
		owner = owners[len(owners)-1]
	}
	h := c.holds[m.holdKey(owner)]
	if h != nil {
		h.users++
	}
	return owner, h
}

// find is enter for a record that exists: nil when this Client has none.
func (c *Core) find(key holdKey) *hold {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.holds[key]
	if h != nil {
		h.users++
	}
	return h
}

// leave ends a use of h begun by enter or find. The record of an
// anonymous owner's hold is forgotten as soon as it is idle: the owner
// never comes back (every ownerless Lock makes a new one), and a lock
// taken and released again and again would otherwise fill the map with
// records to sweep.
func (c *Core) leave(h *hold) {
	c.mu.Lock()
	h.users--
	gen, lost := h.leftLocked()
	c.tidyLocked(h)
	c.mu.Unlock()
	if lost != nil {
		h.lose(gen, lost)
	}
}

// tidyLocked forgets h if it is idle and the record of an anonymous owner
// or of a permit, which never come back (see leave). c.mu is held.
func (c *Core) tidyLocked(h *hold) {
	// The record of a permit, or of an owner that relock made up (a
	// Hold's without an owner in its context, Do's), stays while its loss
	// is untold (see takeLoss), so that the release says it was lost as
	// it does for an owner given with WithOwner; a sweep forgets it all
	// the same. An ownerless Lock's record tells its loss through
	// Core.anonLost instead. A made-up owner that comes back (ReusedOwner)
	// keeps its record, as a given one does.
	if h.idle() && (h.anonymous || (reservedOwner(h.key.owner) && !reusedOwner(h.key.owner) || h.key.suffix == permitSuffix) && h.lost == nil) {
		c.forgetLocked(h)
	}
}

// maxSpares bounds Core.spares.
const maxSpares = 64

// forgetLocked takes the idle record h out of the map, and keeps its
// spare registration for another hold. c.mu is held.
func (c *Core) forgetLocked(h *hold) {
	if c.holds[h.key] != h {
		// Forgotten already (or replaced by a newer record of its key):
		// a record goes into the free list once only.
		return
	}
	delete(c.holds, h.key)
	if h.anonymous && len(c.anonFree) < maxAnonFree {
		// Reused by the next ownerless acquisition, with its spare
		// registration (see enterAnon).
		h.granted, h.lost = nil, nil
		h.heard.Store(false)
		c.anonFree = append(c.anonFree, h)
		return
	}
	if h.spare != nil && len(c.spares) < maxSpares {
		c.spares = append(c.spares, h.spare)
		h.spare = nil
	}
}

// idle reports whether h holds nothing and nothing uses it. c.mu is held.
func (h *hold) idle() bool {
	return h.users == 0 && h.want == 0 && !h.listening && h.renewal == nil && h.finishing == 0
}

// sweepIdleLocked forgets the idle records, and sets when to sweep next:
// when the records have doubled, and never below minSweep. c.mu is held.
func (c *Core) sweepIdleLocked() {
	for _, h := range c.holds {
		if h.idle() {
			c.forgetLocked(h)
		}
	}
	c.sweepAt = max(minSweep, 2*len(c.holds))
}

// acquire takes h's call slot, waiting until ctx ends.
func (h *hold) acquire(ctx context.Context) error {
	select {
	case h.sem <- struct{}{}:
		h.slots.Add(1)
		return nil
	default:
	}
	select {
	case h.sem <- struct{}{}:
		h.slots.Add(1)
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// release gives back h's call slot.
func (h *hold) release() { <-h.sem }

// state returns h's levels and the number of its current hold.
func (h *hold) state() (want int, gen uint64) {
	h.core.mu.Lock()
	defer h.core.mu.Unlock()
	return h.want, h.gen
}

// grantedChan returns a channel closed when the owner is next granted a
// level, so that a waiting call of the same owner re-enters at once.
func (h *hold) grantedChan() <-chan struct{} {
	h.core.mu.Lock()
	defer h.core.mu.Unlock()
	if h.granted == nil {
		h.granted = make(chan struct{})
	}
	return h.granted
}

// errHoldChanged: an acquisition's script answered for a hold that ended
// (lost) while the script was in flight.
var errHoldChanged = errors.New("relock: the hold ended while it was re-entered")

// grant records one more level, won by a script that found the owner at
// from levels of hold gen, sent at sent. lease is the acquisition's lease
// (leaseArg in whole ms), counted from sent; renew puts the hold on the
// watchdog, a fixed lease takes it off (and a watched hold then ends at
// its lease's end, see armExpiryLocked). anonKey, if set, makes the hold
// the Client's latest anonymous hold of its lock. It fails with
// relock.ErrClosed after Close, and with errHoldChanged when the hold was
// lost meanwhile (the caller then acquires anew).
func (h *hold) grant(from int, gen uint64, lease time.Duration, leaseArg string, renew bool, anonKey string,
	sent time.Time) error {
	c := h.core
	c.mu.Lock()
	if c.CheckOpen() != nil {
		c.mu.Unlock()
		return relock.ErrClosed
	}
	if h.want != from || h.gen != gen {
		c.mu.Unlock()
		return errHoldChanged
	}
	var start observe.Hold
	if from == 0 {
		h.gen++
		h.lost = nil
		h.heard.Store(false)
		h.leaseMax = time.Time{}
		h.grantSent = sent
		start = c.obs.holdStartLocked(h)
	}
	h.want++
	h.lease, h.leaseArg, h.fixed = lease, leaseArg, !renew
	h.leaseSetLocked(sent)
	var replaced *hold
	var replacedGen uint64
	var replacedLoss, staleLoss error
	gotGen := h.gen
	if anonKey != "" {
		h.anonKey = anonKey
		if h.shared {
			delete(c.anonLost, anonKey)
			c.anonShared[anonKey] = append(c.anonShared[anonKey], h.key.owner)
		} else {
			var stale bool
			replaced, replacedGen, stale = c.replacedAnonLocked(h, anonKey, sent, !renew)
			switch {
			case stale:
				// The Client's anonymous hold was granted after this one
				// (its reply came first): this one had ended by then. It
				// is reported lost once c.mu is let go; the other stays.
				h.anonKey = ""
				staleLoss = h.loss(whyReplaced, nil)
			default:
				delete(c.anonLost, anonKey)
				if replaced != nil {
					// Described now: once c.mu is let go, the record may
					// end and be reused for another name (lose then
					// ignores it).
					replacedLoss = replaced.loss(whyReplaced, nil)
				}
				c.anon[anonKey] = h.key.owner
			}
		}
	}
	if h.granted != nil {
		close(h.granted)
		h.granted = nil
	}
	var stop *renewal
	switch {
	case renew && h.renewal == nil:
		if err := h.armLocked(); err != nil {
			c.mu.Unlock()
			return err
		}
	case !renew && h.renewal != nil:
		stop, h.renewal = h.renewal, nil
	}
	h.armExpiryLocked()
	c.mu.Unlock()
	if stop != nil {
		h.stopped(stop)
	}
	c.obs.holdStarted(start)
	if replaced != nil {
		replaced.lose(replacedGen, replacedLoss)
	}
	if staleLoss != nil {
		h.lose(gotGen, staleLoss)
	}
	return nil
}

// replacedAnonLocked returns the Client's earlier anonymous hold under
// anonKey, an exclusive role's, that the new anonymous hold h replaces,
// with its gen; nil if there is none. Since h was granted, the earlier
// one is gone from Redis: released by an Unlock that has not settled it
// yet, or lost (its fixed lease ran out, or nobody has been told yet).
// When a call uses its record (that Unlock, most often), the call settles
// it, and the hold is only marked (see hold.replaced); else no call can
// reach it any more, and the caller ends it as lost, or its record would
// stay forever. c.mu is held.
//
// The Client's anonymous hold may also be the later one: two ownerless
// calls on one Client, the first granted on a fixed lease that ran out,
// the second granted then, whose reply the Client took in first. The
// attempt that granted it was sent after the one that granted h (sent):
// stale then reports that h is the hold that ended, and the Client's
// anonymous hold stays. Only a hold on a fixed lease (fixed) can be the
// stale one: a watched hold's lease does not run out between its grant
// and its reply, so when both were granted the other ended first. The
// send times are taken before the attempts reach the connection, and a
// goroutine held up in between sends later than it says: the times are
// compared only where a lease that ran out can explain the order, that
// is on a fixed lease that h's grant, counted from sent, could have
// outlived by now (a later grant of p is seen after it came: a lease
// still running now was running then, and p could not be granted).
func (c *Core) replacedAnonLocked(h *hold, anonKey string, sent time.Time, fixed bool) (p *hold, gen uint64, stale bool) {
	owner := c.anon[anonKey]
	if owner == "" || owner == h.key.owner {
		return nil, 0, false
	}
	p = c.holds[holdKey{h.key.name, h.key.suffix, owner, h.key.shared}]
	if p == nil || p.want == 0 {
		return nil, 0, false
	}
	if fixed && p.grantSent.After(sent) && !time.Now().Before(sent.Add(h.lease)) {
		return nil, 0, true
	}
	if p.users > 0 {
		p.replaced = p.gen + 1
		return nil, 0, false
	}
	return p, p.gen, false
}

// leftLocked is called when a user of h has left: if h was marked
// replaced (see hold.replaced) and the last user left without settling
// it, it returns the hold's gen and the cause of its loss, for lose once
// c.mu is let go; else a nil cause. c.mu is held.
func (h *hold) leftLocked() (uint64, error) {
	if h.replaced == 0 || h.users > 0 {
		return 0, nil
	}
	gen := h.replaced - 1
	h.replaced = 0
	if h.gen != gen || h.want == 0 {
		return 0, nil
	}
	return gen, h.loss(whyReplaced, nil)
}

// armLocked puts h on the watchdog, with the registration of an earlier
// hold if it can be reused: h's own, else one of a forgotten record's. It
// is done under c.mu, so that its loss report (which takes c.mu) sees
// h.renewal set. The first renewal is due a third of the lease from now.
// c.mu is held.
func (h *hold) armLocked() error {
	c := h.core
	r := h.spare
	if n := len(c.spares); r == nil && n > 0 && c.spares[n-1].lease.Duration() == h.lease {
		r = c.spares[n-1]
		c.spares[n-1] = nil
		c.spares = c.spares[:n-1]
		// r is stopped and no report of it is pending: a record keeps a
		// spare only once Stop returned or its loss report has read r.h
		// for the last time (Rearm refuses r while that report is still
		// returning). The watchdog reads r.h only after Rearm, which
		// takes the watchdog's lock after this write.
		r.h = h
	}
	if r != nil && r.lease.Duration() == h.lease && c.Watchdog.Rearm(r.lease) {
		h.spare, h.renewal = nil, r
		return nil
	}
	r = &renewal{h: h}
	r.onLost = r.lost
	l, err := c.Watchdog.Add(h.lease, r, r.onLost)
	if err != nil {
		return relock.ErrClosed
	}
	r.lease = l
	h.renewal = r
	return nil
}

// stopped stops r, a registration taken off h, synchronously, and keeps it
// for the next hold. It must not be called from the watchdog's loss report.
func (h *hold) stopped(r *renewal) {
	r.lease.Stop()
	c := h.core
	c.mu.Lock()
	if h.spare == nil {
		h.spare = r
	}
	c.mu.Unlock()
}

// stopRenewal stops h's watchdog renewal, synchronously: when it returns,
// no renewal of h is in flight or will be sent. It reports whether there
// was one. It must not be called from the watchdog's loss report.
func (h *hold) stopRenewal() bool {
	c := h.core
	c.mu.Lock()
	r := h.renewal
	h.renewal = nil
	c.mu.Unlock()
	if r != nil {
		h.stopped(r)
	}
	return r != nil
}

// rearm puts h back on the watchdog after stopRenewal, if it still holds
// levels of hold gen and nothing armed it meanwhile.
func (h *hold) rearm(gen uint64) {
	c := h.core
	c.mu.Lock()
	defer c.mu.Unlock()
	if h.want == 0 || h.gen != gen || h.renewal != nil {
		return
	}
	_ = h.armLocked() // fails only after Close, which ends the hold anyway
}

// released records a successful release that left remaining levels of
// hold gen. At 0 the hold ends with a nil cause (its life's cause is then
// context.Canceled).
func (h *hold) released(gen uint64, remaining int) (ended bool) {
	if !h.lockCurrent(gen) {
		return false
	}
	if remaining > 0 {
		h.want = remaining
		h.core.mu.Unlock()
		return false
	}
	h.endLocked(observe.OutcomeReleased, nil, false)
	return true
}

// releasedLeave is released, with spare (a registration the caller took
// off h and stopped, or nil) kept for the next hold, and the end of the
// caller's use of h (leave), in one critical section: the way out of an
// Unlock that Redis confirmed. The release was sent at sent: when levels
// remain, it reset the hold's lease.
func (h *hold) releasedLeave(gen uint64, remaining int, spare *renewal, sent time.Time) {
	c := h.core
	c.mu.Lock()
	if spare != nil && h.spare == nil {
		h.spare = spare
	}
	h.users--
	if h.gen != gen || h.want == 0 || remaining > 0 {
		if h.gen == gen && h.want > 0 {
			h.want = remaining
			h.leaseSetLocked(sent)
			h.armExpiryLocked()
		}
		lostGen, lost := h.leftLocked()
		c.tidyLocked(h)
		c.mu.Unlock()
		if lost != nil {
			h.lose(lostGen, lost)
		}
		return
	}
	h.endLocked(observe.OutcomeReleased, nil, true)
}

// keepSpare keeps r, a registration the caller took off h and stopped,
// for h's next hold (nil: nothing to keep).
func (h *hold) keepSpare(r *renewal) {
	if r == nil {
		return
	}
	h.core.mu.Lock()
	if h.spare == nil {
		h.spare = r
	}
	h.core.mu.Unlock()
}

// lose ends hold gen, if it is still h's, with cause (which matches
// relock.ErrLockLost), and tells the lost handler. It reports whether it
// ended the hold.
func (h *hold) lose(gen uint64, cause error) bool {
	if !h.lockCurrent(gen) {
		return false
	}
	h.loseLocked(cause)
	return true
}

// loseLocked is lose for h's current hold, with c.mu held (it unlocks
// it).
func (h *hold) loseLocked(cause error) {
	c := h.core
	name, owner := h.key.name, h.key.owner // the record may be reused once tidied
	h.endLocked(observe.OutcomeLost, cause, false)
	c.mu.Lock()
	c.tidyLocked(h)
	c.mu.Unlock()
	if c.onLost != nil && c.CheckOpen() == nil {
		c.onLost(c.Unmap(name), owner, cause) // the name given, as Name() says
	}
}

// takeLoss returns the cause of the loss of the record's last hold, once:
// the release that learns of it says so. nil when that hold did not end
// by loss, or a release learned of it already.
func (h *hold) takeLoss() error {
	h.core.mu.Lock()
	defer h.core.mu.Unlock()
	lost := h.lost
	h.lost = nil
	return lost
}

// forgetLoss forgets the loss of the record's last hold: the caller told
// it already.
func (h *hold) forgetLoss() { _ = h.takeLoss() }

// takeAnonLoss is takeLoss for the Client's last anonymous hold under key,
// whose record is not kept once it ended.
func (c *Core) takeAnonLoss(key string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	lost := c.anonLost[key]
	delete(c.anonLost, key)
	return lost
}

// lockCurrent takes c.mu and reports whether hold gen is h's current
// hold; when it is not, it lets c.mu go again.
func (h *hold) lockCurrent(gen uint64) bool {
	h.core.mu.Lock()
	if h.gen != gen || h.want == 0 {
		h.core.mu.Unlock()
		return false
	}
	return true
}

// endLocked ends h's hold with outcome and cause (nil for a release): it
// unlocks c.mu, which the caller holds, and then tells the observer,
// stops the renewal and the listener, and ends the hold's life. With tidy
// set the record is forgotten if it is idle (see tidyLocked): at once
// when the hold had no renewal, else once the renewal is stopped, since
// a renewal in flight reads the record's name and field.
func (h *hold) endLocked(outcome observe.Outcome, cause error, tidy bool) {
	c := h.core
	if cause != nil {
		h.lost = cause
		if h.anonKey != "" {
			c.anonLost[h.anonKey] = cause
		}
	}
	ended := c.obs.holdEndLocked(h, outcome, cause)
	e := h.finishLocked()
	stopping := e.renewal != nil
	if stopping {
		h.finishing++
	} else if tidy {
		c.tidyLocked(h)
	}
	c.mu.Unlock()
	c.obs.holdEnded(ended)
	e.finish(cause)
	if stopping {
		// The renewal is stopped: nothing reads the record for the
		// ended hold any more, and it may be reused (see enterAnon).
		// A leave while it was being stopped found the record busy: it
		// is tidied here (tidying twice is harmless).
		c.mu.Lock()
		h.finishing--
		c.tidyLocked(h)
		c.mu.Unlock()
	}
}

// ending is what is left to do, outside c.mu, when a hold ends.
type ending struct {
	h        *hold
	end      context.CancelCauseFunc
	renewal  *renewal
	listener waiter
}

// finish stops the renewal (not the watchdog's own report of it: that one
// clears h.renewal first, so waiting for the wheel cannot deadlock) and
// the listener, and ends the life, if it was made, with cause.
func (e ending) finish(cause error) {
	if e.renewal != nil {
		e.h.stopped(e.renewal)
	}
	if e.listener != nil {
		e.listener.Leave(false)
	}
	if e.end != nil {
		e.end(cause)
	}
}

// finishLocked takes h back to no levels and returns what the caller must
// do outside c.mu. c.mu is held.
func (h *hold) finishLocked() ending {
	c := h.core
	e := ending{h: h, end: h.end, renewal: h.renewal, listener: h.listener}
	h.want, h.life, h.end, h.renewal, h.replaced = 0, nil, nil, nil, 0
	h.listener, h.listening = nil, false
	if h.expiry != nil {
		h.expiry.Stop() // a run in progress finds the hold ended
	}
	h.stopConfirmLocked()
	if h.anonKey != "" {
		c.dropAnon(h.anonKey, h.key.owner)
		h.anonKey = ""
	}
	return e
}

// RenewCall renews the hold with its kind's renewal (see KindRenewer), by
// default lock_renew.lua.
func (r *renewal) RenewCall(lease time.Duration) Call {
	h := r.h
	if h.renewer != nil {
		return h.renewer.RenewCall(Request{Core: h.core, Name: h.key.name, Field: h.field, LeaseMs: Millis(lease)})
	}
	arg := h.core.watchdogArg
	if lease != h.core.WatchdogTimeout {
		arg = strconv.FormatInt(Millis(lease), 10)
	}
	return Call{Script: lua.LockRenew, Keys: []string{h.key.name}, Args: []string{arg, h.field}}
}

// lost is the watchdog's report that the hold is gone. It runs on a
// watchdog goroutine and must not block.
func (r *renewal) lost(cause error) {
	h := r.h
	c := h.core
	c.mu.Lock()
	if h.renewal != r {
		c.mu.Unlock() // a report about a renewal stopped or replaced since
		return
	}
	h.renewal = nil // already out of the wheel
	// What the report names is read now: once c.mu is let go, a release
	// may end the hold and the record be reused (lose then ignores it).
	// A message heard while the renewal that found the hold gone was in
	// flight counts too (its own renewal has not run yet): the Client
	// heard a message and found the hold gone.
	heard := errors.Is(cause, errHeardGone) || errors.Is(cause, watchdog.ErrNotHeld) && h.heard.Swap(false)
	gen, what, seen := h.gen, h.describe(), c.obs.seenLocked(h)
	// No renewal answered in time: the field may still be in Redis, and
	// is settled once the hold is ended (the record is kept for it).
	var settle settleReservation
	reserved := false
	if errors.Is(cause, watchdog.ErrExpired) {
		settle, reserved = c.reserveSettleLocked(h, nil)
	}
	c.mu.Unlock()
	lost := renewalLoss(what, cause, fmt.Sprint(r.lease.Duration()), heard)
	if c.CheckOpen() == nil {
		c.obs.renewalLost(seen, lost)
	}
	ended := h.lose(gen, lost)
	if reserved {
		// A renewal may have reached Redis until now: the hold may be
		// there for a lease from now.
		c.settleReserved(h, settle, ended, time.Now().Add(c.WatchdogTimeout))
	}
	c.mu.Lock()
	if h.spare == nil {
		h.spare = r // reusable once this report has returned
	}
	c.mu.Unlock()
}

// watch returns the life of the hold of record key (nil when there is
// none), making it if nobody asked before, and makes its Client listen,
// while the hold lasts, on channel, where a force-unlock is published: a
// message brings the hold's next renewal forward, and a renewal that finds
// the hold gone reports the loss within a round trip instead of at its
// next turn. Only a hold on the watchdog lease is listened for; it costs
// the channel's subscription (shared with the lock's waiters) for as long
// as the hold lasts.
func (c *Core) watch(key holdKey, channel string) context.Context {
	c.mu.Lock()
	h := c.holds[key]
	if h == nil || h.want == 0 {
		c.mu.Unlock()
		return nil
	}
	if h.life == nil {
		h.life, h.end = context.WithCancelCause(c.root)
		if h.fixed && !time.Now().Before(h.leaseAt.Add(h.lease)) && c.CheckOpen() == nil {
			// First watched after its fixed lease ran out: it ends now,
			// before its life is handed out, not on a timer that fires a
			// moment later (a caller that finds the life live would take
			// the hold for held after its loss was reported).
			life := h.life
			h.loseLocked(h.loss(leaseRanOut(h.lease), nil))
			return life
		}
		h.armExpiryLocked()
	}
	life, gen := h.life, h.gen
	start := channel != "" && h.renewal != nil && !h.listening && (c.subscribeHook == nil || c.listenHook != nil)
	if start {
		h.listening = true
		h.users++
	}
	c.mu.Unlock()
	if !start {
		return life
	}
	l, err := c.listen(channel, h.heardNow, h.checkNow)
	c.mu.Lock()
	if err == nil && h.gen == gen && h.want > 0 {
		h.listener, l = l, nil
	} else if h.gen == gen {
		h.listening = false
	}
	h.users--
	lostGen, lost := h.leftLocked()
	c.mu.Unlock()
	if l != nil {
		l.Leave(false)
	}
	if lost != nil {
		h.lose(lostGen, lost)
	}
	return life
}

// heardNow is checkNow for a message heard on the lock's channel: the
// renewal it brings forward tells, if it finds the hold gone, that a
// message was heard (see hold.heard).
func (h *hold) heardNow() { h.renewNow(true) }

// checkNow brings h's renewal forward: a message may have been published
// on the lock's channel unheard (the channel's subscription was made, or
// made again), and the hold may be gone.
func (h *hold) checkNow() { h.renewNow(false) }

// renewNow brings h's renewal forward (heard: for a message heard). It
// runs on a pub/sub goroutine and does not block.
func (h *hold) renewNow(heard bool) {
	c := h.core
	c.mu.Lock()
	r := h.renewal
	if r != nil && heard {
		h.heard.Store(true)
	}
	c.mu.Unlock()
	if r != nil {
		r.lease.RenewNow()
	}
}

// lookupHold returns the levels of owner's hold on name (in the
// exclusive role with field suffix suffix).
func (c *Core) lookupHold(name, suffix, owner string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h := c.holds[holdKey{name, suffix, owner, false}]; h != nil {
		return h.want
	}
	return 0
}

// anonOwner returns the owner of the Client's latest anonymous hold under
// key ("" when there is none).
func (c *Core) anonOwner(key string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if owner, ok := c.anon[key]; ok {
		return owner
	}
	owners := c.anonShared[key]
	if len(owners) == 0 {
		return ""
	}
	return owners[len(owners)-1]
}

// dropAnon forgets owner's anonymous hold under key. c.mu is held.
func (c *Core) dropAnon(key, owner string) {
	if c.anon[key] == owner {
		delete(c.anon, key)
		return
	}
	owners := c.anonShared[key]
	if i := slices.Index(owners, owner); i >= 0 {
		owners = slices.Delete(owners, i, i+1)
	}
	if len(owners) == 0 {
		delete(c.anonShared, key)
	} else {
		c.anonShared[key] = owners
	}
}

// holdsOn returns the records of every hold of this Client on name, each
// counted as used until leave.
func (c *Core) holdsOn(name string) []*hold {
	c.mu.Lock()
	defer c.mu.Unlock()
	var hs []*hold
	for k, h := range c.holds {
		if k.name == name && h.want > 0 {
			h.users++
			hs = append(hs, h)
		}
	}
	return hs
}
