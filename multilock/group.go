package multilock

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/relock-go/relock/internal/lockcore"
)

// group is what a MultiLock and a RedLock share: their locks, the owner of
// the current anonymous hold, and the record of the holds taken through
// this value, per owner. A record exists from the first acquisition of an
// owner to its final Unlock; while it lasts and the hold was taken on the
// watchdog lease, one monitor goroutine per watched lock waits for that
// lock's hold to end. The monitors belong to the record: they stop at the
// final Unlock, which waits for them, or as soon as the hold is lost.
type group struct {
	kind   string // "multilock" or "redlock", for messages
	name   string
	locks  []Locker
	names  []string
	err    error // a construction error, returned by every method
	needed int   // how many locks must stay held

	mu    sync.Mutex
	anon  string // owner of the current anonymous hold, "" if none
	holds map[string]*hold
}

// subState is what a hold record knows of one of its locks.
type subState uint8

const (
	subFree  subState = iota // never taken by this hold
	subHeld                  // taken, not known to have ended
	subEnded                 // taken, and its Done channel closed
)

// hold is the record of one owner's hold. Every field is guarded by
// group.mu, except wg.
type hold struct {
	count   int // acquisitions not yet matched by an Unlock
	sub     []subState
	watched []<-chan struct{} // the Done channel each monitor waits on
	live    int               // locks in state subHeld

	done    chan struct{} // closed when the hold ends
	ended   bool
	cause   error // nil (released) or an error matching ErrLockLost
	stop    chan struct{}
	stopped bool
	wg      sync.WaitGroup // the monitors
	cancels map[*context.CancelCauseFunc]struct{}
}

func newGroup(kind string, locks []Locker, needed int) *group {
	g := &group{kind: kind, locks: locks, needed: needed, holds: make(map[string]*hold)}
	g.names = make([]string, len(locks))
	for i, l := range locks {
		g.names[i] = l.Name()
	}
	return g
}

// nodeError wraps the error of lock i.
func (g *group) nodeError(i int, err error) *NodeError {
	return &NodeError{Index: i, Name: g.names[i], Err: err}
}

// acquirer returns the context to call the locks with, its owner, and
// whether the owner was made up here (an anonymous acquisition).
func (g *group) acquirer(ctx context.Context) (context.Context, string, bool, error) {
	if owner, ok := lockcore.OwnerFrom(ctx); ok {
		if err := lockcore.CheckOwner(owner); err != nil {
			return nil, "", false, err
		}
		return ctx, owner, false, nil
	}
	owner := newOwner()
	return lockcore.WithOwner(ctx, owner), owner, true, nil
}

// holder returns the context to call the locks with for a release or a
// query, and its owner: the one in ctx, else the current anonymous hold's
// ("" when there is none).
func (g *group) holder(ctx context.Context) (context.Context, string, error) {
	if owner, ok := lockcore.OwnerFrom(ctx); ok {
		if err := lockcore.CheckOwner(owner); err != nil {
			return nil, "", err
		}
		return ctx, owner, nil
	}
	g.mu.Lock()
	owner := g.anon
	g.mu.Unlock()
	if owner == "" {
		return ctx, "", nil
	}
	return lockcore.WithOwner(ctx, owner), owner, nil
}

// notHeld is the error of an Unlock by an owner that holds nothing.
func (g *group) notHeld(owner string) error {
	if owner == "" {
		return fmt.Errorf("%w: %s %q: no owner in the context and no anonymous hold on this value", ErrNotHeld, g.kind, g.name)
	}
	return fmt.Errorf("%w: %s %q by owner %q", ErrNotHeld, g.kind, g.name, owner)
}

// taken returns which locks the owner's hold has taken and not seen end,
// or nil when this value has no record of a hold of the owner.
func (g *group) taken(owner string) []bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	h := g.holds[owner]
	if h == nil {
		return nil
	}
	t := make([]bool, len(h.sub))
	for i, s := range h.sub {
		t[i] = s == subHeld
	}
	return t
}

// grant records an acquisition by owner that took the locks marked in
// took. With watch set (a hold on the watchdog lease), each taken lock that
// is Watchable gets a monitor. octx carries the owner.
func (g *group) grant(octx context.Context, owner string, anon bool, took []bool, watch bool) {
	var chans []<-chan struct{}
	if watch {
		// Asked for outside g.mu: Done takes the lock's own locks.
		chans = make([]<-chan struct{}, len(took))
		for i, ok := range took {
			if w, isW := g.locks[i].(Watchable); ok && isW {
				chans[i] = w.Done(octx)
			}
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if anon {
		g.anon = owner
	}
	h := g.holds[owner]
	if h == nil {
		n := len(g.locks)
		h = &hold{
			sub:     make([]subState, n),
			watched: make([]<-chan struct{}, n),
			done:    make(chan struct{}),
			stop:    make(chan struct{}),
		}
		g.holds[owner] = h
	}
	h.count++
	for i, ok := range took {
		if !ok {
			continue
		}
		if h.sub[i] != subHeld {
			h.sub[i] = subHeld
			h.live++
			h.watched[i] = nil
		}
		if chans == nil || chans[i] == nil || h.stopped || h.watched[i] == chans[i] {
			continue
		}
		// Not watched yet, or watched on the channel of a hold of the lock
		// that has ended since (and been taken again): the old monitor
		// ignores its channel once it is no longer the watched one.
		h.watched[i] = chans[i]
		h.wg.Add(1)
		go g.monitor(h, i, chans[i])
	}
}

// monitor waits for the hold of lock i to end, or for the record to stop
// watching. When fewer than g.needed locks are left held, the hold is lost.
func (g *group) monitor(h *hold, i int, ch <-chan struct{}) {
	defer h.wg.Done()
	select {
	case <-ch:
	case <-h.stop:
		return
	}
	g.mu.Lock()
	if h.stopped || h.watched[i] != ch {
		g.mu.Unlock()
		return
	}
	h.watched[i] = nil
	h.sub[i] = subEnded
	h.live--
	var cancels []*context.CancelCauseFunc
	var cause error
	if h.live < g.needed && !h.ended {
		cause = fmt.Errorf("%w: %s %q: %d of %d locks left held, %d needed (lost %d %q)",
			ErrLockLost, g.kind, g.name, h.live, len(g.locks), g.needed, i, g.names[i])
		cancels = g.endLocked(h, cause)
	}
	g.mu.Unlock()
	for _, cancel := range cancels {
		(*cancel)(cause)
	}
}

// endLocked ends h with cause: its Done channel closes and its monitors
// stop. It returns the Do contexts to cancel (none for a release).
// g.mu is held.
func (g *group) endLocked(h *hold, cause error) []*context.CancelCauseFunc {
	h.ended = true
	h.cause = cause
	close(h.done)
	g.stopLocked(h)
	var cancels []*context.CancelCauseFunc
	if cause != nil {
		for c := range h.cancels {
			cancels = append(cancels, c)
		}
	}
	h.cancels = nil
	return cancels
}

func (g *group) stopLocked(h *hold) {
	if !h.stopped {
		h.stopped = true
		close(h.stop)
	}
}

// beginRelease prepares an Unlock by owner. When it is the owner's last
// level, it stops the monitors and waits for them first, so that the
// release itself is not taken for a loss. It returns the record (nil when
// this value has none).
func (g *group) beginRelease(owner string) *hold {
	g.mu.Lock()
	h := g.holds[owner]
	final := h != nil && h.count <= 1
	if final {
		g.stopLocked(h)
	}
	g.mu.Unlock()
	if final {
		h.wg.Wait()
	}
	return h
}

// endRelease records an Unlock by owner. At the last level the record
// goes, and the hold ends; it returns the cause of a loss that ended the
// hold before, so that the final Unlock reports it.
func (g *group) endRelease(owner string, h *hold) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if h == nil || g.holds[owner] != h {
		return nil
	}
	h.count--
	if h.count > 0 {
		return nil
	}
	delete(g.holds, owner)
	if g.anon == owner {
		g.anon = ""
	}
	if !h.ended {
		g.endLocked(h, nil)
		return nil
	}
	return h.cause
}

// done returns the Done channel of the owner's hold.
func (g *group) done(ctx context.Context) <-chan struct{} {
	_, owner, err := g.holder(ctx)
	if err == nil && owner != "" {
		g.mu.Lock()
		h := g.holds[owner]
		g.mu.Unlock()
		if h != nil {
			return h.done
		}
	}
	return closedChan
}

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// watch arranges for cancel to be called with the cause when the owner's
// hold is lost. It returns a function that undoes it.
func (g *group) watch(owner string, cancel context.CancelCauseFunc) (unwatch func()) {
	g.mu.Lock()
	h := g.holds[owner]
	if h == nil || h.ended {
		var cause error
		if h != nil {
			cause = h.cause
		} else {
			cause = fmt.Errorf("%w: %s %q: no record of the hold", ErrLockLost, g.kind, g.name)
		}
		g.mu.Unlock()
		if cause != nil {
			cancel(cause)
		}
		return func() {}
	}
	if h.cancels == nil {
		h.cancels = make(map[*context.CancelCauseFunc]struct{})
	}
	p := &cancel
	h.cancels[p] = struct{}{}
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		delete(h.cancels, p)
		g.mu.Unlock()
	}
}

// do is Do for both kinds: lock on the watchdog lease, run fn with a
// context cancelled when the hold is lost, unlock.
func (g *group) do(ctx context.Context, fn func(ctx context.Context) error,
	lock func(context.Context) error, unlock func(context.Context) error) error {
	if g.err != nil {
		return g.err
	}
	if fn == nil {
		return invalid("nil function given to Do")
	}
	if _, ok := lockcore.OwnerFrom(ctx); !ok {
		ctx = lockcore.WithOwner(ctx, newOwner())
	}
	if err := lock(ctx); err != nil {
		return err
	}
	owner, _ := lockcore.OwnerFrom(ctx)
	fnCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	unwatch := g.watch(owner, cancel)
	err := fn(fnCtx)
	unwatch()
	cause := context.Cause(fnCtx)
	if !errors.Is(cause, ErrLockLost) {
		cause = nil
	}
	uerr := unlock(ctx)
	switch {
	case cause != nil:
		return joinNew(err, cause)
	case uerr != nil:
		return errors.Join(err, uerr)
	}
	return err
}
