package semaphore

import (
	"strconv"
	"sync"
	"time"

	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/lua"
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
		return &registry{permits: make(map[permitKey]*permit)}
	}).(*registry)
}

// permit is one permit the watchdog renews.
type permit struct {
	reg     *registry
	key     permitKey
	raw     string
	publish string
	lease   *watchdog.Lease
}

var _ lockcore.Renewable = (*permit)(nil)

// add puts a permit on the watchdog. It fails with ErrClosed after Close.
func (r *registry) add(c *lockcore.Core, name, id, raw string) error {
	p := &permit{reg: r, key: permitKey{name, id}, raw: raw, publish: c.PublishCommand()}
	// Under r.mu, so that a loss report (which takes r.mu) sees it.
	r.mu.Lock()
	defer r.mu.Unlock()
	l, err := c.Watchdog.Add(c.WatchdogTimeout, p, p.lost)
	if err != nil {
		return ErrClosed
	}
	p.lease = l
	r.permits[p.key] = p
	return nil
}

// stop stops renewing the permit, synchronously, if it is renewed here.
func (r *registry) stop(name, id string) {
	k := permitKey{name, id}
	r.mu.Lock()
	p := r.permits[k]
	delete(r.permits, k)
	r.mu.Unlock()
	if p != nil {
		p.lease.Stop()
	}
}

// RenewCall resets the permit's lease while it is held.
func (p *permit) RenewCall(lease time.Duration) lockcore.Call {
	k := KeysOf(p.key.name)
	return lockcore.Call{Script: lua.SemRenew, Keys: []string{k.Available, k.Leases, k.Channel},
		Args: []string{p.publish, p.raw, strconv.FormatInt(lockcore.Millis(lease), 10)}}
}

// lost is the watchdog's report that the permit is gone (released
// elsewhere, or its lease ended before a renewal): it is forgotten.
func (p *permit) lost(error) {
	r := p.reg
	r.mu.Lock()
	if r.permits[p.key] == p {
		delete(r.permits, p.key)
	}
	r.mu.Unlock()
}
