package rlock_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/relock-go/relock/internal/layout"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/relock-go/relock/fairlock"
	"github.com/relock-go/relock/handle"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/rlock"
)

// This file is the model of the kinds that hold a lock: rlock.Lock,
// rlock.FencedLock, fairlock.Lock, Lock with WithWakeOne, and the read
// and write sides of a read-write lock. An exclusive lock is modelled as
// a read-write lock whose every hold is a write hold.

// checkedLock is what every lock kind (and side) offers.
type checkedLock interface {
	Name() string
	Lock(ctx context.Context) error
	LockLease(ctx context.Context, lease time.Duration) error
	TryLock(ctx context.Context, wait, lease time.Duration) (bool, error)
	Unlock(ctx context.Context) error
	ForceUnlock(ctx context.Context) (bool, error)
	HoldCount(ctx context.Context) (int, error)
	Do(ctx context.Context, fn func(ctx context.Context) error) error
	HoldContext(ctx context.Context) context.Context
	TryAcquire(ctx context.Context, wait, lease time.Duration) (*handle.Hold, error)
}

// side is the side of a hold: write (exclusive; every hold of an
// exclusive lock) or read (shared).
type side int

const (
	sW side = iota
	sR
)

func (s side) String() string { return [...]string{"write", "read"}[s] }

// conflicts reports whether a waiter of owner key wk (anonymous: wa) on
// side ws must wait for a hold of owner hk (ha) on side hs: holds of
// other owners conflict unless both read; an owner's own hold conflicts
// only when it holds read and waits for write (a read hold is never
// upgraded). Each anonymous acquisition is an owner of its own.
func conflicts(wk string, wa bool, ws side, hk string, ha bool, hs side) bool {
	if !wa && !ha && wk == hk {
		return ws == sW && hs == sR
	}
	return ws == sW || hs == sW
}

// hstate is what the model knows of one owner's hold of one side.
//
// count is what the owner was told it holds. It is exact while the owner
// is certain; an event whose effect on the hold the model cannot know
// (a force-unlock or a long pause that may have come before or after a
// call of the owner, a loss report, a call whose outcome is unknown) makes
// it uncertain, and the next checkpoint takes the Client's own view, after
// checking that view against Redis.
type hstate struct {
	count     int
	releasing int // releases (Unlock, Do's own) in flight
	uncertain bool
	doomed    string // an event that may have ended the hold, this round
	lostSeen  int    // loss reports this round not explained by a doom
	lostAt    time.Time
	// lag: Redis' count may be one higher (a release it did not confirm).
	lag bool
	// start and from are the start and the reply of the call that took
	// the hold from 0.
	start, from time.Time
	// fixedMin and fixedMax bound the end of a fixed lease (zero: the
	// watchdog lease): from the start of the call that set it, and from
	// its reply.
	fixedMin, fixedMax time.Time
	lease              time.Duration // the fixed lease (0: the watchdog's)
	// keptUntil, for a write hold on a fixed lease, is how long its
	// owner's read hold kept the hash, and with it the write field,
	// alive: a write hold is never cut below its owner's read levels.
	keptUntil    time.Time
	lastFixedMax time.Time // of the latest fixed lease, to excuse a loss
	token        int64     // the hold's fencing token, 0 if unknown
}

// howner is the model of one owner.
type howner struct {
	slot      int
	name      string // "a", "b"; "" for the anonymous actor; "do" for Do's own owner
	anonymous bool   // its field is not known (the anonymous actor, Do's owner)
	s         [2]hstate
}

func (o *howner) String() string {
	if o.name == "" {
		return fmt.Sprintf("c%d:anonymous", o.slot)
	}
	return fmt.Sprintf("c%d%s", o.slot, o.name)
}

// ownerString is o's owner string (named owners only).
func ownerString(o *howner) string { return "c" + strconv.Itoa(o.slot) + o.name }

// inside reports whether the hold certainly exists at now: the owner was
// told so, and it is neither being released, uncertain, reported lost,
// doomed, nor past its fixed lease.
func (h *hstate) inside(now time.Time) bool {
	return h.count > h.releasing && !h.uncertain && h.doomed == "" && h.lostSeen == 0 &&
		(h.fixedMin.IsZero() || now.Before(h.fixedMin))
}

// hspan is a hold that may still be in Redis though no owner of the model
// holds it (it ended, its Client died, or a call may have left it), or
// that ended since the last checkpoint: it keeps waiters out during
// [from, to], and certainly exists until certainTo (zero: no claim).
type hspan struct {
	key       string // "<clientID>:<owner>", or "<clientID>:anon" for anonymous owners
	anon      bool
	side      side
	field     string // its hash field, "" when anonymous
	from, to  time.Time
	certainTo time.Time
	why       string
	// settleAt, when set, makes to (left zero: open) settled(settleAt) +
	// settleLease once the faults of the round are over; with ifPaused,
	// the span is dropped then unless the server was paused at settleAt.
	settleAt    time.Time
	settleLease time.Duration
	ifPaused    bool
}

// hdoom is an event that may end any hold taken before it: a force-unlock,
// a pause longer than the lease. When definite, every hold that existed
// before from is gone by goneBy.
type hdoom struct {
	what     string
	from, to time.Time
	definite bool
	goneBy   time.Time
	// watchdogOnly: it ends only holds on the watchdog lease (a pause
	// shorter than a fixed lease).
	watchdogOnly bool
}

// hwait is a call that waited, for the liveness check.
type hwait struct {
	key      string
	anon     bool
	side     side
	from, to time.Time
	what     string
}

// tokenRec is a fencing token a call was given.
type tokenRec struct {
	o          *howner
	start, end time.Time
	token      int64
}

// holdsModel is the model of a lock kind.
type holdsModel struct {
	e    *engine
	rw   bool // a read-write lock
	fair bool
	get  func(s *slot, sd side) checkedLock
	// getN is get for another name (the braced form of the lock's).
	getN func(s *slot, name string, sd side) checkedLock
	// wakeable: the kind takes part in wake-one (Lock, FencedLock);
	// plain: it is a reentrant lock of the plain layout, which a
	// read-write lock of the same name must refuse (and the other way
	// round); spin: its waiters never subscribe (SpinLock).
	wakeable, plain, spin bool
	// anon is the one handle the anonymous goroutines of each Client
	// share (exclusive kinds).
	anon map[*slot]checkedLock
	// calls are the acquisitions of this round, and tries those that
	// ended without the lock and without an error (see
	// checkTriesLocked); watches the hold contexts taken to be judged at
	// a lease's end (see judgeWatchesLocked).
	calls, tries []hwait
	watches      []*holdWatch
	// freeAt is when waitFree saw the lock free, this round.
	freeAt time.Time
	// leaseEnds counts the lease-end rounds.
	leaseEnds int

	// mu is e.mu: the model's state is the engine's.
	owners  []*howner
	forcing int
	dooms   []hdoom
	spans   []hspan
	waits   []hwait
	tokens  []tokenRec
	// anonLosses counts loss reports of owners relock made up (an
	// anonymous hold, Do without an owner), per slot.
	anonLosses []int
	// gaveUp are the waiting calls that ended without the lock: their
	// ends, and who (see engine.leftQueue).
	gaveUp []window
}

func newHoldsModel(e *engine, getN func(s *slot, name string, sd side) checkedLock, rw, fair bool) *holdsModel {
	m := &holdsModel{e: e, getN: getN, rw: rw, fair: fair, anonLosses: make([]int, e.kind.slots), anon: map[*slot]checkedLock{}}
	m.get = func(s *slot, sd side) checkedLock { return getN(s, e.name, sd) }
	m.wakeable = slices.Contains([]string{"Lock", "FencedLock", "WakeOne"}, e.kind.name)
	m.spin = e.kind.name == "SpinLock"
	m.plain = m.wakeable || m.spin
	for i := range e.kind.slots {
		for _, n := range []string{"a", "b", ""} {
			m.owners = append(m.owners, &howner{slot: i, name: n, anonymous: n == ""})
		}
	}
	return m
}

func (m *holdsModel) sides() []side {
	if m.rw {
		return []side{sW, sR}
	}
	return []side{sW}
}

// suffix is the field suffix of a side.
func (m *holdsModel) suffix(sd side) string {
	if m.rw && sd == sW {
		return ":write"
	}
	return ""
}

// keyOf is o's owner key on its slot's current Client. e.mu is held.
func (m *holdsModel) keyOf(o *howner) string {
	id := m.e.slots[o.slot].id
	if o.anonymous {
		return id + ":anon"
	}
	return field(id, ownerString(o))
}

// fieldOf is o's hash field for side sd ("" when anonymous). e.mu is held.
func (m *holdsModel) fieldOf(o *howner, sd side) string {
	if o.anonymous {
		return ""
	}
	return m.keyOf(o) + m.suffix(sd)
}

// handle returns the context an owner's calls use (the anonymous actor's
// carries no owner), its slot, and the lock handle of a side (a new
// handle each time: a hold belongs to its owner and Client, not to a
// handle; but the anonymous goroutines of a Client share one handle of an
// exclusive lock).
func (m *holdsModel) handle(o *howner, sd side) (context.Context, *slot, checkedLock) {
	s := m.e.slot(o.slot)
	ctx := context.Background()
	if !o.anonymous {
		ctx = rlock.WithOwner(ctx, ownerString(o))
	} else if !m.rw && o.name == "" {
		m.e.mu.Lock()
		defer m.e.mu.Unlock()
		l := m.anon[s]
		if l == nil {
			l = m.get(s, sd)
			m.anon[s] = l
		}
		return ctx, s, l
	}
	return ctx, s, m.get(s, sd)
}

func (m *holdsModel) shapes() []string {
	sh := []string{"handoff", "kill-holder", "close-holder", "kill-waiter", "close-waiter", "reenter-shorter",
		"stop-holder", "short-wait", "lease-end"}
	if m.wakeable {
		sh = append(sh, "stop-registrant")
	} else {
		sh = append(sh, "stop-waiter")
	}
	if m.rw {
		sh = append(sh, "reader-leases")
	}
	if m.fair {
		sh = append(sh, "fair-order")
	}
	return sh
}

func (m *holdsModel) round(shape string, f faultKind) {
	switch shape {
	case "handoff":
		m.handoffRound(f)
	case "kill-holder", "close-holder":
		m.deadHolderRound(shape == "kill-holder", f)
	case "kill-waiter", "close-waiter":
		m.deadWaiterRound(strings.TrimSuffix(shape, "-waiter"))
	case "reenter-shorter":
		m.reenterShorterRound()
	case "reader-leases":
		m.readerLeasesRound()
	case "fair-order":
		m.fairOrderRound()
	case "stop-holder":
		m.stopHolderRound()
	case "stop-waiter":
		m.stopWaiterRound()
	case "stop-registrant":
		m.stopRegistrantRound()
	case "short-wait":
		m.shortWaitRound()
	case "lease-end":
		m.leaseEndRound()
	default:
		m.randomRound(f)
	}
}

// randomRound makes every goroutine do one call, with perhaps a fault at
// the same time, and waits for all of them.
func (m *holdsModel) randomRound(f faultKind) {
	e := m.e
	var wg sync.WaitGroup
	e.mu.Lock()
	owners := slices.Clone(m.owners)
	e.mu.Unlock()
	// In some rounds only one Client acts, so that a wake-up its waiters
	// lose is not covered up by another Client's waiter.
	focus := -1
	if e.intn(3) == 0 {
		focus = e.intn(e.kind.slots)
	}
	for _, o := range owners {
		if o.name == "do" || focus >= 0 && o.slot != focus {
			continue
		}
		n := 2
		if o.anonymous {
			// Several goroutines on one anonymous handle, on an exclusive
			// lock (the model does not follow several ownerless reads).
			n = 1
			if !m.rw && !skipped("anon-shared") {
				n = 3
			}
		}
		for range n {
			wg.Go(func() { m.step(o) })
		}
	}
	if f >= 0 {
		wg.Go(func() { e.fault(f, e.ms(200)) })
	}
	wg.Wait()
	if e.intn(25) == 0 {
		m.replaceBetweenRounds(e.intn(e.kind.slots))
	}
}

// pickSide picks a side for a call.
func (m *holdsModel) pickSide() side {
	if m.rw && m.e.intn(5) < 3 {
		return sR
	}
	return sW
}

// step makes one random call for o and updates the model.
func (m *holdsModel) step(o *howner) {
	e := m.e
	sd := m.pickSide()
	e.mu.Lock()
	holding := o.s[sd].count > 0
	if m.rw && !holding && o.s[1-sd].count > 0 && (o.anonymous || e.intn(2) == 0) {
		// The anonymous actor holds one side at a time: a second ownerless
		// read would be a hold of its own, which the model does not follow.
		sd, holding = 1-sd, true
	}
	e.mu.Unlock()
	e.call()
	ctx, s, l := m.handle(o, sd)
	if fl, ok := l.(*rlock.FencedLock); ok && holding && e.intn(8) == 0 {
		m.checkToken(o, ctx, fl)
		return
	}
	r := e.intn(100)
	switch {
	case holding && (r < 40 || m.rw && o.anonymous), !holding && r < 5:
		time.Sleep(e.ms(150)) // hold a while, so that others wait
		m.unlockNow(o, sd, ctx, s, l)
	case r < 55:
		timeout := pick(e, 50*time.Millisecond, 150*time.Millisecond, 300*time.Millisecond, 600*time.Millisecond)
		if fl, ok := l.(*rlock.FencedLock); ok && e.intn(2) == 0 {
			m.acquire(o, sd, ctx, s, "LockAndGetToken", timeout, true, func(ctx context.Context) (bool, int64, error) {
				t, err := fl.LockAndGetToken(ctx)
				return err == nil, t, err
			}, 0)
			return
		}
		m.acquire(o, sd, ctx, s, "Lock", timeout, true, func(ctx context.Context) (bool, int64, error) {
			return true, 0, l.Lock(ctx)
		}, 0)
	case r < 75:
		wait := pick(e, 0, 50*time.Millisecond, 300*time.Millisecond)
		if !skipped("short-wait") && e.intn(4) == 0 {
			wait = shortWait(e) // shorter than a round trip
		}
		lease := pick(e, 0, 0, chkFixedLease, 400*time.Millisecond)
		what := fmt.Sprintf("TryLock(%v, %v)", wait, lease)
		if fl, ok := l.(*rlock.FencedLock); ok && e.intn(2) == 0 {
			m.acquire(o, sd, ctx, s, "TryLockAndGetToken"+what[7:], 3*time.Second, wait > 0, func(ctx context.Context) (bool, int64, error) {
				t, ok, err := fl.TryLockAndGetToken(ctx, wait, lease)
				return ok, t, err
			}, lease)
			return
		}
		m.acquire(o, sd, ctx, s, what, 3*time.Second, wait > 0, func(ctx context.Context) (bool, int64, error) {
			ok, err := l.TryLock(ctx, wait, lease)
			return ok, 0, err
		}, lease)
	case r < 82:
		m.acquire(o, sd, ctx, s, "LockLease", 400*time.Millisecond, true, func(ctx context.Context) (bool, int64, error) {
			return true, 0, l.LockLease(ctx, chkFixedLease)
		}, chkFixedLease)
	case r < 98:
		m.do(o, sd, ctx, s, l)
	default:
		m.forceUnlock(o, sd, ctx, s, l)
	}
}

// handoffRound is a round shaped for hand-offs under faults: one owner of
// a Client holds the lock on a fixed lease for a while, the Client's other
// goroutines wait for it with contexts that end at various times around
// the release, and acquisitions fail (injected OOM replies) for a stretch
// that may cover the release. A woken waiter whose attempt fails and
// whose context then ends must hand its wake-up on.
func (m *holdsModel) handoffRound(f faultKind) {
	e := m.e
	c := e.intn(e.kind.slots)
	e.mu.Lock()
	var holder *howner
	var waiters []*howner
	for _, o := range m.owners {
		switch {
		case o.slot != c || o.name == "do":
		case holder == nil && !o.anonymous:
			holder = o
		default:
			waiters = append(waiters, o)
		}
	}
	e.mu.Unlock()
	hold := 100*time.Millisecond + e.ms(100)
	oom := e.intn(4) != 0
	var wg sync.WaitGroup
	wg.Go(func() {
		ctx, s, l := m.handle(holder, sW)
		e.call()
		m.acquire(holder, sW, ctx, s, "LockLease", 300*time.Millisecond, true, func(ctx context.Context) (bool, int64, error) {
			return true, 0, l.LockLease(ctx, chkFixedLease)
		}, chkFixedLease)
		// The lock's braced name, and the other kind of lock of its name,
		// must be refused while it is held.
		m.foreign(holder, sW)
		if oom {
			// Acquisitions fail from a little before the release on.
			time.Sleep(hold - 20*time.Millisecond)
			wg.Go(func() { e.fault(fOOMInjected, 0) })
			time.Sleep(20 * time.Millisecond)
		} else {
			time.Sleep(hold)
		}
		m.unlockAll(holder, sW)
	})
	for _, w := range waiters {
		// One goroutine of each owner waits until a little after the
		// release, the other long. The short one starts first: the hub
		// wakes its oldest waiter. The anonymous actor has one goroutine.
		timeouts := []time.Duration{hold + e.ms(110), 2 * time.Second}
		if w.anonymous {
			timeouts = timeouts[:1]
		}
		for i, timeout := range timeouts {
			wg.Go(func() {
				time.Sleep(time.Duration(15+10*i) * time.Millisecond)
				sd := m.pickSide()
				ctx, s, l := m.handle(w, sd)
				e.call()
				m.acquire(w, sd, ctx, s, "Lock (hand-off)", timeout, true, func(ctx context.Context) (bool, int64, error) {
					return true, 0, l.Lock(ctx)
				}, 0)
				e.mu.Lock()
				n := w.s[sd].count
				e.mu.Unlock()
				if n > 0 {
					time.Sleep(e.ms(50))
					m.unlockNow(w, sd, ctx, s, l)
				}
			})
		}
	}
	if f >= 0 && f != fOOMInjected {
		wg.Go(func() { e.fault(f, e.ms(200)) })
	}
	wg.Wait()
}

// otherOwners are the owners not of slot skip that hold nothing. e.mu is
// held.
func (m *holdsModel) otherOwners(skip int) []*howner {
	var os []*howner
	for _, o := range m.owners {
		if o.slot != skip && o.name != "do" && o.s[sW].count == 0 && o.s[sR].count == 0 {
			os = append(os, o)
		}
	}
	return os
}

// seenWaiting waits until a waiter of slot s, started when the slot had
// had base replies of its acquire scripts, is seen waiting: it attempted,
// and its Client is subscribed (a waiter attempts again after it
// subscribed, unless its Client was subscribed before it attempted), and,
// for wake-one, registered; for a fair lock, its field f is in the queue;
// a spin lock's waiter, which never subscribes, once it attempted twice
// (it is in its backoff). It reports whether it saw it.
func (m *holdsModel) seenWaiting(s *slot, base int, f string) bool {
	e := m.e
	wakers := layout.Wakers(e.name)
	queue := layout.Queue(e.name)
	return until(2*time.Second, func() bool {
		if m.spin {
			return m.acquireReplies(s) >= base+2
		}
		if m.acquireReplies(s) < base+1 || !e.subscribed(s) {
			return false
		}
		ctx := context.Background()
		if s.wakeOne {
			if err := e.raw.Do(ctx, e.raw.B().Zscore().Key(wakers).Member(s.id).Build()).Error(); err != nil {
				return false
			}
		}
		if m.fair && f != "" {
			fs, err := e.raw.Do(ctx, e.raw.B().Lrange().Key(queue).Start(0).Stop(-1).Build()).AsStrSlice()
			if err != nil || !slices.Contains(fs, f) {
				return false
			}
		}
		return true
	})
}

// acquireReplies counts the non-error replies of s's acquire scripts.
func (m *holdsModel) acquireReplies(s *slot) int {
	e := m.e
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, sha := range e.kind.acquireScripts {
		n += s.evals[sha]
	}
	return n
}

// chkSetup bounds the acquisitions that set up a shaped round: longer
// than what a dead holder of the round before may keep.
const chkSetup = chkLease + chkFixedLease

// drain releases every hold of the model's owners, so that a shaped
// round starts from a lock that only dead holders may keep.
func (m *holdsModel) drain() {
	m.e.mu.Lock()
	owners := slices.Clone(m.owners)
	m.e.mu.Unlock()
	for _, o := range owners {
		for _, sd := range m.sides() {
			m.unlockAll(o, sd)
		}
	}
}

// deadHolderRound: a holder dies (its process killed, or its Client
// closed) while others wait; they take the lock once its lease ends.
func (m *holdsModel) deadHolderRound(kill bool, f faultKind) {
	e := m.e
	m.drain()
	sd := m.pickSide()
	lease := pick(e, 0, 0, 300*time.Millisecond+e.ms(400))
	victim := -1
	var ch *child
	var childStart time.Time
	if kill {
		ch = e.spawn(childSpec{Act: "hold", Side: sideFlag(sd), Lease: lease, WakeOne: e.kind.wakeOne != nil && e.kind.wakeOne(0)})
		if ch == nil {
			return
		}
		at := time.Now()
		started := at
		if ns, err := strconv.ParseInt(strings.Fields(ch.info + " 0")[0], 10, 64); err == nil && ns > 0 {
			started = time.Unix(0, ns)
		}
		e.mu.Lock()
		// It holds: nobody else may while it lives, nor until its lease
		// ends once it died.
		m.spans = append(m.spans, hspan{key: field(ch.id, ch.spec.Owner), side: sd, field: field(ch.id, ch.spec.Owner) + m.suffix(sd),
			from: at, certainTo: at.Add(time.Hour), why: "child " + ch.who + " holds"})
		childStart = started
		e.mu.Unlock()
	} else {
		victim = e.intn(e.kind.slots)
		e.mu.Lock()
		var holder *howner
		for _, o := range m.owners {
			if o.slot == victim && !o.anonymous && o.name != "do" {
				holder = o
				break
			}
		}
		e.mu.Unlock()
		ctx, s, l := m.handle(holder, sd)
		e.call()
		if lease == 0 {
			m.acquire(holder, sd, ctx, s, "Lock (to die holding)", chkSetup, true, func(ctx context.Context) (bool, int64, error) {
				return true, 0, l.Lock(ctx)
			}, 0)
		} else {
			m.acquire(holder, sd, ctx, s, "LockLease (to die holding)", chkSetup, true, func(ctx context.Context) (bool, int64, error) {
				return true, 0, l.LockLease(ctx, lease)
			}, lease)
		}
	}
	e.mu.Lock()
	ws := m.otherOwners(victim)
	e.mu.Unlock()
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(func() {
			time.Sleep(e.ms(60))
			sd := m.pickSide()
			ctx, s, l := m.handle(w, sd)
			e.call()
			m.acquire(w, sd, ctx, s, "Lock (after a dead holder)", chkLease+chkFixedLease, true, func(ctx context.Context) (bool, int64, error) {
				return true, 0, l.Lock(ctx)
			}, 0)
			time.Sleep(10*time.Millisecond + e.ms(40))
			m.unlockAll(w, sd)
		})
	}
	time.Sleep(80*time.Millisecond + e.ms(100))
	if kill {
		expiry := e.keyExpiry()
		at := e.kill(ch, false)
		e.mu.Lock()
		for i := range m.spans {
			sp := &m.spans[i]
			if sp.to.IsZero() && sp.why == "child "+ch.who+" holds" {
				m.deadSpanLocked(sp, at, childStart, lease)
				if lease == 0 {
					sp.certainTo = certainNoLonger(sp.certainTo, expiry)
				}
			}
		}
		e.mu.Unlock()
	} else {
		m.closeSlot(victim, false, "holding")
	}
	if f >= 0 {
		wg.Go(func() { e.fault(f, e.ms(300)) })
	}
	wg.Wait()
	if !kill {
		m.replaceSlot(victim)
	}
}

func sideFlag(sd side) string { return [...]string{"w", "r"}[sd] }

// keyExpiry reads the lock key's time to live: the time until which
// Redis keeps the hold that is in it, unless a call of a live Client
// ends it or renews it (zero when there is no key or no answer). Read
// just before a holder dies or stops, it bounds how long its hold is
// certain: on a loaded machine the holder's renewals may have come late
// before, and its lease then ends sooner than a third of a lease after.
func (e *engine) keyExpiry() time.Time {
	at := time.Now()
	ms, err := e.raw.Do(context.Background(), e.raw.B().Pttl().Key(e.name).Build()).AsInt64()
	if err != nil || ms <= 0 {
		return time.Time{}
	}
	return at.Add(time.Duration(ms) * time.Millisecond)
}

// certainNoLonger is certainTo, no later than expiry (see keyExpiry) when
// both are set.
func certainNoLonger(certainTo, expiry time.Time) time.Time {
	if certainTo.IsZero() || expiry.IsZero() {
		return certainTo
	}
	return minTime(certainTo, expiry)
}

// deadSpanLocked ends the span of a hold whose Client died at at. On the
// watchdog lease (lease 0) it is gone within a lease of its last renewal,
// and certainly there until a third of a lease after the death (renewals
// come every third of a lease; the margin is for a renewal a loaded
// machine delays), unless a fault hit its renewals. On a fixed lease,
// taken by a call that started at start, it is there until the lease
// ends, counted from the call's start, and gone once it ends, counted
// from the span's start (the call's reply). e.mu is held.
func (m *holdsModel) deadSpanLocked(sp *hspan, at, start time.Time, lease time.Duration) {
	e := m.e
	sp.certainTo = time.Time{}
	if lease == 0 {
		sp.to, sp.settleAt, sp.settleLease = time.Time{}, at, chkLease
		if !e.faultedDuring(at.Add(-chkLease), at) {
			sp.certainTo = at.Add(chkLease / 3)
		}
	} else {
		sp.to = sp.from.Add(lease)
		sp.certainTo = start.Add(lease)
	}
	sp.why += fmt.Sprintf(", dead since %v", e.at(at))
}

// deadWaiterRound: a waiter dies (how: "kill", its process killed, or
// "close", its Client closed) or is stopped ("stop": a child process
// stopped with SIGSTOP, which keeps its connections) while it waits,
// queued in a fair lock or registered for wake-one; then the holder
// releases, and a live waiter must take the lock: at once, or within the
// kind's queue delay (fair lock: a stopped waiter's place is not
// refreshed either).
func (m *holdsModel) deadWaiterRound(how string) {
	e := m.e
	kill := how != "close"
	m.drain()
	sd := sW
	e.mu.Lock()
	var holder *howner
	for _, o := range m.owners {
		if o.slot == 0 && !o.anonymous && o.name != "do" && o.s[sR].count == 0 {
			holder = o
			break
		}
	}
	e.mu.Unlock()
	hctx, hs, hl := m.handle(holder, sd)
	e.call()
	m.acquire(holder, sd, hctx, hs, "Lock (holder)", chkSetup, true, func(ctx context.Context) (bool, int64, error) {
		return true, 0, hl.Lock(ctx)
	}, 0)
	e.mu.Lock()
	held := holder.s[sd].count > 0
	e.mu.Unlock()
	if !held {
		return
	}
	// The lock's braced name, and the other kind of lock of its name,
	// must be refused while it is held.
	m.foreign(holder, sd)
	// The victim: a child, or the owner of the last slot (a wake-one slot
	// for the wake-one kind), that waits.
	var ch *child
	var wg sync.WaitGroup
	victim := e.kind.slots - 1
	var vbase int
	if kill {
		ch = e.spawn(childSpec{Act: "wait", Side: sideFlag(sW), WakeOne: e.kind.wakeOne != nil})
		if ch == nil {
			m.unlockAll(holder, sd)
			return
		}
	} else {
		e.mu.Lock()
		var v *howner
		for _, o := range m.owners {
			if o.slot == victim && !o.anonymous && o.name != "do" {
				v = o
				break
			}
		}
		e.mu.Unlock()
		ctx, s, l := m.handle(v, sW)
		vbase = m.acquireReplies(s)
		wg.Go(func() {
			e.call()
			m.acquire(v, sW, ctx, s, "Lock (to die waiting)", 3*time.Second, true, func(ctx context.Context) (bool, int64, error) {
				return true, 0, l.Lock(ctx)
			}, 0)
			m.unlockAll(v, sW)
		})
		if !m.seenWaiting(s, vbase, m.fieldOfSlot(v, sW, s)) {
			e.logf("the waiter of c%d was not seen waiting", victim)
		}
	}
	// A live waiter of another Client than the holder's and the victim's
	// (for wake-one: the one without it), or else of the holder's.
	e.mu.Lock()
	var w *howner
	for _, prefer := range []bool{true, false} {
		for _, o := range m.owners {
			other := o.slot != 0 && (kill || o.slot != victim)
			if w == nil && other == prefer && o != holder && !o.anonymous && o.name != "do" && o.s[sR].count == 0 && o.s[sW].count == 0 &&
				(kill || o.slot != victim) {
				w = o
			}
		}
	}
	e.mu.Unlock()
	if w == nil {
		m.unlockAll(holder, sd)
		wg.Wait()
		return
	}
	wctx, ws, wl := m.handle(w, sW)
	wbase := m.acquireReplies(ws)
	wg.Go(func() {
		e.call()
		m.acquire(w, sW, wctx, ws, "Lock (behind a dead waiter)", 4*time.Second, true, func(ctx context.Context) (bool, int64, error) {
			return true, 0, wl.Lock(ctx)
		}, 0)
		time.Sleep(e.ms(30))
		m.unlockAll(w, sW)
	})
	if !m.seenWaiting(ws, wbase, m.fieldOfSlot(w, sW, ws)) {
		e.logf("the waiter %v was not seen waiting", w)
	}
	switch how {
	case "kill":
		at := e.kill(ch, m.fair)
		// A release the server ran before it saw the child's connections
		// close may have granted the lock to it (grant across Clients).
		m.grantedChild(ch, at, at)
	case "stop":
		at := e.stop(ch)
		if m.fair {
			e.mu.Lock()
			e.excuse(at, at.Add(e.kind.queueDelay), "child "+ch.who+" stopped in the queue")
			e.mu.Unlock()
		}
		// Its registration lives up to 3s after its last attempt, made
		// before it was stopped: until then a release may grant it the
		// lock (grant across Clients).
		m.grantedChild(ch, at, at.Add(3*time.Second))
	default:
		m.closeSlot(victim, m.fair, "waiting")
	}
	time.Sleep(e.ms(100))
	m.unlockAll(holder, sd)
	wg.Wait()
	switch how {
	case "stop":
		e.kill(ch, false)
	case "close":
		m.replaceSlot(victim)
	}
}

// reenterShorterRound: a holder on the watchdog lease re-enters with a
// short fixed lease while another owner waits, and lets it run out: the
// waiter takes the lock once that short lease ends.
func (m *holdsModel) reenterShorterRound() {
	e := m.e
	m.drain()
	sd := m.pickSide()
	e.mu.Lock()
	var h *howner
	for _, o := range m.owners {
		if !o.anonymous && o.name != "do" && o.s[sR].count == 0 && o.s[sW].count == 0 {
			h = o
			break
		}
	}
	e.mu.Unlock()
	if h == nil {
		return
	}
	ctx, s, l := m.handle(h, sd)
	e.call()
	m.acquire(h, sd, ctx, s, "Lock (to re-enter shorter)", chkSetup, true, func(ctx context.Context) (bool, int64, error) {
		return true, 0, l.Lock(ctx)
	}, 0)
	e.mu.Lock()
	held := h.s[sd].count > 0
	var w *howner
	for _, o := range m.owners {
		if o.slot != h.slot && !o.anonymous && o.name != "do" && o.s[sR].count == 0 && o.s[sW].count == 0 {
			w = o
			break
		}
	}
	e.mu.Unlock()
	if !held || w == nil {
		e.logf("reenter-shorter: not set up (held %v)", held)
		m.unlockAll(h, sd)
		return
	}
	// The waiter waits for the other side (a writer waits for readers).
	wsd := sW
	wctx, ws, wl := m.handle(w, wsd)
	base := m.acquireReplies(ws)
	var wg sync.WaitGroup
	wg.Go(func() {
		e.call()
		m.acquire(w, wsd, wctx, ws, "Lock (behind a shorter lease)", 3*time.Second, true, func(ctx context.Context) (bool, int64, error) {
			return true, 0, wl.Lock(ctx)
		}, 0)
		time.Sleep(e.ms(30))
		m.unlockAll(w, wsd)
	})
	m.seenWaiting(ws, base, m.fieldOfSlot(w, wsd, ws))
	short := 150*time.Millisecond + e.ms(150)
	e.call()
	m.acquire(h, sd, ctx, s, fmt.Sprintf("LockLease(%v) (re-entry)", short), time.Second, true, func(ctx context.Context) (bool, int64, error) {
		return true, 0, l.LockLease(ctx, short)
	}, short)
	wg.Wait()
	// The holder's levels ran out with the short lease: its Unlocks find
	// them gone.
	m.unlockAll(h, sd)
}

// readerLeasesRound: reader A on the watchdog lease, reader B on a short
// fixed lease, a writer waits; A unlocks, and the writer takes the lock
// once B's lease ends.
func (m *holdsModel) readerLeasesRound() {
	e := m.e
	m.drain()
	e.mu.Lock()
	var free []*howner
	for _, o := range m.owners {
		if !o.anonymous && o.name != "do" && o.s[sR].count == 0 && o.s[sW].count == 0 {
			free = append(free, o)
		}
	}
	e.mu.Unlock()
	if len(free) < 3 {
		return
	}
	a, b, w := free[0], free[1], free[2]
	actx, as, al := m.handle(a, sR)
	e.call()
	m.acquire(a, sR, actx, as, "Lock (reader on the watchdog)", chkSetup, true, func(ctx context.Context) (bool, int64, error) {
		return true, 0, al.Lock(ctx)
	}, 0)
	lease := 300*time.Millisecond + e.ms(300)
	bctx, bs, bl := m.handle(b, sR)
	e.call()
	m.acquire(b, sR, bctx, bs, fmt.Sprintf("LockLease(%v) (reader)", lease), chkSetup, true, func(ctx context.Context) (bool, int64, error) {
		return true, 0, bl.LockLease(ctx, lease)
	}, lease)
	// The plain lock of the name, by a reader itself too, must be refused
	// while it is read.
	m.foreign(a, sR)
	wctx, ws, wl := m.handle(w, sW)
	base := m.acquireReplies(ws)
	var wg sync.WaitGroup
	wg.Go(func() {
		e.call()
		m.acquire(w, sW, wctx, ws, "Lock (writer behind readers)", 3*time.Second, true, func(ctx context.Context) (bool, int64, error) {
			return true, 0, wl.Lock(ctx)
		}, 0)
		time.Sleep(e.ms(30))
		m.unlockAll(w, sW)
	})
	m.seenWaiting(ws, base, m.fieldOfSlot(w, sW, ws))
	time.Sleep(e.ms(100))
	m.unlockAll(a, sR)
	wg.Wait()
	m.unlockAll(b, sR) // its lease ended: ErrNotHeld or ErrLockLost
}

// fairOrderRound: waiters join a fair lock's queue one after the other
// (each once the one before is seen in the queue); the holder releases;
// they must take the lock in that order.
func (m *holdsModel) fairOrderRound() {
	e := m.e
	m.drain()
	e.mu.Lock()
	var free []*howner
	for _, o := range m.owners {
		if !o.anonymous && o.name != "do" && o.s[sW].count == 0 {
			free = append(free, o)
		}
	}
	e.mu.Unlock()
	if len(free) < 3 {
		return
	}
	h, ws := free[0], free[1:]
	hctx, hs, hl := m.handle(h, sW)
	e.call()
	m.acquire(h, sW, hctx, hs, "Lock (fair holder)", chkSetup, true, func(ctx context.Context) (bool, int64, error) {
		return true, 0, hl.Lock(ctx)
	}, 0)
	e.mu.Lock()
	held := h.s[sW].count > 0
	e.mu.Unlock()
	if !held {
		return
	}
	queue := layout.Queue(e.name)
	queued := func() ([]string, error) {
		return e.raw.Do(context.Background(), e.raw.B().Lrange().Key(queue).Start(0).Stop(-1).Build()).AsStrSlice()
	}
	inQueue := func(f string) bool {
		fs, err := queued()
		return err == nil && slices.Contains(fs, f)
	}
	// A waiter whose leave failed in an earlier round (a fault cut it)
	// may still be queued, until its heartbeat runs out and a call prunes
	// it: asking again before that, it keeps its place. The grants follow
	// the queue's order; the queue follows the order of joining, but for
	// such waiters.
	before, err := queued()
	if err != nil {
		m.unlockAll(h, sW)
		return
	}
	e.mu.Lock()
	stale := map[*howner]bool{}
	for _, w := range ws {
		stale[w] = slices.Contains(before, m.fieldOf(w, sW))
	}
	e.mu.Unlock()
	type grant struct {
		o   *howner
		at  time.Time
		got bool
	}
	var mu sync.Mutex
	var grants []grant
	var joined []*howner
	var wg sync.WaitGroup
	start := time.Now()
	for _, w := range ws {
		ctx, s, l := m.handle(w, sW)
		e.mu.Lock()
		f := m.fieldOf(w, sW)
		e.mu.Unlock()
		wg.Go(func() {
			e.call()
			m.acquire(w, sW, ctx, s, "Lock (fair order)", 3*time.Second, true, func(ctx context.Context) (bool, int64, error) {
				err := l.Lock(ctx)
				mu.Lock()
				grants = append(grants, grant{o: w, at: time.Now(), got: err == nil})
				mu.Unlock()
				return true, 0, err
			}, 0)
			time.Sleep(10*time.Millisecond + e.ms(20))
			m.unlockAll(w, sW)
		})
		if !until(2*time.Second, func() bool { return inQueue(f) }) {
			e.logf("%v not seen in the queue", w)
			break
		}
		joined = append(joined, w)
	}
	time.Sleep(e.ms(50))
	order, qerr := queued()
	m.unlockAll(h, sW)
	wg.Wait()
	e.mu.Lock()
	defer e.mu.Unlock()
	if qerr != nil || e.faultedDuring(start, time.Now()) {
		return
	}
	at := func(o *howner) int { return slices.Index(order, m.fieldOf(o, sW)) }
	// The queue holds the waiters that joined in the order they joined,
	// but for those that were queued before they asked.
	var fresh []*howner
	for _, o := range joined {
		if !stale[o] {
			fresh = append(fresh, o)
		}
	}
	if !slices.IsSortedFunc(fresh, func(a, b *howner) int { return at(a) - at(b) }) || slices.ContainsFunc(fresh, func(o *howner) bool { return at(o) < 0 }) {
		e.count("violations:fair-order", 1)
		e.violation("fair lock: waiters joined the queue in the order %v, and it holds %v", fresh, order)
	}
	// Among the waiters that joined and got the lock (the others left
	// the queue), the grants follow the queue's order.
	var got, want []*howner
	for _, g := range grants {
		if g.got && slices.Contains(joined, g.o) {
			got = append(got, g.o)
		}
	}
	for _, o := range joined {
		if slices.Contains(got, o) {
			want = append(want, o)
		}
	}
	slices.SortStableFunc(want, func(a, b *howner) int { return at(a) - at(b) })
	if !slices.Equal(got, want) {
		e.count("violations:fair-order", 1)
		e.violation("fair lock: waiters joined the queue in the order %v, and were granted the lock in the order %v", want, got)
	}
	if slices.ContainsFunc(joined, func(o *howner) bool { return stale[o] }) {
		e.count("fair-order:stale", 1)
	}
	e.count("fair-order:checked", 1)
}

// closeSlot closes the Client of slot i while it may hold and wait: the
// holds of its owners end with ErrClosed, and stay in Redis until their
// leases end.
func (m *holdsModel) closeSlot(i int, queued bool, what string) {
	e := m.e
	e.mu.Lock()
	old := e.slots[i]
	type life struct {
		o   *howner
		sd  side
		ctx context.Context
	}
	var lives []life
	for _, o := range m.owners {
		for _, sd := range m.sides() {
			if o.slot == i && o.s[sd].count > 0 {
				ctx := context.Background()
				if !o.anonymous {
					ctx = rlock.WithOwner(ctx, ownerString(o))
				}
				lives = append(lives, life{o, sd, ctx})
			}
		}
	}
	e.mu.Unlock()
	// HoldContext may call the lost handler, which takes e.mu, on this
	// goroutine (a hold first watched after its fixed lease ran out).
	for j := range lives {
		lives[j].ctx = m.get(old, lives[j].sd).HoldContext(lives[j].ctx)
	}
	s := e.closeSlot(i, queued, what)
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, lf := range lives {
		h := &lf.o.s[lf.sd]
		lapsed := !h.fixedMin.IsZero() && time.Now().After(h.fixedMin) // its fixed lease may have ended first
		if cause := context.Cause(lf.ctx); !errors.Is(cause, rlock.ErrClosed) && !h.uncertain && h.doomed == "" &&
			!(lapsed && errors.Is(cause, rlock.ErrLockLost)) {
			e.violation("%v: after Close, its %s hold's cause is %v, want ErrClosed", lf.o, lf.sd, cause)
		}
	}
	m.endSlotLocked(i, s)
}

// endSlotLocked turns the holds of the owners of slot i (whose Client s
// closed) into spans that last until their leases end. e.mu is held.
func (m *holdsModel) endSlotLocked(i int, s *slot) {
	for _, o := range m.owners {
		if o.slot != i {
			continue
		}
		for _, sd := range m.sides() {
			h := &o.s[sd]
			if h.count > 0 || h.uncertain {
				sp := hspan{key: s.id + ":anon", anon: o.anonymous, side: sd, from: h.from, why: fmt.Sprintf("%v's %s hold, its Client closed", o, sd)}
				if !o.anonymous {
					sp.key = field(s.id, ownerString(o))
					sp.field = sp.key + m.suffix(sd)
				}
				if h.from.IsZero() {
					sp.from = s.closedAt
				}
				if h.fixedMin.IsZero() {
					m.deadSpanLocked(&sp, s.closedAt, time.Time{}, 0)
				} else {
					sp.to, sp.certainTo = h.fixedMax, h.fixedMin
				}
				if h.uncertain || h.doomed != "" || h.lostSeen > 0 {
					sp.certainTo = time.Time{}
				}
				if h.lag || h.count == 0 {
					sp.certainTo = time.Time{}
				}
				m.spans = append(m.spans, sp)
			}
			*h = hstate{}
		}
	}
	m.owners = slices.DeleteFunc(m.owners, func(p *howner) bool { return p.slot == i && p.name == "do" })
}

// replaceSlot puts a new Client in slot i.
func (m *holdsModel) replaceSlot(i int) { m.e.replaceSlot(i) }

// replaceBetweenRounds closes Client i and replaces it, between rounds.
func (m *holdsModel) replaceBetweenRounds(i int) {
	m.closeSlot(i, false, "between rounds")
	m.replaceSlot(i)
}

// acquiredLocked records a successful acquisition by o on side sd whose
// call started at start on the Client of slot s, and checks exclusion.
// lease > 0 is a fixed lease; token, when not 0, the token it returned.
// e.mu is held.
func (m *holdsModel) acquiredLocked(o *howner, sd side, what string, start time.Time, lease time.Duration, s *slot, token int64) {
	e := m.e
	now := time.Now()
	h := &o.s[sd]
	e.logLocked("%v %s %s -> acquired (count %d, token %d)", o, sd, what, h.count+1, token)
	key, fld := m.keyOf(o), m.fieldOf(o, sd)
	if s != e.slots[o.slot] || !s.closedAt.IsZero() {
		// Its Client closed while the call ran: the hold ended with it,
		// and stays in Redis until its lease ends.
		sp := hspan{key: key, anon: o.anonymous, side: sd, field: fld, from: now, why: fmt.Sprintf("%v's %s hold won as its Client closed", o, sd)}
		if lease > 0 {
			sp.to = now.Add(lease)
		} else {
			sp.settleAt, sp.settleLease = maxTime(now, s.closedAt), chkLease
		}
		m.spans = append(m.spans, sp)
		return
	}
	// Exclusion: nobody else certainly inside, on a side that conflicts.
	if m.forcing == 0 {
		for _, p := range m.owners {
			for _, q := range m.sides() {
				if p != o && p.s[q].inside(now) && conflicts(key, o.anonymous, sd, m.keyOf(p), p.anonymous, q) {
					e.count("violations:exclusion", 1)
					e.violation("%v: %s acquired the %s side while %v held the %s side (%d levels)", o, what, sd, p, q, p.s[q].count)
				}
			}
		}
		for _, sp := range m.spans {
			if now.Before(sp.certainTo) && conflicts(key, o.anonymous, sd, sp.key, sp.anon, sp.side) {
				e.count("violations:exclusion", 1)
				e.violation("%v: %s acquired the %s side while %s (certain until %v)", o, what, sd, sp.why, e.at(sp.certainTo))
			}
		}
	}
	if o.anonymous && h.count > 0 && !h.fixedMin.IsZero() && !now.Before(h.fixedMin) {
		// The actor's earlier hold ran out its fixed lease: the Client
		// ends it (as lost) now that a new ownerless hold replaces it.
		m.endHoldLocked(o, sd, h.fixedMax, "its fixed lease ran out")
	}
	if o.anonymous && o.name == "" && sd == sW && h.count > h.releasing && !h.uncertain {
		e.violation("%v: %s acquired the lock a second time without an owner: it is not reentrant", o, what)
	}
	reentry := h.count > 0
	h.count++
	h.lag = false
	if !reentry {
		h.start, h.from = start, now
		// Taken before an event that ended in the meantime (its script ran
		// before, its reply came after): that event may have ended it.
		for _, d := range m.dooms {
			if d.to.After(start) && (!d.watchdogOnly || lease == 0) {
				h.doomed, h.uncertain = d.what, true
			}
		}
		if m.forcing > 0 {
			h.doomed, h.uncertain = "ForceUnlock", true
		}
	}
	h.lease = lease
	if lease > 0 {
		h.fixedMin, h.fixedMax = start.Add(lease), now.Add(lease)
		h.lastFixedMax = h.fixedMax
	} else {
		h.fixedMin, h.fixedMax = time.Time{}, time.Time{}
	}
	if token != 0 {
		m.tokenLocked(o, sd, start, now, token, reentry)
	}
}

// tokenLocked checks a fencing token: a new hold's is greater than every
// token a call was given before this call started; a re-entry's is its
// hold's. e.mu is held.
func (m *holdsModel) tokenLocked(o *howner, sd side, start, end time.Time, token int64, reentry bool) {
	e := m.e
	h := &o.s[sd]
	e.count("tokens", 1)
	if reentry && h.token != 0 && token != h.token {
		if !h.uncertain && h.doomed == "" && !m.excused(o, sd) {
			e.count("violations:token", 1)
			e.violation("%v: a re-entry returned token %d, its hold's is %d, and the hold was never reported lost", o, token, h.token)
		}
		reentry = false // a new hold, taken after the old one was found lost
	}
	if !reentry {
		for _, r := range m.tokens {
			if r.end.Before(start) && r.token >= token {
				e.count("violations:token", 1)
				e.violation("%v: a new hold got token %d, not greater than token %d given to %v at %v", o, token, r.token, r.o, e.at(r.end))
			}
		}
	}
	h.token = token
	m.tokens = append(m.tokens, tokenRec{o: o, start: start, end: end, token: token})
}

// checkToken reads the token of o's hold: while the hold is certain, it
// is the token its acquisition returned.
func (m *holdsModel) checkToken(o *howner, ctx context.Context, l *rlock.FencedLock) {
	e := m.e
	start := time.Now()
	t, err := l.Token(ctx)
	e.mu.Lock()
	defer e.mu.Unlock()
	h := &o.s[sW]
	e.logLocked("%v Token -> %d, %v", o, t, errText(err))
	if err == nil && h.token != 0 && h.inside(start) && h.inside(time.Now()) && t != h.token {
		e.count("violations:token", 1)
		e.violation("%v: Token = %d, but its hold's token is %d", o, t, h.token)
	}
}

// endHoldLocked ends o's hold of side sd, which is gone from Redis by
// goneBy at the latest, and records it as a span (for the liveness
// check). e.mu is held.
func (m *holdsModel) endHoldLocked(o *howner, sd side, goneBy time.Time, why string) {
	m.judgeWatchesLocked(o, sd, time.Now())
	h := &o.s[sd]
	if m.rw && sd == sR && o.s[sW].count > 0 && o.s[sW].lease > 0 {
		// The hash the read hold kept alive lives on for up to a lease.
		o.s[sW].keptUntil = maxTime(o.s[sW].keptUntil, goneBy.Add(chkLease))
	}
	if m.rw && sd == sW && h.lease > 0 && why != "released" {
		goneBy = maxTime(goneBy, h.keptUntil)
		if o.s[sR].count > 0 {
			// Kept by the owner's read hold: it ends with it.
			if !h.from.IsZero() {
				m.spans = append(m.spans, hspan{key: m.keyOf(o), anon: o.anonymous, side: sd, field: m.fieldOf(o, sd),
					from: h.from, settleAt: time.Now(), settleLease: chkLease, why: fmt.Sprintf("%v's write field, kept by its read hold", o)})
			}
			h.from = time.Time{}
		}
	}
	if !h.from.IsZero() {
		m.spans = append(m.spans, hspan{key: m.keyOf(o), anon: o.anonymous, side: sd, field: m.fieldOf(o, sd),
			from: h.from, to: goneBy, why: fmt.Sprintf("%v's %s hold (%s)", o, sd, why)})
	}
	h.count, h.fixedMin, h.fixedMax, h.lag, h.from, h.start, h.token, h.lease, h.keptUntil = 0, time.Time{}, time.Time{}, false, time.Time{}, time.Time{}, 0, 0, time.Time{}
}

// phantomLocked records that o's hold of side sd may be in Redis from
// from until to, though o does not hold it: a call whose outcome is
// unknown. e.mu is held.
func (m *holdsModel) phantomLocked(o *howner, sd side, from, to time.Time, why string) {
	m.spans = append(m.spans, hspan{key: m.keyOf(o), anon: o.anonymous, side: sd, field: m.fieldOf(o, sd),
		from: from, to: to, why: fmt.Sprintf("%v's %s level may be left (%s)", o, sd, why)})
}

// excused reports whether a loss of o's hold is explained by an event: a
// doom this round, or the end of a fixed lease. e.mu is held.
func (m *holdsModel) excused(o *howner, sd side) bool {
	h := &o.s[sd]
	return h.doomed != "" || !h.lastFixedMax.IsZero() && time.Now().After(h.lastFixedMax.Add(-100*time.Millisecond)) ||
		!h.fixedMin.IsZero() && time.Now().After(h.fixedMin)
}

// acquire runs one acquisition call for o with a timeout on its context;
// waits tells whether the call may wait (for the liveness check).
func (m *holdsModel) acquire(o *howner, sd side, ctx context.Context, s *slot, what string, timeout time.Duration,
	waits bool, call func(context.Context) (bool, int64, error), lease time.Duration) {
	e := m.e
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	ok, token, err := call(ctx)
	end := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	hw := hwait{key: m.keyOfSlot(o, s), anon: o.anonymous, side: sd, from: start, to: end, what: fmt.Sprintf("%v %s %s", o, sd, what)}
	if waits {
		m.waits = append(m.waits, hw)
	}
	m.calls = append(m.calls, hw)
	if err == nil && !ok && s.closedAt.IsZero() {
		m.tries = append(m.tries, hw)
	}
	if !s.closedAt.IsZero() && !(err == nil && ok) {
		e.logLocked("%v %s %s -> %v (its Client closed)", o, sd, what, errText(err))
		return
	}
	switch {
	case err == nil && ok:
		m.acquiredLocked(o, sd, what, start, lease, s, token)
		return
	case err == nil:
		e.logLocked("%v %s %s -> not acquired", o, sd, what)
	default:
		e.logLocked("%v %s %s -> %v", o, sd, what, oneLine(err))
		if !errors.Is(err, rlock.ErrNotAcquired) && !errors.Is(err, rlock.ErrClosed) && !isRedisFailure(err) && !e.refusedForProbe(err, start) {
			e.violation("%v: %s failed with %v, which is neither ErrNotAcquired, ErrClosed nor a Redis failure", o, what, err)
		}
		if errors.Is(err, rlock.ErrLockLost) {
			o.s[sd].uncertain = true // a re-entry found the hold gone
		}
	}
	if waits {
		m.gaveUp = append(m.gaveUp, window{from: end, to: end, what: o.String()})
	}
	// Truly unknowable: a script held up in a paused server may run after
	// its call gave up and gave back what it might have won; it then
	// holds a level until its lease ends.
	l := lease
	if l == 0 {
		l = chkLease
	}
	m.spans = append(m.spans, hspan{key: m.keyOfSlot(o, s), anon: o.anonymous, side: sd, field: m.fieldOfSlot(o, sd, s), from: start,
		settleAt: end, settleLease: l, ifPaused: true, why: fmt.Sprintf("%v's %s level may be left by an acquisition that gave up in a pause", o, sd)})
}

// fieldOfSlot is fieldOf on a given slot.
func (m *holdsModel) fieldOfSlot(o *howner, sd side, s *slot) string {
	if o.anonymous {
		return ""
	}
	return m.keyOfSlot(o, s) + m.suffix(sd)
}

// keyOfSlot is keyOf on a given slot.
func (m *holdsModel) keyOfSlot(o *howner, s *slot) string {
	if o.anonymous {
		return s.id + ":anon"
	}
	return field(s.id, ownerString(o))
}

// unlockAll releases every level o holds of side sd.
func (m *holdsModel) unlockAll(o *howner, sd side) {
	m.e.mu.Lock()
	n := o.s[sd].count
	m.e.mu.Unlock()
	ctx, s, l := m.handle(o, sd)
	for range n {
		m.unlockNow(o, sd, ctx, s, l)
	}
}

// unlockNow releases one level.
func (m *holdsModel) unlockNow(o *howner, sd side, ctx context.Context, s *slot, l checkedLock) {
	e := m.e
	e.mu.Lock()
	o.s[sd].releasing++
	e.mu.Unlock()
	e.call()
	start := time.Now()
	err := l.Unlock(ctx)
	e.mu.Lock()
	defer e.mu.Unlock()
	o.s[sd].releasing--
	e.logLocked("%v %s Unlock (count %d) -> %v", o, sd, o.s[sd].count, errText(err))
	m.releasedLocked(o, sd, err, "Unlock", start, s)
}

// releasedLocked records the outcome err of a release of one level of o
// (an Unlock, or Do's own) that started at start. e.mu is held.
func (m *holdsModel) releasedLocked(o *howner, sd side, err error, what string, start time.Time, s *slot) {
	e := m.e
	h := &o.s[sd]
	now := time.Now()
	if s != e.slots[o.slot] || !s.closedAt.IsZero() {
		return // its Client closed: the model ended its holds then
	}
	switch {
	case err == nil:
		h.lag = false
		if h.count == 0 {
			if !h.uncertain {
				e.violation("%v: %s succeeded, but the owner was told it holds nothing", o, what)
			}
			return
		}
		if h.count == 1 {
			m.endHoldLocked(o, sd, now, "released")
			return
		}
		h.count--
		if h.lease > 0 {
			// A release that leaves levels resets the lease, as Redisson's.
			h.fixedMin, h.fixedMax = start.Add(h.lease), now.Add(h.lease)
			h.lastFixedMax = h.fixedMax
		}
	case o.anonymous && o.name == "" && errors.Is(err, rlock.ErrNotHeld) && !errors.Is(err, rlock.ErrLockLost) && h.releasing >= h.count:
		// Goroutines sharing the anonymous handle released more levels
		// than it held: this release came after the others took them.
		e.logLocked("  model: %v: a release that found the levels taken by the other releases in flight", o)
	case errors.Is(err, rlock.ErrLockLost), errors.Is(err, rlock.ErrNotHeld):
		// Found gone: a loss, reported by the error (and to the handler).
		if h.count > 0 && !h.uncertain && !m.excused(o, sd) {
			e.count("violations:promise", 1)
			e.violation("%v: %s found a %s hold of %d levels gone, with nothing that could have ended it: %v", o, what, sd, h.count, err)
		}
		if h.count > 0 {
			m.endHoldLocked(o, sd, m.goneByLocked(o, sd, now), "found gone")
		}
		if errors.Is(err, rlock.ErrLockLost) {
			h.uncertain = true
		}
	case errors.Is(err, rlock.ErrClosed):
		if h.count > 0 {
			m.endHoldLocked(o, sd, m.goneByLocked(o, sd, now), "closed")
		}
		h.uncertain = true
	default:
		// Redis did not confirm the release: the level is released for the
		// Client all the same. Truly unknowable: whether the script ran.
		// Redis' count may stay one higher until the owner's next call; at
		// the last level the field may be left until its lease ends (the
		// watchdog stopped when the release started).
		if !isRedisFailure(err) {
			e.violation("%v: %s failed with %v, not a Redis failure", o, what, err)
		}
		if h.count > 1 {
			h.count--
			h.lag = true
			if h.lease > 0 {
				// It may have reset the lease, at the latest when it settled.
				t := e.settled(now)
				if t.IsZero() {
					t = now.Add(chkLease*3/2 + chkSettle) // a pause lasts no longer
				}
				h.fixedMax = maxTime(h.fixedMax, t.Add(h.lease))
				h.lastFixedMax = h.fixedMax
			}
			return
		}
		if h.count == 1 {
			sp := hspan{key: m.keyOf(o), anon: o.anonymous, side: sd, field: m.fieldOf(o, sd), from: h.from,
				why: fmt.Sprintf("%v's %s hold, its release unconfirmed", o, sd)}
			if !h.fixedMax.IsZero() {
				sp.to = h.fixedMax
			} else {
				sp.settleAt, sp.settleLease = now, chkLease
			}
			m.endHoldLocked(o, sd, now, "released, unconfirmed")
			m.spans = append(m.spans, sp)
		}
	}
}

// goneByLocked is the latest time o's hold of side sd can have been in
// Redis, when it was found gone at now: the end of its fixed lease, the
// end of an event that certainly ended it, or its loss report. e.mu is
// held.
func (m *holdsModel) goneByLocked(o *howner, sd side, now time.Time) time.Time {
	h := &o.s[sd]
	t := now
	if !h.fixedMax.IsZero() && h.fixedMax.Before(t) {
		t = h.fixedMax
	}
	for _, d := range m.dooms {
		if d.definite && h.from.Before(d.from) && (!d.watchdogOnly || h.fixedMin.IsZero()) && d.goneBy.Before(t) {
			t = d.goneBy
		}
	}
	if !h.lostAt.IsZero() && h.lostAt.Before(t) {
		t = h.lostAt
	}
	return t
}

// doomLocked marks every hold with levels as doomed by why: it may end
// without its Client knowing yet. Acquisitions whose reply comes later
// check the windows of m.dooms. e.mu is held.
func (m *holdsModel) doomLocked(why string, watchdogOnly bool) {
	for _, o := range m.owners {
		for _, sd := range m.sides() {
			if o.s[sd].count > 0 && (!watchdogOnly || o.s[sd].fixedMin.IsZero()) {
				o.s[sd].doomed = why
				o.s[sd].uncertain = true
			}
		}
	}
}

// do runs Do with a function that checks the hold, maybe re-enters, and
// returns nil, an error, or panics.
func (m *holdsModel) do(o *howner, sd side, ctx context.Context, s *slot, l checkedLock) {
	e := m.e
	ctx, cancel := context.WithTimeout(ctx, pick(e, 100*time.Millisecond, 500*time.Millisecond))
	defer cancel()
	mode := e.intn(4) // 0: nil, 1: error, 2: panic, 3: re-entry inside
	start := time.Now()
	var inner *howner // the owner Do acted for
	errFn := errors.New("fn failed")
	fn := func(fctx context.Context) error {
		e.mu.Lock()
		inner = o
		if o.anonymous {
			// Do made an owner of its own: a temporary owner of the model.
			inner = &howner{slot: o.slot, name: "do", anonymous: true}
			m.owners = append(m.owners, inner)
		}
		m.acquiredLocked(inner, sd, "Do", start, 0, s, 0)
		h := &inner.s[sd]
		if l.HoldContext(fctx).Err() != nil && !h.uncertain && h.doomed == "" && s == e.slots[o.slot] && s.closedAt.IsZero() {
			e.violation("%v: Do's function runs with its hold already ended (%v)", inner, context.Cause(l.HoldContext(fctx)))
		}
		e.mu.Unlock()
		defer func() {
			// Do releases its level once fn returns.
			e.mu.Lock()
			inner.s[sd].releasing++
			e.mu.Unlock()
		}()
		if mode == 3 {
			start := time.Now()
			if err := l.Lock(fctx); err == nil {
				e.mu.Lock()
				m.acquiredLocked(inner, sd, "re-entry in Do", start, 0, s, 0)
				inner.s[sd].releasing++
				e.mu.Unlock()
				rstart := time.Now()
				err := l.Unlock(fctx)
				e.mu.Lock()
				inner.s[sd].releasing--
				m.releasedLocked(inner, sd, err, "Unlock in Do", rstart, s)
				e.mu.Unlock()
			}
		}
		time.Sleep(e.ms(100))
		switch mode {
		case 1:
			return errFn
		case 2:
			panic("checker: fn panics")
		}
		return nil
	}
	var err error
	func() {
		defer func() {
			if v := recover(); v != nil && v != "checker: fn panics" {
				panic(v)
			}
		}()
		err = l.Do(ctx, fn)
	}()
	e.mu.Lock()
	defer e.mu.Unlock()
	m.waits = append(m.waits, hwait{key: m.keyOfSlot(o, s), anon: o.anonymous, side: sd, from: start, to: time.Now(), what: fmt.Sprintf("%v %s Do", o, sd)})
	m.calls = append(m.calls, m.waits[len(m.waits)-1])
	e.logLocked("%v %s Do(mode %d) -> %v", o, sd, mode, errText(err))
	if inner == nil {
		if err == nil {
			e.violation("%v: Do returned nil without running its function", o)
		}
		// As for any acquisition that gave up: see acquire.
		m.spans = append(m.spans, hspan{key: m.keyOfSlot(o, s), anon: o.anonymous, side: sd, field: m.fieldOfSlot(o, sd, s), from: start,
			settleAt: time.Now(), settleLease: chkLease, ifPaused: true, why: fmt.Sprintf("%v's %s level may be left by a Do that gave up in a pause", o, sd)})
		return
	}
	h := &inner.s[sd]
	h.releasing--
	// Another goroutine of the owner may have released the level Do took
	// while fn ran (an owner's levels are all alike): Do's release then
	// finds nothing to release. That is right only if the model, too, has
	// no level left for the owner, or does not know how many it has (a
	// loss, or an event that may have ended the hold, then Do took a new
	// hold, which a release of a level from before took).
	taken := errors.Is(err, rlock.ErrNotHeld) && !errors.Is(err, rlock.ErrLockLost) &&
		(h.count == 0 || h.uncertain || h.doomed != "")
	if mode == 1 && !errors.Is(err, errFn) || mode == 0 && err != nil && !errors.Is(err, rlock.ErrLockLost) &&
		!errors.Is(err, rlock.ErrClosed) && !isRedisFailure(err) && !taken {
		e.violation("%v: Do = %v, want the function's own result", o, err)
	}
	// Do released its level, found the hold gone, found its level taken,
	// or failed to release (a panic hides the release's error: the
	// release may have failed).
	var rerr error
	switch {
	case errors.Is(err, rlock.ErrLockLost), errors.Is(err, rlock.ErrClosed), taken:
		rerr = err
	case err != nil && isRedisFailure(err):
		rerr = err
	case mode == 2 && h.count == 0:
		rerr = rlock.ErrNotHeld // the panic hid a release that found its level taken
	case mode == 2:
		// Truly unknowable: the panic hides whether the release went
		// through; treat it as a release Redis did not confirm.
		rerr = errors.New("injected: a panic hid the release's outcome")
	}
	m.releasedLocked(inner, sd, rerr, "Do's release", start, s)
	if inner != o && inner.s[sd].count == 0 && !inner.s[sd].uncertain {
		m.owners = slices.DeleteFunc(m.owners, func(p *howner) bool { return p == inner })
	}
}

// forceUnlock deletes the lock whoever holds it: every hold taken before
// the call ends is doomed, and while it is in flight nobody is certainly
// inside.
func (m *holdsModel) forceUnlock(o *howner, sd side, ctx context.Context, s *slot, l checkedLock) {
	e := m.e
	from := time.Now()
	e.mu.Lock()
	m.doomLocked("ForceUnlock", false)
	m.forcing++
	// What a dead holder left is not certain any more either.
	for i := range m.spans {
		if sp := &m.spans[i]; sp.certainTo.After(from) {
			sp.certainTo = from
		}
	}
	e.mu.Unlock()
	ok, err := l.ForceUnlock(ctx)
	e.mu.Lock()
	defer e.mu.Unlock()
	m.doomLocked("ForceUnlock", false)
	m.forcing--
	now := time.Now()
	m.dooms = append(m.dooms, hdoom{what: "ForceUnlock", from: from, to: now, definite: ok && err == nil, goneBy: now})
	if ok && err == nil {
		// It deleted the lock: what was left before it started is gone.
		for i := range m.spans {
			if sp := &m.spans[i]; sp.from.Before(from) && (sp.to.IsZero() || sp.to.After(now)) {
				sp.to, sp.settleAt, sp.ifPaused = now, time.Time{}, false
			}
		}
	}
	e.logLocked("%v %s ForceUnlock -> %v, %v", o, sd, ok, errText(err))
}

// faulted: a pause longer than the lease may end every hold on the
// watchdog lease (no renewal gets through before it runs out): they are
// doomed while it lasts, and gone once it ended.
func (m *holdsModel) faulted(f faultKind, from, to time.Time) {
	if f != fPauseLong {
		return
	}
	e := m.e
	e.mu.Lock()
	defer e.mu.Unlock()
	m.doomLocked(f.String(), true)
	if !to.IsZero() {
		m.dooms = append(m.dooms, hdoom{what: f.String(), from: from, to: to, definite: true, goneBy: to.Add(chkSettle), watchdogOnly: true})
	}
}

// lost is the lost handler of the Client of slot si, generation gen.
func (m *holdsModel) lost(si, gen int, name, owner string, cause error) {
	e := m.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if name != e.name {
		e.violation("loss reported for %q, not the checker's lock %q", name, e.name)
	}
	if !errors.Is(cause, rlock.ErrLockLost) {
		e.violation("loss reported with cause %v, which does not match ErrLockLost", cause)
	}
	if e.slots[si].gen != gen {
		return
	}
	now := time.Now()
	// A watchdog that did not run in time because the test process
	// stalled explains the loss it reports (see starvedLossLocked).
	starved := e.starvedLossLocked(cause, now)
	for _, o := range m.owners {
		if o.slot == si && !o.anonymous && ownerString(o) == owner {
			// The report does not say which side: it is explained if the
			// hold of either side may have ended. Checked against its
			// causes now, and again at the checkpoint (an acquisition that
			// registers late may learn of a doom only then).
			explained := starved
			var first *hstate
			for _, sd := range m.sides() {
				h := &o.s[sd]
				if h.count == 0 && !h.uncertain {
					continue
				}
				if first == nil {
					first = h
				}
				if h.uncertain || m.excused(o, sd) {
					explained = true
				}
			}
			for _, sd := range m.sides() {
				h := &o.s[sd]
				if h.count == 0 && !h.uncertain {
					continue
				}
				if !explained && h == first {
					h.lostSeen++
				}
				h.uncertain = true
				if h.lostAt.IsZero() {
					h.lostAt = now
				}
			}
			return
		}
	}
	// An owner relock made up (an anonymous hold, Do's): explained if a
	// hold of one of them may have ended, at the time of the report.
	explained := starved
	for _, o := range m.owners {
		if o.slot == si && o.anonymous {
			for _, sd := range m.sides() {
				h := &o.s[sd]
				if (h.count > 0 || h.uncertain) && (h.uncertain || m.excused(o, sd)) {
					explained = true
				}
			}
		}
	}
	if !explained {
		m.anonLosses[si]++
	}
	for _, o := range m.owners {
		if o.slot == si && o.anonymous {
			for _, sd := range m.sides() {
				o.s[sd].uncertain = true
				if o.s[sd].lostAt.IsZero() {
					o.s[sd].lostAt = now
				}
			}
		}
	}
}

// view is what a Client says of one owner's hold of a side: its life, and
// the count Redis has.
type view struct {
	alive bool
	// life is the hold's life the view sampled alive from: a fixed
	// lease's timer may end it (and report the loss) after the sample.
	life  context.Context
	count int
	// anonFields, for an anonymous actor, counts the fields Redis has of
	// its Client's anonymous owners.
	anonFields int
}

type viewKey struct {
	o  *howner
	sd side
}

// views reads the Client's and Redis' view of every owner's holds. Named
// owners are read from the lock's fields, anonymous actors with HoldCount
// without an owner.
func (m *holdsModel) views(fields map[string]string) map[viewKey]view {
	e := m.e
	e.mu.Lock()
	owners := slices.Clone(m.owners)
	slots := slices.Clone(e.slots)
	e.mu.Unlock()
	vs := make(map[viewKey]view)
	for _, o := range owners {
		if o.name == "do" {
			continue
		}
		s := slots[o.slot]
		ctx := context.Background()
		if !o.anonymous {
			ctx = rlock.WithOwner(ctx, ownerString(o))
		}
		for _, sd := range m.sides() {
			l := m.get(s, sd)
			life := l.HoldContext(ctx)
			v := view{alive: life.Err() == nil, life: life}
			if o.anonymous {
				v.count, _ = l.HoldCount(ctx)
				prefix := field(s.id, "anon-")
				for f := range fields {
					if strings.HasPrefix(f, prefix) && strings.HasSuffix(f, m.suffix(sd)) == (m.suffix(sd) != "") {
						v.anonFields++
					}
				}
			} else {
				v.count, _ = strconv.Atoi(fields[field(s.id, ownerString(o))+m.suffix(sd)])
			}
			vs[viewKey{o, sd}] = v
		}
	}
	return vs
}

// known reports whether field f of Redis is accounted for at now: held by
// an owner, or a span that may still be there. e.mu is held.
func (m *holdsModel) known(f string, now time.Time) (bool, string) {
	if f == "mode" && m.rw {
		return true, ""
	}
	if _, ok := m.e.diedStartingLocked(f, now); ok {
		return true, "" // a child that died as it started may have taken it
	}
	for _, o := range m.owners {
		for _, sd := range m.sides() {
			h := &o.s[sd]
			if h.count == 0 && !h.uncertain {
				continue
			}
			if o.anonymous {
				if strings.HasPrefix(f, field(m.e.slots[o.slot].id, "anon-")) {
					return true, ""
				}
			} else if m.fieldOf(o, sd) == f {
				return true, ""
			}
		}
	}
	why := ""
	for _, sp := range m.spans {
		match := sp.field == f || sp.anon && strings.HasPrefix(f, strings.TrimSuffix(sp.key, "anon")+"anon-") &&
			strings.HasSuffix(f, ":write") == (m.suffix(sp.side) != "")
		if !match {
			continue
		}
		if sp.to.IsZero() || !now.After(sp.to) {
			return true, ""
		}
		if m.rw && sp.side == sR && (m.readersLeftLocked(now) || m.writerLeftLocked(now)) {
			// Redisson's layout: a reader's field goes only at its release
			// or with the hash, which lives on while other readers hold,
			// and while the writer (the same owner) holds: its renewals
			// keep the whole hash, and its release deletes it.
			return true, ""
		}
		why = sp.why + ", which should have ended by " + m.e.at(sp.to)
	}
	return false, why
}

// inFields reports whether the hash fields have the field of span sp (for
// an anonymous owner: any anonymous field of its Client, on its side).
func (m *holdsModel) inFields(sp *hspan, fields map[string]string) bool {
	if !sp.anon {
		_, ok := fields[sp.field]
		return ok
	}
	prefix := strings.TrimSuffix(sp.key, "anon") + "anon-"
	for f := range fields {
		if strings.HasPrefix(f, prefix) && strings.HasSuffix(f, ":write") == (m.suffix(sp.side) != "") {
			return true
		}
	}
	return false
}

// writerLeftLocked reports whether a write hold may still keep the
// hash: an owner holds the write side (or may), or a write hold's field
// may still be in Redis. e.mu is held.
func (m *holdsModel) writerLeftLocked(now time.Time) bool {
	for _, o := range m.owners {
		if o.s[sW].count > 0 || o.s[sW].uncertain {
			return true
		}
	}
	for _, sp := range m.spans {
		if sp.side == sW && (sp.to.IsZero() || now.Before(sp.to)) {
			return true
		}
	}
	return false
}

// readersLeftLocked reports whether a read hold may be alive at now.
// e.mu is held.
func (m *holdsModel) readersLeftLocked(now time.Time) bool {
	for _, o := range m.owners {
		if o.s[sR].count > 0 || o.s[sR].uncertain {
			return true
		}
	}
	for _, sp := range m.spans {
		if sp.side == sR && (sp.to.IsZero() || now.Before(sp.to)) {
			return true
		}
	}
	return false
}

// checkpoint checks the model against the Clients and Redis between
// rounds, when no call is in flight.
func (m *holdsModel) checkpoint() {
	e := m.e
	ctx := context.Background()
	e.mu.Lock()
	m.spans = slices.DeleteFunc(m.spans, func(sp hspan) bool {
		if sp.settleAt.IsZero() {
			return false
		}
		if _, paused := e.pausedAt(sp.settleAt); sp.ifPaused && !paused {
			return true
		}
		return false
	})
	for i := range m.spans {
		if sp := &m.spans[i]; !sp.settleAt.IsZero() {
			sp.to, sp.settleAt = e.settled(sp.settleAt).Add(sp.settleLease), time.Time{}
		}
	}
	for _, g := range m.gaveUp {
		e.leftQueue(g.from, g.what)
	}
	m.gaveUp = m.gaveUp[:0]
	e.mu.Unlock()
	// A doomed hold whose field is gone is reported lost within a renewal
	// interval (a fixed lease just ends): wait for that first.
	deadline := time.Now().Add(chkLease + 500*time.Millisecond)
	strayUntil := time.Now().Add(400 * time.Millisecond)
	var fields map[string]string
	var vs map[viewKey]view
	for {
		var err error
		fields, err = e.raw.Do(ctx, e.raw.B().Hgetall().Key(e.name).Build()).AsStrMap()
		if !assert.NoError(e.t, err, "HGETALL") {
			return
		}
		vs = m.views(fields)
		pending := ""
		now := time.Now()
		e.mu.Lock()
		for k, v := range vs {
			if v.alive && v.count == 0 && k.o.s[k.sd].fixedMin.IsZero() {
				pending = k.o.String()
			}
		}
		// A field nobody holds may be one a failed acquisition is taking
		// back: give it a moment (the settlement runs every 100ms).
		if pending == "" && now.Before(strayUntil) {
			for f := range fields {
				if ok, _ := m.known(f, now); !ok {
					pending = "stray field " + f
				}
			}
		}
		e.mu.Unlock()
		if pending == "" || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	now := time.Now()
	// What Redis no longer has is gone for good (the round is over, and
	// no script of it is held up any more): a level that may have been
	// left, or a dead holder's, ends here at the latest.
	for i := range m.spans {
		sp := &m.spans[i]
		if !sp.to.IsZero() && !sp.to.After(now) || m.inFields(sp, fields) {
			continue
		}
		sp.to, sp.settleAt = now, time.Time{}
		if sp.certainTo.After(now) {
			sp.certainTo = now
		}
	}
	m.judgeWatchesLocked(nil, 0, now)
	m.checkTriesLocked(now)
	for k, v := range vs {
		o, sd := k.o, k.sd
		h := &o.s[sd]
		fixedOver := !h.fixedMin.IsZero() && !now.Before(h.fixedMin)
		switch {
		case h.count > 0 && !v.alive && fixedOver && !h.uncertain && h.doomed == "":
			// A watched hold ends at its lease's end (its Client's timer):
			// the lease ran out while it was held.
			e.logLocked("  model: %v %s: its fixed lease ended, and its Client ended the hold", o, sd)
			m.endHoldLocked(o, sd, h.fixedMax, "its fixed lease ended")
		case v.alive && v.count == 0 && h.fixedMin.IsZero():
			e.count("violations:promise", 1)
			e.violation("%v: its Client holds the %s side for it, but Redis has no hold of it, and no loss was reported within the lease", o, sd)
		case h.uncertain || h.doomed != "":
			// Take the Client's view.
			e.logLocked("  model: %v %s resynced from %d to %d levels (alive %v, doomed %q)", o, sd, h.count, v.count, v.alive, h.doomed)
			switch {
			case v.alive && v.count == 0:
				// A fixed-lease hold gone from Redis: its Client learns of
				// it at its next call, which reports the loss then.
				if h.count > 0 {
					m.endHoldLocked(o, sd, m.goneByLocked(o, sd, now), "gone")
				}
				if v.life.Err() != nil {
					// Its Client ended it since the view (its fixed
					// lease's timer), and reported the loss: the owner's
					// next Lock takes the lock anew.
					break
				}
				h.count = 1 // still the Client's, until its next call
				h.fixedMin, h.fixedMax, h.from, h.start = now, now, now, now
			case v.alive:
				// Redis' count may still lag a release it did not confirm;
				// the Client's count is the one released.
				if !(h.lag && v.count == h.count+1) {
					if h.count == 0 {
						h.from, h.start = now, now
					}
					h.count = v.count
				}
			default:
				if h.count > 0 {
					goneBy := m.goneByLocked(o, sd, now)
					if !h.fixedMin.IsZero() && !now.Before(h.fixedMin) {
						// Its Client's timer ended it at its fixed lease's
						// end, counted from the call's start: Redis counts
						// from the script, and may keep it until fixedMax.
						goneBy = maxTime(goneBy, h.fixedMax)
					}
					m.endHoldLocked(o, sd, goneBy, "lost")
				}
				if v.count > 0 {
					// Truly unknowable: a level a lost reply may have left
					// (the Client gave up its hold); it ends with its lease.
					m.phantomLocked(o, sd, now, e.settled(now).Add(max(chkLease, chkFixedLease)), "left by an uncertain call")
				}
			}
		case h.count > 0 && !v.alive:
			e.count("violations:promise", 1)
			e.violation("%v was told it holds %d %s levels, but its hold ended without a loss report (Redis has %d)", o, h.count, sd, v.count)
		case h.count > 0 && v.count != h.count && !fixedOver && !(h.lag && v.count == h.count+1):
			e.violation("%v was told it holds %d %s levels; Redis has %d", o, h.count, sd, v.count)
		case h.count == 0 && v.alive:
			e.violation("%v was told it holds no %s level, but its Client has a live hold for it (Redis has %d)", o, sd, v.count)
		}
		if h.lostSeen > 0 && !m.excused(o, sd) {
			e.count("violations:promise", 1)
			e.violation("%v: %d loss reports of its %s hold, with nothing that could have ended it", o, h.lostSeen, sd)
		}
		h.lostSeen, h.uncertain, h.doomed, h.lostAt = 0, false, "", time.Time{}
	}
	for i, n := range m.anonLosses {
		if n > 0 && len(m.dooms) == 0 {
			e.violation("c%d: %d loss reports of anonymous holds, with nothing that could have ended them", i, n)
		}
		m.anonLosses[i] = 0
	}
	// Do's own owners are gone once Do returned.
	for _, o := range m.owners {
		if o.name == "do" {
			for _, sd := range m.sides() {
				if o.s[sd].count > 0 {
					m.phantomLocked(o, sd, o.s[sd].from, e.settled(now).Add(chkLease), "Do's owner")
					m.endHoldLocked(o, sd, now, "Do returned")
				}
			}
		}
	}
	m.owners = slices.DeleteFunc(m.owners, func(p *howner) bool { return p.name == "do" })
	// Every field belongs to an owner that holds, or to a hold that may
	// still be there.
	for f, v := range fields {
		if ok, why := m.known(f, now); !ok {
			e.count("violations:stray", 1)
			if why != "" {
				e.violation("Redis has field %s=%s of %s", f, v, why)
			} else {
				e.violation("Redis has field %s=%s that no owner holds", f, v)
			}
		}
	}
	m.livenessLocked(now)
	m.dooms = m.dooms[:0]
	m.waits = m.waits[:0]
	m.calls, m.tries, m.freeAt = m.calls[:0], m.tries[:0], time.Time{}
	// A span that ended is forgotten, but a reader's while other readers
	// may keep its field in the hash (see known).
	readers := m.rw && m.readersLeftLocked(now)
	m.spans = slices.DeleteFunc(m.spans, func(sp hspan) bool {
		return !sp.to.IsZero() && sp.to.Before(now) && !(readers && sp.side == sR)
	})
	e.forgetPast()
}

// livenessLocked checks the waits of the round: a wait must not go on for
// longer than the bound while no hold that conflicts with it may be in
// Redis. e.mu is held.
func (m *holdsModel) livenessLocked(now time.Time) {
	e := m.e
	var ws []wait
	for _, w := range m.waits {
		var busy []window
		add := func(from, to time.Time, why string) {
			if to.IsZero() {
				to = now
			}
			busy = append(busy, window{from: from, to: to, what: why})
		}
		for _, o := range m.owners {
			for _, sd := range m.sides() {
				h := &o.s[sd]
				if h.count > 0 && conflicts(w.key, w.anon, w.side, m.keyOf(o), o.anonymous, sd) {
					to := now
					if !h.fixedMax.IsZero() && h.fixedMax.Before(now) {
						to = maxTime(h.fixedMax, h.keptUntil)
						if m.rw && sd == sW && o.s[sR].count > 0 {
							to = now // kept by the owner's read hold
						}
					}
					add(h.from, to, fmt.Sprintf("%v's %s hold", o, sd))
				}
			}
		}
		for _, sp := range m.spans {
			if conflicts(w.key, w.anon, w.side, sp.key, sp.anon, sp.side) {
				add(sp.from, sp.to, sp.why)
			}
		}
		ws = append(ws, wait{from: w.from, to: w.to, what: w.what, avail: free(w.from, w.to, busy)})
	}
	e.checkLiveness(ws)
}

// finish releases every hold, waits for what is left to expire, and
// checks that nothing of the lock is left in Redis or subscribed.
func (m *holdsModel) finish() {
	e := m.e
	e.mu.Lock()
	owners := slices.Clone(m.owners)
	e.mu.Unlock()
	for _, o := range owners {
		for _, sd := range m.sides() {
			m.unlockAll(o, sd)
		}
	}
	e.closeAll()
	if m.fair {
		// A queued waiter that died stays in the queue until a call of the
		// lock prunes it (once its heartbeat ran out): make that call, as
		// the next caller would, until the queue is gone.
		c, err := rlock.New(e.raw)
		if !assert.NoError(e.t, err, "a Client to prune the queue") {
			return
		}
		ctx := rlock.WithOwner(context.Background(), "finish")
		l := c.GetFairLock(e.name)
		until(e.kind.queueDelay+chkLease+time.Second, func() bool {
			if ok, err := l.TryLock(ctx, 0, chkLease); err == nil && ok {
				_ = l.Unlock(ctx)
			}
			n, err := e.raw.Do(ctx, e.raw.B().Exists().Key(layout.Queue(e.name)).Build()).AsInt64()
			if err == nil && n == 0 {
				return true
			}
			time.Sleep(20 * time.Millisecond)
			return false
		})
		_ = c.Close()
	}
	e.finishKeys(func(k string) bool { return strings.HasPrefix(k, layout.TokenPrefix+":") })
}

// lockKinds are the kinds the holds model covers.
func lockKinds() []*chkKind {
	exclusive := func(get func(c *rlock.Client, n string) checkedLock, fair bool) func(e *engine) model {
		return func(e *engine) model {
			return newHoldsModel(e, func(s *slot, name string, _ side) checkedLock { return get(s.c, name) }, false, fair)
		}
	}
	deaths := []string{"death:kill hold", "death:kill wait", "death:close holding", "death:close waiting"}
	ks := []*chkKind{
		{name: "Lock", slots: 2, acquireScripts: []string{lua.LockAcquire.SHA1, lua.LockReenter.SHA1},
			model: exclusive(func(c *rlock.Client, n string) checkedLock { return c.GetLock(n) }, false)},
		{name: "FencedLock", slots: 2, acquireScripts: []string{lua.FencedAcquire.SHA1, lua.LockReenter.SHA1},
			model: exclusive(func(c *rlock.Client, n string) checkedLock { return c.GetFencedLock(n) }, false)},
		{name: "FairLock", slots: 2, acquireScripts: []string{lua.FairAcquire.SHA1},
			queueDelay: fairlock.WaiterTimeout + fairlock.RefreshInterval,
			model:      exclusive(func(c *rlock.Client, n string) checkedLock { return c.GetFairLock(n) }, true)},
		// Clients 0 and 2 have wake-one, client 1 not: a release by a
		// wake-one Client must still wake the waiters of Clients without it.
		{name: "WakeOne", slots: 3, wakeOne: func(i int) bool { return i != 1 },
			acquireScripts: []string{lua.LockAcquire.SHA1, lua.LockReenter.SHA1},
			model:          exclusive(func(c *rlock.Client, n string) checkedLock { return c.GetLock(n) }, false)},
		{name: "ReadWrite", slots: 2,
			acquireScripts: []string{lua.RWReadAcquire.SHA1, lua.RWWriteAcquire.SHA1, lua.RWReadReenter.SHA1, lua.RWWriteReenter.SHA1},
			model: func(e *engine) model {
				return newHoldsModel(e, func(s *slot, name string, sd side) checkedLock {
					rw := s.c.GetReadWriteLock(name)
					if sd == sR {
						return rw.ReadLock()
					}
					return rw.WriteLock()
				}, true, false)
			}},
	}
	for _, k := range ks {
		k.deaths = deaths
	}
	return ks
}
