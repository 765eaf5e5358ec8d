package lockcore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/relock-go/relock/observe"
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

	sem chan struct{}

	want    int
	lease   time.Duration // of the latest acquisition; reset by partial releases
	renewal *renewal      // nil unless on the watchdog lease
	life    context.Context
	end     context.CancelCauseFunc
	anonKey string        // set while the hold is the Client's anonymous hold of its lock
	// listener hears force-unlocks while the hold is watched (see watch);
	// listening is set from the moment one is being made.
	listener  waiter
	listening bool
	users   int           // calls using the record
	granted chan struct{} // made for waiting calls of the owner; closed at the next grant

	// obs is for the Client's observer, if it has one (observe.go).
	obs *holdObs
}

// renewal is one registration of a hold with the watchdog. A loss report
// counts only while it is the hold's current renewal.
type renewal struct {
	h     *hold
	lease *watchdog.Lease
}

// enter returns the record of field's hold on name, making it if needed,
// and counts the caller as a user until leave.
func (c *Core) enter(name, field, owner string) *hold {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := holdKey{name, field}
	h := c.holds[k]
	if h == nil {
		h = &hold{core: c, key: k, owner: owner, sem: make(chan struct{}, 1)}
		c.holds[k] = h
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
// anonKey, if set, makes the hold the Client's anonymous hold of its lock.
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
	var start observe.Hold
	if h.life == nil {
		h.life, h.end = context.WithCancelCause(c.root)
		start = c.obs.holdStartLocked(h)
	}
	if anonKey != "" {
		h.anonKey = anonKey
		c.anon[anonKey] = h.owner
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
	c.obs.holdStarted(start)
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
	ended := c.obs.holdEndLocked(h, observe.OutcomeReleased, nil)
	e := h.finishLocked()
	c.mu.Unlock()
	c.obs.holdEnded(ended)
	e.finish(nil)
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
	ended := c.obs.holdEndLocked(h, observe.OutcomeLost, cause)
	e := h.finishLocked()
	c.mu.Unlock()
	c.obs.holdEnded(ended)
	e.finish(cause)
	if c.onLost != nil && c.CheckOpen() == nil {
		c.onLost(h.key.name, h.owner, cause)
	}
}

// ending is what is left to do, outside c.mu, when a hold ends.
type ending struct {
	end      context.CancelCauseFunc
	renewal  *renewal
	listener waiter
}

// finish stops the renewal (not the watchdog's own report of it: that one
// clears h.renewal first, so waiting for the wheel cannot deadlock) and
// the listener, and ends the life with cause.
func (e ending) finish(cause error) {
	if e.renewal != nil {
		e.renewal.lease.Stop()
	}
	if e.listener != nil {
		e.listener.Leave(false)
	}
	e.end(cause)
}

// finishLocked takes h back to no levels and returns what the caller must
// do outside c.mu. c.mu is held.
func (h *hold) finishLocked() ending {
	c := h.core
	e := ending{end: h.end, renewal: h.renewal, listener: h.listener}
	h.want, h.life, h.end, h.renewal = 0, nil, nil, nil
	h.listener, h.listening = nil, false
	if h.anonKey != "" {
		if c.anon[h.anonKey] == h.owner {
			delete(c.anon, h.anonKey)
		}
		h.anonKey = ""
	}
	if h.users == 0 && c.holds[h.key] == h {
		delete(c.holds, h.key)
	}
	return e
}

// watch returns the life of field's hold on name (nil when there is
// none), and makes its Client listen, while it lasts, on channel, where
// a force-unlock is published: a message brings the hold's next renewal
// forward, and a renewal that finds the hold gone reports the loss within
// a round trip instead of at its next turn. Only a hold on the watchdog
// lease is listened for; it costs the channel's subscription (shared with
// the lock's waiters) for as long as the hold lasts.
func (c *Core) watch(name, field, channel string) context.Context {
	c.mu.Lock()
	h := c.holds[holdKey{name, field}]
	if h == nil || h.life == nil {
		c.mu.Unlock()
		return nil
	}
	life := h.life
	start := h.renewal != nil && !h.listening && (c.subscribeHook == nil || c.listenHook != nil)
	if start {
		h.listening = true
		h.users++
	}
	c.mu.Unlock()
	if !start {
		return life
	}
	l, err := c.listen(channel, h.checkNow)
	c.mu.Lock()
	if err == nil && h.life == life {
		h.listener, l = l, nil
	} else if h.life == life {
		h.listening = false
	}
	c.mu.Unlock()
	c.leave(h)
	if l != nil {
		l.Leave(false)
	}
	return life
}

// checkNow brings h's renewal forward: a message says the hold may be
// gone. It runs on the pub/sub reader goroutine and does not block.
func (h *hold) checkNow() {
	c := h.core
	c.mu.Lock()
	r := h.renewal
	c.mu.Unlock()
	if r != nil {
		r.lease.RenewNow()
	}
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
	lost := fmt.Errorf("%w: %q: %w", ErrLockLost, h.key.name, cause)
	c.obs.renewalLost(h, lost)
	h.lose(life, lost)
}

// anonOwner returns the owner of the Client's anonymous hold under key.
func (c *Core) anonOwner(key string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.anon[key]
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
