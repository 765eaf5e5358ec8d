package lockcore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/watchdog"
)

type holdKey struct{ name, field string }

// hold is this Client's record of one owner's hold on one lock: the one
// place where a hold's state lives. Its life is a small state machine:
//
//		free ──grant──▶ held(want ≥ 1) ──release to 0──▶ free (life ends, cause nil)
//		                   │  ▲ grant / partial release
//		                   │
//		                   ├──loss (renewal, re-entry or unlock found it gone,
//		                   │        ForceUnlock)──▶ free (life ends, ErrLockLost)
//		                   └──Close──▶ ended (life ends, ErrClosed)
//
//	  - want is the number of levels the owner was granted and has not
//	    released: successful acquisitions minus successful unlocks. Redis'
//	    count of the field is want, except after a call whose reply was lost;
//	    every script that changes a hold sets the count from want instead of
//	    adding to it, so the next call brings Redis back in line.
//	  - sem makes the Redis calls that change the hold go one at a time, so
//	    that want is exact when a script is built from it, also when several
//	    goroutines share one owner.
//	  - life is a context that lives from the first level to the end of the
//	    hold; context.Cause tells how it ended. Done channels, Do's function
//	    context and MultiLock's watch all hang on it (context.AfterFunc), so
//	    watching a hold costs no goroutine.
//	  - renewal is the watchdog's lease while the hold is on the watchdog
//	    lease (the mode of the latest acquisition: a re-entry resets the
//	    lease, as in Redisson).
//
// Fields other than sem are guarded by Core.mu. A record lives in
// Core.holds while it holds levels or a call uses it.
type hold struct {
	core  *Core
	key   holdKey
	owner string
	kind  Kind // of the lock, for its renewal
	// shared: the lock's role may be held by several owners at once (see
	// Role.Shared).
	shared bool

	sem chan struct{}

	want    int
	lease   time.Duration // of the latest acquisition; reset by partial releases
	renewal *renewal      // nil unless on the watchdog lease
	life    context.Context
	end     context.CancelCauseFunc
	anonKey string        // set while the hold is one of the Client's anonymous holds of its lock
	users   int           // calls using the record
	granted chan struct{} // made for waiting calls of the owner; closed at the next grant
}

// renewal is one registration of a hold with the watchdog. A loss report
// counts only while it is the hold's current renewal.
type renewal struct {
	h     *hold
	lease *watchdog.Lease
}

// enter returns the record of field's hold on name, a lock of kind k
// (shared: see Role.Shared), making it if needed, and counts the caller
// as a user until leave.
func (c *Core) enter(name, field, owner string, k Kind, shared bool) *hold {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := holdKey{name, field}
	h := c.holds[key]
	if h == nil {
		h = &hold{core: c, key: key, owner: owner, kind: k, shared: shared, sem: make(chan struct{}, 1)}
		c.holds[key] = h
	}
	h.users++
	return h
}

// find is enter for a record that exists: nil when this Client has none.
func (c *Core) find(name, field string) *hold {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.holds[holdKey{name, field}]
	if h != nil {
		h.users++
	}
	return h
}

// leave ends a use of h begun by enter or find; a record that holds
// nothing and is used by nobody is forgotten.
func (c *Core) leave(h *hold) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h.users--
	if h.users == 0 && h.want == 0 && c.holds[h.key] == h {
		delete(c.holds, h.key)
	}
}

// acquire takes h's call slot, waiting until ctx ends.
func (h *hold) acquire(ctx context.Context) error {
	select {
	case h.sem <- struct{}{}:
		return nil
	default:
	}
	select {
	case h.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// release gives back h's call slot.
func (h *hold) release() { <-h.sem }

// state returns h's levels and its current life (nil when it holds none).
func (h *hold) state() (want int, life context.Context) {
	h.core.mu.Lock()
	defer h.core.mu.Unlock()
	return h.want, h.life
}

// grantedChan returns a channel closed when the owner is next granted a
// level, so that a waiting call of the same owner re-enters at once.
func (h *hold) grantedChan() <-chan struct{} {
	h.core.mu.Lock()
	defer h.core.mu.Unlock()
	if h.granted == nil {
		h.granted = make(chan struct{})
	}
	return h.granted
}

// errHoldChanged: an acquisition's script answered for a hold that ended
// (lost) while the script was in flight.
var errHoldChanged = errors.New("relock: the hold ended while it was re-entered")

// grant records one more level, won by a script that found the owner at
// from levels in a life that was life then. lease is the acquisition's
// lease; renew puts the hold on the watchdog, a fixed lease takes it off.
// anonKey, if set, makes the hold the Client's latest anonymous hold of
// its lock.
// It fails with ErrClosed after Close, and with errHoldChanged when the
// hold was lost meanwhile (the caller then acquires anew).
func (h *hold) grant(from int, life context.Context, lease time.Duration, renew bool, anonKey string) error {
	c := h.core
	c.mu.Lock()
	if c.CheckOpen() != nil {
		c.mu.Unlock()
		return ErrClosed
	}
	if h.want != from || h.life != life {
		c.mu.Unlock()
		return errHoldChanged
	}
	h.want++
	h.lease = lease
	if h.life == nil {
		h.life, h.end = context.WithCancelCause(c.root)
	}
	if anonKey != "" {
		h.anonKey = anonKey
		if h.shared {
			c.anon[anonKey] = append(c.anon[anonKey], h.owner)
		} else {
			c.anon[anonKey] = []string{h.owner}
		}
	}
	if h.granted != nil {
		close(h.granted)
		h.granted = nil
	}
	var stop *renewal
	switch {
	case renew && h.renewal == nil:
		if err := h.armLocked(); err != nil {
			c.mu.Unlock()
			return err
		}
	case !renew && h.renewal != nil:
		stop, h.renewal = h.renewal, nil
	}
	c.mu.Unlock()
	if stop != nil {
		stop.lease.Stop()
	}
	return nil
}

// stopRenewal stops h's watchdog renewal, synchronously: when it returns,
// no renewal of h is in flight or will be sent. It reports whether there
// was one. It must not be called from the watchdog's loss report.
func (h *hold) stopRenewal() bool {
	c := h.core
	c.mu.Lock()
	r := h.renewal
	h.renewal = nil
	c.mu.Unlock()
	if r != nil {
		r.lease.Stop()
	}
	return r != nil
}

// rearm puts h back on the watchdog after stopRenewal, if it still holds
// levels in life and nothing armed it meanwhile.
func (h *hold) rearm(life context.Context) {
	c := h.core
	c.mu.Lock()
	defer c.mu.Unlock()
	if h.want == 0 || h.life != life || h.renewal != nil {
		return
	}
	_ = h.armLocked() // fails only after Close, which ends the hold anyway
}

// armLocked puts h on the watchdog. It is done under c.mu, so that its
// loss report (which takes c.mu) sees h.renewal set. The first renewal is
// due a third of the lease from now. c.mu is held.
func (h *hold) armLocked() error {
	r := &renewal{h: h}
	l, err := h.core.Watchdog.Add(h.core.WatchdogTimeout, r, r.lost)
	if err != nil {
		return ErrClosed
	}
	r.lease = l
	h.renewal = r
	return nil
}

// released records a successful release that left remaining levels in
// life. At 0 the hold ends with a nil cause (its life's cause is then
// context.Canceled).
func (h *hold) released(life context.Context, remaining int) {
	c := h.core
	c.mu.Lock()
	if h.life != life {
		c.mu.Unlock()
		return
	}
	if remaining > 0 {
		h.want = remaining
		c.mu.Unlock()
		return
	}
	end, r := h.finishLocked()
	c.mu.Unlock()
	if r != nil {
		r.lease.Stop()
	}
	end(nil)
}

// lose ends life, if it is still h's, with cause (which matches
// ErrLockLost), and tells the lost handler.
func (h *hold) lose(life context.Context, cause error) {
	c := h.core
	c.mu.Lock()
	if life == nil || h.life != life {
		c.mu.Unlock()
		return
	}
	end, r := h.finishLocked()
	c.mu.Unlock()
	if r != nil {
		// Not the watchdog's own report of this renewal (that one clears
		// h.renewal first), so waiting for the wheel cannot deadlock.
		r.lease.Stop()
	}
	end(cause)
	if c.onLost != nil && c.CheckOpen() == nil {
		c.onLost(h.key.name, h.owner, cause)
	}
}

// finishLocked takes h back to no levels and returns what the caller must
// do outside c.mu: end the life, and stop the renewal. c.mu is held.
func (h *hold) finishLocked() (context.CancelCauseFunc, *renewal) {
	c := h.core
	end, r := h.end, h.renewal
	h.want, h.life, h.end, h.renewal = 0, nil, nil, nil
	if h.anonKey != "" {
		c.dropAnon(h.anonKey, h.owner)
		h.anonKey = ""
	}
	if h.users == 0 && c.holds[h.key] == h {
		delete(c.holds, h.key)
	}
	return end, r
}

// RenewCall renews the hold with its kind's renewal (see KindRenewer), by
// default lock_renew.lua.
func (r *renewal) RenewCall(lease time.Duration) Call {
	h := r.h
	req := Request{Core: h.core, Name: h.key.name, Field: h.key.field, LeaseMs: Millis(lease)}
	if k, ok := h.kind.(KindRenewer); ok {
		return k.RenewCall(req)
	}
	return Call{Script: lua.LockRenew, Keys: []string{req.Name},
		Args: []string{strconv.FormatInt(req.LeaseMs, 10), req.Field}}
}

// lost is the watchdog's report that the hold is gone. It runs on a
// watchdog goroutine and must not block.
func (r *renewal) lost(cause error) {
	h := r.h
	c := h.core
	c.mu.Lock()
	if h.renewal != r {
		c.mu.Unlock() // a report about a renewal stopped or replaced since
		return
	}
	h.renewal = nil // already out of the wheel
	life := h.life
	c.mu.Unlock()
	h.lose(life, fmt.Errorf("%w: %q: %w", ErrLockLost, h.key.name, cause))
}

// anonOwner returns the owner of the Client's latest anonymous hold under
// key ("" when there is none).
func (c *Core) anonOwner(key string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	owners := c.anon[key]
	if len(owners) == 0 {
		return ""
	}
	return owners[len(owners)-1]
}

// dropAnon forgets owner's anonymous hold under key. c.mu is held.
func (c *Core) dropAnon(key, owner string) {
	owners := c.anon[key]
	if i := slices.Index(owners, owner); i >= 0 {
		owners = slices.Delete(owners, i, i+1)
	}
	if len(owners) == 0 {
		delete(c.anon, key)
	} else {
		c.anon[key] = owners
	}
}

// holdsOn returns the records of every hold of this Client on name.
func (c *Core) holdsOn(name string) []*hold {
	c.mu.Lock()
	defer c.mu.Unlock()
	var hs []*hold
	for k, h := range c.holds {
		if k.name == name && h.want > 0 {
			h.users++
			hs = append(hs, h)
		}
	}
	return hs
}

// lookupHold returns the levels of field's hold on name and its life.
func (c *Core) lookupHold(name, field string) (int, context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h := c.holds[holdKey{name, field}]; h != nil {
		return h.want, h.life
	}
	return 0, nil
}
