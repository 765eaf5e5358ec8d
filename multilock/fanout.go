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
// answers. The calling goroutine makes one of the calls itself and starts
// a goroutine for each of the others, which ends once its call answered:
// the caller waits for every answer (on done), so no goroutine of a round
// or a release outlives the RedLock call that started it, except the
// Unlock of a Locker that ignores its context, which a release stops
// waiting for (see RedLock.unlockEach). A RedLock keeps its fanouts in a
// pool: one is used by one call at a time, and it goes back to the pool
// only once every call it started has answered, so that fanning out
// allocates nothing once the pool has one.
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
	// inline is the lock whose call the caller makes itself (-1: none);
	// next claims the next lock to call for a goroutine.
	inline int
	next   atomic.Int32
	// res[i] is lock i's answer, written before answered[i] is set.
	res      []result
	answered []atomic.Bool
	// pending counts the calls not answered yet; the last answer sends
	// on done, so that the caller wakes once.
	pending atomic.Int32
	done    chan struct{}
	call    func() // f.callNext: made once, so that starting a goroutine allocates nothing
	// Scratch space for the caller: the locks a round took, and those the
	// owner held before.
	took, before []bool
	// abandoned is set when the caller stopped waiting for a call: the
	// fanout is then left to its goroutines and never reused.
	abandoned bool
}

func newFanout(locks []Locker, bounded []bool) *fanout {
	n := len(locks)
	f := &fanout{locks: locks, bounded: bounded, ask: make([]bool, n), res: make([]result, n), answered: make([]atomic.Bool, n),
		done: make(chan struct{}, 1), took: make([]bool, n), before: make([]bool, n)}
	f.call = f.callNext
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
// bounded, if any), and start returns once it answered; a goroutine makes
// each other call. f.done receives once every call has answered (at once
// when none was asked).
func (f *fanout) start(ctx context.Context, release bool, lease time.Duration, inline bool) {
	f.ctx, f.release, f.lease = ctx, release, lease
	f.next.Store(0)
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
	f.inline = last
	goroutines := asked
	if last >= 0 {
		goroutines--
	}
	for range goroutines {
		go f.call()
	}
	if last >= 0 {
		f.callOn(last)
	}
}

// callNext makes the call on the next lock marked in f.ask that the
// caller does not call itself. It runs on a goroutine of its own, whose
// stack it grows first (growStack).
func (f *fanout) callNext() {
	growStack()
	i := int(f.next.Add(1)) - 1
	for !f.ask[i] || i == f.inline {
		i = int(f.next.Add(1)) - 1
	}
	f.callOn(i)
}

// callOn makes the call on lock i and records its answer.
func (f *fanout) callOn(i int) {
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

// callStack is the size of growStack's frame: with what the goroutine
// has on its stack already, the stack grows to 16 KiB (unless it started
// bigger), which a call into one of relock's locks (through its lock
// core and rueidis) does not outgrow.
const callStack = 8 << 10

// growStack grows the calling goroutine's stack to hold callStack more
// bytes, in one step: its frame alone is that big. A new goroutine
// starts with a small stack (a few KiB), and a call into a lock grew it
// step by step, each step copying the stack and adjusting every frame
// then on it, several times per goroutine: 15 to 19% of the client's CPU
// time in BenchmarkRedLock over 5 servers. Grown here, at the top of the
// goroutine, the stack is copied once with two frames on it, and no call
// grew it again: 3 to 5% of the client's CPU time, this copy included.
//
//go:noinline
func growStack() {
	var frame [callStack]byte
	keep(&frame)
}

// keep stops the compiler from dropping growStack's frame.
//
//go:noinline
func keep(*[callStack]byte) {}
