package multilock

import (
	"context"
	"sync/atomic"
	"time"
)

// result is one lock's answer in a round or a release.
type result struct {
	i   int
	ok  bool
	err error
}

// fanout calls some of a RedLock's locks at once and collects their
// answers. A RedLock keeps its fanouts in a pool: one is used by one call
// at a time, and it goes back to the pool only once every call it started
// has answered, so that fanning out allocates nothing once the pool has
// one.
//
// Each lock has a worker goroutine of the fanout that makes its calls.
// A worker is started by the first call that needs it and waits for the
// next one for workerIdleFor, then ends: back-to-back acquisitions and
// releases reuse the same goroutines, whose stacks have grown already, and
// a fanout left alone has no goroutine after workerIdleFor. The caller
// makes one call of a round or a release itself (start's inline), so five
// locks take four workers.
type fanout struct {
	locks []Locker
	// bounded[i]: lock i's Unlock keeps to its context's deadline (it is
	// one of relock's handles; see RedLock.bounded).
	bounded []bool
	// What the calls are, set before they start: TryLock(ctx, 0, lease),
	// or Unlock(ctx) with release set, on each lock marked in ask.
	ctx     context.Context
	lease   time.Duration
	release bool
	ask     []bool
	// res[i] is lock i's answer, written before answered[i] is set.
	res      []result
	answered []atomic.Bool
	// pending counts the calls not answered yet; the last answer sends
	// on done, so that the caller wakes once.
	pending atomic.Int32
	done    chan struct{}
	// workers[i] is the state of lock i's worker (workerNone, workerIdle
	// or workerBusy); wake[i] hands it a call.
	workers []atomic.Int32
	wake    []chan struct{}
	// Scratch space for the caller: the locks a round took, and those the
	// owner held before.
	took, before []bool
	// abandoned is set when the caller stopped waiting for a call: the
	// fanout is then left to its workers and never reused.
	abandoned bool
}

// The states of a lock's worker.
const (
	workerNone int32 = iota // no worker: the next call starts one
	workerIdle              // waiting for a call on wake
	workerBusy              // handed a call (or starting with one)
)

// workerIdleFor is how long a worker waits for its next call before it
// ends.
var workerIdleFor = 50 * time.Millisecond

func newFanout(locks []Locker, bounded []bool) *fanout {
	n := len(locks)
	f := &fanout{locks: locks, bounded: bounded, ask: make([]bool, n), res: make([]result, n), answered: make([]atomic.Bool, n),
		done: make(chan struct{}, 1), workers: make([]atomic.Int32, n), wake: make([]chan struct{}, n),
		took: make([]bool, n), before: make([]bool, n)}
	for i := range f.wake {
		f.wake[i] = make(chan struct{}, 1)
	}
	return f
}

// getFanout returns an idle fanout of r's locks.
func (r *RedLock) getFanout() *fanout {
	if f, ok := r.fanouts.Get().(*fanout); ok {
		return f
	}
	return newFanout(r.g.locks, r.bounded())
}

// putFanout gives f back, unless a call may still use it.
func (r *RedLock) putFanout(f *fanout) {
	if f.abandoned {
		return
	}
	f.ctx = nil
	clear(f.res) // drops the errors
	r.fanouts.Put(f)
}

// start calls, on ctx, every lock marked in f.ask: TryLock with lease, or
// Unlock with release set. With inline set, the calling goroutine makes
// the last call itself (for a release, the last on a lock whose Unlock is
// bounded, if any), and start returns once it answered. f.done receives
// once every call has answered (at once when none was asked).
func (f *fanout) start(ctx context.Context, release bool, lease time.Duration, inline bool) {
	f.ctx, f.release, f.lease = ctx, release, lease
	asked, last := 0, -1
	for i, a := range f.ask {
		f.answered[i].Store(false)
		if a {
			asked++
			if !release || f.bounded[i] {
				last = i
			}
		}
	}
	if asked == 0 {
		f.done <- struct{}{}
		return
	}
	f.pending.Store(int32(asked))
	if !inline {
		last = -1
	}
	for i, a := range f.ask {
		if a && i != last {
			f.dispatch(i)
		}
	}
	if last >= 0 {
		f.call(last, false)
	}
}

// dispatch hands the call on lock i to its worker, starting one when it
// has none.
func (f *fanout) dispatch(i int) {
	if f.workers[i].CompareAndSwap(workerIdle, workerBusy) {
		f.wake[i] <- struct{}{}
		return
	}
	// No worker: the last one ended (a worker is never busy here: every
	// call of the fanout's previous use answered before this one).
	f.workers[i].Store(workerBusy)
	go f.work(i)
}

// work is lock i's worker: it makes the call it was started for, then
// each call handed to it on f.wake[i], until none came for workerIdleFor.
func (f *fanout) work(i int) {
	f.call(i, true)
	t := time.NewTimer(workerIdleFor)
	defer t.Stop()
	for {
		select {
		case <-f.wake[i]:
			f.call(i, true)
			t.Reset(workerIdleFor)
		case <-t.C:
			if f.workers[i].CompareAndSwap(workerIdle, workerNone) {
				return
			}
			// A call was handed over meanwhile: it is on f.wake[i].
		}
	}
}

// call makes the call on lock i and records its answer. From a worker
// (worker set), the worker is marked idle before the answer counts, so
// that the next use of the fanout finds it ready.
func (f *fanout) call(i int, worker bool) {
	l := f.locks[i]
	if f.release {
		f.res[i] = result{i: i, ok: true, err: l.Unlock(f.ctx)}
	} else {
		ok, err := l.TryLock(f.ctx, 0, f.lease)
		f.res[i] = result{i: i, ok: ok && err == nil, err: err}
	}
	if worker {
		f.workers[i].Store(workerIdle)
	}
	f.answered[i].Store(true)
	if f.pending.Add(-1) == 0 {
		f.done <- struct{}{}
	}
}

// askAll marks every lock to be called.
func (f *fanout) askAll() {
	for i := range f.ask {
		f.ask[i] = true
	}
}
