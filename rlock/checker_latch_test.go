package rlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/latch"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/rlock"
)

// This file is the model of the count-down latch: a count set when the
// latch is open (at 0), counted down by anyone; at 0 every waiter goes
// on, also one whose latch was set again at once.

// latchAwait is one call of Await.
type latchAwait struct {
	who      string
	from, to time.Time
	armed    bool // it had subscribed before the round's count-downs started
	err      error
	ended    bool
}

type latchModel struct {
	e *engine
	// count is the model's count; certain is false after a call whose
	// outcome is unknown, until the checkpoint reads Redis.
	count   int
	certain bool
	// zeros are the stretches, since the last checkpoint, in which the
	// count may have been 0: from the start of the call that brought it
	// there to the reply of the call that set it again (to zero: open).
	// opened are the replies of the calls known to have brought it to 0.
	zeros  []window
	opened []time.Time
	// sure are the stretches in which the count was surely 0: from the
	// reply of the count-down that brought it there to the start of the
	// next call that set it (to zero: open).
	sure   []window
	awaits []*latchAwait
}

func latchKind() *chkKind {
	return &chkKind{name: "Latch", slots: 2,
		acquireScripts: []string{lua.LatchSet.SHA1, lua.LatchCountDown.SHA1},
		deaths:         []string{"death:kill wait", "death:close waiting"},
		model: func(e *engine) model {
			return &latchModel{e: e, certain: true, zeros: []window{{from: time.Now(), what: "the latch, never set"}}}
		}}
}

func (m *latchModel) shapes() []string {
	return []string{"reset", "kill-waiter", "close-waiter", "stop-waiter", "proxy-opening"}
}

// round sets the latch if it is open, starts waiters (and has them
// subscribe), counts the latch down to 0, and sets it again at once or
// later, with perhaps a fault or a death on the way.
func (m *latchModel) round(shape string, f faultKind) {
	e := m.e
	ctx := context.Background()
	switch shape {
	case "proxy-opening":
		m.proxyOpeningRound()
		return
	case "stale-opening":
		m.staleOpeningRound()
		return
	}
	if !m.resync() {
		return
	}
	e.mu.Lock()
	n := m.count
	e.mu.Unlock()
	if n == 0 {
		m.set(e.intn(e.kind.slots), 1+e.intn(3))
	}
	e.mu.Lock()
	n, certain := m.count, m.certain
	e.mu.Unlock()
	if n == 0 || !certain {
		e.logf("the latch is not set: no waiters this round")
		return
	}
	// Waiters: in every Client, and a child for kill-waiter.
	var wg sync.WaitGroup
	type armer struct {
		s    *slot
		base int
		k    int
	}
	var armers []*armer
	victim := -1
	if shape == "close-waiter" {
		victim = e.intn(e.kind.slots)
	}
	for i := range e.kind.slots {
		s := e.slot(i)
		k := 1 + e.intn(3)
		e.mu.Lock()
		ar := &armer{s: s, base: s.gets, k: k}
		e.mu.Unlock()
		armers = append(armers, ar)
		for j := range k {
			timeout := pick(e, 100*time.Millisecond, 300*time.Millisecond, 1500*time.Millisecond, 2500*time.Millisecond)
			if shape != "" && shape != "random" {
				timeout = 2500 * time.Millisecond
			}
			w := &latchAwait{who: fmt.Sprintf("c%d.%d#%d", i, s.gen, j)}
			wg.Go(func() { m.await(w, s, timeout) })
		}
	}
	var ch *child
	if shape == "kill-waiter" || shape == "stop-waiter" {
		ch = e.spawn(childSpec{Act: "wait"})
	}
	// Armed: the waiters read the count (each at least once: a waiter
	// that finds the latch's channel subscribed by its Client subscribes
	// first and reads once, the first reads, subscribes and reads again),
	// and every Client subscribes the channel: from then on, an opening
	// reaches every waiter, one that has yet to read included (it reads
	// after its subscription).
	armed := true
	for _, ar := range armers {
		if !until(2*time.Second, func() bool {
			e.mu.Lock()
			defer e.mu.Unlock()
			return ar.s.gets >= ar.base+ar.k
		}) {
			armed = false
		}
	}
	if armed && !until(2*time.Second, func() bool {
		return relocktest.Subscribers(e.raw, latch.Channel(e.name)) >= int64(e.kind.slots)
	}) {
		armed = false
	}
	e.mu.Lock()
	for _, w := range m.awaits {
		if !w.ended {
			w.armed = armed
		}
	}
	e.mu.Unlock()
	if !armed {
		e.logf("the waiters were not all seen subscribed: no liveness claim for them this round")
	}
	if f >= 0 {
		wg.Go(func() { e.fault(f, e.ms(200)) })
	}
	if ch != nil {
		if shape == "stop-waiter" {
			e.stop(ch) // it lives, subscribed, and does nothing
		} else {
			e.kill(ch, false)
		}
	}
	if victim >= 0 {
		e.closeSlot(victim, false, "waiting")
	}
	// Count down to 0, from any Client, one after the other or two at
	// once.
	{
		for n > 0 {
			time.Sleep(e.ms(60))
			if n >= 2 && e.intn(3) == 0 {
				var cw sync.WaitGroup
				for range 2 {
					cw.Go(func() { m.countDown(m.liveSlot(victim)) })
				}
				cw.Wait()
				n -= 2
				continue
			}
			m.countDown(m.liveSlot(victim))
			n--
		}
		if shape == "reset" || e.intn(2) == 0 && !skipped("reset") {
			// The next batch starts at once: a waiter woken by the 0 must
			// go on all the same.
			m.set(m.liveSlot(victim), 1+e.intn(3))
		}
	}
	wg.Wait()
	if ch != nil && shape == "stop-waiter" {
		e.kill(ch, false)
	}
	if victim >= 0 {
		e.replaceSlot(victim)
	}
	_ = ctx
}

// resync reads the count when a call of the last round had an unknown
// outcome (nothing is in flight). It reports whether the model's count
// is certain.
func (m *latchModel) resync() bool {
	e := m.e
	e.mu.Lock()
	certain := m.certain
	e.mu.Unlock()
	if certain {
		return true
	}
	c, err := e.raw.Do(context.Background(), e.raw.B().Get().Key(e.name).Build()).AsInt64()
	if rueidis.IsRedisNil(err) {
		c, err = 0, nil
	}
	if !assert.NoError(e.t, err, "GET") {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	m.count, m.certain = int(c), true
	e.logLocked("  model: the latch's count resynced to %d", c)
	return true
}

// liveSlot is a slot other than skip.
func (m *latchModel) liveSlot(skip int) int {
	for {
		i := m.e.intn(m.e.kind.slots)
		if i != skip {
			return i
		}
	}
}

// set sets the count through the Client of slot i.
func (m *latchModel) set(i, n int) {
	e := m.e
	s := e.slot(i)
	e.call()
	start := time.Now()
	e.mu.Lock()
	for j := range m.sure {
		if m.sure[j].to.IsZero() {
			m.sure[j].to = start
		}
	}
	e.mu.Unlock()
	ok, err := s.c.GetCountDownLatch(e.name).TrySetCount(context.Background(), n)
	end := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.logLocked("c%d TrySetCount(%d) -> %v, %v", i, n, ok, errText(err))
	switch {
	case err == nil && ok:
		if m.certain && m.count != 0 {
			e.violation("TrySetCount(%d) set a latch whose count is %d", n, m.count)
		}
		m.count = n
		m.closeZeroLocked(end)
	case err == nil:
		if m.certain && m.count == 0 {
			e.violation("TrySetCount(%d) did not set an open latch", n)
		}
	case isDefinite(err):
	default:
		if !isRedisFailure(err) {
			e.violation("TrySetCount(%d) failed with %v, not a Redis failure", n, err)
		}
		m.certain = false
		_ = start
	}
}

// missableLocked reports whether a waiter may have missed the opening
// by the count-down that ran from start to its reply at opened: a CLIENT
// KILL, or a cut of the proxy's connections (which drops what a stall
// kept), may have had the waiters' subscriptions down when the count-down
// published, and the latch was set again before they could read the
// count after they subscribed anew (the fault and its recovery). Redis
// keeps no record of an opening, so such a waiter waits for the next one;
// nothing can do better. (A pause keeps the connections: the message
// reaches them after it.) e.mu is held.
func (m *latchModel) missableLocked(start, opened time.Time) bool {
	e := m.e
	for _, f := range e.faults {
		if f.kind != fClientKill && (f.kind != fNet || f.form != "cut") {
			continue
		}
		to := f.to
		if to.IsZero() {
			to = time.Now()
		}
		to = to.Add(chkRecovery)
		if !start.Before(to) || opened.Before(f.from) {
			continue // the count-down published before or after it
		}
		for _, o := range m.sure {
			if o.from.Equal(opened) && !o.to.IsZero() && o.to.Before(to) {
				e.count("latch:opening-missable", 1)
				e.logLocked("  the opening at %v came while %v had the waiters' subscriptions down and the latch was set again at %v: no liveness claim for it", e.at(opened), f.kind, e.at(o.to))
				return true
			}
		}
	}
	return false
}

// closeZeroLocked ends the open zero stretch at t. e.mu is held.
func (m *latchModel) closeZeroLocked(t time.Time) {
	for i := range m.zeros {
		if m.zeros[i].to.IsZero() {
			m.zeros[i].to = t
		}
	}
}

// isDefinite reports whether err is an error reply that means the script
// did not run (OOM, as injected or real).
func isDefinite(err error) bool {
	_, ok := rueidis.IsRedisErr(err)
	return ok
}

// countDown counts down through the Client of slot i.
func (m *latchModel) countDown(i int) {
	e := m.e
	s := e.slot(i)
	e.call()
	start := time.Now()
	err := s.c.GetCountDownLatch(e.name).CountDown(context.Background())
	end := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.logLocked("c%d CountDown (count %d) -> %v", i, m.count, errText(err))
	switch {
	case err == nil:
		if m.count > 0 {
			m.count--
			if m.count == 0 && m.certain {
				m.zeros = append(m.zeros, window{from: start, what: fmt.Sprintf("the count reached 0 at %v", e.at(end))})
				m.opened = append(m.opened, end)
				m.sure = append(m.sure, window{from: end, what: "the latch open"})
				e.count("latch:opened", 1)
			}
		}
	case isDefinite(err):
	default:
		if !isRedisFailure(err) {
			e.violation("CountDown failed with %v, not a Redis failure", err)
		}
		m.certain = false
		m.zeros = append(m.zeros, window{from: start, what: "a count-down whose outcome is unknown"})
	}
}

// await runs Await with a timeout.
func (m *latchModel) await(w *latchAwait, s *slot, timeout time.Duration) {
	e := m.e
	e.mu.Lock()
	m.awaits = append(m.awaits, w)
	e.mu.Unlock()
	e.call()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	e.mu.Lock()
	w.from = time.Now()
	e.mu.Unlock()
	err := s.c.GetCountDownLatch(e.name).Await(ctx)
	e.mu.Lock()
	defer e.mu.Unlock()
	w.to, w.err, w.ended = time.Now(), err, true
	e.logLocked("%s Await(%v) -> %v", w.who, timeout, errText(err))
	if err != nil && !errors.Is(err, rlock.ErrNotAcquired) && !errors.Is(err, rlock.ErrClosed) && !isRedisFailure(err) {
		e.violation("%s: Await failed with %v, which is neither ErrNotAcquired, ErrClosed nor a Redis failure", w.who, err)
	}
}

func (m *latchModel) faulted(faultKind, time.Time, time.Time) {}

func (m *latchModel) lost(_, _ int, name, owner string, _ error) {
	m.e.mu.Lock()
	defer m.e.mu.Unlock()
	m.e.violation("a loss reported for %q %q: a latch has no holds", name, owner)
}

// checkpoint checks the awaits of the round, and the count in Redis.
func (m *latchModel) checkpoint() {
	e := m.e
	raw, err := e.raw.Do(context.Background(), e.raw.B().Get().Key(e.name).Build()).AsInt64()
	if rueidis.IsRedisNil(err) {
		raw, err = 0, nil
	}
	if !assert.NoError(e.t, err, "GET") {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	now := time.Now()
	if m.certain && int(raw) != m.count {
		e.count("violations:count", 1)
		e.violation("Redis has the latch's count at %d; the model has %d", raw, m.count)
	}
	// Safety: an Await returns nil only if the count may have been 0
	// while it ran.
	for _, w := range m.awaits {
		if w.err != nil {
			continue
		}
		open, stale := false, time.Time{}
		for _, z := range m.zeros {
			if z.from.Before(w.to) && (z.to.IsZero() || z.to.After(w.from)) {
				open = true
			} else if z.from.Before(w.from) && !z.to.IsZero() {
				stale = maxTime(stale, z.to)
			}
		}
		if !open && m.certain && !stale.IsZero() && w.from.Before(e.settled(stale).Add(chkStaleDelivery)) && !strict("stale-opening") {
			// A known defect, not fixed yet: a waiter that joins its
			// Client's subscription while the "0" of an opening that ended
			// just before it started is on its way to that Client goes on
			// (within chkStaleDelivery of the opening's end, once settled).
			// RELOCK_CHECK_STRICT=stale-opening judges it.
			e.count("latch:stale-opening", 1)
			e.logLocked("  %s went on by the opening that ended at %v, before it started (stale-opening, a known defect)", w.who, e.at(stale))
			continue
		}
		if !open && m.certain {
			e.count("violations:early", 1)
			e.violation("%s: Await returned nil (%v to %v), but the latch stayed set", w.who, e.at(w.from), e.at(w.to))
		}
	}
	// Liveness: an armed waiter goes on once the count reached 0, even if
	// it was set again at once; a waiter that came while it was open
	// goes on at once.
	missable := make(map[time.Time]bool)
	for _, z := range m.zeros {
		for _, o := range m.opened {
			if !o.Before(z.from) && (z.to.IsZero() || !o.After(z.to)) && m.missableLocked(z.from, o) {
				missable[o] = true
			}
		}
	}
	var ws []wait
	for _, w := range m.awaits {
		var avail []window
		for _, z := range m.zeros {
			if z.what == "a count-down whose outcome is unknown" {
				continue
			}
			if w.armed && w.from.Before(z.from) {
				// It was waiting when the count-down that opened the latch
				// started: from that call's reply on.
				for _, o := range m.opened {
					if !o.Before(z.from) && (z.to.IsZero() || !o.After(z.to)) && !missable[o] {
						avail = append(avail, window{from: o, to: w.to, what: z.what})
					}
				}
			}
		}
		for _, o := range m.sure {
			if !w.from.Before(o.from) && (o.to.IsZero() || w.from.Before(o.to)) {
				// It came while the latch was open: it goes on at once.
				avail = append(avail, window{from: w.from, to: w.to, what: o.what})
			}
		}
		ws = append(ws, wait{from: w.from, to: w.to, what: w.who + " Await", avail: avail})
	}
	e.checkLiveness(ws)
	if !m.certain {
		m.count, m.certain = int(raw), true
		e.logLocked("  model: the latch's count resynced to %d", raw)
	}
	m.awaits = m.awaits[:0]
	m.opened = m.opened[:0]
	var open []window
	for _, o := range m.sure {
		if o.to.IsZero() {
			open = append(open, window{from: now, what: o.what})
		}
	}
	m.sure = open
	// Openings that ended in the last second stay known: a waiter of the
	// next round may hear the message of one (stale-opening).
	var keep []window
	for _, z := range m.zeros {
		if z.to.IsZero() || now.Sub(z.to) < time.Second {
			keep = append(keep, z)
		}
	}
	m.zeros = keep
	if m.count == 0 && len(m.zeros) == 0 {
		m.zeros = append(m.zeros, window{from: now, what: "the latch, open"})
	}
	e.forgetPast()
}

// finish counts the latch down to 0 and checks nothing is left.
func (m *latchModel) finish() {
	e := m.e
	l := e.slot(0).c.GetCountDownLatch(e.name)
	for range 10 {
		n, err := l.Count(context.Background())
		if err != nil || n == 0 {
			break
		}
		_ = l.CountDown(context.Background())
	}
	e.closeAll()
	// relock's mark of the last opening stays until it expires (10s), so
	// does the mark of the latch that warms the proxied Client's
	// subscription (proxy-opening).
	// The warming latch itself is the test's scaffold, not a latch under
	// test: its TrySetCount may land after the DEL that follows it (a
	// reply lost to a fault while the command was still on its way
	// through the proxy), so it is deleted here and not judged.
	warm := e.name + ":warm"
	opened := []string{layout.LatchOpened(e.name), layout.LatchOpened(warm)}
	e.finishKeys(func(k string) bool {
		if k == warm {
			return true
		}
		if !slices.Contains(opened, k) {
			return false
		}
		ms, err := e.raw.Do(context.Background(), e.raw.B().Pttl().Key(k).Build()).AsInt64()
		return err == nil && ms > 0
	})
	_ = e.raw.Do(context.Background(), e.raw.B().Del().Key(warm).Build()).Error()
}
