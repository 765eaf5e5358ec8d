package rlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/ratelimit"
	"github.com/relock-go/relock/rlock"
)

// This file is the model of the rate limiter (ratelimit.Limiter,
// Redisson's RRateLimiter): at most rate permits granted in any window of
// its interval, on the server's clock. A grant is used up, never given
// back; it leaves the window interval after it was made.

// rateBound is the rate limiter's liveness bound: a refused waiter sleeps
// until the oldest grants that keep it out leave the window (the script
// tells it when, on the server's clock), or until a message (a rate set
// anew), then attempts; it goes on within a round trip of that, and the
// bound leaves room for a loaded machine's timers. It is below the
// shortest interval, so that a waiter that sleeps a whole interval
// instead is seen.
const rateBound = 150 * time.Millisecond

// rGrant is a grant of n permits made (certain) or perhaps made (a call
// of unknown outcome: its reply was lost, its give-back may not have run)
// between from and to (the call's start and end).
type rGrant struct {
	n        int
	from, to time.Time
	certain  bool
	who      string
	epoch    int
}

// rEpoch is a rate set: from the end of the call that set it (every grant
// before it no longer counts once it ran: SetRate starts an empty
// window).
type rEpoch struct {
	setFrom, setTo time.Time
	interval       time.Duration
}

// rWait is a call that waited for n permits.
type rWait struct {
	n        int
	from, to time.Time
	what     string
}

type rateModel struct {
	e        *engine
	rate     int
	interval time.Duration // the usual one
	epochs   []rEpoch
	grants   []*rGrant
	waits    []rWait
	// unknown are the calls of unknown outcome of this round, settled at
	// the checkpoint (a script held up by a pause runs at its end).
	unknown  []*rGrant
	faultEnd time.Time
	// calls are the acquisitions of this round, and tries those that
	// ended without a grant and without an error (see checkTriesLocked).
	calls, tries []rWait
}

func rateKind() *chkKind {
	return &chkKind{name: "RateLimiter", slots: 2, bound: rateBound,
		acquireScripts: []string{lua.RateAcquire.SHA1},
		deaths:         []string{"death:kill wait", "death:close waiting"},
		model: func(e *engine) model {
			m := &rateModel{e: e, rate: 2 + e.intn(2), interval: 400*time.Millisecond + e.ms(200)}
			start := time.Now()
			ok, err := m.limiter(e.slot(0)).TrySetRate(context.Background(), m.rate, m.interval)
			require.NoError(e.t, err, "TrySetRate")
			require.True(e.t, ok, "TrySetRate(%d, %v) on a new rate limiter", m.rate, m.interval)
			m.epochs = []rEpoch{{setFrom: start, setTo: time.Now(), interval: m.interval}}
			return m
		}}
}

// TestCheckerRateLimiter is the checker (see TestRandomizedHolds) on the
// rate limiter: never more grants than the rate in a window of the
// interval, by the calls' own times (grants that surely fell in one
// window) and by the server's clock (the grants' scores); a waiter goes
// on within rateBound once the grants that kept it out left the window,
// or the rate was set anew. One run of chkWave4Run by default
// (RELOCK_CHECK_DURATION sets a longer time, in runs of that length).
func TestCheckerRateLimiter(t *testing.T) {
	runChecker(t, []*chkKind{rateKind()}, true, chkWave4Run, chkWave4Run)
}

func (m *rateModel) limiter(s *slot) *ratelimit.Limiter { return s.c.GetRateLimiter(m.e.name) }

func (m *rateModel) shapes() []string { return []string{"kill-waiter", "close-waiter", "window"} }

func (m *rateModel) round(shape string, f faultKind) {
	switch shape {
	case "window":
		m.windowRound()
	case "kill-waiter", "close-waiter":
		m.deadWaiterRound(shape == "kill-waiter")
	default:
		m.randomRound(f)
	}
}

// randomRound: three actors per Client each make two calls (a waiting
// Acquire or a TryAcquire, of one or two permits), with perhaps a fault.
func (m *rateModel) randomRound(f faultKind) {
	e := m.e
	var wg sync.WaitGroup
	for i := range e.kind.slots {
		for _, n := range []string{"a", "b", "c"} {
			who := fmt.Sprintf("c%d%s", i, n)
			wg.Go(func() {
				for range 2 {
					time.Sleep(e.ms(100))
					m.step(i, who)
				}
			})
		}
	}
	if f >= 0 {
		wg.Go(func() { e.fault(f, e.ms(200)) })
	}
	wg.Wait()
}

func (m *rateModel) step(i int, who string) {
	e := m.e
	e.call()
	n := pick(e, 1, 1, 1, 2)
	if e.intn(2) == 0 {
		timeout := pick(e, 100*time.Millisecond, 300*time.Millisecond, 600*time.Millisecond)
		m.acquire(i, who, n, fmt.Sprintf("Acquire(%d)", n), timeout, true, func(ctx context.Context, l *ratelimit.Limiter) (bool, error) {
			err := l.Acquire(ctx, n)
			return err == nil, err
		})
		return
	}
	wait := pick(e, 0, 50*time.Millisecond, 300*time.Millisecond)
	if e.intn(4) == 0 {
		wait = shortWait(e)
	}
	m.acquire(i, who, n, fmt.Sprintf("TryAcquire(%d, %v)", n, wait), 3*time.Second, wait > 0, func(ctx context.Context, l *ratelimit.Limiter) (bool, error) {
		return l.TryAcquire(ctx, n, wait)
	})
}

// acquire runs one acquisition of n permits through the Client of slot
// i, and reports whether it was granted.
func (m *rateModel) acquire(i int, who string, n int, what string, timeout time.Duration, waits bool,
	call func(context.Context, *ratelimit.Limiter) (bool, error)) bool {
	e := m.e
	s := e.slot(i)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	ok, err := call(ctx, m.limiter(s))
	end := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	what = who + " " + what
	if waits {
		m.waits = append(m.waits, rWait{n: n, from: start, to: end, what: what})
	}
	m.calls = append(m.calls, rWait{n: n, from: start, to: end, what: what})
	if err == nil && !ok && s.closedAt.IsZero() {
		m.tries = append(m.tries, m.calls[len(m.calls)-1])
	}
	switch {
	case err == nil && ok:
		e.logLocked("%s -> granted", what)
		m.grants = append(m.grants, &rGrant{n: n, from: start, to: end, certain: true, who: what, epoch: len(m.epochs) - 1})
		return true
	case err == nil:
		e.logLocked("%s -> not granted", what)
		return false
	}
	e.logLocked("%s -> %v", what, oneLine(err))
	if !errors.Is(err, rlock.ErrNotAcquired) && !errors.Is(err, rlock.ErrClosed) && !isRedisFailure(err) {
		e.violation("%s failed with %v, which is neither ErrNotAcquired, ErrClosed nor a Redis failure", what, err)
	}
	if !errors.Is(err, context.DeadlineExceeded) || e.faultedDuring(start.Add(-chkRecovery), end.Add(chkSettle)) {
		// Truly unknowable: an attempt whose reply was lost may have been
		// granted, and the call's give-back may not have run.
		m.unknown = append(m.unknown, &rGrant{n: n, from: start, to: end, who: what + " (outcome unknown)", epoch: len(m.epochs) - 1})
	}
	return false
}

// setRate sets the rate anew with interval d, through the Client of slot
// i: an empty window.
func (m *rateModel) setRate(i int, d time.Duration) {
	e := m.e
	start := time.Now()
	err := m.limiter(e.slot(i)).SetRate(context.Background(), m.rate, d)
	end := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.logLocked("c%d SetRate(%d, %v) -> %v", i, m.rate, d, errText(err))
	if !assert.NoError(e.t, err, "SetRate in a round without a fault") {
		e.failed = true
		return
	}
	m.epochs = append(m.epochs, rEpoch{setFrom: start, setTo: end, interval: d})
}

// windowRound: the window, once empty, is filled, and a half to three
// quarters of an interval later a waiter of each Client (one or two permits) starts:
// each must go on once the grants that keep it out leave the window, not
// a whole interval after it was refused.
func (m *rateModel) windowRound() {
	e := m.e
	// The grants of the rounds before leave the window first.
	time.Sleep(m.interval + chkSettle)
	for range m.rate {
		e.call()
		m.acquire(0, "c0a", 1, "TryAcquire(1, 0) (to fill)", time.Second, false, func(ctx context.Context, l *ratelimit.Limiter) (bool, error) {
			return l.TryAcquire(ctx, 1, 0)
		})
	}
	half := m.interval / 2
	time.Sleep(half + time.Duration(e.intn(int(half/2)+1)))
	var wg sync.WaitGroup
	for i, who := range []string{"c0b", "c1a"} {
		n := pick(e, 1, 1, 2)
		wg.Go(func() {
			e.call()
			m.acquire(i, who, n, fmt.Sprintf("Acquire(%d) (for room in the window)", n), 3*m.interval, true, func(ctx context.Context, l *ratelimit.Limiter) (bool, error) {
				err := l.Acquire(ctx, n)
				return err == nil, err
			})
		})
	}
	wg.Wait()
}

// deadWaiterRound: the rate is set anew with a long interval, and its
// window filled; a waiter (a child, killed; or one whose Client is then
// closed) and a live waiter of the other Client wait; the waiter dies,
// then the usual rate is set again (an empty window, published): the
// live waiter must go on.
func (m *rateModel) deadWaiterRound(kill bool) {
	e := m.e
	m.setRate(0, 10*time.Second)
	for range m.rate {
		e.call()
		m.acquire(0, "c0a", 1, "TryAcquire(1, 0) (to fill)", time.Second, false, func(ctx context.Context, l *ratelimit.Limiter) (bool, error) {
			return l.TryAcquire(ctx, 1, 0)
		})
	}
	var wg sync.WaitGroup
	var ch *child
	victim := 1
	if kill {
		ch = e.spawn(childSpec{Act: "wait", Expect: 1})
		if ch == nil {
			m.setRate(0, m.interval)
			return
		}
	} else {
		s := e.slot(victim)
		base := e.replies(s, lua.RateAcquire.SHA1)
		wg.Go(func() {
			e.call()
			m.acquire(victim, "c1a", 1, "Acquire(1) (to die waiting)", 3*time.Second, true, func(ctx context.Context, l *ratelimit.Limiter) (bool, error) {
				err := l.Acquire(ctx, 1)
				return err == nil, err
			})
		})
		seenWaiting(e, s, lua.RateAcquire.SHA1, base)
	}
	ws := e.slot(0)
	base := e.replies(ws, lua.RateAcquire.SHA1)
	wg.Go(func() {
		e.call()
		m.acquire(0, "c0b", 1, "Acquire(1) (beside a dead waiter)", 3*time.Second, true, func(ctx context.Context, l *ratelimit.Limiter) (bool, error) {
			err := l.Acquire(ctx, 1)
			return err == nil, err
		})
	})
	seenWaiting(e, ws, lua.RateAcquire.SHA1, base)
	if kill {
		e.kill(ch, false)
	} else {
		e.closeSlot(victim, false, "waiting")
	}
	time.Sleep(e.ms(100))
	m.setRate(0, m.interval)
	wg.Wait()
	if !kill {
		e.replaceSlot(victim)
	}
}

func (m *rateModel) faulted(f faultKind, from, to time.Time) {
	if to.IsZero() {
		return
	}
	e := m.e
	e.mu.Lock()
	defer e.mu.Unlock()
	m.faultEnd = maxTime(m.faultEnd, to)
}

// lost: a rate limiter reports no loss.
func (m *rateModel) lost(si, gen int, name, owner string, cause error) {
	e := m.e
	e.mu.Lock()
	defer e.mu.Unlock()
	e.violation("a loss of %q (owner %q) reported by c%d.%d of a rate limiter: %v", name, owner, si, gen, oneLine(cause))
}

// busyTo is when g surely left the window (or the window was emptied by a
// rate set anew). e.mu is held.
func (m *rateModel) busyTo(g *rGrant) time.Time {
	to := g.to.Add(m.epochs[g.epoch].interval)
	for _, ep := range m.epochs[g.epoch+1:] {
		if ep.setFrom.After(g.to) && ep.setTo.Before(to) {
			to = ep.setTo
		}
	}
	return to
}

// checkWindowsLocked checks that no window of the interval surely holds
// grants of more than the rate: grants of one rate whose calls all ran
// within less than an interval less a millisecond (the layout stamps
// grants in whole ms of the server's clock, Redisson's resolution: two
// grants 490.1ms apart may be stamped 491ms apart, and a window of 491ms
// has let the first go). A grant whose call overlapped the setting of a
// later rate may be of either: it is left out. e.mu is held.
func (m *rateModel) checkWindowsLocked() {
	e := m.e
	gs := slices.Clone(m.grants)
	slices.SortFunc(gs, func(a, b *rGrant) int { return a.from.Compare(b.from) })
	clean := func(g *rGrant) bool {
		for _, ep := range m.epochs[g.epoch+1:] {
			if ep.setFrom.Before(g.to) {
				return false
			}
		}
		return true
	}
	for i, g := range gs {
		if !clean(g) {
			continue
		}
		interval := m.epochs[g.epoch].interval
		n, in := 0, []string{}
		for _, h := range gs[i:] {
			if h.epoch == g.epoch && clean(h) && h.to.Sub(g.from) < interval-time.Millisecond {
				n += h.n
				in = append(in, fmt.Sprintf("%s (%v to %v)", h.who, e.at(h.from), e.at(h.to)))
			}
		}
		if n > m.rate {
			e.count("violations:rate", 1)
			e.violation("grants of %d permits within one window of %v (rate %d): %v", n, interval, m.rate, in)
			return
		}
	}
}

// checkScoresLocked checks the grants Redis has (scored on the server's
// clock, in ms) against the rate: no window of the interval holds more.
func (m *rateModel) checkScores() {
	e := m.e
	k := layout.RateLimiter(e.name)
	zs, err := e.raw.Do(context.Background(), e.raw.B().Zrange().Key(k.Permits).Min("0").Max("-1").Withscores().Build()).AsZScores()
	if !assert.NoError(e.t, err, "ZRANGE the grants") {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	interval := float64(m.epochs[len(m.epochs)-1].interval.Milliseconds())
	for i, z := range zs {
		n := 0
		for _, y := range zs[i:] {
			if y.Score-z.Score < interval {
				_, p, ok := layout.UnpackGrant(y.Member)
				if !ok {
					e.violation("Redis has a grant %q that is not packed as Redisson packs it", y.Member)
					return
				}
				n += int(p)
			}
		}
		if n > m.rate {
			e.count("violations:rate", 1)
			e.violation("Redis has grants of %d permits within %vms from %v on its clock (rate %d)", n, interval, z.Score, m.rate)
			return
		}
	}
}

// checkpoint checks the windows, by the calls' times and by the server's
// clock, and liveness.
func (m *rateModel) checkpoint() {
	e := m.e
	e.mu.Lock()
	wait := time.Until(m.faultEnd.Add(chkSettle))
	m.faultEnd = time.Time{}
	e.mu.Unlock()
	if wait > 0 {
		time.Sleep(wait)
	}
	m.checkScores()
	e.mu.Lock()
	defer e.mu.Unlock()
	now := time.Now()
	m.checkWindowsLocked()
	m.checkTriesLocked(now)
	m.livenessLocked(now)
	m.calls, m.tries = m.calls[:0], m.tries[:0]
	// Forget what can no longer share a window with what comes.
	last := len(m.epochs) - 1
	m.grants = slices.DeleteFunc(m.grants, func(g *rGrant) bool { return g.epoch < last || m.busyTo(g).Before(now) })
	for _, g := range m.grants {
		g.epoch -= last
	}
	// An acquisition whose outcome is unknown (a fault crossed it, a
	// paused server ran its script late) may hold its permits in the
	// window until its settle plus an interval, past the round's end: it
	// is kept while it can share a window with what comes, as grants are.
	m.unknown = slices.DeleteFunc(m.unknown, func(g *rGrant) bool {
		return g.epoch < last || e.settled(g.to).Add(m.epochs[g.epoch].interval).Before(now)
	})
	for _, g := range m.unknown {
		g.epoch -= last
	}
	m.epochs = m.epochs[last:]
	m.waits = m.waits[:0]
	e.forgetPast()
}

// checkTriesLocked judges the acquisitions of the round that ended
// without a grant and without an error: if the window had room for the
// n permits one asked for during its whole call (every grant counted from
// its call's start, and the other acquisitions in flight as grants), with
// no child at work, no fault and no other excuse, it should have been
// granted, however short its wait. e.mu is held.
func (m *rateModel) checkTriesLocked(now time.Time) {
	e := m.e
	xs := e.excuses()
	for _, w := range m.tries {
		var busy []window
		for _, g := range m.grants {
			for range g.n {
				busy = append(busy, window{from: g.from, to: m.busyTo(g)})
			}
		}
		for _, g := range m.unknown {
			for range g.n {
				busy = append(busy, window{from: g.from, to: e.settled(g.to).Add(m.epochs[g.epoch].interval)})
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
		whole := func(ps []window) bool {
			return len(ps) == 1 && ps[0].from.Equal(w.from) && ps[0].to.Equal(w.to)
		}
		steps := []step{{from: m.epochs[0].setFrom, n: m.rate - (w.n - 1)}}
		if !whole(positive(w.from, w.to, steps, busy)) || !whole(subtract(window{from: w.from, to: w.to}, xs)) {
			continue
		}
		e.count("violations:free-not-taken", 1)
		e.violation("%s (%v to %v, %v) was not granted, though the window had room for its %d permits for the whole call, with no other call in flight",
			w.what, e.at(w.from), e.at(w.to), w.to.Sub(w.from).Round(time.Microsecond), w.n)
	}
}

// livenessLocked checks the waits of the round: none waits for longer than
// the bound while the window has room for it. e.mu is held.
func (m *rateModel) livenessLocked(now time.Time) {
	e := m.e
	var busy []window
	add := func(g *rGrant, from, to time.Time) {
		for range g.n {
			busy = append(busy, window{from: from, to: to, what: "the grant of " + g.who})
		}
	}
	for _, g := range m.grants {
		// A grant is made between its call's start and its reply; with no
		// fault about its end, the reply comes within a round trip of the
		// script (chkSettle, as the engine takes it), and the model takes
		// it as made no earlier (a waiting call's start may be long before
		// its grant, and would hide the room the window had meanwhile).
		from := g.from
		if !e.faultedDuring(g.to.Add(-chkSettle-chkRecovery), g.to) {
			from = maxTime(from, g.to.Add(-chkSettle))
		}
		add(g, from, m.busyTo(g))
	}
	for _, g := range m.unknown {
		// Made, if at all, by the time the call's last script ran.
		to := e.settled(g.to).Add(m.epochs[g.epoch].interval)
		for _, ep := range m.epochs[g.epoch+1:] {
			if ep.setFrom.After(e.settled(g.to)) && ep.setTo.Before(to) {
				to = ep.setTo
			}
		}
		add(g, g.from, to)
	}
	steps := func(n int) []step {
		return []step{{from: m.epochs[0].setFrom, n: m.rate - (n - 1)}}
	}
	var ws []wait
	for _, w := range m.waits {
		ws = append(ws, wait{from: w.from, to: w.to, what: w.what, avail: positive(w.from, w.to, steps(w.n), busy)})
		if len(ws[len(ws)-1].avail) > 0 {
			e.count("liveness:judged", 1) // it could have gone on at some point
		}
	}
	e.checkLiveness(ws)
}

// finish: the limiter's keys stay (its rate has no lifetime), and nothing
// else.
func (m *rateModel) finish() {
	e := m.e
	e.closeAll()
	k := layout.RateLimiter(e.name)
	e.finishKeys(func(key string) bool { return key == k.Config || key == k.Value || key == k.Permits })
}
