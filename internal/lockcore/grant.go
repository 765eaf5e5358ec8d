package lockcore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/lua"
)

// Grant on release (Config.NoGrant turns it off). Without it, the last
// Unlock of a hold publishes on the lock's channel, a waiter wakes and
// sends its acquisition: a release, a message and a round trip before
// the next holder holds. With it, when the same Client has a goroutine
// waiting for the lock (of the same kind: a reentrant, a fenced or a fair
// lock), the release hands the lock to that waiter in Redis itself, and
// the Client hands it to the waiter in the process:
//
//   - A waiting acquisition that sleeps, and whose owner holds nothing of
//     the lock, offers itself to the Client's releases of the lock
//     (grantOffer), oldest first. Its offer ends when it wakes for any
//     other reason.
//   - The last Unlock of a hold claims the oldest offer of another owner
//     and sends the waiter's field with its release (lock_unlock.lua):
//     when the release frees the lock and the lock's channel has at most
//     one subscriber (this Client: no other Client and no Redisson
//     waiter waits for the lock), the script writes the waiter's field
//     instead of publishing, with a lease of its own, the confirmation
//     window (see grantWindow). Else it releases and publishes as it
//     would without the offer.
//   - The release's reply resolves the claim: granted (with the fenced
//     lock's new token), nothing granted, or unknown (no reply: the next
//     attempt of the waiter takes over a field that is there, and a
//     waiter that gives up settles it, as after any attempt whose reply
//     was lost). Only the first send carries the grant: a resend is a
//     plain release.
//   - The waiter takes the hold as an acquisition's reply grants one,
//     under its owner's call slot, and the Client confirms the hold's
//     lease within the window (see confirmGrant); until then the hold's
//     local end is the window's (less a tenth). A waiter whose context
//     ended, or whose Client closed, while the grant was on its way
//     returns at once, and the releasing call gives back what it granted
//     (see resolveGrant); a waiter whose wait limit ran out meanwhile
//     takes it (as an attempt sent before the limit); a grant claimed for
//     an owner whose hold changed since is not taken. A waiter never
//     returns "not acquired" holding the lock, and a granted hold nobody
//     takes is given back or, if its Client died, ends with the window.
//   - Callers that never subscribe (relock's spin waiters, callers polling
//     TryLock with wait 0) are seen by the knocks their refused attempts
//     leave
//     (layout.Knocks, for KnockTTL; a Client's own refused TryLock with
//     wait 0 or spin waiter, of any kind sharing the name's hash, in
//     Core.refused): no release grants while one is recent. Nor while a
//     waiter of the Client for the name's other kind (a fenced lock
//     beside a plain one) sleeps: it is offered only to its kind's
//     releases.
//     Redisson's spin waiters leave none (a known limit: they get the
//     lock when a run of grants ends). Nor while a fair lock's queue is
//     beside the lock: a plain or fenced acquisition is refused there, and
//     a grant would take the lock past the queue (lock_unlock.lua, KEYS[7]).
//
// A fair lock (a QueueKind) grants only to the head of its queue, by its
// own script's rule (fair_unlock.lua): the Client offers its waiters in
// the order they queued, and its script counts no subscribers of the
// channel and reads no knocks (below), nor does the Client remember its
// own fair pollers' refusals (noteRefused): the queue decides who is
// next, and a poller is refused while others are queued. A grant its
// release cannot make wakes the head as before.
//
// Fairness across Clients: a Client grants only while the lock's channel
// has no subscriber but its own (PUBSUB NUMSUB, SHARDNUMSUB with sharded
// pub/sub). A waiter of another Client or of Redisson subscribes to the
// channel before its second attempt, so from then on every release of the
// lock publishes and wakes it as without grants: a Client's goroutines
// hand the lock among themselves only while nobody else waits. (On Redis
// Cluster with classic pub/sub, NUMSUB counts only the subscribers of the
// node that runs the script: use WithShardedPubSub there, as wake-one
// asks.)

// grantWindow is the longest lease a granted hold has in Redis until its
// Client confirms it: a Client that dies between the grant and the
// confirmation keeps the lock from others for at most that long. The
// window of a hold whose own lease is shorter is that lease.
const grantWindow = 3 * time.Second

// grantKind is a Kind whose release can grant the lock to a waiter of the
// Client (the reentrant, the fenced and the fair lock).
type grantKind interface {
	// ReleaseGrant is Release for r with a waiter's field (r.GrantField,
	// r.GrantLeaseArg): granted reports that the release wrote it, with
	// its token for a fenced lock; unsynced that fewer replicas than
	// required confirmed the release.
	ReleaseGrant(ctx context.Context, r Request) (left int64, granted bool, token int64, unsynced, err error)
}

// ReleaseGrant runs lock_unlock.lua with a grant.
func (Reentrant) ReleaseGrant(ctx context.Context, r Request) (int64, bool, int64, error, error) {
	return r.Core.releaseGrant(ctx, r, false)
}

// ReleaseGrant runs lock_unlock.lua with a grant that takes a token.
func (Fenced) ReleaseGrant(ctx context.Context, r Request) (int64, bool, int64, error, error) {
	return r.Core.releaseGrant(ctx, r, true)
}

// releaseGrant runs lock_unlock.lua for r with the grant arguments
// (KEYS[3..6], ARGV[6..18]): a grant to r.GrantField, when set, whose
// hold takes a token when fenced, and, with wake-one on, a grant to
// another Client's registered waiter (see remotegrant.go). Such a grant
// made by the release counts in GrantsMade; the release reports only the
// grant to its own waiter.
func (c *Core) releaseGrant(ctx context.Context, r Request, fenced bool) (int64, bool, int64, error, error) {
	keys, args := c.withWake(r, append(make([]string, 0, 7), r.Name, r.Chan),
		append(make([]string, 0, 18), layout.UnlockMessage, r.LeaseArg, r.Field, c.publish, strconv.Itoa(r.Target)))
	grantees, remote := r.Name, ""
	if len(keys) == 2 {
		keys = append(keys, r.Name)
		args = append(args, "", "", "", "", "")
	} else if !c.noGrant {
		grantees, remote = layout.Grantees(r.Name), layout.GrantMessagePrefix
	}
	kind := ""
	if fenced {
		kind = grantFenced
	}
	keys = append(keys, layout.Knocks(r.Name), layout.Token(r.Name), grantees, layout.Queue(r.Name))
	args = append(args, r.GrantField, r.GrantLeaseArg, c.numsub, layout.GrantedMessage, c.ID, kind, remote, grantWindowMs)
	return c.RunReleaseGrant(ctx, lua.LockUnlock, keys, args)
}

// RunReleaseGrant runs a release script that may grant the lock to
// r.GrantField, for a Kind's ReleaseGrant, and reads its reply as
// lock_unlock.lua's (see grantReply): the count left, or {0, token} for
// the grant.
func (c *Core) RunReleaseGrant(ctx context.Context, s *lua.Script, keys, args []string) (int64, bool, int64, error, error) {
	res, unsynced := c.runSynced(ctx, s, keys, args)
	return grantReply(res, unsynced)
}

// grantReply reads lock_unlock.lua's reply: the count left, {0, token}
// for a grant to the caller's waiter, or {0, 0, 1} for a grant to
// another Client's.
func grantReply(res rueidis.RedisResult, unsynced error) (int64, bool, int64, error, error) {
	msg, err := res.ToMessage()
	if err != nil {
		return 0, false, 0, nil, err
	}
	if msg.IsInt64() {
		n, _ := msg.AsInt64()
		return n, false, 0, nil, nil
	}
	vals, err := msg.AsIntSlice()
	if err != nil {
		return 0, false, 0, nil, err
	}
	switch {
	case len(vals) == 3 && vals[0] == 0 && vals[2] == 1:
		grantsMade.Add(1)
		return 0, false, 0, nil, nil
	case len(vals) != 2 || vals[0] != 0:
		return 0, false, 0, nil, errUnexpected("unlock with a grant", vals)
	}
	return 0, true, vals[1], unsynced, nil
}

// grantKey names the waiters a release may grant to: those of one lock of
// one kind.
type grantKey struct {
	name string
	kind Kind
}

// grantOffer is a sleeping acquisition's offer to take the lock from a
// release of its Client. Its state is guarded by Core.mu.
type grantOffer struct {
	a     *acquisition
	state offerState
	// The resolution's flags (see below), beside state: a sleeping call
	// keeps its offer, which is kept small.
	granted bool
	unknown bool
	// gen is the waiter's hold number when a release claimed the offer:
	// a grant is the waiter's only while no hold of its owner has begun
	// since (see takeGrant).
	gen uint64
	// done is closed when a claimed offer is resolved.
	done chan struct{}
	// The resolution: granted (with token, the release sent at sent, and
	// unsynced when too few replicas confirmed it), or unknown (the
	// release's reply was lost; the field may have been written).
	token    int64
	sent     time.Time
	unsynced error
	// gone is set when the waiter left before the claim was resolved
	// (see landGrant): rarely, so it is a value of its own.
	gone *grantGone
	// counted is the record whose granting counts the claim, until the
	// grant is landed (see grantLandedLocked).
	counted *hold
	// stamp and slots are the call's, as of the attempt the offer
	// follows (see acquisition.grantee): a grant through the registry is
	// taken only for that attempt's entry, with no call of the owner
	// since (remotegrant.go).
	stamp int64
	slots uint64
}

// grantGone is what the release that claimed an offer needs to give
// back what it granted, when the waiter left before the claim was
// resolved: the waiter's hold record (counted in its users), its request
// and the window's length.
type grantGone struct {
	h      *hold
	r      Request
	m      *Mutex
	window time.Duration
}

type offerState uint8

const (
	offerOpen      offerState = iota // waiting for a release
	offerClaimed                     // a release carries it
	offerResolved                    // the release answered, or failed
	offerWithdrawn                   // the waiter woke before any claim
	offerAbandoned                   // claimed, and the waiter's call ended
)

// grantWindowFor is the confirmation window of a hold with lease lease.
func grantWindowFor(lease time.Duration) time.Duration { return min(grantWindow, lease) }

// grantWindowArg is the window of a hold with lease lease, as the script
// takes it.
func grantWindowArg(lease time.Duration) string {
	if w := grantWindowFor(lease); w != grantWindow {
		return strconv.FormatInt(Millis(w), 10)
	}
	return grantWindowMs
}

var grantWindowMs = strconv.FormatInt(Millis(grantWindow), 10)

// offerGrant offers the sleeping call to the Client's releases of the
// lock, and returns the channel closed when a release it was claimed by
// resolved it; nil when the call cannot be granted to (grants off, a kind
// without them, the owner holds levels: its calls re-enter), or does not
// offer itself (offer is false: it is not subscribed to the lock's
// channel). A grant through the registry that came for the call's
// attempt before this sleep (see earlyGrant) resolves the offer at once;
// one the call does not take is given back.
func (a *acquisition) offerGrant(offer bool) <-chan struct{} {
	c := a.m.core
	_, kind := a.m.kind.(grantKind)
	if !offer || c.noGrant || a.offer != nil || !kind {
		a.dropEarly()
		return nil
	}
	c.mu.Lock()
	if a.h.want > 0 || c.CheckOpen() != nil {
		a.takeEarlyLocked(false)
		c.mu.Unlock()
		return nil
	}
	// The call's offers are one value, reused: no release refers to the
	// last one any more (it was withdrawn, or resolved and its channel
	// closed), and its channel serves again unless it was closed.
	o := &a.offerV
	done := o.done
	if done == nil || o.state == offerResolved {
		done = make(chan struct{})
	}
	*o = grantOffer{a: a, done: done, stamp: a.stamp, slots: a.slots}
	k := grantKey{a.m.name, a.m.kind}
	if c.offers == nil {
		c.offers = make(map[grantKey][]*grantOffer)
	}
	c.offers[k] = addOffer(c.offers[k], o)
	a.offer = o
	if e := a.takeEarlyLocked(true); e != nil {
		if c.takesGrantLocked(o, e.stamp, e.sent) {
			done := c.landOfferLocked(o, e.token, e.sent)
			c.mu.Unlock()
			c.grantLanded(e.m, done)
			return done
		}
		c.giveBackEarlyLocked(*e, a.h)
	}
	c.mu.Unlock()
	return done
}

// QueueKind is a grant kind whose waiters take the lock in the order they
// queued (the fair lock): its release script grants only to the head of
// the lock's queue, so a release offers the lock to the Client's waiter
// that queued first (see acquisition.queued), not to the one that has
// slept longest.
type QueueKind interface {
	GrantsInQueueOrder()
}

// addOffer adds o to a lock's open offers: last, or, for a QueueKind,
// after the offers of the calls that queued before it.
func addOffer(list []*grantOffer, o *grantOffer) []*grantOffer {
	if _, queue := o.a.m.kind.(QueueKind); !queue {
		return append(list, o)
	}
	i := len(list)
	for i > 0 && list[i-1].a.queued > o.a.queued {
		i--
	}
	return slices.Insert(list, i, o)
}

// dropOfferLocked takes o out of the open offers. c.mu is held.
func (c *Core) dropOfferLocked(o *grantOffer) {
	k := grantKey{o.a.m.name, o.a.m.kind}
	list := c.offers[k]
	for i, p := range list {
		if p == o {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(c.offers, k)
	} else {
		c.offers[k] = list
	}
}

// offerEmpty reports, once the offer's channel is closed, whether the
// release that claimed it granted nothing and certainly wrote nothing:
// the call then offers itself again and sleeps on.
func (a *acquisition) offerEmpty() bool {
	o := a.offer
	if o == nil {
		return false
	}
	a.m.core.mu.Lock()
	empty := o.state == offerResolved && !o.granted && !o.unknown
	a.m.core.mu.Unlock()
	if empty {
		a.offer = nil
	}
	return empty
}

// landGrant ends the call's offer: withdrawn if no release claimed it;
// else it waits for the release that did to resolve it (one send). A
// grant is taken (keep) or given back; an unknown outcome is settled like
// an attempt's whose reply was lost. got reports that the call holds the
// lock; err is the call's error when the grant was given back because the
// call ends (its context, Close, too few replicas).
func (a *acquisition) landGrant(w *Wait, keep bool) (got bool, err error) {
	o := a.offer
	if o == nil {
		return false, nil
	}
	a.offer = nil
	c := a.m.core
	c.mu.Lock()
	if o.state == offerOpen {
		o.state = offerWithdrawn
		c.dropOfferLocked(o)
		c.mu.Unlock()
		return false, nil
	}
	if !keep && o.state == offerClaimed && c.CheckOpen() == nil {
		// The call ends (its context, an error) while the release that
		// claimed its offer is on its way: it does not wait for another
		// goroutine's release. That release gives back what it granted
		// (see resolveGrant); the record stays until then, and the call's
		// value is not reused (the release still refers to it).
		o.state = offerAbandoned
		o.gone = &grantGone{h: a.h, r: a.req(), m: a.m, window: grantWindowFor(a.lease)}
		a.h.users++
		a.abandoned = true
		c.mu.Unlock()
		return false, nil
	}
	c.mu.Unlock()
	if c.landHook != nil {
		c.landHook()
	}
	<-o.done
	// Once the grant is taken (the record's want shows it) or given
	// back, or found empty, the owner's settles may run again.
	defer func() {
		c.mu.Lock()
		c.grantLandedLocked(o)
		c.mu.Unlock()
	}()
	if o.unknown {
		a.unknown = true
	}
	if !o.granted {
		return false, nil
	}
	return a.takeGrant(w, o, keep)
}

// takeGrant takes the hold a release granted to the call, as an attempt
// takes one its script won, under the owner's call slot; or gives it back
// when the call does not keep it.
func (a *acquisition) takeGrant(w *Wait, o *grantOffer, keep bool) (bool, error) {
	_ = a.h.acquire(context.Background()) // no end: the grant must be settled
	defer a.h.release()
	from, gen := a.h.state()
	if from > 0 || gen != o.gen {
		// Another call of the owner took the granted field over (its
		// attempt found it there): the hold is that call's, and this
		// call re-enters with its next attempt; or that hold has begun
		// and ended already (the field is gone, the lock may be
		// another's), and the grant is spent: this call attempts anew.
		return false, nil
	}
	if !keep {
		a.giveBack(w.Ctx, 0)
		return false, nil
	}
	if over := w.Cancelled(); over != nil {
		a.giveBack(w.Ctx, 0)
		return false, over
	}
	if o.unsynced != nil {
		a.giveBack(w.Ctx, 0)
		return false, notAcquired(fmt.Errorf("%q: %w", a.m.name, o.unsynced))
	}
	switch err := a.h.grant(0, gen, a.lease, a.leaseArg, a.renew, a.anonKey(), o.sent); {
	case errors.Is(err, errHoldChanged):
		return false, nil
	case err != nil:
		a.giveBack(w.Ctx, 0)
		return false, notAcquired(err)
	}
	_, gen = a.h.state() // the grant began hold gen+1
	a.h.confirmGrant(gen, grantWindowFor(a.lease), o.sent)
	a.token = o.token
	return true, nil
}

// claimGrant claims, for the last Unlock of h on m, the oldest open offer
// of another owner of the Client that holds nothing of the lock; nil when
// there is none.
func (c *Core) claimGrant(m *Mutex, h *hold) *grantOffer {
	if !c.grants(m) {
		return nil
	}
	if c.sharesChannel(m.channel) {
		// Another Client on the Client's rueidis client waits for the
		// lock: see shareconn.go.
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.offers) == 0 {
		return nil
	}
	k := grantKey{m.name, m.kind}
	if at, ok := c.refused[m.name]; ok {
		if time.Since(at) < KnockTTL {
			// A call of the Client that hears no release was refused
			// the lock lately: free it, as for another Client's knock.
			return nil
		}
		delete(c.refused, m.name)
	}
	for _, other := range grantKinds {
		if other != m.kind && len(c.offers[grantKey{m.name, other}]) > 0 {
			// A waiter of the Client for the name's other kind sleeps:
			// only a release that publishes wakes it (this release's
			// offers are not its own).
			return nil
		}
	}
	for _, o := range c.offers[k] {
		// (An owner whose count a settle is setting is not granted to:
		// the settle may run after the grant and take it away.)
		if o.a.h != h && o.a.h.want == 0 && o.a.h.settling == 0 {
			o.state = offerClaimed
			o.gen = o.a.h.gen
			o.a.h.granting++
			o.counted = o.a.h
			c.dropOfferLocked(o)
			return o
		}
	}
	return nil
}

// grantLandedLocked ends o's count in its record's granting, once: the
// grant it claimed was landed, found empty, or is given back by the
// release (the waiter left). c.mu is held.
func (c *Core) grantLandedLocked(o *grantOffer) {
	if o.counted != nil {
		o.counted.granting--
		o.counted = nil
	}
}

// errGrantLanding is settleOnce's answer, sending nothing, while a grant
// to the owner is on its way (see hold.granting): a settling tries again.
var errGrantLanding = errors.New("a grant to the owner is on its way")

// grants reports whether the Client's releases of m may grant it: grants
// are on and m's kind grants.
func (c *Core) grants(m *Mutex) bool {
	_, ok := m.kind.(grantKind)
	return ok && !c.noGrant
}

// grantKinds are the kinds whose releases grant. They share a name's hash
// (with the spin lock): a waiter of one is a caller of the other's lock.
var grantKinds = [...]Kind{Reentrant{}, Fenced{}}

// noteRefused records that an attempt of the Client that hears no release
// (it does not wait, or spins) found m held (see Core.refused); only for
// a kind that shares its hash with a kind whose releases grant.
func (c *Core) noteRefused(m *Mutex) {
	if _, spin := m.kind.(Spinner); c.noGrant || !spin && !c.grants(m) {
		return
	}
	if _, queue := m.kind.(QueueKind); queue {
		// A fair poller is refused while others are queued, free or
		// not: holding grants back would give it nothing.
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.refused == nil {
		c.refused = make(map[string]time.Time)
	}
	now := time.Now()
	if len(c.refused) >= max(64, 2*c.refusedKept) {
		// Drop the records that ran out, when the map has doubled
		// since the last sweep: a Client that polls many names keeps
		// only those of the last KnockTTL.
		for k, at := range c.refused {
			if now.Sub(at) >= KnockTTL {
				delete(c.refused, k)
			}
		}
		c.refusedKept = len(c.refused)
	}
	c.refused[m.name] = now
}

// resolveGrant resolves a claimed offer: granted, or not (unknown: the
// release may have written the grant).
//
// When the waiter's call ended before (offerAbandoned), the release's
// goroutine gives back a hold it granted, or may have granted, itself:
// the owner's count goes back to what the owner holds now, as when an
// attempt's reply was lost; nobody else would.
func (c *Core) resolveGrant(o *grantOffer, granted, unknown bool, token int64, sent time.Time, unsynced error) {
	c.mu.Lock()
	gone := o.state == offerAbandoned
	o.state = offerResolved
	o.granted, o.unknown, o.token, o.sent, o.unsynced = granted, unknown, token, sent, unsynced
	done := o.done // o is its waiter's again once done is closed
	g := o.gone
	if gone || (!granted && !unknown) {
		// Nothing to land: the release wrote nothing, or gives back
		// itself what it wrote.
		c.grantLandedLocked(o)
	}
	c.mu.Unlock()
	close(done)
	if gone {
		c.giveBackGone(g.m, g.h, g.r, g.window, granted || unknown)
	}
}

// giveBackGone gives back, for a waiter whose call ended before the
// release that claimed its offer answered, the hold the release granted
// (settle): the owner's count goes back to its own. A give-back that
// gets no answer goes on in the background until the window would have
// ended. It lets go of the record the waiter left in use.
func (c *Core) giveBackGone(m *Mutex, h *hold, r Request, window time.Duration, settle bool) {
	defer c.leave(h)
	if !settle {
		return
	}
	ctx, cancel := cleanupContext(c.root)
	err := m.settleOnce(WithoutReplicaWait(ctx), h, r, settleAny)
	cancel()
	if err != nil {
		c.settleLater(m, h, r, time.Now().Add(window))
	}
}

// grantSendTimeout bounds the release that carries a grant: its waiter
// waits for its reply.
const grantSendTimeout = releaseTimeout

// releaseGranting is release for the last level of h, carrying a grant
// to the waiter of offer o: the first send carries it, and its outcome
// resolves o; a resend after a lost reply or a refusal is a plain release.
func (m *Mutex) releaseGranting(ctx context.Context, h *hold, r Request, o *grantOffer) (int64, error) {
	g := m.kind.(grantKind)
	// The granted hold's lease in Redis is the window, as the script
	// takes it.
	r.GrantField, r.GrantLeaseArg = o.a.h.field, grantWindowArg(o.a.lease)
	sctx, cancel := context.WithTimeout(ctx, grantSendTimeout)
	sent := time.Now()
	n, granted, token, unsynced, err := g.ReleaseGrant(sctx, r)
	cancel()
	if err != nil {
		unknown := outcomeUnknown(err)
		m.core.resolveGrant(o, false, unknown, 0, sent, nil)
		if ctx.Err() != nil || m.core.CheckOpen() != nil {
			return 0, err
		}
		if _, isReply := replyOf(err); isReply && (!notRun(err) || isBusy(err)) {
			return 0, err
		}
		r.GrantField, r.GrantLeaseArg = "", ""
		return m.release(ctx, h, r, unknown)
	}
	if granted {
		grantsMade.Add(1)
	}
	m.core.resolveGrant(o, granted, false, token, sent, unsynced)
	return n, nil
}

// grantsMade counts the releases of the process that granted the lock.
var grantsMade atomic.Int64

// GrantsMade is the number of releases, by any Client of the process,
// that granted the lock to a waiter (see grant.go): for the tests that
// must know that grants happened.
func GrantsMade() int64 { return grantsMade.Load() }

// confirmGrant makes the Client confirm a granted hold (gen), granted by
// a release sent at sent, within its window: the hold's lease in Redis
// is the window until then, and so is its end as the Client counts it
// (confirmBy): the watchdog's deadline is brought forward to it (see
// watchdog.Lease.Limit), and a watched hold on a fixed lease ends then.
// On the watchdog's lease, the hold's renewal is brought forward a third
// of the window after the grant (a watchdog lease no longer than the
// window needs nothing: its first renewal falls due then anyway); a
// renewal that fails is retried within the window, and a hold none got
// through for by its end is lost, as any hold whose renewals failed. On a
// fixed lease longer than the window, the rest of the lease is set a
// third of the window after the grant (lock_renew.lua, which publishes
// '1' on the lock's channel when that cuts the lease left: a grant through
// the registry counts the lease from the waiter's attempt), tried again
// until the window ends; a hold found gone, or not confirmed by then, is lost.
// A hold released, or re-entered, before then needs no confirmation (the
// re-entry resets the lease): the timer then finds nothing to do, or is
// stopped.
func (h *hold) confirmGrant(gen uint64, window time.Duration, sent time.Time) {
	c := h.core
	c.mu.Lock()
	defer c.mu.Unlock()
	if h.gen != gen || h.want == 0 || c.CheckOpen() != nil || window >= h.lease {
		return
	}
	h.confirmGen = gen
	// A tenth of the window short of its end: the hold is reported lost
	// before Redis can give the lock to another (the watchdog's tick, the
	// loss report's way).
	h.confirmBy = sent.Add(window - window/10)
	if h.fixed {
		h.armExpiryLocked()
	} else if h.renewal != nil {
		h.renewal.lease.Limit(h.confirmBy)
	}
	// A third of the window from now, or sooner when the grant was made
	// long before (one through the registry counts from its waiter's
	// attempt): halfway to the hold's end as the Client counts it.
	h.confirmIn(min(window/3, max(0, time.Until(h.confirmBy)/2)))
}

// confirmIn (re)starts h's confirmation timer. c.mu is held.
func (h *hold) confirmIn(d time.Duration) {
	if h.confirmT == nil {
		h.confirmT = time.AfterFunc(d, h.confirm)
		return
	}
	h.confirmT.Reset(d)
}

// whyUnconfirmed is why a granted hold on a fixed lease whose lease no
// confirmation could set within its window was lost.
const whyUnconfirmed = "its grant was not confirmed within its window (no confirmation got through)"

// confirm is confirmGrant's timer: see there.
func (h *hold) confirm() {
	c := h.core
	c.mu.Lock()
	gen := h.confirmGen
	if h.gen != gen || h.want == 0 || c.CheckOpen() != nil || h.confirmBy.IsZero() {
		c.mu.Unlock()
		return
	}
	if !h.fixed {
		r := h.renewal
		c.mu.Unlock()
		if r != nil {
			r.lease.RenewNow()
		}
		return
	}
	by := h.confirmBy
	if !time.Now().Before(by) {
		h.loseLocked(h.loss(whyUnconfirmed, nil))
		return
	}
	end := h.leaseAt.Add(h.lease)
	c.background.Add(1)
	h.users++ // the record stays while the confirmation goes on
	name, field := h.key.name, h.field
	c.mu.Unlock()
	go func() {
		defer c.background.Done()
		defer c.leave(h)
		ctx, cancel := context.WithDeadline(c.root, by)
		defer cancel()
		// Under the owner's call slot, as a renewal stops before the
		// last release: the confirmation sets the lease of the hold it
		// confirms, never that of a later hold of the owner (the hold
		// released, or re-entered, and the lock taken again on another
		// lease while the confirmation was on its way).
		if h.acquire(ctx) != nil {
			h.retryConfirm(gen, by)
			return
		}
		c.mu.Lock()
		current := h.confirmingLocked(gen, by)
		c.mu.Unlock()
		if !current {
			h.release()
			return
		}
		arg := strconv.FormatInt(max(1, Millis(time.Until(end))), 10)
		// The rest of the lease may be shorter than the window's lease
		// left in Redis (a grant through the registry counts the lease
		// from the waiter's attempt): set_lease then publishes '1', so
		// that a waiter that read the window's lease (Redisson's sleeps
		// until its end) looks again.
		n, err := lua.LockRenew.Exec(ctx, c.RDB, []string{name, layout.Channel(name)},
			[]string{arg, field, c.publish}).AsInt64()
		h.release()
		switch {
		case err == nil && n == 0:
			h.lose(gen, h.loss(h.goneWhy("confirmation of its grant"), nil))
		case err == nil:
			c.mu.Lock()
			if h.confirmingLocked(gen, by) {
				h.confirmBy = time.Time{}
				h.armExpiryLocked()
			}
			c.mu.Unlock()
		default:
			h.retryConfirm(gen, by)
		}
	}()
}

// retryConfirm sets the next try of hold gen's confirmation, which got no
// answer, within its window (by); at its end the hold is lost (the timer
// finds the window over).
func (h *hold) retryConfirm(gen uint64, by time.Time) {
	c := h.core
	c.mu.Lock()
	if h.confirmingLocked(gen, by) && c.CheckOpen() == nil {
		h.confirmIn(min(confirmRetry, max(0, time.Until(by))))
	}
	c.mu.Unlock()
}

// confirmingLocked reports whether h is still hold gen, held, and
// waiting for the confirmation due by by. c.mu is held.
func (h *hold) confirmingLocked(gen uint64, by time.Time) bool {
	return h.gen == gen && h.want > 0 && h.confirmBy.Equal(by)
}

// confirmRetry spaces the tries of a confirmation that got no answer.
const confirmRetry = 250 * time.Millisecond

// stopConfirmLocked stops h's confirmation timer. c.mu is held.
func (h *hold) stopConfirmLocked() {
	if h.confirmT != nil {
		h.confirmT.Stop()
	}
}
