package watchdog

import (
	"math"
	"time"
)

// run is the wheel goroutine. Each time it wakes, it takes the leases that
// have fallen due out of the wheel, starts their renewals (or reports them
// lost when they already ran out), and sleeps until the next occupied slot,
// or until woken when the wheel is empty.
func (w *Watchdog) run() {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		w.mu.Lock()
		w.wakeups++
		now := time.Now()
		due, expired := w.advance(now)
		batches := w.makeBatches(due)
		next := w.nextOccupiedTick()
		if next == math.MaxInt64 && w.wakeTick > w.cursor {
			// The lease that woke us was stopped before we ran, as a
			// short hold's is. Sleep until its tick anyway: the holder's
			// next lease falls on that tick or later, so it schedules
			// without waking us. Idle, we would be woken once per hold.
			next = w.wakeTick
		}
		w.wakeTick = next
		w.mu.Unlock()

		for _, b := range batches {
			w.wg.Go(func() { w.renewBatch(b) })
		}
		if len(expired) > 0 {
			w.wg.Go(func() { w.notify(expired) })
		}

		if next == math.MaxInt64 {
			select {
			case <-w.wake:
			case <-w.quit:
				return
			}
			continue
		}
		timer.Reset(time.Until(w.tickTime(next)))
		select {
		case <-timer.C:
		case <-w.wake:
		case <-w.quit:
			return
		}
	}
}

// tickAt returns the tick that t falls in (t is not before the epoch).
func (w *Watchdog) tickAt(t time.Time) int64 {
	return int64(t.Sub(w.epoch) / w.tick)
}

// tickTime returns the time at which tick begins.
func (w *Watchdog) tickTime(tick int64) time.Time {
	return w.epoch.Add(time.Duration(tick) * w.tick)
}

// schedule puts l in the wheel for a renewal at due: at the first tick
// beginning at or after due, and after the last tick processed. It wakes the
// wheel goroutine if that is earlier than it would wake. w.mu is held.
func (w *Watchdog) schedule(l *Lease, due, now time.Time) {
	if w.inWheel == 0 {
		// The wheel may have slept through many ticks; none holds a
		// lease, so there is no need to sweep them.
		w.cursor = max(w.cursor, w.tickAt(now))
	}
	offset := due.Sub(w.epoch)
	tick := int64((offset + w.tick - 1) / w.tick) // rounded up
	l.dueTick = max(tick, w.cursor+1)
	slot := l.dueTick % int64(len(w.slots))
	l.prev = nil
	l.next = w.slots[slot]
	if l.next != nil {
		l.next.prev = l
	}
	w.slots[slot] = l
	l.state = stateScheduled
	w.inWheel++
	if l.dueTick < w.wakeTick {
		w.wakeTick = l.dueTick
		select {
		case w.wake <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
}

// unlink takes l, which is scheduled, out of the wheel. w.mu is held.
func (w *Watchdog) unlink(l *Lease) {
	if l.prev != nil {
		l.prev.next = l.next
	} else {
		w.slots[l.dueTick%int64(len(w.slots))] = l.next
	}
	if l.next != nil {
		l.next.prev = l.prev
	}
	l.prev, l.next = nil, nil
	w.inWheel--
}

// advance processes the ticks after the cursor up to now's. It takes out of
// the wheel the leases that are due, which it returns in due (marked as
// renewing) or, when they already ran out, in expired (marked as lost).
// w.mu is held.
func (w *Watchdog) advance(now time.Time) (due, expired []*Lease) {
	nowTick := w.tickAt(now)
	// A full turn visits every slot; more would visit some twice.
	steps := min(nowTick-w.cursor, int64(len(w.slots)))
	for i := int64(1); i <= steps; i++ {
		l := w.slots[(w.cursor+i)%int64(len(w.slots))]
		for l != nil {
			next := l.next
			if l.dueTick <= nowTick {
				w.unlink(l)
				if now.Before(l.deadline) {
					l.state = stateRenewing
					l.busy = true
					due = append(due, l)
				} else {
					w.lose(l, expiredCause(l.lastErr))
					expired = append(expired, l)
				}
			}
			l = next
		}
	}
	w.cursor = max(w.cursor, nowTick)
	return due, expired
}

// makeBatches splits due leases into RenewFunc calls of at most maxBatch
// leases and records them as in flight. w.mu is held.
func (w *Watchdog) makeBatches(due []*Lease) []*batch {
	var batches []*batch
	for len(due) > 0 {
		n := min(len(due), w.maxBatch)
		b := &batch{leases: due[:n:n], deadline: due[0].deadline}
		for _, l := range b.leases[1:] {
			if l.deadline.Before(b.deadline) {
				b.deadline = l.deadline
			}
		}
		w.inFlight[b] = struct{}{}
		batches = append(batches, b)
		due = due[n:]
	}
	return batches
}

// nextOccupiedTick returns the first tick after the cursor whose slot holds
// a lease (which may be due only in a later turn), or math.MaxInt64 if the
// wheel is empty. w.mu is held.
func (w *Watchdog) nextOccupiedTick() int64 {
	if w.inWheel == 0 {
		return math.MaxInt64
	}
	n := int64(len(w.slots))
	for i := int64(1); i <= n; i++ {
		if w.slots[(w.cursor+i)%n] != nil {
			return w.cursor + i
		}
	}
	return math.MaxInt64 // not reached: inWheel > 0
}
