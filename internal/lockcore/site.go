package lockcore

import (
	"maps"
	"slices"
)

// Site is embedded, under an unexported alias, in every lock handle of
// relock: it tells multilock which Client, and so which Redis servers, a
// Locker uses, without a method in the handles' public API.
type Site struct{ core *Core }

// SiteOf returns the Site of the handles of c.
func SiteOf(c *Core) Site { return Site{core: c} }

func (s Site) relockSite() *Core { return s.core }

type sited interface{ relockSite() *Core }

// SharedServer finds two of locks that live on one Redis server: the same
// Client, or Clients that share a node address. It reports their positions
// and the address (empty for one Client). Locks that are not relock's own
// handles are skipped. It does no I/O.
func SharedServer(locks []any) (i, j int, addr string, found bool) {
	type seen struct {
		i     int
		core  *Core
		addrs []string
	}
	var prev []seen
	for j, l := range locks {
		s, ok := l.(sited)
		if !ok || s.relockSite() == nil {
			continue
		}
		c := s.relockSite()
		addrs := slices.Sorted(maps.Keys(c.RDB.Nodes()))
		for _, p := range prev {
			if p.core == c {
				return p.i, j, "", true
			}
			for _, a := range addrs {
				if slices.Contains(p.addrs, a) {
					return p.i, j, a, true
				}
			}
		}
		prev = append(prev, seen{j, c, addrs})
	}
	return 0, 0, "", false
}
