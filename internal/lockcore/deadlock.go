package lockcore

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/waitrec"
	"github.com/relock-go/relock/observe"
)

// Deadlock detection. A waiting call whose record was written looks, once
// it has waited DeadlockAfter and again every DeadlockAfter while it
// waits, for a cycle of owners through itself: from the name it waits
// for, the owners that hold it (the hash fields of the lock kinds: plain,
// fenced, fair and spin locks, both sides of a read-write lock), then what
// each of them waits for (the records with that owner in its Client's wait
// record hash), their holders, and so on, until the walk comes back to
// the call's owner. Each name and each record hash is read on its own
// (they may be in different Cluster slots), once per look, and a look
// reads at most maxDetectReads keys: a longer chain ends nothing.
//
// Owners are threads of control, as a database's transactions are: an
// owner that waits is taken to hold what it holds until its wait ends.
// Goroutines that share an owner (the owner travels in the context) and
// wait for each other's releases are one owner to the detector: a cycle
// through such an owner is reported although another of its goroutines
// might have released what the cycle waits for.
//
// An owner that holds the name it waits for is not a cycle (a re-entry,
// or a grant its call has not seen yet), except a read hold under a write
// wait on a read-write lock (an upgrade), which waits for itself: that is
// a cycle of one. A read wait waits only for a write hold: a reader that
// holds the name keeps no reader out (a read wait's record that names a
// name read-held by others is one whose grant came, its delete on its
// way).
//
// Exactly one wait of a cycle ends, the victim: the wait with the
// youngest record (the greatest since; ties by owner, then by record hash
// and field). Every member of the cycle reads the same records, so each
// names the same victim, and only the victim ends itself. Before it ends,
// the victim reads the cycle's edges again (each record is still there,
// unchanged, and each holder still holds): a chain that changed while it
// was read ends nothing. The victim's call returns an error matching
// relock.ErrDeadlock and relock.ErrNotAcquired that names the cycle; the
// others wait on, and go on once the victim's caller releases what it
// holds.

// maxDetectReads bounds the keys one look reads.
const maxDetectReads = 64

// DefaultDeadlockAfter is the default deadlock detection delay.
const DefaultDeadlockAfter = time.Second

// holding is one holder of a name.
type holding struct {
	owner string // "<clientID>:<owner>"
	field string // its field in the name's hash
	read  bool   // a read hold of a read-write lock
}

// recordAt is a wait record where it was read.
type recordAt struct {
	key, field, value string
	rec               waitrec.Record
}

// CycleEdge is one step of a cycle: a wait (its record) for a name, and
// the owner that holds that name.
type CycleEdge struct {
	Wait        recordAt
	Holder      string // "<clientID>:<owner>"
	HolderField string // its field in the name's hash
}

// detector is one look for a cycle: the keys it read, each once.
type detector struct {
	c       *Core
	ctx     context.Context
	reads   int
	holders map[string][]holding
	records map[string][]recordAt // by Client ID
}

// over reports whether the look read as much as it may.
func (d *detector) over() bool { return d.reads >= maxDetectReads || d.ctx.Err() != nil }

// holdersOf returns the holders of name, each owner once.
func (d *detector) holdersOf(name string) []holding {
	if hs, ok := d.holders[name]; ok {
		return hs
	}
	d.reads++
	m, err := d.c.RDB.Do(d.ctx, d.c.RDB.B().Hgetall().Key(name).Build()).AsStrMap()
	if err != nil {
		// Not a hash (a semaphore's count, a latch), or unreadable: no
		// holders known.
		m = nil
	}
	hs := parseHolders(m)
	d.holders[name] = hs
	return hs
}

// parseHolders returns the holders a lock's hash names, each owner once,
// in a fixed order (read holds after the others).
func parseHolders(m map[string]string) []holding {
	_, rw := m["mode"]
	seen := map[string]int{}
	var hs []holding
	fields := make([]string, 0, len(m))
	for f := range m {
		fields = append(fields, f)
	}
	sort.Strings(fields)
	for _, f := range fields {
		if !layout.IsHolderField(f) {
			continue
		}
		h := holding{owner: f, field: f}
		if rw {
			if o, ok := strings.CutSuffix(f, layout.WriteSuffix); ok {
				h.owner = o
			} else {
				h.read = true
			}
		}
		if i, ok := seen[h.owner]; ok {
			if !h.read {
				hs[i] = h // the owner's write hold names it
			}
			continue
		}
		seen[h.owner] = len(hs)
		hs = append(hs, h)
	}
	return hs
}

// waitsOf returns the records of owner's waits.
func (d *detector) waitsOf(owner string) []recordAt {
	id, _ := layout.SplitField(owner)
	recs, ok := d.records[id]
	if !ok {
		d.reads++
		key := waitrec.Key(d.c.prefix, id)
		m, err := d.c.RDB.Do(d.ctx, d.c.RDB.B().Hgetall().Key(key).Build()).AsStrMap()
		if err != nil {
			m = nil
		}
		fields := make([]string, 0, len(m))
		for f := range m {
			fields = append(fields, f)
		}
		sort.Strings(fields)
		for _, f := range fields {
			if r, err := waitrec.Decode(m[f]); err == nil {
				recs = append(recs, recordAt{key: key, field: f, value: m[f], rec: r})
			}
		}
		d.records[id] = recs
	}
	var out []recordAt
	for _, r := range recs {
		if r.rec.Owner == owner {
			out = append(out, r)
		}
	}
	return out
}

// find returns a cycle through self's wait, its first edge self's, or
// nil.
func (d *detector) find(self recordAt) []CycleEdge {
	visited := map[string]bool{self.rec.Owner: true}
	var path []CycleEdge
	var walk func(r recordAt) bool
	walk = func(r recordAt) bool {
		for _, h := range d.holdersOf(r.rec.Name) {
			if h.read && r.rec.Kind == observe.KindRead {
				// A read hold keeps no reader out (a read wait waits for a
				// writer, whose own read holds name its write hold here):
				// the wait has ended with a grant, and its record outlives
				// it by a moment.
				continue
			}
			e := CycleEdge{Wait: r, Holder: h.owner, HolderField: h.field}
			switch {
			case h.owner == self.rec.Owner:
				if len(path) == 0 && !(h.read && r.rec.Kind == observe.KindWrite) {
					// self holds what it waits for: a re-entry, or a
					// grant not seen yet; only an upgrade waits for
					// itself.
					continue
				}
				path = append(path, e)
				return true
			case h.owner == r.rec.Owner, visited[h.owner]:
				// A waiter that holds what it waits for (its record
				// outlives its wait by a moment), or an owner walked
				// already.
				continue
			}
			visited[h.owner] = true
			path = append(path, e)
			for _, next := range d.waitsOf(h.owner) {
				if d.over() {
					return false
				}
				if walk(next) {
					return true
				}
			}
			path = path[:len(path)-1]
			if d.over() {
				return false
			}
		}
		return false
	}
	if walk(self) {
		return path
	}
	return nil
}

// victim is the index of the edge whose wait the cycle ends: the
// youngest record (the greatest since), ties by owner, then by record
// hash and field.
func victim(cycle []CycleEdge) int {
	v := 0
	for i := 1; i < len(cycle); i++ {
		if younger(cycle[i].Wait, cycle[v].Wait) {
			v = i
		}
	}
	return v
}

func younger(a, b recordAt) bool {
	switch {
	case a.rec.Since != b.rec.Since:
		return a.rec.Since > b.rec.Since
	case a.rec.Owner != b.rec.Owner:
		return a.rec.Owner > b.rec.Owner
	case a.key != b.key:
		return a.key > b.key
	}
	return a.field > b.field
}

// confirm reads the cycle's edges again, one key at a time: each record
// is still there, unchanged, and each holder still holds. The first
// edge's record is the caller's own, which it knows is live.
func (d *detector) confirm(cycle []CycleEdge) bool {
	rdb := d.c.RDB
	for i, e := range cycle {
		if i > 0 {
			v, err := rdb.Do(d.ctx, rdb.B().Hget().Key(e.Wait.key).Field(e.Wait.field).Build()).ToString()
			if err != nil || v != e.Wait.value {
				return false
			}
		}
		n, err := rdb.Do(d.ctx, rdb.B().Hexists().Key(e.Wait.rec.Name).Field(e.HolderField).Build()).AsInt64()
		if err != nil || n != 1 {
			return false
		}
	}
	return true
}

// detect is one look for a cycle through w's wait. It returns the error
// that ends w's call when w is the victim of a cycle confirmed, nil
// otherwise (no cycle, another's wait ends it, a chain that changed or
// could not be read).
func (w *Wait) detect() error {
	r := w.rec
	r.mu.Lock()
	ok := r.ok
	r.mu.Unlock()
	if !ok {
		// Not written (yet, or the write failed): no one sees this wait,
		// and its since is not known.
		return nil
	}
	c := w.core
	ctx, cancel := context.WithTimeout(w.until, max(c.waits.after, time.Second))
	defer cancel()
	stop := context.AfterFunc(c.root, cancel)
	defer stop()
	self := recordAt{key: c.waits.key, field: r.field, value: r.rec.Encode(), rec: r.rec}
	if cycle := c.lookFor(ctx, self, nil); cycle != nil {
		err := &deadlockError{cycle: cycle}
		if ob := c.obs; ob != nil && ob.log != nil {
			ob.log.LogAttrs(w.Ctx, slog.LevelWarn, "relock: deadlock; this wait ends",
				slog.String("lock", w.Lock.Name), slog.String("kind", w.Lock.Kind), slog.String("owner", w.Owner),
				slog.Int("owners", len(cycle)), slog.String("cycle", err.Error()))
		}
		return notAcquired(err)
	}
	return nil
}

// lookFor is one look for a cycle through the wait whose record is self:
// it returns the cycle, confirmed, when self's wait is its victim, and nil
// otherwise. between, when not nil (tests), runs after the cycle was
// found and before it is confirmed.
func (c *Core) lookFor(ctx context.Context, self recordAt, between func()) []CycleEdge {
	d := &detector{c: c, ctx: ctx, holders: map[string][]holding{}, records: map[string][]recordAt{}}
	cycle := d.find(self)
	if cycle == nil || victim(cycle) != 0 {
		return nil
	}
	if between != nil {
		between()
	}
	if !d.confirm(cycle) {
		return nil
	}
	return cycle
}

// deadlockError is the error of the victim of a cycle: it matches
// relock.ErrDeadlock and names the cycle.
type deadlockError struct{ cycle []CycleEdge }

func (e *deadlockError) Error() string {
	var b strings.Builder
	b.WriteString(relock.ErrDeadlock.Error())
	b.WriteString(": ")
	for i, edge := range e.cycle {
		if i == 0 {
			b.WriteString(describeOwner(edge.Wait.rec.Owner))
		} else {
			b.WriteString(", which")
		}
		fmt.Fprintf(&b, " waits for %s %q held by %s", edge.Wait.rec.Kind, edge.Wait.rec.Name, describeOwner(edge.Holder))
	}
	b.WriteString("; this wait, the youngest of the cycle, ends")
	return b.String()
}

func (e *deadlockError) Is(target error) bool { return target == relock.ErrDeadlock }

// describeOwner names a field's owner and its Client.
func describeOwner(field string) string {
	id, owner := layout.SplitField(field)
	return fmt.Sprintf("owner %q (client %s)", owner, id)
}
