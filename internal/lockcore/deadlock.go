package lockcore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

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
// record hash), their holders, and so on: every owner its wait leads to.
// The owners of that graph that lead back to the call's owner are its
// strongly connected set: every cycle through the call's owner is in it.
// Each name and each record hash is read on its own (they may be in
// different Cluster slots), once per look, and a look reads at most
// maxDetectReads keys: a larger graph, or a read that failed, ends
// nothing. The records of the look's own Client are not read from Redis
// but from what the Client knows it wrote there and has not deleted (see
// waitBook.ownWaits): a Client with N waiting calls would otherwise read
// all N records in each of their looks. What a look sees of them is
// mostly what a read would have returned a moment earlier or later, but
// not always (a hash lost, a delete that failed, a lost reply: see find),
// and the members of a set must name the same victim: a look that finds a
// cycle reads the Client's hash before it names one, as the other
// Clients do; so do the looks through an owner whose record's write was
// answered with an error. The victim's confirmation reads every record of
// the cycle but its own from Redis. The looks of a Client share their
// reads of another Client's hash (and of its own, when they read it) for
// RecordsFresh (see recordReads): what a look sees is then what its own
// read would have returned a moment earlier, as the members of a cycle
// read at different moments anyway.
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
// Exactly one wait of a strongly connected set ends, the victim: of the
// waits with an edge inside the set, the youngest (the greatest since;
// ties by owner, then by record hash and field) whose end leaves no cycle
// in the set, else the youngest. On a plain ring that is its youngest
// wait; where cycles overlap (several readers of a read-write lock, each
// waiting for what its writer-to-be holds), it is the wait they all share,
// so that one end breaks them all, where ending the youngest of each
// cycle would end one wait per cycle. Every member of the set reaches the
// same owners, reads the same records and holders, and so names the same
// victim, and only the victim ends itself (a set with no wait that all its
// cycles share ends its youngest, and the next look ends the next). Before it ends,
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
	full    bool // a read was needed beyond maxDetectReads, or failed
	holders map[string][]holding
	records map[string][]recordAt // by Client ID
	// fromBook: the look read waits of its own Client's owners from the
	// Client's book; ownRead: it reads them from the Client's hash, as
	// the other Clients do (see find).
	fromBook, ownRead bool
}

// over reports whether the look needed more reads than it may make, or
// its context ended.
func (d *detector) over() bool { return d.full || d.ctx.Err() != nil }

// read counts one read, and reports false (over from then on) when the
// look has made as many as it may.
func (d *detector) read() bool {
	if d.reads >= maxDetectReads {
		d.full = true
		return false
	}
	d.reads++
	return true
}

// unread notes a read's error: a reply that did not come (not an error
// reply of the server) makes the look end nothing, as the members of a
// cycle must read the same graph to name the same victim.
func (d *detector) unread(err error) {
	if _, ok := rueidis.IsRedisErr(err); !ok {
		d.full = true
	}
}

// holdersOf returns the holders of name, each owner once.
func (d *detector) holdersOf(name string) []holding {
	if hs, ok := d.holders[name]; ok {
		return hs
	}
	if !d.read() {
		return nil
	}
	m, err := d.c.RDB.Do(d.ctx, d.c.RDB.B().Hgetall().Key(name).Build()).AsStrMap()
	if err != nil {
		// Not a hash (a semaphore's count, a latch: an error reply): no
		// holders known. A read that failed (no reply) leaves the graph
		// unknown: the look ends nothing.
		d.unread(err)
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

// waitsOf returns the records of owner's waits: an owner of the look's
// own Client from the Client's book, any other from its Client's hash.
func (d *detector) waitsOf(owner string) []recordAt {
	id, _ := layout.SplitField(owner)
	if id == d.c.ID && !d.ownRead {
		if recs, sure := d.c.waits.ownWaits(owner); sure {
			d.fromBook = true
			return recs
		}
	}
	recs, ok := d.records[id]
	if !ok {
		if !d.read() {
			return nil
		}
		recs = d.readRecords(id)
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

// RecordsFresh is how old a read of another Client's wait record hash
// may be for a look to use it instead of reading the hash itself (or a
// tenth of the detection delay, when that is less).
const RecordsFresh = 100 * time.Millisecond

// recordReads are the reads of other Clients' record hashes that a
// Client's looks share: a look that needs a hash that another look of
// the Client read, or is reading, less than RecordsFresh ago uses that
// read. With N calls of one Client waiting for owners of another, each
// looking once per delay, every look would otherwise read all of that
// Client's records; what a look sees is then what its own read would
// have returned a moment earlier, as the members of a cycle read at
// different moments anyway, and the victim's confirmation reads each
// record of the cycle again.
type recordReads struct {
	mu sync.Mutex
	m  map[string]*recordRead // by Client ID
}

// recordRead is one read of a Client's record hash.
type recordRead struct {
	sent time.Time
	done chan struct{} // closed once recs and err are set
	recs []recordAt    // by field; shared: not changed once done
	err  error
}

// join returns the read of the Client id's hash that a look may share:
// one sent less than fresh ago, other than ended (a read whose sender's
// context ended), or a new one that the caller must send (mine).
func (rr *recordReads) join(id string, fresh time.Duration, ended *recordRead) (r *recordRead, mine bool) {
	now := time.Now()
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if r := rr.m[id]; r != nil && r != ended && now.Sub(r.sent) < fresh {
		return r, false
	}
	if rr.m == nil {
		rr.m = make(map[string]*recordRead)
	}
	r = &recordRead{sent: now, done: make(chan struct{})}
	rr.m[id] = r
	return r, true
}

// forget drops r, unless a later read of id replaced it.
func (rr *recordReads) forget(id string, r *recordRead) {
	rr.mu.Lock()
	if rr.m[id] == r {
		delete(rr.m, id)
	}
	rr.mu.Unlock()
}

// readRecords returns the records of the Client id's hash, from a read
// another look of the Client shares (see recordReads) or its own; nil
// when the read failed or the look's context ended (the look is then
// over when that read had no reply).
func (d *detector) readRecords(id string) []recordAt {
	fresh := min(RecordsFresh, d.c.waits.after/10)
	var ended *recordRead
	for {
		r, mine := d.c.recordReads.join(id, fresh, ended)
		if mine {
			return d.sendRead(id, r, fresh)
		}
		select {
		case <-r.done:
		case <-d.ctx.Done():
			d.full = true
			return nil
		}
		if r.err == nil {
			return r.recs
		}
		if !senderEnded(r.err) || d.ctx.Err() != nil {
			d.unread(r.err)
			return nil
		}
		// The look that sent the read ended (its call's context), not
		// the read: this look reads the hash itself.
		ended = r
	}
}

// sendRead reads the Client id's record hash into r, which other looks
// may share until it is fresh no more (each read forgets itself then,
// or at once when it failed).
func (d *detector) sendRead(id string, r *recordRead, fresh time.Duration) []recordAt {
	c := d.c
	key := waitrec.Key(c.prefix, id)
	m, err := c.RDB.Do(d.ctx, c.RDB.B().Hgetall().Key(key).Build()).AsStrMap()
	if err != nil {
		if _, ok := rueidis.IsRedisErr(err); ok {
			err, m = nil, nil // not a hash: no records
		}
	}
	fields := make([]string, 0, len(m))
	for f := range m {
		fields = append(fields, f)
	}
	sort.Strings(fields)
	for _, f := range fields {
		if rec, derr := waitrec.Decode(m[f]); derr == nil {
			r.recs = append(r.recs, recordAt{key: key, field: f, value: m[f], rec: rec})
		}
	}
	r.err = err
	close(r.done)
	forget := func() { c.recordReads.forget(id, r) }
	if err != nil {
		// No reply: the next look reads again.
		forget()
		d.unread(err)
		return nil
	}
	// Not kept once stale, when no later read replaces it.
	time.AfterFunc(fresh-time.Since(r.sent), forget)
	return r.recs
}

// senderEnded reports whether err is a read's error that its sender's
// context ended, not the read.
func senderEnded(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// waitEdge is one edge of the wait-for graph: a wait (its record) for a
// name, and one holder of that name.
type waitEdge struct {
	wait   recordAt
	holder holding
}

// rid names a record in the graph: its hash and field.
func (r recordAt) rid() string { return r.key + "\x00" + r.field }

// edgesOf returns the edges of the wait r: to each holder of the name it
// waits for, except a read hold under a read wait (a reader keeps no
// reader out: the wait has ended with a grant, and its record outlives it
// by a moment) and r's own owner (a re-entry, a grant not seen yet, or a
// record that outlives its wait), unless r's owner reads the name and r
// waits for its write side (an upgrade, which waits for itself).
func (d *detector) edgesOf(r recordAt) []waitEdge {
	var out []waitEdge
	for _, h := range d.holdersOf(r.rec.Name) {
		if h.read && r.rec.Kind == observe.KindRead {
			continue
		}
		if h.owner == r.rec.Owner && !(h.read && r.rec.Kind == observe.KindWrite) {
			continue
		}
		out = append(out, waitEdge{wait: r, holder: h})
	}
	return out
}

// explore reads the wait-for graph reachable from self's owner: for each
// owner, the edges of its waits (self's own wait among its owner's,
// whether or not the read found its record). It returns nil when the
// graph is larger than a look may read, or the look's context ended.
func (d *detector) explore(self recordAt) map[string][]waitEdge {
	graph := map[string][]waitEdge{self.rec.Owner: nil}
	queue := []string{self.rec.Owner}
	for len(queue) > 0 {
		o := queue[0]
		queue = queue[1:]
		waits := d.waitsOf(o)
		if o == self.rec.Owner && !slices.ContainsFunc(waits, func(r recordAt) bool { return r.rid() == self.rid() }) {
			waits = append(waits, self)
		}
		for _, r := range waits {
			for _, e := range d.edgesOf(r) {
				graph[o] = append(graph[o], e)
				if _, ok := graph[e.holder.owner]; !ok {
					graph[e.holder.owner] = nil
					queue = append(queue, e.holder.owner)
				}
			}
		}
	}
	if d.over() {
		return nil
	}
	return graph
}

// component is the strongly connected set of owners of graph that holds
// owner: every owner of graph is reached from owner, so those that reach
// it back.
func component(graph map[string][]waitEdge, owner string) map[string]bool {
	back := map[string][]string{}
	for o, es := range graph {
		for _, e := range es {
			back[e.holder.owner] = append(back[e.holder.owner], o)
		}
	}
	scc := map[string]bool{owner: true}
	stack := []string{owner}
	for len(stack) > 0 {
		o := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, p := range back[o] {
			if !scc[p] {
				scc[p] = true
				stack = append(stack, p)
			}
		}
	}
	return scc
}

// acyclic reports whether the edges of graph between the owners of scc,
// without those of the wait whose rid is without, make no cycle.
func acyclic(graph map[string][]waitEdge, scc map[string]bool, without string) bool {
	const (
		walking = 1
		done    = 2
	)
	state := map[string]int{}
	var visit func(o string) bool
	visit = func(o string) bool {
		state[o] = walking
		for _, e := range graph[o] {
			if !scc[e.holder.owner] || e.wait.rid() == without {
				continue
			}
			switch state[e.holder.owner] {
			case walking:
				return false
			case 0:
				if !visit(e.holder.owner) {
					return false
				}
			}
		}
		state[o] = done
		return true
	}
	for o := range scc {
		if state[o] == 0 && !visit(o) {
			return false
		}
	}
	return true
}

// victimOf is the wait that ends the cycles of the strongly connected set
// of owners scc: of the waits with an edge inside it, the youngest whose
// end leaves no cycle in it (where cycles overlap, as through several
// readers of a name, a wait that they all share), else the youngest. Every
// member of the set reads the same graph of it (all of them reach the
// same owners), so each names the same victim.
func victimOf(graph map[string][]waitEdge, scc map[string]bool) (recordAt, bool) {
	var waits []recordAt
	seen := map[string]bool{}
	for o := range scc {
		for _, e := range graph[o] {
			if scc[e.holder.owner] && !seen[e.wait.rid()] {
				seen[e.wait.rid()] = true
				waits = append(waits, e.wait)
			}
		}
	}
	if len(waits) == 0 {
		return recordAt{}, false
	}
	sort.Slice(waits, func(i, j int) bool { return younger(waits[i], waits[j]) })
	for _, w := range waits {
		if acyclic(graph, scc, w.rid()) {
			return w, true
		}
	}
	return waits[0], true
}

// cycleThrough returns a cycle of graph inside scc whose first edge is
// the wait self's: from a holder of what it waits for, the shortest path
// back to its owner.
func cycleThrough(graph map[string][]waitEdge, scc map[string]bool, self recordAt) []CycleEdge {
	for _, first := range graph[self.rec.Owner] {
		if first.wait.rid() != self.rid() || !scc[first.holder.owner] {
			continue
		}
		from := map[string]waitEdge{}
		seen := map[string]bool{first.holder.owner: true}
		queue := []string{first.holder.owner}
		for len(queue) > 0 && !seen[self.rec.Owner] {
			o := queue[0]
			queue = queue[1:]
			for _, e := range graph[o] {
				if scc[e.holder.owner] && !seen[e.holder.owner] {
					seen[e.holder.owner] = true
					from[e.holder.owner] = e
					queue = append(queue, e.holder.owner)
				}
			}
		}
		if !seen[self.rec.Owner] {
			continue
		}
		var back []CycleEdge
		for o := self.rec.Owner; o != first.holder.owner; {
			e := from[o]
			back = append(back, CycleEdge{Wait: e.wait, Holder: e.holder.owner, HolderField: e.holder.field})
			o = e.wait.rec.Owner
		}
		cycle := []CycleEdge{{Wait: self, Holder: first.holder.owner, HolderField: first.holder.field}}
		for i := len(back) - 1; i >= 0; i-- {
			cycle = append(cycle, back[i])
		}
		return cycle
	}
	return nil
}

// find returns a cycle through self's wait, its first edge self's, when
// self's wait is the victim of its strongly connected set of owners (see
// victimOf), and nil otherwise.
//
// A look that read its own Client's waits from the book and found a cycle
// looks again, reading them from the Client's hash, and names the victim
// from that: the other Clients' members of the set read the hash, and
// the book differs from it for longer than a moment where a record's
// write was answered with an error (in the hash or not; until a tick
// writes it again: ownWaits then says so, and the hash is read), where a
// delete failed (the record stays until a tick deletes it), and where the
// hash was lost (until a tick writes it again). A victim named from the
// book there would be a second victim, or none.
func (d *detector) find(self recordAt) []CycleEdge {
	graph := d.explore(self)
	if graph == nil {
		return nil
	}
	scc := component(graph, self.rec.Owner)
	v, ok := victimOf(graph, scc)
	if !ok {
		return nil
	}
	if d.fromBook {
		d.fromBook, d.ownRead = false, true
		return d.find(self)
	}
	if v.rid() != self.rid() {
		return nil
	}
	return cycleThrough(graph, scc, self)
}

// younger orders waits youngest first: the greatest since, ties by owner,
// then by record hash and field.
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
	if cycle == nil {
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
	youngest := true
	for _, edge := range e.cycle[1:] {
		if younger(edge.Wait, e.cycle[0].Wait) {
			youngest = false
		}
	}
	if youngest {
		b.WriteString("; this wait, the youngest of the cycle, ends")
	} else {
		// Cycles overlap in this wait (see victimOf).
		b.WriteString("; this wait, which every cycle through these owners shares, ends")
	}
	return b.String()
}

func (e *deadlockError) Is(target error) bool { return target == relock.ErrDeadlock }

// describeOwner names a field's owner and its Client.
func describeOwner(field string) string {
	id, owner := layout.SplitField(field)
	return fmt.Sprintf("owner %q (client %s)", owner, id)
}
