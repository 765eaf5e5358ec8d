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

// fanout calls some of a RedLock's locks at once, one goroutine each, and
// collects their answers. A RedLock keeps its fanouts in a pool: one is
// used by one call at a time, and it goes back to the pool only once every
// goroutine it started has answered, so that fanning out allocates
// nothing once the pool has one.
type fanout struct {
	locks []Locker
	// What the goroutines do, set before they start: TryLock(ctx, 0,
	// lease), or Unlock(ctx) with release set, on each lock marked in ask.
	ctx     context.Context
	lease   time.Duration
	release bool
	ask     []bool
	next    atomic.Int32 // claims the next lock to call
	// res[i] is lock i's answer, written before answered[i] is set.
	res      []result
	answered []atomic.Bool
	// pending counts the calls not answered yet; the last answer sends
	// on done, so that the caller wakes once.
	pending atomic.Int32
	done    chan struct{}
	call    func() // f.callOne: made once, so that starting a goroutine allocates nothing
	// Scratch space for the caller: the locks a round took, and those the
	// owner held before.
	took, before []bool
	// abandoned is set when the caller stopped waiting for a goroutine:
	// the fanout is then left to it and never reused.
	abandoned bool
}

func newFanout(locks []Locker) *fanout {
	n := len(locks)
	f := &fanout{locks: locks, ask: make([]bool, n), res: make([]result, n), answered: make([]atomic.Bool, n),
		done: make(chan struct{}, 1), took: make([]bool, n), before: make([]bool, n)}
	f.call = f.callOne
	return f
}

// getFanout returns an idle fanout of r's locks.
func (r *RedLock) getFanout() *fanout {
	if f, ok := r.fanouts.Get().(*fanout); ok {
		return f
	}
	return newFanout(r.g.locks)
}

// putFanout gives f back, unless a goroutine may still use it.
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
// the last call itself, and start returns once it answered. f.done
// receives once every call has answered (at once when none was asked).
func (f *fanout) start(ctx context.Context, release bool, lease time.Duration, inline bool) {
	f.ctx, f.release, f.lease = ctx, release, lease
	f.next.Store(0)
	asked := 0
	for i, a := range f.ask {
		f.answered[i].Store(false)
		if a {
			asked++
		}
	}
	if asked == 0 {
		f.done <- struct{}{}
		return
	}
	f.pending.Store(int32(asked))
	goroutines := asked
	if inline {
		goroutines--
	}
	for range goroutines {
		go f.call()
	}
	if goroutines < asked {
		f.callOne()
	}
}

// callOne makes the call on the next lock marked in f.ask.
func (f *fanout) callOne() {
	i := int(f.next.Add(1)) - 1
	for !f.ask[i] {
		i = int(f.next.Add(1)) - 1
	}
	l := f.locks[i]
	if f.release {
		f.res[i] = result{i: i, ok: true, err: l.Unlock(f.ctx)}
	} else {
		ok, err := l.TryLock(f.ctx, 0, f.lease)
		f.res[i] = result{i: i, ok: ok && err == nil, err: err}
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
