package semaphore

import (
	"strconv"
	"sync"
	"time"

	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/observe"
	"github.com/relock-go/relock/watchdog"
)

// registry is a Client's permits on the watchdog lease.
type registry struct {
	mu      sync.Mutex
	permits map[permitKey]*permit
}

type permitKey struct{ name, id string }

// registryKey keys a Client's registry (lockcore.Core.Extension).
type registryKey struct{}

func registryOf(c *lockcore.Core) *registry {
	return c.Extension(registryKey{}, func() any {
		r := &registry{permits: make(map[permitKey]*permit)}
		c.OnClose(r.closed)
		return r
	}).(*registry)
}

// closed ends the permits at Close: they are no longer renewed, and come
// back by themselves when their lease ends.
func (r *registry) closed() {
	r.mu.Lock()
	ps := make([]*permit, 0, len(r.permits))
	for k, p := range r.permits {
		ps = append(ps, p)
		delete(r.permits, k)
	}
	r.mu.Unlock()
	for _, p := range ps {
		p.lease.Stop()
		p.ended(observe.OutcomeClosed, ErrClosed)
	}
}

// permit is one permit the watchdog renews.
type permit struct {
	reg     *registry
	key     permitKey
	raw     string
	publish string
	lease   *watchdog.Lease
	o       observe.Observer // the Client's observer, nil if none
	since   time.Time        // when it was taken
}

var _ lockcore.Renewable = (*permit)(nil)

// add puts a permit on the watchdog, and tells o (if not nil) that it is
// held. It fails with ErrClosed after Close.
func (r *registry) add(c *lockcore.Core, name, id, raw string, o observe.Observer) error {
	p := &permit{reg: r, key: permitKey{name, id}, raw: raw, publish: c.PublishCommand(), o: o, since: time.Now()}
	// Under r.mu, so that a loss report (which takes r.mu) sees it.
	r.mu.Lock()
	defer r.mu.Unlock()
	l, err := c.Watchdog.Add(c.WatchdogTimeout, p, p.lost)
	if err != nil {
		return ErrClosed
	}
	p.lease = l
	r.permits[p.key] = p
	if o != nil {
		o.HoldStart(p.holdEvent())
	}
	return nil
}

// stop stops renewing the permit, synchronously, if it is renewed here,
// and returns it (nil if not).
func (r *registry) stop(name, id string) *permit {
	k := permitKey{name, id}
	r.mu.Lock()
	p := r.permits[k]
	delete(r.permits, k)
	r.mu.Unlock()
	if p != nil {
		p.lease.Stop()
	}
	return p
}

// RenewCall resets the permit's lease while it is held.
func (p *permit) RenewCall(lease time.Duration) lockcore.Call {
	k := KeysOf(p.key.name)
	return lockcore.Call{Script: lua.SemRenew, Keys: []string{k.Available, k.Leases, k.Channel},
		Args: []string{p.publish, p.raw, strconv.FormatInt(lockcore.Millis(lease), 10)}}
}

// lost is the watchdog's report that the permit is gone (released
// elsewhere, or its lease ended before a renewal): it is forgotten.
func (p *permit) lost(cause error) {
	r := p.reg
	r.mu.Lock()
	mine := r.permits[p.key] == p
	if mine {
		delete(r.permits, p.key)
	}
	r.mu.Unlock()
	if mine && p.o != nil {
		lost := lockcore.Join(ErrLockLost, cause)
		lock, owner := p.ObservedAs()
		p.o.Renewal(observe.Renewal{Lock: lock, Owner: owner, Outcome: observe.OutcomeLost, Err: lost})
		p.ended(observe.OutcomeLost, lost)
	}
}
