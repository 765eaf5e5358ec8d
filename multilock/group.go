package multilock

import (
	"context"
	"fmt"
	"sync"

	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/observe"
)

// group is what a MultiLock and a RedLock share: their locks, the owner of
// the current anonymous hold, and the record of the holds taken through
// this value, per owner.
//
// A hold's life is a context, as in rlock (see lockcore.RunHeld): it ends
// at the final Unlock, or as soon as too few of its locks are left held.
// While a hold taken on the watchdog lease lasts, it watches each lock it
// took through the lock's own hold context (context.AfterFunc: no
// goroutine), or, for a Locker that only offers Done, with one goroutine
// that the record owns and its final Unlock stops and waits for.
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

	obs observe.Observer // nil when none (observe.go)
}

// hold is the record of one owner's hold. Every field is guarded by
// group.mu, except wg.
type hold struct {
	count int    // acquisitions not yet matched by an Unlock
	held  []bool // locks taken by this hold and not seen to end
	live  int    // locks in held
	life  context.Context
	end   context.CancelCauseFunc
	// watches[i] is the watch on lock i (nil when it is not watched).
	watches []*watch
	wg      sync.WaitGroup // watch goroutines of Lockers without HoldContext
	obs     holdObs        // for the observer (observe.go)
}

// holdContexter is implemented by relock's locks (and by MultiLock and
// RedLock): a context that ends when the owner's current hold ends, with
// its cause. It lets a hold be watched without a goroutine.
type holdContexter interface {
	HoldContext(ctx context.Context) context.Context
}

func newGroup(kind string, locks []Locker, needed int) *group {
	g := &group{kind: kind, locks: locks, needed: needed, holds: make(map[string]*hold)}
	g.names = make([]string, len(locks))
	for i, l := range locks {
		g.names[i] = l.Name()
	}
	g.obs = observerOf(locks)
	return g
}

// nodeError wraps the error of lock i.
func (g *group) nodeError(i int, err error) *NodeError {
	return &NodeError{Index: i, Name: g.names[i], Err: err}
}

// acquirer returns the context to call the locks with, its owner, and
// whether the owner was made up here (an anonymous acquisition).
func (g *group) acquirer(ctx context.Context) (context.Context, string, bool, error) {
	owner, ok, err := lockcore.ContextOwner(ctx)
	if err != nil {
		return nil, "", false, err
	}
	if ok {
		return ctx, owner, false, nil
	}
	owner = lockcore.AnonymousOwner()
	return lockcore.WithReservedOwner(ctx, owner), owner, true, nil
}

// holder returns the context to call the locks with for a release or a
// query, and its owner: the one in ctx, else the current anonymous hold's
// ("" when there is none).
func (g *group) holder(ctx context.Context) (context.Context, string, error) {
	owner, ok, err := lockcore.ContextOwner(ctx)
	if err != nil {
		return nil, "", err
	}
	if ok {
		return ctx, owner, nil
	}
	g.mu.Lock()
	owner = g.anon
	g.mu.Unlock()
	if owner == "" {
		return ctx, "", nil
	}
	return lockcore.WithReservedOwner(ctx, owner), owner, nil
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
	return append([]bool(nil), h.held...)
}

// grant records an acquisition by owner that took the locks marked in
// took. With watching set (a hold on the watchdog lease), each taken lock
// that can tell when its hold ends is watched. octx carries the owner.
func (g *group) grant(octx context.Context, owner string, anon bool, took []bool, watching bool) {
	// The locks' hold contexts are asked for outside g.mu: that takes
	// the locks' own locks.
	var lives []context.Context
	var dones []<-chan struct{}
	if watching {
		lives = make([]context.Context, len(took))
		dones = make([]<-chan struct{}, len(took))
		for i, ok := range took {
			switch l := g.locks[i].(type) {
			case holdContexter:
				if ok {
					lives[i] = l.HoldContext(octx)
				}
			case Watchable:
				if ok {
					dones[i] = l.Done(octx)
				}
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
		h = &hold{held: make([]bool, n), watches: make([]*watch, n)}
		h.life, h.end = context.WithCancelCause(context.Background())
		g.holds[owner] = h
		g.holdStartLocked(h, owner)
	}
	h.count++
	for i, ok := range took {
		if !ok {
			continue
		}
		if !h.held[i] {
			h.held[i] = true
			h.live++
		}
		if h.life.Err() != nil {
			continue // lost already: nothing more to watch
		}
		switch {
		case lives != nil && lives[i] != nil:
			life := lives[i]
			g.watchLocked(h, i, func(w *watch) {
				stop := context.AfterFunc(life, func() { g.ended(h, i, w) })
				w.stop = func() { stop() }
			})
		case dones != nil && dones[i] != nil:
			done := dones[i]
			g.watchLocked(h, i, func(w *watch) {
				quit := make(chan struct{})
				h.wg.Go(func() {
					select {
					case <-done:
						g.ended(h, i, w)
					case <-quit:
					}
				})
				w.stop = func() { close(quit) }
			})
		}
	}
}

// watch is the watch on one lock of a hold.
type watch struct{ stop func() }

// watchLocked starts a watch on lock i of h, replacing the one it had (a
// re-entry watches the lock's current hold, which may be a new one). start
// arranges for g.ended to be called with w when the lock's hold ends, and
// sets w.stop. g.mu is held.
func (g *group) watchLocked(h *hold, i int, start func(w *watch)) {
	if old := h.watches[i]; old != nil {
		old.stop()
	}
	w := &watch{}
	start(w)
	h.watches[i] = w
}

// ended is called when the hold of lock i of h, watched by w, ended. A
// watch replaced or stopped meanwhile is ignored. When fewer than g.needed
// locks are left held, the hold is lost.
func (g *group) ended(h *hold, i int, w *watch) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if h.watches[i] != w {
		return
	}
	h.watches[i] = nil
	h.held[i] = false
	h.live--
	if h.live < g.needed && h.life.Err() == nil {
		h.end(fmt.Errorf("%w: %s %q: %d of %d locks left held, %d needed (lost %d %q)",
			ErrLockLost, g.kind, g.name, h.live, len(g.locks), g.needed, i, g.names[i]))
		g.holdEndLocked(h, observe.OutcomeLost, context.Cause(h.life))
		g.unwatchLocked(h)
	}
}

// unwatchLocked stops every watch of h. A watch goroutine may still be
// about to call ended: it finds its watch gone. g.mu is held.
func (g *group) unwatchLocked(h *hold) {
	for i, w := range h.watches {
		if w != nil {
			w.stop()
			h.watches[i] = nil
		}
	}
}

// beginRelease prepares an Unlock by owner. When it is the owner's last
// level, it stops the watches and waits for their goroutines first, so
// that the release itself is not taken for a loss. It returns the record
// (nil when this value has none).
func (g *group) beginRelease(owner string) *hold {
	g.mu.Lock()
	h := g.holds[owner]
	final := h != nil && h.count <= 1
	if final {
		g.unwatchLocked(h)
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
	if err := h.life.Err(); err != nil {
		return context.Cause(h.life)
	}
	g.holdEndLocked(h, observe.OutcomeReleased, nil)
	h.end(nil)
	return nil
}

// holdContext is HoldContext for both kinds: the life of the owner's hold.
func (g *group) holdContext(ctx context.Context) context.Context {
	if g.err != nil {
		return notHeldContext
	}
	_, owner, err := g.holder(ctx)
	if err == nil && owner != "" {
		g.mu.Lock()
		h := g.holds[owner]
		g.mu.Unlock()
		if h != nil {
			return h.life
		}
	}
	return notHeldContext
}

// notHeldContext is the hold context of an owner that holds nothing.
var notHeldContext = func() context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(fmt.Errorf("%w: no current hold", ErrNotHeld))
	return ctx
}()

// do is Do for both kinds: lock on the watchdog lease, run fn with a
// context cancelled when the hold is lost, unlock (also when fn panics).
func (g *group) do(ctx context.Context, fn func(ctx context.Context) error,
	lock func(context.Context) error, unlock func(context.Context) error) error {
	if g.err != nil {
		return g.err
	}
	if fn == nil {
		return invalid("nil function given to Do")
	}
	if _, ok := lockcore.OwnerFrom(ctx); !ok {
		ctx = lockcore.WithReservedOwner(ctx, lockcore.AnonymousOwner())
	}
	if err := lock(ctx); err != nil {
		return err
	}
	return lockcore.RunHeld(ctx, g.holdContext(ctx), fn, unlock, g.name)
}
