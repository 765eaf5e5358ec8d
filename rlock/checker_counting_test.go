package rlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/rlock"
	"github.com/relock-go/relock/semaphore"
)

// This file is the model of the counting semaphore (semaphore.Counting,
// Redisson's RSemaphore): a count of permits, taken n at a time (all or
// none) and given back by whoever took them; the library keeps no record
// of who holds what. The checker's actors (and children) know what they
// took and give it back. Permits have no lease: a holder that dies
// (killed, or its Client closed) takes its permits with it for good, by
// design, as Redisson's do; the model counts them as taken forever
// ("lost:<how>") and refills the semaphore with AddPermits, which must
// wake a waiter.

// countingBound is the counting semaphore's liveness bound: a waiter
// sleeps until a message (every script that gives permits publishes,
// and hands the wake-up on while permits are left), so it goes on within
// a round trip or two of the release; the bound leaves room for the
// scheduler of a loaded machine, as chkBound does for the locks.
const countingBound = chkBound

// cTake is a batch of permits taken by one call: by an actor (held until
// it gives them back), by a holder that died (taken for good), or by a
// call whose outcome is unknown (it may have taken them, and its give-back
// may not have run).
type cTake struct {
	n        int
	who      string
	start    time.Time // the call that took them
	from, to time.Time // from its reply; to: zero while taken
	// certain: the permits are surely taken from the reply on (not for a
	// call whose outcome is unknown).
	certain bool
	// dead: taken by a holder that died: they never come back.
	dead bool
	// refilled: the round already added as many permits for them (a
	// dead holder's round refills to wake its waiters): the checkpoint
	// forgets them without adding them again.
	refilled bool
	// releasing: a Release of them is in flight.
	releasing bool
}

// cActor is one goroutine of a slot, with the batches it holds.
type cActor struct {
	slot  int
	name  string
	takes []*cTake
}

func (a *cActor) String() string { return fmt.Sprintf("c%d%s", a.slot, a.name) }

type countingModel struct {
	e      *engine
	actors []*cActor
	// total is the count the semaphore was set to plus what was added
	// (refills among it); taken what the model's takes hold now. steps
	// is the count's low bound over the round (a step function), top the
	// most it had.
	total int
	steps []step
	top   int
	// down is what AddPermits calls in flight take away: the model's
	// total has them off already, Redis may not yet.
	down  int
	takes []*cTake
	waits []cWait
	// calls are the acquisitions of this round, and tries those that
	// ended without the permits and without an error (see
	// checkTriesLocked).
	calls, tries []cWait
	// faultEnd is the end of the round's last fault (zero: none).
	faultEnd time.Time
}

// cWait is a call that waited for n permits.
type cWait struct {
	n        int
	from, to time.Time
	what     string
}

func countingKind() *chkKind {
	return &chkKind{name: "CountingSemaphore", slots: 2, bound: countingBound,
		acquireScripts: []string{lua.CountingAcquire.SHA1},
		deaths:         []string{"death:kill hold", "death:kill wait", "death:close holding", "death:close waiting"},
		model: func(e *engine) model {
			m := &countingModel{e: e}
			for i := range e.kind.slots {
				for _, n := range []string{"a", "b", "c"} {
					m.actors = append(m.actors, &cActor{slot: i, name: n})
				}
			}
			m.total = 3 + e.intn(2)
			ok, err := m.sem(e.slot(0)).TrySetPermits(context.Background(), m.total)
			require.NoError(e.t, err, "TrySetPermits")
			require.True(e.t, ok, "TrySetPermits(%d) on a new counting semaphore", m.total)
			m.top = m.total
			m.steps = []step{{from: time.Now(), n: m.total}}
			return m
		}}
}

// TestCheckerCountingSemaphore is the checker (see TestRandomizedHolds)
// on the counting semaphore: never more permits taken than the
// semaphore has; after every round Redis' count is the model's (what the
// semaphore has, less what live actors hold and what dead holders took
// for good), up to what calls whose outcome is unknown may have taken;
// whenever n permits are free, a waiter for n goes on within
// countingBound. One run of chkWave4Run by default
// (RELOCK_CHECK_DURATION sets a longer time, in runs of that length).
func TestCheckerCountingSemaphore(t *testing.T) {
	runChecker(t, []*chkKind{countingKind()}, true, chkWave4Run, chkWave4Run)
}

func (m *countingModel) sem(s *slot) *semaphore.Counting { return s.c.GetCountingSemaphore(m.e.name) }

func (m *countingModel) shapes() []string {
	return []string{"kill-holder", "close-holder", "kill-waiter", "close-waiter", "pass-on"}
}

func (m *countingModel) round(shape string, f faultKind) {
	switch shape {
	case "kill-holder", "close-holder":
		m.deadHolderRound(shape == "kill-holder")
	case "kill-waiter", "close-waiter":
		m.deadWaiterRound(shape == "kill-waiter")
	case "pass-on":
		m.passOnRound()
	default:
		m.randomRound(f)
	}
}

// randomRound makes every actor do one call, with perhaps a fault.
func (m *countingModel) randomRound(f faultKind) {
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
func (m *countingModel) step(a *cActor, faulty bool) {
	e := m.e
	e.mu.Lock()
	holding := len(a.takes) > 0
	e.mu.Unlock()
	e.call()
	r := e.intn(100)
	n := pick(e, 1, 1, 1, 2)
	switch {
	case holding && r < 45:
		time.Sleep(e.ms(150))
		m.release(a, -1)
	case r < 70:
		timeout := pick(e, 50*time.Millisecond, 150*time.Millisecond, 300*time.Millisecond, 600*time.Millisecond)
		m.acquire(a, n, fmt.Sprintf("Acquire(%d)", n), timeout, true, func(ctx context.Context, s *semaphore.Counting) (bool, error) {
			err := s.Acquire(ctx, n)
			return err == nil, err
		})
	case r < 92:
		wait := pick(e, 0, 50*time.Millisecond, 300*time.Millisecond)
		if e.intn(4) == 0 {
			wait = shortWait(e)
		}
		m.acquire(a, n, fmt.Sprintf("TryAcquire(%d, %v)", n, wait), 3*time.Second, wait > 0, func(ctx context.Context, s *semaphore.Counting) (bool, error) {
			return s.TryAcquire(ctx, n, wait)
		})
	case !faulty:
		m.addPermits(a)
	}
}

// acquire runs one acquisition of n permits for a.
func (m *countingModel) acquire(a *cActor, n int, what string, timeout time.Duration, waits bool,
	call func(context.Context, *semaphore.Counting) (bool, error)) bool {
	e := m.e
	s := e.slot(a.slot)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	ok, err := call(ctx, m.sem(s))
	end := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	what = fmt.Sprintf("%v %s", a, what)
	if waits {
		m.waits = append(m.waits, cWait{n: n, from: start, to: end, what: what})
	}
	m.calls = append(m.calls, cWait{n: n, from: start, to: end, what: what})
	if err == nil && !ok && s.closedAt.IsZero() {
		m.tries = append(m.tries, m.calls[len(m.calls)-1])
	}
	switch {
	case err == nil && ok:
		e.logLocked("%s -> acquired", what)
		t := &cTake{n: n, who: a.String(), start: start, from: end, certain: true}
		m.checkTakeLocked(t, what)
		if !s.closedAt.IsZero() || s != e.slots[a.slot] {
			// Its Client closed as it took them: nobody gives them back.
			t.dead = true
			e.count("lost:closed", n)
			m.takes = append(m.takes, t)
			return false
		}
		m.takes = append(m.takes, t)
		a.takes = append(a.takes, t)
		return true
	case err == nil:
		e.logLocked("%s -> not acquired", what)
		return false
	}
	e.logLocked("%s -> %v", what, oneLine(err))
	if !errors.Is(err, rlock.ErrNotAcquired) && !errors.Is(err, rlock.ErrClosed) && !isRedisFailure(err) {
		e.violation("%s failed with %v, which is neither ErrNotAcquired, ErrClosed nor a Redis failure", what, err)
	}
	if !errors.Is(err, context.DeadlineExceeded) || e.faultedDuring(start.Add(-chkRecovery), end.Add(chkSettle)) {
		// Truly unknowable: an attempt whose reply was lost may have
		// taken them, and the call's give-back may not have run (Redis did
		// not answer it either). The checkpoint reads the count. (A call
		// that only ran out of time, with no fault, took nothing.)
		m.takes = append(m.takes, &cTake{n: n, who: what + " (outcome unknown)", start: start, from: start})
	}
	return false
}

// checkTakeLocked checks that the permits t took, with those certainly
// taken when it got them, are no more than the semaphore had. e.mu is
// held.
func (m *countingModel) checkTakeLocked(t *cTake, what string) {
	e := m.e
	n := t.n
	for _, o := range m.takes {
		if o.certain && o.to.IsZero() && !o.releasing {
			n += o.n
		}
	}
	if n > m.top {
		e.count("violations:over-committed", 1)
		e.violation("%s took %d permits while %d others were taken, and the semaphore has %d", what, t.n, n-t.n, m.top)
	}
}

// release gives back one of a's batches (i < 0: a random one).
func (m *countingModel) release(a *cActor, i int) {
	e := m.e
	e.mu.Lock()
	if len(a.takes) == 0 {
		e.mu.Unlock()
		return
	}
	if i < 0 {
		i = e.intn(len(a.takes))
	}
	t := a.takes[i]
	a.takes = append(a.takes[:i:i], a.takes[i+1:]...)
	t.releasing = true
	s := e.slots[a.slot]
	e.mu.Unlock()
	start := time.Now()
	err := m.sem(s).Release(context.Background(), t.n)
	end := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.logLocked("%v Release(%d) -> %v", a, t.n, errText(err))
	var re *rueidis.RedisError
	switch {
	case err == nil:
		t.to = end
	case errors.As(err, &re) && s.closedAt.IsZero():
		// Refused by Redis (an OOM reply): nothing came back; a gives
		// them back later.
		t.releasing = false
		a.takes = append(a.takes, t)
	case isRedisFailure(err) || errors.Is(err, rlock.ErrClosed):
		// Truly unknowable: the permits may or may not be back; nobody
		// gives them back again. The checkpoint reads the count.
		t.certain = false
		t.who += fmt.Sprintf(", its Release at %v unconfirmed", e.at(start))
	default:
		e.violation("%v: Release(%d) failed with %v, not a Redis failure", a, t.n, err)
		t.certain = false
	}
}

// addPermits adds a permit, or takes one away (the count stays between 2
// and 5).
func (m *countingModel) addPermits(a *cActor) {
	e := m.e
	e.mu.Lock()
	n := 1
	if m.total > 2 && (m.total >= 5 || e.intn(2) == 0) {
		n = -1
	}
	old := m.total
	m.total += n
	m.down += max(-n, 0)
	m.top = max(m.top, m.total+m.down)
	m.steps = append(m.steps, step{from: time.Now(), n: min(old, m.total)})
	e.mu.Unlock()
	err := m.sem(e.slot(a.slot)).AddPermits(context.Background(), n)
	e.mu.Lock()
	defer e.mu.Unlock()
	m.down -= max(-n, 0)
	e.logLocked("%v AddPermits(%d) -> %v (now %d)", a, n, errText(err), m.total)
	if err != nil {
		e.violation("%v: AddPermits(%d) = %v in a round without a fault", a, n, err)
		return
	}
	m.steps = append(m.steps, step{from: time.Now(), n: m.total})
}

// refill adds n permits for those taken for good, through the Client of
// slot i, and reports whether it did.
func (m *countingModel) refill(i, n int, why string) bool {
	e := m.e
	// A waiter the refill wakes may take a permit before the reply below
	// is read: the most the semaphore has is raised first.
	e.mu.Lock()
	m.top = max(m.top, m.total+n+m.down)
	e.mu.Unlock()
	err := m.sem(e.slot(i)).AddPermits(context.Background(), n)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.logLocked("c%d AddPermits(%d) (refill: %s) -> %v", i, n, why, errText(err))
	if err != nil {
		e.violation("c%d: AddPermits(%d) = %v in a round without a fault", i, n, err)
		return false
	}
	m.total += n
	m.top = max(m.top, m.total)
	m.steps = append(m.steps, step{from: time.Now(), n: m.total})
	return true
}

// drain gives back every batch the actors hold.
func (m *countingModel) drain() {
	for _, a := range m.actors {
		for {
			m.e.mu.Lock()
			n := len(a.takes)
			m.e.mu.Unlock()
			if n == 0 {
				break
			}
			m.release(a, 0)
		}
	}
}

// free is the count the model expects now with nothing in doubt. e.mu is
// held.
func (m *countingModel) freeLocked() int {
	n := m.total
	for _, t := range m.takes {
		if t.to.IsZero() && (t.certain || t.dead) {
			n -= t.n
		}
	}
	return n
}

// fill takes every free permit with the actors of slot i, one at a time,
// until an attempt is refused: the rounds that fill the semaphore count on
// no permit being left free (a child that finds one takes it and dies as
// it starts, see spawn). The model's count bounds the attempts.
func (m *countingModel) fill(i int) {
	e := m.e
	e.mu.Lock()
	most := max(m.freeLocked(), 0) + 1
	e.mu.Unlock()
	for range most {
		var a *cActor
		for _, x := range m.actors {
			if x.slot == i && (a == nil || len(x.takes) < len(a.takes)) {
				a = x
			}
		}
		e.call()
		if !m.acquire(a, 1, "TryAcquire(1, 0) (to fill)", time.Second, false, func(ctx context.Context, s *semaphore.Counting) (bool, error) {
			return s.TryAcquire(ctx, 1, 0)
		}) {
			return
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.violation("c%d took the %d permits the model has free, and one more: the model has too few", i, most-1)
}

// spawn starts a child of the kind for spec, which asks for n permits; a
// child that dies as it starts (it did not say it holds or waits in time,
// or it took its permits at once when it was to wait) may have taken them,
// for good: its call's outcome is unknown to the model, which the
// checkpoint settles from the count.
func (m *countingModel) spawn(spec childSpec, n int) *child {
	e := m.e
	start := time.Now()
	ch := e.spawn(spec)
	if ch == nil {
		e.mu.Lock()
		e.logLocked("  model: a child that died as it started may have taken %d permits for good", n)
		m.takes = append(m.takes, &cTake{n: n, who: "a child that died as it started (outcome unknown)", start: start, from: start})
		e.mu.Unlock()
	}
	return ch
}

// waiter starts an Acquire of n permits for a, which gives them back
// shortly after it got them; it returns at once.
func (m *countingModel) waiter(wg *sync.WaitGroup, a *cActor, n int, what string) {
	e := m.e
	wg.Go(func() {
		e.call()
		if m.acquire(a, n, fmt.Sprintf("Acquire(%d) (%s)", n, what), 3*time.Second, true, func(ctx context.Context, s *semaphore.Counting) (bool, error) {
			err := s.Acquire(ctx, n)
			return err == nil, err
		}) {
			time.Sleep(10*time.Millisecond + e.ms(40))
			m.release(a, len(a.takes)-1)
		}
	})
}

// seenWaiting waits until a waiter of slot s, started when the slot had
// had base replies of the acquire script, is seen waiting: it attempted,
// and its Client is subscribed (a waiter attempts again after it
// subscribed, unless its Client was subscribed before it attempted: the
// channel of a waiter that left lingers a while).
func (m *countingModel) seenWaiting(s *slot, base int) bool {
	return seenWaiting(m.e, s, lua.CountingAcquire.SHA1, base)
}

// seenWaiting is the counting semaphore's and the rate limiter's: a
// waiter of slot s has had a reply of the acquire script sha since base,
// and its Client is subscribed.
func seenWaiting(e *engine, s *slot, sha string, base int) bool {
	return until(2*time.Second, func() bool { return e.replies(s, sha) >= base+1 && e.subscribed(s) })
}

// deadHolderRound: a holder (a child, killed; or an actor whose Client
// is closed) takes permits while the others take the rest and wait; its
// permits are gone for good (the model says so: "lost:<how>"), then a
// refill (AddPermits) wakes a waiter, which must go on.
func (m *countingModel) deadHolderRound(kill bool) {
	e := m.e
	m.drain()
	n := 1 + e.intn(2)
	victim := e.intn(e.kind.slots)
	var ch *child
	var ct *cTake // the child's
	var dt *cTake // the dead holder's
	if kill {
		ch = m.spawn(childSpec{Act: "hold", Expect: n}, n)
		if ch == nil {
			return
		}
		e.mu.Lock()
		ct = &cTake{n: n, who: "child " + ch.who, start: time.Now(), from: time.Now(), certain: true}
		m.checkTakeLocked(ct, "child "+ch.who+" Acquire")
		m.takes = append(m.takes, ct)
		e.mu.Unlock()
		dt = ct
	} else {
		a := m.slotActors(victim)[0]
		e.call()
		if !m.acquire(a, n, fmt.Sprintf("Acquire(%d) (to die holding)", n), time.Second, false, func(ctx context.Context, s *semaphore.Counting) (bool, error) {
			err := s.Acquire(ctx, n)
			return err == nil, err
		}) {
			return
		}
		e.mu.Lock()
		dt = a.takes[len(a.takes)-1]
		e.mu.Unlock()
	}
	other := 1 - victim
	m.fill(other)
	var wg sync.WaitGroup
	for _, a := range m.slotActors(other) {
		m.waiter(&wg, a, 1, "after a dead holder")
	}
	time.Sleep(60*time.Millisecond + e.ms(100))
	how := "closed"
	if kill {
		how = "killed"
		e.kill(ch, false)
	} else {
		m.closeSlot(victim, false, "holding")
	}
	e.mu.Lock()
	if ct != nil {
		ct.dead = true
	}
	e.count("lost:"+how, n)
	e.logLocked("  model: the %d permits of the dead holder are taken for good (no lease, by design)", n)
	e.mu.Unlock()
	time.Sleep(e.ms(100))
	if m.refill(other, n, "for the dead holder's") {
		// The refill replaces the dead holder's permits: the checkpoint
		// must not add them again (the semaphore would grow by n each
		// such round, past what fill takes).
		e.mu.Lock()
		dt.refilled = true
		e.mu.Unlock()
	}
	wg.Wait()
	if !kill {
		e.replaceSlot(victim)
	}
	m.drain()
}

// deadWaiterRound: the permits are all taken; a waiter (a child, killed,
// or one whose Client is closed) and a live waiter of another Client
// wait; the waiter dies, then a permit comes back, and the live waiter
// must go on.
func (m *countingModel) deadWaiterRound(kill bool) {
	e := m.e
	m.drain()
	victim := 1
	m.fill(0)
	var wg sync.WaitGroup
	var ch *child
	if kill {
		ch = m.spawn(childSpec{Act: "wait", Expect: 1}, 1)
		if ch == nil {
			m.drain()
			return
		}
	} else {
		a := m.slotActors(victim)[0]
		s := e.slot(victim)
		base := e.replies(s, lua.CountingAcquire.SHA1)
		wg.Go(func() {
			e.call()
			m.acquire(a, 1, "Acquire(1) (to die waiting)", 3*time.Second, true, func(ctx context.Context, s *semaphore.Counting) (bool, error) {
				err := s.Acquire(ctx, 1)
				return err == nil, err
			})
		})
		m.seenWaiting(s, base)
	}
	w := m.slotActors(0)[len(m.slotActors(0))-1]
	ws := e.slot(0)
	base := e.replies(ws, lua.CountingAcquire.SHA1)
	m.waiter(&wg, w, 1, "beside a dead waiter")
	m.seenWaiting(ws, base)
	if kill {
		e.kill(ch, false)
	} else {
		m.closeSlot(victim, false, "waiting")
	}
	time.Sleep(e.ms(100))
	e.call()
	m.release(m.slotActors(0)[0], 0)
	wg.Wait()
	if !kill {
		e.replaceSlot(victim)
	}
	m.drain()
}

// passOnRound: the permits are all taken by one Client; a waiter for two
// permits and then one for one wait in the other Client; one permit comes
// back: too few for the first, which must hand the wake-up on to the
// second, which must go on.
func (m *countingModel) passOnRound() {
	e := m.e
	m.drain()
	m.fill(0)
	s := e.slot(1)
	as := m.slotActors(1)
	var wg sync.WaitGroup
	base := e.replies(s, lua.CountingAcquire.SHA1)
	m.waiter(&wg, as[0], 2, "a big request")
	m.seenWaiting(s, base)
	base = e.replies(s, lua.CountingAcquire.SHA1)
	m.waiter(&wg, as[1], 1, "a small request")
	m.seenWaiting(s, base)
	time.Sleep(e.ms(50))
	e.call()
	m.release(m.slotActors(0)[0], 0)
	// Nothing else frees a permit for longer than the bound: a small
	// request that sleeps on is seen.
	time.Sleep(countingBound + 200*time.Millisecond)
	m.drain()
	wg.Wait()
	m.drain()
}

func (m *countingModel) slotActors(i int) []*cActor {
	var as []*cActor
	for _, a := range m.actors {
		if a.slot == i {
			as = append(as, a)
		}
	}
	return as
}

// closeSlot closes the Client of slot i: the permits its actors hold are
// taken for good.
func (m *countingModel) closeSlot(i int, queued bool, what string) {
	e := m.e
	s := e.closeSlot(i, queued, what)
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, a := range m.actors {
		if a.slot != i {
			continue
		}
		for _, t := range a.takes {
			t.dead, t.who = true, t.who+fmt.Sprintf(", its Client c%d.%d closed", i, s.gen)
		}
		a.takes = nil
	}
}

func (m *countingModel) faulted(f faultKind, from, to time.Time) {
	if to.IsZero() {
		return
	}
	e := m.e
	e.mu.Lock()
	defer e.mu.Unlock()
	m.faultEnd = maxTime(m.faultEnd, to)
}

// lost: a counting semaphore reports no loss (it has no lease).
func (m *countingModel) lost(si, gen int, name, owner string, cause error) {
	e := m.e
	e.mu.Lock()
	defer e.mu.Unlock()
	e.violation("a loss of %q (owner %q) reported by c%d.%d of a counting semaphore, which has no lease: %v", name, owner, si, gen, oneLine(cause))
}

// count reads the semaphore's count.
func (m *countingModel) count() (int, bool) {
	e := m.e
	n, err := e.raw.Do(context.Background(), e.raw.B().Get().Key(e.name).Build()).AsInt64()
	if rueidis.IsRedisNil(err) {
		return 0, true
	}
	return int(n), assert.NoError(e.t, err, "GET the count")
}

// checkpoint checks Redis' count against the model's, ends the doubts
// (what calls of unknown outcome took is taken for good), refills what is
// taken for good, and checks liveness.
func (m *countingModel) checkpoint() {
	e := m.e
	e.mu.Lock()
	// A script held up by a fault runs by its end and a round trip.
	wait := time.Until(m.faultEnd.Add(chkSettle))
	m.faultEnd = time.Time{}
	e.mu.Unlock()
	if wait > 0 {
		time.Sleep(wait)
	}
	got, ok := m.count()
	if !ok {
		return
	}
	e.mu.Lock()
	now := time.Now()
	want := m.freeLocked()
	doubt := 0
	for _, t := range m.takes {
		if t.to.IsZero() && !t.certain && !t.dead {
			doubt += t.n
		}
	}
	if got > want || got < want-doubt {
		e.count("violations:count", 1)
		e.violation("Redis has a count of %d; the model has %d free (the semaphore has %d, less what is held and what dead holders took), less up to %d that calls of unknown outcome may have taken",
			got, want, m.total, doubt)
	} else if doubt > 0 {
		if lost := want - got; lost > 0 {
			e.count("lost:unknown", lost)
			e.logLocked("  model: calls of unknown outcome took %d permits for good", lost)
			m.takes = append(m.takes, &cTake{n: lost, who: "calls of unknown outcome", start: now, from: now, certain: true, dead: true})
		}
	}
	for _, t := range m.takes {
		if t.to.IsZero() && !t.certain && !t.dead {
			t.to = now
		}
	}
	m.checkTriesLocked(now)
	m.livenessLocked(now)
	m.calls, m.tries = m.calls[:0], m.tries[:0]
	// What is taken for good is refilled below, unless its round refilled
	// it already: the model forgets it.
	dead, refill := 0, 0
	var keep []*cTake
	for _, t := range m.takes {
		switch {
		case t.dead && t.to.IsZero():
			dead += t.n
			if !t.refilled {
				refill += t.n
			}
		case t.to.IsZero():
			keep = append(keep, t)
		}
	}
	m.takes = keep
	m.total -= dead
	m.waits = m.waits[:0]
	e.forgetPast()
	e.mu.Unlock()
	if refill > 0 {
		m.refill(0, refill, "for permits taken for good")
	}
	e.mu.Lock()
	m.top = m.total
	m.steps = []step{{from: time.Now(), n: m.total}}
	e.mu.Unlock()
}

// checkTriesLocked judges the acquisitions of the round that ended
// without the permits and without an error: if the n permits one asked
// for were free for its whole call (the count less what was held, what
// calls of unknown outcome may have taken and what the other
// acquisitions in flight may have), with no child at work, no fault and
// no other excuse, it should have taken them, however short its wait.
// e.mu is held.
func (m *countingModel) checkTriesLocked(now time.Time) {
	e := m.e
	xs := e.excuses()
	for _, w := range m.tries {
		var busy []window
		for _, t := range m.takes {
			to := t.to
			if to.IsZero() {
				to = now
			}
			for range t.n {
				busy = append(busy, window{from: t.start, to: to})
			}
		}
		for _, c := range m.calls {
			if !(c.from.Equal(w.from) && c.what == w.what) {
				for range c.n {
					busy = append(busy, window{from: c.from, to: c.to.Add(chkStray)})
				}
			}
		}
		busy = append(busy, e.childWindowsLocked(now)...)
		steps := make([]step, len(m.steps))
		for i, st := range m.steps {
			steps[i] = step{from: st.from, n: st.n - (w.n - 1)}
		}
		whole := func(ps []window) bool {
			return len(ps) == 1 && ps[0].from.Equal(w.from) && ps[0].to.Equal(w.to)
		}
		if !whole(positive(w.from, w.to, steps, busy)) || !whole(subtract(window{from: w.from, to: w.to}, xs)) {
			continue
		}
		e.count("violations:free-not-taken", 1)
		e.violation("%s (%v to %v, %v) took nothing, though the %d permits it asked for were free for the whole call, with no other call in flight",
			w.what, e.at(w.from), e.at(w.to), w.to.Sub(w.from).Round(time.Microsecond), w.n)
	}
}

// livenessLocked checks the waits of the round: none waits for longer than
// the bound while the permits it asked for are free. e.mu is held.
func (m *countingModel) livenessLocked(now time.Time) {
	e := m.e
	var busy []window
	for _, t := range m.takes {
		to := t.to
		if to.IsZero() {
			to = now
		}
		for range t.n {
			busy = append(busy, window{from: t.from, to: to, what: t.who})
		}
	}
	var ws []wait
	for _, w := range m.waits {
		// n permits free: the count less the busy ones is above n-1.
		steps := make([]step, len(m.steps))
		for i, st := range m.steps {
			steps[i] = step{from: st.from, n: st.n - (w.n - 1)}
		}
		ws = append(ws, wait{from: w.from, to: w.to, what: w.what, avail: positive(w.from, w.to, steps, busy)})
		if len(ws[len(ws)-1].avail) > 0 {
			e.count("liveness:judged", 1) // it could have gone on at some point
		}
	}
	e.checkLiveness(ws)
}

// finish gives back every permit, and checks that Redis has the count and
// relock's record of grants only.
func (m *countingModel) finish() {
	e := m.e
	m.drain()
	e.closeAll()
	k := layout.CountingSemaphore(e.name)
	e.finishKeys(func(key string) bool { return key == k.Count || key == k.Grants })
}
