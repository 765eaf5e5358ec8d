package rlock_test

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/rlock"
	"github.com/relock-go/relock/semaphore"
)

// This file is the model of the semaphore: permits taken on a lease (the
// watchdog's, or fixed) and given back by their ID, by whichever Client.

// semBound is the semaphore's liveness bound: below its waiters' refresh
// interval, so that a permit that came free by a release (which
// publishes) and waits for a queued waiter's refresh is seen.
const semBound = 150 * time.Millisecond

// permit is what the model knows of one permit held.
type permit struct {
	id        string
	slot      *slot
	actor     string
	start     time.Time // the call that took it
	from      time.Time // its reply
	lease     time.Duration
	fixedMin  time.Time // a fixed lease ends between fixedMin and fixedMax
	fixedMax  time.Time
	releasing bool
	doomed    string    // an event that may have ended it
	lostAt    time.Time // its loss report
	// crossed: released by another Client while it was renewed: its
	// Client may report it lost.
	crossed bool
}

func (p *permit) String() string { return p.actor + ":" + p.id[:8] }

// inside reports whether the permit certainly exists at now.
func (p *permit) inside(now time.Time) bool {
	return !p.releasing && p.doomed == "" && p.lostAt.IsZero() && (p.fixedMin.IsZero() || now.Before(p.fixedMin)) &&
		p.slot.closedAt.IsZero()
}

// pspan is a permit that may still be in Redis though no actor holds it
// (released unconfirmed, its Client died, a call may have left it), or
// that ended since the last checkpoint. settleAt works as in hspan.
type pspan struct {
	id          string // "" when unknown (a call that gave up)
	from, to    time.Time
	certainTo   time.Time
	settleAt    time.Time
	settleLease time.Duration
	ifPaused    bool
	// silent: it ends by its lease, which publishes nothing: a queued
	// waiter learns of it at its next refresh.
	silent bool
	why    string
}

// semWait is a call that waited.
type semWait struct {
	from, to time.Time
	what     string
	queued   bool // it waited long enough to join the queue
	got      bool
}

// semActor is one goroutine of a slot, with the permits it holds.
type semActor struct {
	slot int
	name string
	ids  []string
}

func (a *semActor) String() string { return fmt.Sprintf("c%d%s", a.slot, a.name) }

type semModel struct {
	e      *engine
	actors []*semActor
	// permits are the permits the actors hold.
	permits map[string]*permit
	spans   []pspan
	// steps is the number of permits the semaphore has, at least, over
	// time (a step function); top is the most it had since the last
	// checkpoint.
	steps []step
	cur   int
	top   int
	// unset: the semaphore was deleted and not set again.
	unset  bool
	waits  []semWait
	losses map[string]time.Time // loss reports by permit ID
	// deleted are the Delete calls since the last checkpoint: every
	// permit taken before one started is gone once it returned.
	deleted []window
	// released are the IDs released (to release again: ErrNotHeld).
	released []string
	// gaveUp are the waiting calls that ended without a permit: their
	// ends, and who.
	gaveUp []window
	// calls are the acquisitions of this round, and tries those that
	// ended without a permit and without an error (see
	// checkTriesLocked); freeAt is when waitFree saw no permit held.
	calls, tries []window
	freeAt       time.Time
	// childWaiters are the waiting children of the dead-waiter rounds, by
	// their Clients' IDs (see childWaiter).
	childWaiters map[string]*childWaiter
	// queuedHook, when set (by a test), runs in a dead-waiter round once
	// the child and the live waiter behind it are queued, before the child
	// dies or is stopped.
	queuedHook func(ch *child)
}

// childWaiter is a child that waited in a dead-waiter round. A queued
// waiter takes a permit that comes free, and the round fills the
// semaphore first so that none does before its death; when permits of
// holders the model does not know (calls that gave up in a fault of an
// earlier round, whose permits come back with their leases) kept the
// fill from taking them all, one of those may come back while the child
// waits, and the child takes it. The holders record names the child's
// Client for its permit: it is not a stray, and it lasts a lease after
// the child's death. When the fill took every permit, a permit of the
// child's is a violation: nothing came free while it lived.
type childWaiter struct {
	who  string
	full bool // the fill took every permit the semaphore has
	// from is when it started waiting, freed when the round began to give
	// a permit back, dead its death.
	from, freed, dead time.Time
}

func semKind() *chkKind {
	return &chkKind{name: "Semaphore", slots: 2, bound: semBound,
		queueDelay:     semaphore.WaiterTimeout + semaphore.RefreshInterval,
		acquireScripts: []string{lua.SemAcquire.SHA1},
		deaths:         []string{"death:kill hold", "death:kill wait", "death:close holding", "death:close waiting"},
		model: func(e *engine) model {
			m := &semModel{e: e, permits: map[string]*permit{}, losses: map[string]time.Time{}, childWaiters: map[string]*childWaiter{}}
			for i := range e.kind.slots {
				for _, n := range []string{"a", "b", "c"} {
					m.actors = append(m.actors, &semActor{slot: i, name: n})
				}
			}
			m.cur = 2 + e.intn(2)
			ok, err := e.slot(0).c.GetSemaphore(e.name).TrySetPermits(context.Background(), m.cur)
			require.NoError(e.t, err, "TrySetPermits")
			require.True(e.t, ok, "TrySetPermits(%d) on a new semaphore", m.cur)
			m.top = m.cur
			m.steps = []step{{from: time.Now(), n: m.cur}}
			return m
		}}
}

func (m *semModel) sem(s *slot) *semaphore.Semaphore { return s.c.GetSemaphore(m.e.name) }

func (m *semModel) shapes() []string {
	return []string{"queue", "kill-holder", "close-holder", "kill-waiter", "close-waiter", "delete",
		"stop-holder", "stop-waiter", "short-wait"}
}

func (m *semModel) round(shape string, f faultKind) {
	switch shape {
	case "queue":
		m.queueRound()
	case "kill-holder", "close-holder", "stop-holder":
		m.deadHolderRound(strings.TrimSuffix(shape, "-holder"))
	case "kill-waiter", "close-waiter", "stop-waiter":
		m.deadWaiterRound(strings.TrimSuffix(shape, "-waiter"))
	case "short-wait":
		m.shortWaitRound()
	case "delete":
		m.deleteRound()
	default:
		m.randomRound(f)
	}
}

// randomRound makes every actor do one call, with perhaps a fault.
func (m *semModel) randomRound(f faultKind) {
	e := m.e
	var wg sync.WaitGroup
	for _, a := range m.actors {
		wg.Go(func() { m.step(a, f >= 0) })
	}
	if f >= 0 {
		wg.Go(func() { e.fault(f, e.ms(200)) })
	}
	wg.Wait()
}

// step makes one random call for a.
func (m *semModel) step(a *semActor, faulty bool) {
	e := m.e
	e.mu.Lock()
	holding := len(a.ids) > 0
	e.mu.Unlock()
	e.call()
	r := e.intn(100)
	lease := pick(e, 0, 0, 400*time.Millisecond, chkFixedLease)
	switch {
	case holding && r < 40:
		time.Sleep(e.ms(150))
		m.release(a, -1)
	case r < 60:
		timeout := pick(e, 50*time.Millisecond, 150*time.Millisecond, 300*time.Millisecond, 600*time.Millisecond)
		m.acquire(a, fmt.Sprintf("Acquire(%v)", lease), timeout, true, lease, func(ctx context.Context, s *semaphore.Semaphore) (string, bool, error) {
			id, err := s.Acquire(ctx, lease)
			return id, err == nil, err
		})
	case r < 80:
		wait := pick(e, 0, 50*time.Millisecond, 300*time.Millisecond)
		if !skipped("short-wait") && e.intn(4) == 0 {
			wait = shortWait(e) // shorter than a round trip
		}
		m.acquire(a, fmt.Sprintf("TryAcquire(%v, %v)", wait, lease), 3*time.Second, wait > 0, lease, func(ctx context.Context, s *semaphore.Semaphore) (string, bool, error) {
			return s.TryAcquire(ctx, wait, lease)
		})
	case r < 88:
		m.releaseStale(a)
	case r < 94:
		m.releaseOther(a)
	case !faulty:
		m.addPermits(a)
	}
}

// acquire runs one acquisition for a.
func (m *semModel) acquire(a *semActor, what string, timeout time.Duration, waits bool, lease time.Duration,
	call func(context.Context, *semaphore.Semaphore) (string, bool, error)) {
	e := m.e
	s := e.slot(a.slot)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	id, ok, err := call(ctx, m.sem(s))
	end := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	if waits {
		m.waits = append(m.waits, semWait{from: start, to: end, what: fmt.Sprintf("%v %s", a, what), queued: end.Sub(start) > semaphore.QueueAfter, got: ok})
	}
	m.calls = append(m.calls, window{from: start, to: end, what: fmt.Sprintf("%v %s", a, what)})
	if err == nil && !ok && s.closedAt.IsZero() {
		m.tries = append(m.tries, m.calls[len(m.calls)-1])
	}
	switch {
	case err == nil && ok:
		m.acquiredLocked(a, s, id, what, start, end, lease)
		return
	case err == nil:
		e.logLocked("%v %s -> not acquired", a, what)
	default:
		e.logLocked("%v %s -> %v", a, what, oneLine(err))
		if !errors.Is(err, rlock.ErrNotAcquired) && !errors.Is(err, rlock.ErrClosed) && !isRedisFailure(err) && !e.refusedForProbe(err, start) {
			e.violation("%v: %s failed with %v, which is neither ErrNotAcquired, ErrClosed nor a Redis failure", a, what, err)
		}
	}
	if waits {
		m.leftQueueLater(end, a.String())
	}
	// Truly unknowable: an attempt held up in a paused server may take a
	// permit after its call gave up and gave back what it might have
	// won; the permit then comes back when its lease ends.
	l := lease
	if l == 0 {
		l = chkLease
	}
	m.spans = append(m.spans, pspan{from: start, settleAt: end, settleLease: l, ifPaused: true, silent: true,
		why: fmt.Sprintf("a permit %v's %s may have taken in a pause", a, what)})
}

// leftQueueLater records that a waiting call ended without a permit at
// end: if a fault hit then, its place in the queue may be left (checked
// at the checkpoint). e.mu is held.
func (m *semModel) leftQueueLater(end time.Time, who string) {
	m.gaveUp = append(m.gaveUp, window{from: end, to: end, what: who})
}

// acquiredLocked records a permit taken, and checks that no more permits
// are held than the semaphore has. e.mu is held.
func (m *semModel) acquiredLocked(a *semActor, s *slot, id, what string, start, end time.Time, lease time.Duration) {
	e := m.e
	e.logLocked("%v %s -> permit %s", a, what, id[:8])
	p := &permit{id: id, slot: s, actor: a.String(), start: start, from: end, lease: lease}
	if lease > 0 {
		p.fixedMin, p.fixedMax = start.Add(lease), end.Add(lease)
	}
	if !s.closedAt.IsZero() {
		// Its Client closed as it was taken: it comes back with its lease.
		m.endPermitLocked(p, time.Time{}, "taken as its Client closed", true)
		return
	}
	// Taken before an event that ended in the meantime: that may have
	// ended it.
	for _, d := range m.deleted {
		if d.to.After(start) {
			p.doomed = d.what
		}
	}
	if at, ok := m.losses[id]; ok {
		p.lostAt = at
	}
	n := 1
	for _, q := range m.permits {
		if q.inside(end) {
			n++
		}
	}
	for _, sp := range m.spans {
		if end.Before(sp.certainTo) {
			n++
		}
	}
	if n > m.top && !m.unset {
		e.count("violations:over-committed", 1)
		e.violation("%v: %s took permit %s while %d others were held, and the semaphore has %d permits", a, what, id[:8], n-1, m.top)
	}
	m.permits[id] = p
	a.ids = append(a.ids, id)
}

// endPermitLocked ends a permit: gone from Redis by goneBy, or, when
// dead, there until its lease ends. e.mu is held.
func (m *semModel) endPermitLocked(p *permit, goneBy time.Time, why string, dead bool) {
	delete(m.permits, p.id)
	sp := pspan{id: p.id, from: p.from, to: goneBy, why: fmt.Sprintf("permit %v (%s)", p, why)}
	if dead {
		sp.silent = true
		at := p.slot.closedAt
		if at.IsZero() {
			at = time.Now()
		}
		if p.lease > 0 {
			sp.to, sp.certainTo = p.fixedMax, p.fixedMin
		} else {
			sp.to, sp.settleAt, sp.settleLease = time.Time{}, at, chkLease
			if !m.e.faultedDuring(at.Add(-chkLease), at) {
				sp.certainTo = at.Add(chkLease / 3)
			}
		}
	}
	m.spans = append(m.spans, sp)
}

// release gives back one of a's permits (i < 0: a random one).
func (m *semModel) release(a *semActor, i int) {
	e := m.e
	e.mu.Lock()
	if len(a.ids) == 0 {
		e.mu.Unlock()
		return
	}
	if i < 0 {
		i = e.intn(len(a.ids))
	}
	id := a.ids[i]
	a.ids = slices.Delete(a.ids, i, i+1)
	p := m.permits[id]
	if p != nil {
		p.releasing = true
	}
	e.mu.Unlock()
	m.releaseID(a, id, p, e.slot(a.slot))
}

// releaseID releases permit id (p: the model's permit, nil if none)
// through the Client of slot s.
func (m *semModel) releaseID(a *semActor, id string, p *permit, s *slot) {
	e := m.e
	err := m.sem(s).Release(context.Background(), id)
	now := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	m.released = append(m.released, id)
	e.logLocked("%v Release(%s) -> %v", a, id[:8], errText(err))
	if p == nil {
		if err == nil {
			e.violation("%v: Release(%s) of a permit nobody holds succeeded", a, id[:8])
		}
		return
	}
	if !p.slot.closedAt.IsZero() || s != e.slots[s.idx] {
		return // its Client closed: the model ended its permits then
	}
	if p.slot != s && p.lease == 0 {
		p.crossed = true
	}
	switch {
	case err == nil:
		m.endPermitLocked(p, now, "released", false)
	case errors.Is(err, rlock.ErrNotHeld):
		if !m.excusedLocked(p) {
			e.count("violations:promise", 1)
			e.violation("%v: Release(%s) says not held, of a permit never reported lost and with nothing that could have ended it: %v", a, p, err)
		}
		m.endPermitLocked(p, m.goneByLocked(p, now), "found gone", false)
	case errors.Is(err, rlock.ErrClosed):
		m.endPermitLocked(p, time.Time{}, "closed", true)
	default:
		// Truly unknowable: whether the release ran. The permit comes back
		// with its lease at the latest (its renewal stopped first).
		if !isRedisFailure(err) {
			e.violation("%v: Release(%s) failed with %v, not a Redis failure", a, p, err)
		}
		delete(m.permits, p.id)
		sp := pspan{id: p.id, from: p.from, silent: true, why: fmt.Sprintf("permit %v, its release unconfirmed", p)}
		if p.lease > 0 {
			sp.to = p.fixedMax
		} else {
			sp.settleAt, sp.settleLease = now, chkLease
		}
		m.spans = append(m.spans, sp)
	}
}

// excusedLocked reports whether a permit's end is explained: a fixed
// lease that ended, a Delete or a long pause, a loss report. e.mu is held.
func (m *semModel) excusedLocked(p *permit) bool {
	return p.doomed != "" || !p.lostAt.IsZero() || !p.fixedMin.IsZero() && time.Now().After(p.fixedMin.Add(-50*time.Millisecond))
}

// goneByLocked is the latest time p can have been in Redis, found gone at
// now. e.mu is held.
func (m *semModel) goneByLocked(p *permit, now time.Time) time.Time {
	t := now
	if !p.fixedMax.IsZero() && p.fixedMax.Before(t) {
		t = p.fixedMax
	}
	for _, d := range m.deleted {
		if p.from.Before(d.from) && d.to.Before(t) {
			t = d.to
		}
	}
	if !p.lostAt.IsZero() && p.lostAt.Before(t) {
		t = p.lostAt
	}
	return t
}

// releaseStale releases an ID that is not held (released before, or
// made up): ErrNotHeld, and nothing changes.
func (m *semModel) releaseStale(a *semActor) {
	e := m.e
	e.mu.Lock()
	id := hex.EncodeToString([]byte(fmt.Sprintf("stale-%010d", e.intn(1e9))))[:32]
	if len(m.released) > 0 && e.intn(2) == 0 {
		id = m.released[e.intn(len(m.released))]
	}
	held := m.permits[id] != nil
	e.mu.Unlock()
	if held {
		return
	}
	err := m.sem(e.slot(a.slot)).Release(context.Background(), id)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.logLocked("%v Release(%s) (stale) -> %v", a, id[:8], errText(err))
	if err == nil {
		e.violation("%v: Release(%s) of a permit released before succeeded", a, id[:8])
	}
}

// releaseOther releases a permit another actor holds, through a's
// Client: a permit belongs to nobody in particular.
func (m *semModel) releaseOther(a *semActor) {
	e := m.e
	e.mu.Lock()
	var owner *semActor
	for _, b := range m.actors {
		if b != a && len(b.ids) > 0 && e.intn(2) == 0 {
			owner = b
		}
	}
	if owner == nil {
		e.mu.Unlock()
		return
	}
	i := e.intn(len(owner.ids))
	id := owner.ids[i]
	owner.ids = slices.Delete(owner.ids, i, i+1)
	p := m.permits[id]
	if p != nil {
		p.releasing = true
	}
	e.mu.Unlock()
	m.releaseID(a, id, p, e.slot(a.slot))
}

// addPermits adds or takes away a permit (between 1 and 4 in all).
func (m *semModel) addPermits(a *semActor) {
	e := m.e
	e.mu.Lock()
	if m.unset {
		e.mu.Unlock()
		return
	}
	n := 1
	if m.cur > 1 && (m.cur >= 4 || e.intn(2) == 0) {
		n = -1
	}
	start := time.Now()
	old := m.cur
	m.cur += n
	m.top = max(m.top, m.cur)
	m.steps = append(m.steps, step{from: start, n: min(old, old+n)})
	e.mu.Unlock()
	err := m.sem(e.slot(a.slot)).AddPermits(context.Background(), n)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.logLocked("%v AddPermits(%d) -> %v (now %d)", a, n, errText(err), m.cur)
	if err != nil {
		// Only in rounds without a fault: any error is the library's.
		e.violation("%v: AddPermits(%d) = %v in a round without a fault", a, n, err)
		return
	}
	m.steps = append(m.steps, step{from: time.Now(), n: m.cur})
}

// queueRound, three times: the permits are all held by one Client; four
// waiters of the other queue up (they waited longer than QueueAfter); the
// permits are released one after the other, and each must go to a waiter
// at once. The first waiter subscribes first, and its first attempt to
// join the queue is answered with an OOM error reply, so that it joins
// last: the Client's oldest waiter is not the queue's head.
func (m *semModel) queueRound() {
	e := m.e
	braced := false
	for range 3 {
		m.drain()
		h := e.intn(e.kind.slots)
		holders := m.slotActors(h)
		m.fill(h)
		if !braced {
			// The semaphore's braced name must be refused while it is
			// set (tried again in the next round when a fault's recovery
			// kept it from being judged).
			braced = m.foreign()
		}
		w := 1 - h
		s := e.slot(w)
		join := lua.SemAcquire.SHA1 + "/join"
		base, joined := e.replies(s, lua.SemAcquire.SHA1), e.replies(s, join)
		s.faulty.Inject(&relocktest.Rule{SHA1s: []string{lua.SemAcquire.SHA1}, N: 1, Reply: e.oom, Match: func(args []string) bool {
			nk, err := strconv.Atoi(args[2])
			return err == nil && len(args) > 3+nk+3 && args[3+nk+3] == "1"
		}})
		var wg sync.WaitGroup
		for i := range 4 {
			a := &semActor{slot: w, name: fmt.Sprintf("q%d", i)}
			wg.Go(func() {
				e.call()
				m.acquire(a, "Acquire(0) (queued)", 3*time.Second, true, 0, func(ctx context.Context, s *semaphore.Semaphore) (string, bool, error) {
					id, err := s.Acquire(ctx, 0)
					return id, err == nil, err
				})
				time.Sleep(30*time.Millisecond + e.ms(50))
				m.release(a, -1)
			})
			if i == 0 {
				// Subscribed once it attempted twice.
				until(time.Second, func() bool { return e.replies(s, lua.SemAcquire.SHA1) >= base+2 })
			}
		}
		if !until(2*time.Second, func() bool { return e.replies(s, join) >= joined+4 }) {
			e.logf("the queued waiters were not all seen queued")
		}
		s.faulty.Clear()
		for _, a := range holders {
			for {
				e.mu.Lock()
				n := len(a.ids)
				e.mu.Unlock()
				if n == 0 {
					break
				}
				time.Sleep(30*time.Millisecond + e.ms(170))
				e.call()
				m.release(a, 0)
			}
		}
		wg.Wait()
	}
}

// slotActors are the actors of slot i.
func (m *semModel) slotActors(i int) []*semActor {
	var as []*semActor
	for _, a := range m.actors {
		if a.slot == i {
			as = append(as, a)
		}
	}
	return as
}

// drain releases every permit the actors hold.
func (m *semModel) drain() {
	for _, a := range m.actors {
		for {
			m.e.mu.Lock()
			n := len(a.ids)
			m.e.mu.Unlock()
			if n == 0 {
				break
			}
			m.release(a, 0)
		}
	}
}

// fill takes every permit left with the actors of slot i, on the
// watchdog lease.
func (m *semModel) fill(i int) {
	as := m.slotActors(i)
	for j := 0; j < 8; j++ {
		var got bool
		m.acquire(as[j%len(as)], "TryAcquire(0, 0) (to fill)", time.Second, false, 0, func(ctx context.Context, s *semaphore.Semaphore) (string, bool, error) {
			id, ok, err := s.TryAcquire(ctx, 0, 0)
			got = ok
			return id, ok, err
		})
		if !got {
			return
		}
	}
}

// deadHolderRound: a holder dies (how: "kill", its process killed, or
// "close", its Client closed) while others wait for its permit; they get
// it once its lease ends. Or ("stop") a child that holds is stopped
// (SIGSTOP): for longer than the lease (its renewals stop, and its permit
// comes back with its lease) or a quarter of it (it holds on); then it
// goes on (SIGCONT) and is killed.
func (m *semModel) deadHolderRound(how string) {
	e := m.e
	kill := how != "close"
	m.drain()
	lease := pick(e, 0, 0, 300*time.Millisecond+e.ms(400))
	victim := e.intn(e.kind.slots)
	var ch *child
	if kill {
		ch = e.spawn(childSpec{Act: "hold", Lease: lease})
		if ch == nil {
			return
		}
	} else {
		a := m.slotActors(victim)[0]
		e.call()
		m.acquire(a, "Acquire (to die holding)", time.Second, false, lease, func(ctx context.Context, s *semaphore.Semaphore) (string, bool, error) {
			id, err := s.Acquire(ctx, lease)
			return id, err == nil, err
		})
	}
	var childWhy string
	var childStart time.Time
	if kill {
		e.mu.Lock()
		id := ch.info
		started := time.Now()
		if f := strings.Fields(ch.info); len(f) == 2 {
			if ns, err := strconv.ParseInt(f[0], 10, 64); err == nil {
				started = time.Unix(0, ns)
			}
			id = f[1]
		}
		childWhy = "child " + ch.who + "'s permit"
		m.spans = append(m.spans, pspan{id: id, from: time.Now(), certainTo: time.Now().Add(time.Hour), silent: true, why: childWhy})
		childStart = started
		e.mu.Unlock()
	}
	// The others take what is left, then wait.
	other := 1 - victim
	if kill {
		other = e.intn(e.kind.slots)
	}
	m.fill(other)
	var wg sync.WaitGroup
	for _, a := range m.actors {
		if !kill && a.slot == victim {
			continue
		}
		wg.Go(func() {
			time.Sleep(e.ms(60))
			e.call()
			m.acquire(a, "Acquire (after a dead holder)", chkLease+chkFixedLease, true, 0, func(ctx context.Context, s *semaphore.Semaphore) (string, bool, error) {
				id, err := s.Acquire(ctx, 0)
				return id, err == nil, err
			})
			time.Sleep(10*time.Millisecond + e.ms(40))
			m.release(a, len(a.ids)-1)
		})
	}
	time.Sleep(80*time.Millisecond + e.ms(100))
	certain := time.Now().Add(time.Hour)
	if how == "stop" {
		stopAt := e.stop(ch)
		long := e.intn(2) == 0
		e.mu.Lock()
		for i := range m.spans {
			if sp := &m.spans[i]; sp.why == childWhy {
				switch {
				case lease > 0:
					// A fixed lease ends at its time, stopped or not.
					sp.to, sp.certainTo = sp.from.Add(lease), childStart.Add(lease)
				case e.faultedDuring(stopAt.Add(-chkLease), stopAt):
					sp.certainTo = stopAt
				default:
					sp.certainTo = stopAt.Add(chkLease / 3) // its last renewal came before the stop
				}
				certain = sp.certainTo
				sp.why += fmt.Sprintf(", stopped at %v", e.at(stopAt))
			}
		}
		e.mu.Unlock()
		if long {
			time.Sleep(chkLease * 5 / 4)
		} else {
			time.Sleep(chkLease / 4)
		}
		e.cont(ch)
		if long && lease == 0 {
			// Its permit came back a lease after its last renewal: a renewal
			// after SIGCONT finds it gone and brings nothing back.
			e.mu.Lock()
			for i := range m.spans {
				if sp := &m.spans[i]; sp.why == childWhy+fmt.Sprintf(", stopped at %v", e.at(stopAt)) && sp.to.IsZero() && sp.settleAt.IsZero() {
					sp.settleAt, sp.settleLease = stopAt, chkLease
				}
			}
			e.mu.Unlock()
		}
		time.Sleep(e.ms(200))
	}
	if kill {
		at := e.kill(ch, false)
		e.mu.Lock()
		for i := range m.spans {
			if sp := &m.spans[i]; strings.HasPrefix(sp.why, childWhy) && sp.to.IsZero() && sp.settleAt.IsZero() {
				if lease > 0 {
					sp.to, sp.certainTo = sp.from.Add(lease), childStart.Add(lease)
				} else {
					sp.settleAt, sp.settleLease, sp.certainTo = at, chkLease, time.Time{}
					if !e.faultedDuring(at.Add(-chkLease), at) {
						sp.certainTo = minTime(at.Add(chkLease/3), certain)
					}
				}
				sp.why += fmt.Sprintf(", dead since %v", e.at(at))
			}
		}
		e.mu.Unlock()
	} else {
		m.closeSlot(victim, false, "holding")
	}
	wg.Wait()
	if !kill {
		e.replaceSlot(victim)
	}
	m.drain()
}

// deadWaiterRound: a queued waiter dies (how: "kill", its process
// killed, or "close", its Client closed) or is stopped ("stop": a child
// stopped with SIGSTOP, which keeps its connections and its place); a
// permit comes free, and a live waiter queued behind it gets it within
// the queue's delay for a waiter that does not refresh its place.
func (m *semModel) deadWaiterRound(how string) {
	e := m.e
	kill := how != "close"
	m.drain()
	h := 0
	m.fill(h)
	e.mu.Lock()
	filled := 0
	for _, a := range m.slotActors(h) {
		filled += len(a.ids)
	}
	full := filled >= m.cur
	e.mu.Unlock()
	var ch *child
	var wg sync.WaitGroup
	victim := 1
	if kill {
		spawned := time.Now()
		ch = e.spawn(childSpec{Act: "wait"})
		if ch == nil {
			m.drain()
			return
		}
		e.mu.Lock()
		m.childWaiters[ch.id] = &childWaiter{who: ch.who, full: full, from: spawned}
		e.mu.Unlock()
	} else {
		a := m.slotActors(victim)[0]
		s := e.slot(victim)
		base := e.replies(s, lua.SemAcquire.SHA1+"/join")
		wg.Go(func() {
			e.call()
			m.acquire(a, "Acquire (to die waiting)", 3*time.Second, true, 0, func(ctx context.Context, s *semaphore.Semaphore) (string, bool, error) {
				id, err := s.Acquire(ctx, 0)
				return id, err == nil, err
			})
		})
		until(2*time.Second, func() bool { return e.replies(s, lua.SemAcquire.SHA1+"/join") >= base+1 })
	}
	// A live waiter queued behind it.
	w := m.slotActors(h)[len(m.slotActors(h))-1]
	if kill {
		w = m.slotActors(1)[0]
	}
	ws := e.slot(w.slot)
	base := e.replies(ws, lua.SemAcquire.SHA1+"/join")
	wg.Go(func() {
		e.call()
		m.acquire(w, "Acquire (behind a dead waiter)", 4*time.Second, true, 0, func(ctx context.Context, s *semaphore.Semaphore) (string, bool, error) {
			id, err := s.Acquire(ctx, 0)
			return id, err == nil, err
		})
		time.Sleep(e.ms(30))
		m.release(w, len(w.ids)-1)
	})
	until(2*time.Second, func() bool { return e.replies(ws, lua.SemAcquire.SHA1+"/join") >= base+1 })
	if m.queuedHook != nil && ch != nil {
		m.queuedHook(ch)
	}
	switch how {
	case "kill":
		m.childDied(ch, e.kill(ch, true))
	case "stop":
		at := e.stop(ch)
		e.mu.Lock()
		e.excuse(at, at.Add(e.kind.queueDelay), "child "+ch.who+" stopped in the queue")
		e.mu.Unlock()
	default:
		m.closeSlot(victim, true, "waiting")
	}
	time.Sleep(e.ms(100))
	a := m.slotActors(h)[0]
	e.call()
	if ch != nil {
		e.mu.Lock()
		if w := m.childWaiters[ch.id]; w != nil {
			w.freed = time.Now()
		}
		e.mu.Unlock()
	}
	m.release(a, 0)
	wg.Wait()
	switch how {
	case "stop":
		m.childDied(ch, e.kill(ch, false))
	case "close":
		e.replaceSlot(victim)
	}
	m.drain()
}

// childDied records the death of a waiting child at at.
func (m *semModel) childDied(ch *child, at time.Time) {
	m.e.mu.Lock()
	defer m.e.mu.Unlock()
	if w := m.childWaiters[ch.id]; w != nil {
		w.dead = at
	}
}

// deleteRound: the semaphore is deleted while permits are held on the
// watchdog lease: every one of them must be reported lost, and their
// Release says not held; then it is set again.
func (m *semModel) deleteRound() {
	e := m.e
	m.drain()
	for i := range e.kind.slots {
		as := m.slotActors(i)
		a := as[e.intn(len(as))]
		e.call()
		m.acquire(a, "Acquire(0) (to be deleted)", time.Second, false, 0, func(ctx context.Context, s *semaphore.Semaphore) (string, bool, error) {
			id, err := s.Acquire(ctx, 0)
			return id, err == nil, err
		})
	}
	e.call()
	m.delete(m.actors[e.intn(len(m.actors))])
}

// delete deletes the semaphore and sets it again.
func (m *semModel) delete(a *semActor) {
	e := m.e
	s := e.slot(a.slot)
	start := time.Now()
	e.mu.Lock()
	m.steps = append(m.steps, step{from: start, n: 0})
	e.mu.Unlock()
	ok, err := m.sem(s).Delete(context.Background())
	end := time.Now()
	e.mu.Lock()
	e.logLocked("%v Delete -> %v, %v", a, ok, errText(err))
	m.deleted = append(m.deleted, window{from: start, to: end, what: "Delete"})
	for _, p := range m.permits {
		if p.from.Before(end) {
			p.doomed = "Delete"
		}
	}
	// What dead holders left is gone with it.
	for i := range m.spans {
		if sp := &m.spans[i]; sp.from.Before(start) && (sp.to.IsZero() || sp.to.After(end)) {
			sp.to, sp.settleAt, sp.ifPaused, sp.silent = end, time.Time{}, false, false
		}
		if sp := &m.spans[i]; sp.certainTo.After(start) {
			sp.certainTo = start
		}
	}
	m.unset = true
	n := m.cur
	e.mu.Unlock()
	ok, err = m.sem(s).TrySetPermits(context.Background(), n)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.logLocked("%v TrySetPermits(%d) -> %v, %v", a, n, ok, errText(err))
	if !ok || err != nil {
		e.violation("%v: TrySetPermits(%d) after Delete = %v, %v", a, n, ok, err)
		return
	}
	m.unset = false
	m.steps = append(m.steps, step{from: time.Now(), n: n})
}

// closeSlot closes the Client of slot i: its permits stay in Redis until
// their leases end.
func (m *semModel) closeSlot(i int, queued bool, what string) {
	e := m.e
	s := e.closeSlot(i, queued, what)
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, p := range m.permits {
		if p.slot == s {
			m.endPermitLocked(p, time.Time{}, "its Client closed", true)
		}
	}
	for _, a := range m.actors {
		if a.slot == i {
			a.ids = nil
		}
	}
}

// faulted: a pause longer than the lease ends every permit on the
// watchdog lease (its Client must report it lost).
func (m *semModel) faulted(f faultKind, from, to time.Time) {
	if f != fPauseLong {
		return
	}
	e := m.e
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, p := range m.permits {
		if p.lease == 0 {
			p.doomed = f.String()
		}
	}
	if !to.IsZero() {
		m.deleted = append(m.deleted, window{from: from, to: to.Add(chkSettle), what: f.String()})
	}
}

// lost is the lost handler: for a permit, the name is the semaphore's and
// the owner the permit ID.
func (m *semModel) lost(si, gen int, name, owner string, cause error) {
	e := m.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if name != e.name {
		e.violation("loss reported for %q, not the semaphore %q", name, e.name)
	}
	if !errors.Is(cause, rlock.ErrLockLost) {
		e.violation("loss of permit %s reported with cause %v, which does not match ErrLockLost", owner, cause)
	}
	now := time.Now()
	m.losses[owner] = now
	if p := m.permits[owner]; p != nil {
		p.lostAt = now
		if p.doomed == "" && !p.crossed && p.lease == 0 && !e.starvedLossLocked(cause, now) {
			e.count("violations:promise", 1)
			e.violation("permit %v reported lost with nothing that could have ended it: %v", p, oneLine(cause))
		}
		if p.slot.idx != si || p.slot.gen != gen {
			e.violation("permit %v reported lost by Client c%d.%d, not the one that took it", p, si, gen)
		}
	}
}

// checkpoint checks the model against Redis between rounds.
func (m *semModel) checkpoint() {
	e := m.e
	ctx := context.Background()
	keys := semaphore.KeysOf(e.name)
	e.mu.Lock()
	m.settleLocked()
	e.mu.Unlock()
	// A permit on the watchdog lease that is gone from Redis is reported
	// lost within a renewal interval: wait for that first.
	deadline := time.Now().Add(chkLease + 500*time.Millisecond)
	var leases map[string]float64
	var nowMs float64
	expired := 0
	for {
		zs, err := e.raw.Do(ctx, e.raw.B().Zrange().Key(keys.Leases).Min("0").Max("-1").Withscores().Build()).AsZScores()
		if !assert.NoError(e.t, err, "ZRANGE") {
			return
		}
		tm, err := e.raw.Do(ctx, e.raw.B().Time().Build()).AsIntSlice()
		if !assert.NoError(e.t, err, "TIME") || !assert.Len(e.t, tm, 2, "TIME") {
			return
		}
		nowMs = float64(tm[0]*1000 + tm[1]/1000)
		leases, expired = map[string]float64{}, 0
		for _, z := range zs {
			if z.Score > nowMs {
				leases[hex.EncodeToString([]byte(z.Member))] = z.Score
			} else {
				expired++ // given back by the next script that looks
			}
		}
		pending := ""
		e.mu.Lock()
		for _, p := range m.permits {
			if _, ok := leases[p.id]; !ok && p.lease == 0 && p.lostAt.IsZero() && !p.crossed {
				pending = p.String()
			}
		}
		e.mu.Unlock()
		if pending == "" || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Who took each permit, as the holders record says (permit ID -> its
	// Client's ID and owner).
	holders := map[string]string{}
	hs, err := e.raw.Do(ctx, e.raw.B().Hgetall().Key(keys.Holders).Build()).AsStrMap()
	if !assert.NoError(e.t, err, "HGETALL holders") {
		return
	}
	for id, who := range hs {
		holders[hex.EncodeToString([]byte(id))] = who
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	now := time.Now()
	exact := true
	for _, p := range slices.Collect(maps.Values(m.permits)) {
		_, there := leases[p.id]
		switch {
		case there:
		case p.lease == 0 && p.lostAt.IsZero() && !p.crossed:
			e.count("violations:promise", 1)
			why := "nothing"
			if p.doomed != "" {
				why = p.doomed
			}
			e.violation("permit %v on the watchdog lease is gone from Redis (ended by %s), and its loss was never reported", p, why)
			m.endPermitLocked(p, m.goneByLocked(p, now), "gone", false)
		case p.lease > 0 && now.After(p.fixedMin):
			// Its fixed lease ended: its Client does not learn of it.
			m.endPermitLocked(p, p.fixedMax, "its lease ended", false)
			m.spans[len(m.spans)-1].silent = true
			m.dropID(p.id)
		case p.doomed != "" || !p.lostAt.IsZero() || p.crossed:
			m.endPermitLocked(p, m.goneByLocked(p, now), "lost", false)
			m.dropID(p.id)
		default:
			e.count("violations:promise", 1)
			e.violation("permit %v is held, but Redis has no lease for it", p)
			m.endPermitLocked(p, now, "gone", false)
			m.dropID(p.id)
		}
	}
	// What Redis no longer has is gone for good (the round is over, and no
	// script of it is held up any more): a permit that may have been left,
	// or a dead holder's, ends here at the latest; the permits of unknown
	// ID a call may have taken end too when Redis has no permit unknown.
	unaccounted := false
	for id := range leases {
		known := m.permits[id] != nil
		for _, sp := range m.spans {
			if sp.id == id {
				known = true
			}
		}
		if !known {
			unaccounted = true
		}
	}
	for i := range m.spans {
		sp := &m.spans[i]
		if !sp.to.IsZero() && !sp.to.After(now) {
			continue
		}
		if _, there := leases[sp.id]; there || sp.id == "" && unaccounted {
			continue
		}
		sp.to, sp.settleAt = now, time.Time{}
		if sp.certainTo.After(now) {
			sp.certainTo = now
		}
	}
	// Every permit in Redis is held, or may still be there.
	for id := range leases {
		if m.permits[id] != nil {
			continue
		}
		known, unknown := false, false
		for _, sp := range m.spans {
			if sp.to.IsZero() || !now.After(sp.to) {
				if sp.id == id {
					known = true
				}
				if sp.id == "" {
					unknown = true
				}
			}
		}
		if _, ok := e.diedStartingLocked("", now); ok {
			unknown = true // a child that died as it started may have taken it
		}
		if !known && m.childWaiterPermitLocked(id, holders[id], leases[id], now) {
			known = true
		}
		if !known && !unknown {
			e.count("violations:stray", 1)
			e.violation("Redis has a lease for permit %s that nobody holds", id[:8])
		}
		exact = false
	}
	for _, sp := range m.spans {
		if sp.to.IsZero() || !now.After(sp.to) {
			exact = false
		}
	}
	if exact && !m.unset {
		// Nothing uncertain: Redis' count is the model's.
		raw, err := e.raw.Do(ctx, e.raw.B().Get().Key(keys.Available).Build()).AsInt64()
		if err == nil && int(raw)+expired != m.cur-len(m.permits) {
			e.count("violations:count", 1)
			e.violation("Redis has %d permits available (and %d whose lease ended); the semaphore has %d and %d are held", raw, expired, m.cur, len(m.permits))
		}
	}
	m.silentEndsLocked()
	m.checkTriesLocked(now)
	m.livenessLocked(now)
	m.top = m.cur
	m.steps = []step{{from: now, n: m.cur}}
	m.waits = m.waits[:0]
	m.calls, m.tries, m.freeAt = m.calls[:0], m.tries[:0], time.Time{}
	m.deleted = m.deleted[:0]
	m.spans = slices.DeleteFunc(m.spans, func(sp pspan) bool { return !sp.to.IsZero() && sp.to.Before(now) })
	clear(m.losses)
	maps.DeleteFunc(m.childWaiters, func(_ string, w *childWaiter) bool {
		return !w.dead.IsZero() && now.After(w.dead.Add(chkLease+chkSettle))
	})
	e.forgetPast()
}

// childWaiterPermitLocked reports whether the permit id in Redis, which
// no actor holds and no span explains, is a dead waiting child's (who
// is the holders record's entry for it): a permit that came back while
// the child waited, taken by it (see childWaiter). It is then a span to
// the end of its lease, the child's death and a lease (its last renewal
// came before); or, when the child's round had filled the semaphore and
// its lease (leaseEnd, unix ms) was set before a permit was given back,
// a violation. e.mu is held.
func (m *semModel) childWaiterPermitLocked(id, who string, leaseEnd float64, now time.Time) bool {
	e := m.e
	cid, _, ok := strings.Cut(who, ":")
	w := m.childWaiters[cid]
	if !ok || w == nil || w.dead.IsZero() {
		return false
	}
	if set := time.UnixMilli(int64(leaseEnd)).Add(-chkLease); w.full && (w.freed.IsZero() || set.Before(w.freed)) {
		e.count("violations:over-committed", 1)
		e.violation("Redis has permit %s of child %s, which waited while every permit was held", id[:8], w.who)
		return true
	}
	e.logLocked("permit %s is child %s's, taken as it waited (permits of holders the model does not know kept its round from filling the semaphore)", id[:8], w.who)
	e.count("child-waiter:took", 1)
	// It was held from some time in the child's wait: busy from its start
	// (for the liveness check of the round's other waiters).
	m.spans = append(m.spans, pspan{id: id, from: w.from, to: w.dead.Add(chkLease + chkSettle), silent: true,
		why: fmt.Sprintf("child %s's permit %s, taken as it waited", w.who, id[:8])})
	return true
}

// dropID forgets a permit ID an actor still lists. e.mu is held.
func (m *semModel) dropID(id string) {
	for _, a := range m.actors {
		a.ids = slices.DeleteFunc(a.ids, func(x string) bool { return x == id })
	}
}

// settleLocked settles the spans that waited for the round's faults to
// end. e.mu is held.
func (m *semModel) settleLocked() {
	e := m.e
	for _, g := range m.gaveUp {
		e.leftQueue(g.from, g.what)
	}
	m.gaveUp = m.gaveUp[:0]
	m.spans = slices.DeleteFunc(m.spans, func(sp pspan) bool {
		if sp.settleAt.IsZero() {
			return false
		}
		_, paused := e.pausedAt(sp.settleAt)
		return sp.ifPaused && !paused
	})
	for i := range m.spans {
		if sp := &m.spans[i]; !sp.settleAt.IsZero() {
			sp.to, sp.settleAt = e.settled(sp.settleAt).Add(sp.settleLease), time.Time{}
		}
	}
}

// silentEndsLocked excuses, for each permit that ends by its lease (which
// publishes nothing), the time a queued waiter may sleep before its next
// refresh finds it back. e.mu is held.
func (m *semModel) silentEndsLocked() {
	for i := range m.spans {
		if sp := &m.spans[i]; sp.silent && !sp.to.IsZero() {
			m.e.excuse(sp.to, sp.to.Add(semaphore.RefreshInterval+chkSettle), "a permit came back by its lease: "+sp.why)
			sp.silent = false // excused once
		}
	}
}

// livenessLocked checks the waits of the round: none goes on for longer
// than the bound while a permit is available. e.mu is held.
func (m *semModel) livenessLocked(now time.Time) {
	e := m.e
	var busy []window
	for _, p := range m.permits {
		to := now
		if !p.fixedMax.IsZero() && p.fixedMax.Before(now) {
			to = p.fixedMax
		}
		busy = append(busy, window{from: p.from, to: to, what: "permit " + p.String()})
	}
	for _, sp := range m.spans {
		to := sp.to
		if to.IsZero() {
			to = now
		}
		busy = append(busy, window{from: sp.from, to: to, what: sp.why})
	}
	var ws []wait
	for _, w := range m.waits {
		ws = append(ws, wait{from: w.from, to: w.to, what: w.what, avail: positive(w.from, w.to, m.steps, busy)})
	}
	e.checkLiveness(ws)
}

// finish releases every permit and checks that the semaphore's leases
// are all gone once their leases end.
func (m *semModel) finish() {
	e := m.e
	m.drain()
	e.closeAll()
	keys := semaphore.KeysOf(e.name)
	// A permit whose lease ended (its holder died or closed) stays in the
	// leases set until a script of the semaphore gives it back: read the
	// count, which does, until the set is gone or the longest lease ended.
	ctx := context.Background()
	until(chkFixedLease+chkLease+time.Second, func() bool {
		_ = lua.SemAvailable.Exec(ctx, e.raw, []string{keys.Available, keys.Leases, keys.Channel}, []string{"publish"}).Error()
		n, err := e.raw.Do(ctx, e.raw.B().Exists().Key(keys.Leases).Build()).AsInt64()
		return err == nil && n == 0
	})
	e.finishKeys(func(k string) bool { return k == keys.Available })
}

// TestCheckerChildWaiterTakesPermitComingBack: a dead-waiter round whose
// fill finds every permit taken by holders the model does not know (the
// calls of an earlier round that gave up in a fault, whose permits come
// back with their leases; here a Client outside the model, its permits
// released once the child and the live waiter are queued). The child,
// first in the queue, takes a permit that comes back, and dies (killed,
// or stopped then killed) holding it: the checkpoint must find its
// permit in the holders record, not judge it a stray (flake hunt of
// issue 32, failure N: stop-waiter, after a pause that left permits of
// calls that gave up).
func TestCheckerChildWaiterTakesPermitComingBack(t *testing.T) {
	for _, shape := range []string{"stop-waiter", "kill-waiter"} {
		t.Run(shape, func(t *testing.T) {
			e := newEngine(t, semKind(), uint64(time.Now().UnixNano()))
			m := e.m.(*semModel)
			other, err := rlock.New(e.raw, rlock.WithWatchdogTimeout(chkLease))
			require.NoError(t, err)
			defer other.Close()
			ctx := context.Background()
			keys := semaphore.KeysOf(e.name)
			var ids []string
			e.mu.Lock()
			n := m.cur
			e.mu.Unlock()
			for range n {
				id, err := other.GetSemaphore(e.name).Acquire(ctx, 10*time.Second)
				require.NoError(t, err)
				ids = append(ids, id)
				e.mu.Lock()
				m.spans = append(m.spans, pspan{id: id, from: time.Now(), why: "a permit of a holder outside the model"})
				e.mu.Unlock()
			}
			m.queuedHook = func(ch *child) {
				for _, id := range ids {
					require.NoError(t, other.GetSemaphore(e.name).Release(ctx, id))
					e.mu.Lock()
					for i := range m.spans {
						if m.spans[i].id == id {
							m.spans[i].to = time.Now()
						}
					}
					e.mu.Unlock()
				}
				require.True(t, until(3*time.Second, func() bool {
					hs, err := e.raw.Do(ctx, e.raw.B().Hvals().Key(keys.Holders).Build()).AsStrSlice()
					return err == nil && slices.ContainsFunc(hs, func(h string) bool { return strings.HasPrefix(h, ch.id+":") })
				}), "child %s took no permit", ch.who)
			}
			e.logf("round 1: %s, fault none", shape)
			m.round(shape, -1)
			m.checkpoint()
			e.closeAll()
			e.mu.Lock()
			defer e.mu.Unlock()
			if e.failed {
				t.Logf("history:\n%s", strings.Join(e.history, "\n"))
			}
			assert.Equal(t, 1, e.counts["child-waiter:took"], "the child's permit found by the checkpoint")
		})
	}
}
