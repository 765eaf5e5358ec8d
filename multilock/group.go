package multilock

import (
	"context"
	"errors"
	"fmt"
	"github.com/relock-go/relock"
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
// A hold taken on the watchdog lease is watched: each lock it took through
// the lock's own hold context (context.AfterFunc: no goroutine), or, for a
// Locker that only offers Done, with one goroutine that the record owns and
// its final Unlock stops and waits for. The watches start when someone
// needs them: at the first HoldContext, Done or Do of the hold, or at once
// when there is an observer to tell of a loss. A hold nobody watched learns
// of a loss at its final Unlock, from what its locks answer.
type group struct {
	kind   string // "multilock" or "redlock", for messages
	name   string
	locks  []Locker
	names  []string
	err    error // a construction error, returned by every method
	needed int   // how many locks must stay held

	// watchMu orders the starts of watches (a grant that watches, a first
	// HoldContext), so that a hold is never watched twice at once. It is
	// taken before mu.
	watchMu sync.Mutex

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
	// heldIn is held's room for up to 8 locks, so that a record is one
	// allocation.
	heldIn [8]bool
	// life is the hold's life, made when first needed (nil until then).
	life context.Context
	end  context.CancelCauseFunc
	// watchdog is set once a level was taken on the watchdog lease: the
	// locks are then to be watched (from watched on), and a final Unlock
	// of a hold never watched checks its locks' answers for a loss.
	watchdog bool
	watched  bool
	// releasing is set by a final Unlock: no watch starts any more.
	releasing bool
	// watches[i] is the watch on lock i (nil when it is not watched; the
	// slice is nil until the first watch).
	watches []*watch
	wg      sync.WaitGroup // watch goroutines of Lockers without HoldContext
	obs     holdObs        // for the observer (observe.go)
	// reuse is set on the hold of a made-up owner whose acquisition had
	// no failed call: once released cleanly, the owner may be used again.
	reuse bool
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
	if g.kind == "redlock" {
		owner = freeOwners.take()
	} else {
		owner = lockcore.AnonymousOwner()
	}
	return lockcore.WithReservedOwner(ctx, owner), owner, true, nil
}

// freeOwners are made-up owners of RedLocks' anonymous acquisitions that
// are done with, to be used again by any RedLock of the process (see
// reuseAnon): a relock Client keeps its record of such an owner's hold
// once idle (lockcore.ReusedOwner), and an acquisition with an owner it
// has seen finds it, with no new record to make. Taking the latest first
// keeps the owners in use few.
var freeOwners ownerList

type ownerList struct {
	mu   sync.Mutex
	free []string
}

// maxFreeOwners bounds freeOwners.
const maxFreeOwners = 64

// take returns a free owner, or a new one.
func (l *ownerList) take() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.free)
	if n == 0 {
		return lockcore.ReusedOwner()
	}
	o := l.free[n-1]
	l.free = l.free[:n-1]
	return o
}

// reuseAnon gives back owner, made up for an anonymous acquisition of a
// RedLock, to be used by a later one. Only an owner that holds nothing,
// and that no call in flight or left behind can make hold something, may
// be given back: one whose every call answered, with success or, for a
// release, ErrNotHeld.
func (g *group) reuseAnon(owner string) {
	freeOwners.mu.Lock()
	if len(freeOwners.free) < maxFreeOwners {
		freeOwners.free = append(freeOwners.free, owner)
	}
	freeOwners.mu.Unlock()
}

// markReuse marks the hold of owner, just granted to an anonymous
// acquisition with no failed call, as one whose owner may be used again
// once released (see releasedAnon).
func (g *group) markReuse(owner string) {
	g.mu.Lock()
	if h := g.holds[owner]; h != nil && h.count == 1 {
		h.reuse = true
	}
	g.mu.Unlock()
}

// releasedAnon is told, after a release of h by owner, whether every lock
// answered it with a release or ErrNotHeld (clean). When h ended by that
// release, was marked by markReuse and was not lost, and the answers
// were clean, the owner is given back (reuseAnon). Only the first call
// for h decides.
func (g *group) releasedAnon(owner string, h *hold, clean bool) {
	if h == nil {
		return
	}
	g.mu.Lock()
	reuse := h.reuse && h.count == 0 && g.holds[owner] != h && (h.life == nil || h.life.Err() == nil || context.Cause(h.life) == context.Canceled)
	if h.count == 0 {
		h.reuse = false
	}
	g.mu.Unlock()
	if reuse && clean {
		g.reuseAnon(owner)
	}
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

// takenInto reports whether this value has a record of a hold of owner,
// and copies into dst (len(g.locks) long) which locks it has taken and not
// seen end.
func (g *group) takenInto(owner string, dst []bool) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	h := g.holds[owner]
	if h == nil {
		return false
	}
	copy(dst, h.held)
	return true
}

// lifeLocked returns h's life, making it if needed. g.mu is held.
func (g *group) lifeLocked(h *hold) context.Context {
	if h.life == nil {
		h.life, h.end = context.WithCancelCause(context.Background())
	}
	return h.life
}

// grant records an acquisition by owner that took the locks marked in
// took (grant keeps no reference to it). With watching set (a hold on the
// watchdog lease), each taken lock that can tell when its hold ends is
// watched, now if the hold is watched already or an observer waits for
// its loss, else from the first HoldContext on. octx carries the owner.
func (g *group) grant(octx context.Context, owner string, anon bool, took []bool, watching bool) {
	if !watching {
		g.mu.Lock()
		g.recordLocked(owner, anon, took)
		g.mu.Unlock()
		return
	}
	g.watchMu.Lock()
	defer g.watchMu.Unlock()
	g.mu.Lock()
	h := g.holds[owner]
	if g.obs == nil && (h == nil || !h.watched) {
		h = g.recordLocked(owner, anon, took)
		h.watchdog = true
		g.mu.Unlock()
		return
	}
	g.mu.Unlock()
	// The locks' hold contexts are asked for outside g.mu: that takes
	// the locks' own locks.
	lives, dones := g.lockLives(octx, took)
	g.mu.Lock()
	defer g.mu.Unlock()
	h = g.recordLocked(owner, anon, took)
	h.watchdog = true
	g.watchLocked(h, took, lives, dones)
}

// recordLocked counts an acquisition by owner that took the locks marked
// in took, making the record if needed, and returns it. g.mu is held.
func (g *group) recordLocked(owner string, anon bool, took []bool) *hold {
	if anon {
		g.anon = owner
	}
	h := g.holds[owner]
	if h == nil {
		h = &hold{}
		if n := len(g.locks); n <= len(h.heldIn) {
			h.held = h.heldIn[:n]
		} else {
			h.held = make([]bool, n)
		}
		g.holds[owner] = h
		g.holdStartLocked(h, owner)
	}
	h.count++
	for i, ok := range took {
		if ok && !h.held[i] {
			h.held[i] = true
			h.live++
		}
	}
	return h
}

// lockLives returns, for each lock marked in which, what tells when the
// owner's hold of it ends: its hold context (lives[i]) or, for a Locker
// that offers only Done, its Done channel (dones[i]). octx carries the
// owner.
func (g *group) lockLives(octx context.Context, which []bool) (lives []context.Context, dones []<-chan struct{}) {
	lives = make([]context.Context, len(which))
	dones = make([]<-chan struct{}, len(which))
	for i, ok := range which {
		if !ok {
			continue
		}
		switch l := g.locks[i].(type) {
		case holdContexter:
			lives[i] = l.HoldContext(octx)
		case Watchable:
			dones[i] = l.Done(octx)
		}
	}
	return lives, dones
}

// watchLocked marks h watched and starts a watch on each lock i marked in
// which that is still held and has lives[i] or dones[i]. g.mu is held.
func (g *group) watchLocked(h *hold, which []bool, lives []context.Context, dones []<-chan struct{}) {
	h.watched = true
	if g.lifeLocked(h).Err() != nil {
		return // lost already: nothing more to watch
	}
	for i, ok := range which {
		if !ok || !h.held[i] {
			continue
		}
		switch {
		case lives[i] != nil:
			life := lives[i]
			g.watchOneLocked(h, i, func(w *watch) {
				stop := context.AfterFunc(life, func() { g.ended(h, i, w) })
				w.stop = func() { stop() }
			})
		case dones[i] != nil:
			done := dones[i]
			g.watchOneLocked(h, i, func(w *watch) {
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

// watchOneLocked starts a watch on lock i of h, replacing the one it had
// (a re-entry watches the lock's current hold, which may be a new one).
// start arranges for g.ended to be called with w when the lock's hold
// ends, and sets w.stop. g.mu is held.
func (g *group) watchOneLocked(h *hold, i int, start func(w *watch)) {
	if h.watches == nil {
		h.watches = make([]*watch, len(g.locks))
	}
	if old := h.watches[i]; old != nil {
		old.stop()
	}
	w := &watch{}
	start(w)
	h.watches[i] = w
}

// startWatching starts the watches of owner's hold h, taken on the
// watchdog lease and not watched yet. octx carries the owner.
func (g *group) startWatching(octx context.Context, owner string, h *hold) {
	g.watchMu.Lock()
	defer g.watchMu.Unlock()
	g.mu.Lock()
	if g.holds[owner] != h || h.watched || h.releasing {
		g.mu.Unlock()
		return
	}
	which := append([]bool(nil), h.held...)
	g.mu.Unlock()
	lives, dones := g.lockLives(octx, which)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.holds[owner] == h && !h.watched && !h.releasing {
		g.watchLocked(h, which, lives, dones)
	}
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
		g.loseLocked(h, i)
	}
}

// loseLocked ends h as lost, lock i being the last one seen to go. g.mu
// is held.
func (g *group) loseLocked(h *hold, i int) {
	g.lifeLocked(h)
	h.end(fmt.Errorf("%w: %s %q: %d of %d locks left held, %d needed (lost %d %q)",
		ErrLockLost, g.kind, g.name, h.live, len(g.locks), g.needed, i, g.names[i]))
	g.holdEndLocked(h, observe.OutcomeLost, context.Cause(h.life))
	g.unwatchLocked(h)
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
		h.releasing = true
		g.unwatchLocked(h)
	}
	g.mu.Unlock()
	if final {
		h.wg.Wait()
	}
	return h
}

// gone reports whether err, a lock's answer to a release, says that the
// owner's hold of it had already ended: not held, lost, or its client
// closed.
func gone(err error) bool {
	return errors.Is(err, ErrNotHeld) || errors.Is(err, ErrLockLost) || errors.Is(err, relock.ErrClosed)
}

// endRelease records an Unlock by owner. At the last level the record
// goes, and the hold ends; it returns the cause of a loss that ended the
// hold before, so that the final Unlock reports it. released(i) is what
// lock i answered to this release: for a hold on the watchdog lease that
// was never watched, the hold counts as lost when the locks whose answer
// says that their hold had ended leave fewer than g.needed held (the
// locks' losses that watching would have seen).
func (g *group) endRelease(owner string, h *hold, released func(i int) error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if h == nil || g.holds[owner] != h {
		return nil
	}
	h.count--
	if h.count > 0 {
		h.releasing = false
		return nil
	}
	delete(g.holds, owner)
	if g.anon == owner {
		g.anon = ""
	}
	if h.life != nil && h.life.Err() != nil {
		return context.Cause(h.life)
	}
	if h.watchdog && !h.watched {
		last := -1
		for i, ok := range h.held {
			if ok && watchable(g.locks[i]) && gone(released(i)) {
				h.held[i] = false
				h.live--
				last = i
			}
		}
		if last >= 0 && h.live < g.needed {
			g.loseLocked(h, last)
			return context.Cause(h.life)
		}
	}
	g.holdEndLocked(h, observe.OutcomeReleased, nil)
	if h.life != nil {
		h.end(nil)
	}
	return nil
}

// watchable reports whether a hold can watch l.
func watchable(l Locker) bool {
	switch l.(type) {
	case holdContexter, Watchable:
		return true
	}
	return false
}

// holdContext is HoldContext for both kinds: the life of the owner's hold.
// The first call for a hold on the watchdog lease starts its watches.
func (g *group) holdContext(ctx context.Context) context.Context {
	if g.err != nil {
		return notHeldContext
	}
	octx, owner, err := g.holder(ctx)
	if err != nil || owner == "" {
		return notHeldContext
	}
	g.mu.Lock()
	h := g.holds[owner]
	if h == nil {
		g.mu.Unlock()
		return notHeldContext
	}
	life := g.lifeLocked(h)
	start := h.watchdog && !h.watched && !h.releasing
	g.mu.Unlock()
	if start {
		g.startWatching(octx, owner, h)
	}
	return life
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
