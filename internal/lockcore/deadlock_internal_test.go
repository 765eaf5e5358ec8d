package lockcore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/waitrec"
)

// The deadlock detector against a model: owners of several Clients, each
// holding names and waiting for at most one (an owner is one thread of
// control), written into Redis as the lock hashes and the wait record
// hashes are; each waiting owner looks once, as its wait would. The model
// says which waits are on a cycle and which of each cycle is its victim:
// exactly the victims end, and a look whose cycle changed between its
// reads (a record deleted or rewritten, a hold released) ends nothing.

type dlOwner struct {
	client string
	field  string // "<clientID>:<owner>"
	wait   *dlWait
}

type dlWait struct {
	name  string
	kind  string
	field string // the record's field in its Client's hash
	since int64
	key   string
	value string
}

type dlModel struct {
	owners  []*dlOwner
	holders map[string][]dlHold // by name
	rw      map[string]bool
	names   []string
}

type dlHold struct {
	owner int
	read  bool
}

// holderField is h's field in the hash of name.
func (m *dlModel) holderField(name string, h dlHold) string {
	f := m.owners[h.owner].field
	if m.rw[name] && !h.read {
		f += layout.WriteSuffix
	}
	return f
}

// genModel makes a model: n owners on k Clients, each holding one name of
// its own (some read-write: the read side, or the write side), some
// holding a second; most waiting for a random name, some for their own
// read-write name's write side (an upgrade).
func genModel(rng *rand.Rand, prefix string, shared bool) *dlModel {
	m := &dlModel{holders: map[string][]dlHold{}, rw: map[string]bool{}}
	k := 1 + rng.IntN(4)
	clients := make([]string, k)
	for i := range clients {
		clients[i] = uuid.NewString()
	}
	n := 2 + rng.IntN(18)
	newName := func() string {
		name := fmt.Sprintf("%sn%d", prefix, len(m.names))
		m.names = append(m.names, name)
		return name
	}
	for i := range n {
		c := clients[rng.IntN(k)]
		o := &dlOwner{client: c, field: layout.Field(c, fmt.Sprintf("o%d", i))}
		m.owners = append(m.owners, o)
		for range 1 + rng.IntN(2) {
			name := newName()
			h := dlHold{owner: i}
			if rng.IntN(4) == 0 {
				m.rw[name] = true
				h.read = rng.IntN(2) == 0
			}
			m.holders[name] = append(m.holders[name], h)
		}
	}
	newName() // a name no one holds
	if shared {
		// Some read-write names read by several owners: the graph
		// branches.
		for _, name := range m.names {
			hs := m.holders[name]
			if !m.rw[name] || len(hs) != 1 || !hs[0].read {
				continue
			}
			for range rng.IntN(3) {
				if j := rng.IntN(n); j != hs[0].owner {
					m.holders[name] = append(m.holders[name], dlHold{owner: j, read: true})
				}
			}
		}
	}
	seq := map[string]int{}
	for i, o := range m.owners {
		if rng.IntN(10) < 3 {
			continue // not waiting
		}
		var name string
		kind := "lock"
		if rng.IntN(8) == 0 {
			// An upgrade: the owner's own read-write name, if it reads it.
			for _, nm := range m.names {
				if hs := m.holders[nm]; m.rw[nm] && len(hs) == 1 && hs[0].owner == i && hs[0].read {
					name = nm
				}
			}
		}
		if name == "" {
			for {
				name = m.names[rng.IntN(len(m.names))]
				if hs := m.holders[name]; len(hs) == 0 || hs[0].owner != i {
					break
				}
			}
		}
		if m.rw[name] {
			kind = "write"
		}
		seq[o.client]++
		w := &dlWait{name: name, kind: kind, field: fmt.Sprint(seq[o.client]), since: 1000 + rng.Int64N(6),
			key: waitrec.Key("", o.client)}
		w.value = waitrec.Record{Owner: o.field, Name: name, Kind: kind, Since: w.since}.Encode()
		o.wait = w
	}
	return m
}

// genReaders makes a model of cycles that overlap through the readers of
// a read-write name: a writer holds one or two names and waits for the
// name's write side; each of two to four readers of it waits for one of
// the writer's names (a cycle through the writer), or for a name no one
// holds, or not at all; the waits' ages are random.
func genReaders(rng *rand.Rand, prefix string) *dlModel {
	m := &dlModel{holders: map[string][]dlHold{}, rw: map[string]bool{}}
	k := 1 + rng.IntN(3)
	clients := make([]string, k)
	for i := range clients {
		clients[i] = uuid.NewString()
	}
	newName := func() string {
		name := fmt.Sprintf("%sn%d", prefix, len(m.names))
		m.names = append(m.names, name)
		return name
	}
	rw := newName()
	m.rw[rw] = true
	nr := 2 + rng.IntN(3)
	for i := range nr + 1 {
		c := clients[rng.IntN(k)]
		m.owners = append(m.owners, &dlOwner{client: c, field: layout.Field(c, fmt.Sprintf("o%d", i))})
	}
	w := nr // the writer is the last owner
	var held []string
	for range 1 + rng.IntN(2) {
		name := newName()
		m.holders[name] = []dlHold{{owner: w}}
		held = append(held, name)
	}
	for i := range nr {
		m.holders[rw] = append(m.holders[rw], dlHold{owner: i, read: true})
	}
	free := newName()
	seq := map[string]int{}
	wait := func(i int, name, kind string) {
		o := m.owners[i]
		seq[o.client]++
		ww := &dlWait{name: name, kind: kind, field: fmt.Sprint(seq[o.client]), since: 1000 + rng.Int64N(4),
			key: waitrec.Key("", o.client)}
		ww.value = waitrec.Record{Owner: o.field, Name: name, Kind: kind, Since: ww.since}.Encode()
		o.wait = ww
	}
	wait(w, rw, "write")
	for i := range nr {
		switch rng.IntN(6) {
		case 0:
			wait(i, free, "lock")
		case 1:
		default:
			wait(i, held[rng.IntN(len(held))], "lock")
		}
	}
	return m
}

// next is the owner that owner i waits for, or -1: the holder of the name
// it waits for (every name has one holder in the model), itself only for
// an upgrade.
func (m *dlModel) next(i int) int {
	w := m.owners[i].wait
	if w == nil {
		return -1
	}
	hs := m.holders[w.name]
	if len(hs) == 0 {
		return -1
	}
	if hs[0].owner == i && !(hs[0].read && w.kind == "write") {
		return -1
	}
	return hs[0].owner
}

// succ are the owners that owner i waits for: the holders of the name it
// waits for, itself only for an upgrade.
func (m *dlModel) succ(i int) []int {
	w := m.owners[i].wait
	if w == nil {
		return nil
	}
	var out []int
	for _, h := range m.holders[w.name] {
		if h.owner != i || (h.read && w.kind == "write") {
			out = append(out, h.owner)
		}
	}
	return out
}

// onCycle reports whether a path of waits leads from i back to i.
func (m *dlModel) onCycle(i int) bool {
	seen := map[int]bool{}
	stack := m.succ(i)
	for len(stack) > 0 {
		j := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if j == i {
			return true
		}
		if !seen[j] {
			seen[j] = true
			stack = append(stack, m.succ(j)...)
		}
	}
	return false
}

// cycleOf returns the owners of the cycle through i, or nil.
func (m *dlModel) cycleOf(i int) []int {
	cyc := []int{i}
	for j := m.next(i); j >= 0; j = m.next(j) {
		if j == i {
			return cyc
		}
		for _, x := range cyc {
			if x == j {
				return nil // a tail into another cycle
			}
		}
		cyc = append(cyc, j)
	}
	return nil
}

// victimOf is the model's victim of a cycle: the greatest since, then
// owner, then record hash and field.
func (m *dlModel) victimOf(cyc []int) int {
	v := cyc[0]
	for _, i := range cyc[1:] {
		a, b := m.owners[i], m.owners[v]
		switch {
		case a.wait.since != b.wait.since:
			if a.wait.since > b.wait.since {
				v = i
			}
		case a.field != b.field:
			if a.field > b.field {
				v = i
			}
		case a.wait.key != b.wait.key:
			if a.wait.key > b.wait.key {
				v = i
			}
		case a.wait.field > b.wait.field:
			v = i
		}
	}
	return v
}

// sccOf is the strongly connected set of owners through i: those it
// reaches that reach it back (i itself only when it waits for itself).
func (m *dlModel) sccOf(i int) map[int]bool {
	reach := func(from int) map[int]bool {
		seen := map[int]bool{}
		stack := m.succ(from)
		for len(stack) > 0 {
			j := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if !seen[j] {
				seen[j] = true
				stack = append(stack, m.succ(j)...)
			}
		}
		return seen
	}
	scc := map[int]bool{}
	for j := range reach(i) {
		if reach(j)[i] {
			scc[j] = true
		}
	}
	return scc
}

// older orders the waits of owners a and b as the detector does: the
// greatest since first, then owner, record hash and field.
func (m *dlModel) younger(a, b int) bool {
	x, y := m.owners[a], m.owners[b]
	switch {
	case x.wait.since != y.wait.since:
		return x.wait.since > y.wait.since
	case x.field != y.field:
		return x.field > y.field
	case x.wait.key != y.wait.key:
		return x.wait.key > y.wait.key
	}
	return x.wait.field > y.wait.field
}

// sccVictim is the model's victim of a strongly connected set of owners
// with a cycle: of its waits, the youngest whose end leaves no cycle in
// the set, else the youngest; and whether it is not the youngest.
func (m *dlModel) sccVictim(scc map[int]bool) (int, bool) {
	var waits []int
	for i := range scc {
		waits = append(waits, i)
	}
	sort.Slice(waits, func(a, b int) bool { return m.younger(waits[a], waits[b]) })
	for _, v := range waits {
		// Without v's wait, does a cycle remain among the others?
		cyclic := false
		for _, j := range waits {
			if j == v {
				continue
			}
			seen := map[int]bool{}
			var stack []int
			for _, k := range m.succ(j) {
				if scc[k] && k != v {
					stack = append(stack, k)
				}
			}
			for len(stack) > 0 && !cyclic {
				k := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				if k == j {
					cyclic = true
				}
				if seen[k] {
					continue
				}
				seen[k] = true
				for _, x := range m.succ(k) {
					if scc[x] && x != v {
						stack = append(stack, x)
					}
				}
			}
		}
		if !cyclic {
			return v, v != waits[0]
		}
	}
	return waits[0], false
}

func (m *dlModel) write(t *testing.T, rdb rueidis.Client) {
	t.Helper()
	ctx := context.Background()
	var cmds rueidis.Commands
	for name, hs := range m.holders {
		if m.rw[name] {
			mode := "read"
			if !hs[0].read {
				mode = "write"
			}
			cmds = append(cmds, rdb.B().Hset().Key(name).FieldValue().FieldValue("mode", mode).Build())
		}
		for _, h := range hs {
			cmds = append(cmds, rdb.B().Hset().Key(name).FieldValue().FieldValue(m.holderField(name, h), "1").Build())
		}
	}
	for _, o := range m.owners {
		if o.wait != nil {
			cmds = append(cmds, rdb.B().Hset().Key(o.wait.key).FieldValue().FieldValue(o.wait.field, o.wait.value).Build())
		}
	}
	for _, r := range rdb.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			t.Fatal(err)
		}
	}
}

func (m *dlModel) clear(rdb rueidis.Client) {
	keys := append([]string(nil), m.names...)
	for _, o := range m.owners {
		keys = append(keys, waitrec.Key("", o.client))
	}
	rdb.Do(context.Background(), rdb.B().Del().Key(keys...).Build())
}

// TestDeadlockModel: rounds of generated graphs; in each, every waiting
// owner looks once. Only the victim of each cycle ends (none on a tail
// into a cycle, none on a chain), and a victim whose cycle changes between
// its look's reads ends nothing.
func TestDeadlockModel(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	rdb := redistest.Shared(t).Client(t)
	c := lookCore(t, rdb)
	var cycles, ended, broken, tails int
	for round := range 300 {
		m := genModel(rng, fmt.Sprintf("dlmodel:%d:%d:", seed, round), false)
		m.write(t, rdb)
		for i, o := range m.owners {
			if o.wait == nil {
				continue
			}
			cyc := m.cycleOf(i)
			want := cyc != nil && m.victimOf(cyc) == i
			if cyc == nil && m.next(i) >= 0 {
				tails++
			}
			var between func()
			if want && rng.IntN(2) == 0 {
				// Change the cycle between the look's reads: one of its
				// edges goes, or a record is rewritten.
				want = false
				broken++
				j := cyc[rng.IntN(len(cyc))]
				w := m.owners[j].wait
				ctx := context.Background()
				change := rng.IntN(3)
				if j == i {
					// The looking wait's own record is live: it is the
					// one looking.
					change = 2
				}
				switch change {
				case 0: // the wait ended: its record is deleted
					between = func() { rdb.Do(ctx, rdb.B().Hdel().Key(w.key).Field(w.field).Build()) }
				case 1: // the wait ended and another began: a new since
					between = func() {
						v := waitrec.Record{Owner: m.owners[j].field, Name: w.name, Kind: w.kind, Since: w.since + 100}.Encode()
						rdb.Do(ctx, rdb.B().Hset().Key(w.key).FieldValue().FieldValue(w.field, v).Build())
					}
				default: // the holder of the name it waits for released
					h := m.holders[w.name][0]
					between = func() { rdb.Do(ctx, rdb.B().Hdel().Key(w.name).Field(m.holderField(w.name, h)).Build()) }
				}
			}
			self := recordAt{key: o.wait.key, field: o.wait.field, value: o.wait.value,
				rec: waitrec.Record{Owner: o.field, Name: o.wait.name, Kind: o.wait.kind, Since: o.wait.since}}
			got := c.lookFor(t.Context(), self, between) != nil
			if got != want {
				t.Fatalf("round %d, owner %d (%s waits for %s): ended %v, want %v; cycle %v, next %d",
					round, i, o.field, o.wait.name, got, want, cyc, m.next(i))
			}
			if got {
				ended++
			}
			if cyc != nil && m.victimOf(cyc) == i {
				cycles++
			}
			if between != nil {
				// Put the graph back as it was for the other looks.
				m.clear(rdb)
				m.write(t, rdb)
			}
		}
		m.clear(rdb)
	}
	// Graphs that branch (several readers of a name): exactly one wait of
	// each strongly connected set of owners ends, the model's victim (where
	// cycles overlap, a wait they share), and it names a cycle.
	var branched, shared int
	for round := range 300 {
		var m *dlModel
		if round%3 == 2 {
			m = genReaders(rng, fmt.Sprintf("dlmodel:%d:readers:%d:", seed, round))
		} else {
			m = genModel(rng, fmt.Sprintf("dlmodel:%d:shared:%d:", seed, round), true)
		}
		m.write(t, rdb)
		for i, o := range m.owners {
			if o.wait == nil {
				continue
			}
			self := recordAt{key: o.wait.key, field: o.wait.field, value: o.wait.value,
				rec: waitrec.Record{Owner: o.field, Name: o.wait.name, Kind: o.wait.kind, Since: o.wait.since}}
			cycle := c.lookFor(t.Context(), self, nil)
			if cycle != nil && !m.onCycle(i) {
				t.Fatalf("shared round %d, owner %d (%s waits for %s): ended, on no cycle; found %+v",
					round, i, o.field, o.wait.name, cycle)
			}
			want := false
			if m.onCycle(i) {
				v, notYoungest := m.sccVictim(m.sccOf(i))
				want = v == i
				if want && notYoungest {
					shared++
				}
			}
			if (cycle != nil) != want {
				t.Fatalf("shared round %d, owner %d (%s waits for %s): ended %v, want %v; its set %v",
					round, i, o.field, o.wait.name, cycle != nil, want, m.sccOf(i))
			}
			if cycle != nil {
				branched++
				// The cycle it named is one of the model's.
				for k, e := range cycle {
					next := cycle[(k+1)%len(cycle)].Wait.rec.Owner
					if e.Holder != next {
						t.Fatalf("shared round %d: edge %d held by %s, the next wait is %s's", round, k, e.Holder, next)
					}
				}
				if h := m.owners[i].wait; h.name != cycle[0].Wait.rec.Name {
					t.Fatalf("shared round %d: the cycle does not start with the looking wait", round)
				}
				if !sameLast(cycle, o.field) {
					t.Fatalf("shared round %d: the cycle does not end at the looking owner", round)
				}
			}
		}
		m.clear(rdb)
	}
	t.Logf("%d cycles, %d ended, %d changed while read, %d waits on chains that are no cycle; branched graphs: %d ended, %d of them not the youngest of their set",
		cycles, ended, broken, tails, branched, shared)
	if cycles < 50 || broken < 20 || tails < 50 || shared < 15 {
		t.Fatalf("too few cases: %d cycles, %d changed, %d tails, %d overlapping", cycles, broken, tails, shared)
	}
}

// sameLast reports whether the cycle's last edge comes back to owner.
func sameLast(cycle []CycleEdge, owner string) bool {
	return cycle[len(cycle)-1].Holder == owner
}

// ring is a cycle of n owners, each on a Client of its own: owner i holds
// name i and waits for name i+1.
func ring(prefix string, n int) *dlModel {
	m := &dlModel{holders: map[string][]dlHold{}, rw: map[string]bool{}}
	for i := range n {
		c := uuid.NewString()
		m.owners = append(m.owners, &dlOwner{client: c, field: layout.Field(c, "o")})
		name := fmt.Sprintf("%sn%d", prefix, i)
		m.names = append(m.names, name)
		m.holders[name] = []dlHold{{owner: i}}
	}
	for i, o := range m.owners {
		w := &dlWait{name: m.names[(i+1)%n], kind: "lock", field: "1", since: int64(1000 + i), key: waitrec.Key("", o.client)}
		w.value = waitrec.Record{Owner: o.field, Name: w.name, Kind: w.kind, Since: w.since}.Encode()
		o.wait = w
	}
	return m
}

// TestDeadlockLookBounded: a look reads at most maxDetectReads keys (a
// name's hash and a Client's records per owner): a cycle of 30 owners on
// 30 Clients ends its youngest wait; one of 40 is too long to see, and
// ends nothing.
func TestDeadlockLookBounded(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	c := lookCore(t, rdb)
	for _, n := range []int{30, 40} {
		m := ring(fmt.Sprintf("dlring:%d:%d:", time.Now().UnixNano(), n), n)
		m.write(t, rdb)
		ends := 0
		for i, o := range m.owners {
			self := recordAt{key: o.wait.key, field: o.wait.field, value: o.wait.value,
				rec: waitrec.Record{Owner: o.field, Name: o.wait.name, Kind: o.wait.kind, Since: o.wait.since}}
			if c.lookFor(t.Context(), self, nil) != nil {
				ends++
				if i != n-1 {
					t.Errorf("ring of %d: owner %d ended, want the youngest, %d", n, i, n-1)
				}
			}
		}
		m.clear(rdb)
		if want := map[int]int{30: 1, 40: 0}[n]; ends != want {
			t.Errorf("ring of %d: %d waits ended, want %d", n, ends, want)
		}
	}
}

// TestDeadlockReachesOtherCycle: a look reads every owner its wait
// reaches, which can be more than its own cycle: here A and B wait for each
// other (B for the write side of a name that A and C read), and C and D,
// which B reaches through C's read, wait for each other too. Each cycle
// ends its own youngest wait (B's, C's), whatever the other cycle's waits
// are: a look that judged every owner it read as one set would find no
// single wait that ends both cycles, pick the youngest of all (C's) from
// B's and A's looks, and leave A and B waiting for ever.
func TestDeadlockReachesOtherCycle(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	c := lookCore(t, rdb)
	prefix := fmt.Sprintf("dlother:%d:", time.Now().UnixNano())
	m := &dlModel{holders: map[string][]dlHold{}, rw: map[string]bool{}}
	for i := range 4 {
		cl := uuid.NewString()
		m.owners = append(m.owners, &dlOwner{client: cl, field: layout.Field(cl, fmt.Sprintf("o%d", i))})
	}
	const a, b, cc, d = 0, 1, 2, 3
	name := func(s string) string {
		n := prefix + s
		m.names = append(m.names, n)
		return n
	}
	n1, rw, n3, n4 := name("n1"), name("rw"), name("n3"), name("n4")
	m.rw[rw] = true
	m.holders[n1] = []dlHold{{owner: b}}
	m.holders[rw] = []dlHold{{owner: a, read: true}, {owner: cc, read: true}}
	m.holders[n3] = []dlHold{{owner: d}}
	m.holders[n4] = []dlHold{{owner: cc}}
	wait := func(i int, name, kind string, since int64) {
		o := m.owners[i]
		w := &dlWait{name: name, kind: kind, field: "1", since: since, key: waitrec.Key("", o.client)}
		w.value = waitrec.Record{Owner: o.field, Name: name, Kind: kind, Since: since}.Encode()
		o.wait = w
	}
	wait(a, n1, "lock", 1000)
	wait(b, rw, "write", 1001)
	wait(d, n4, "lock", 1002)
	wait(cc, n3, "lock", 1003)
	m.write(t, rdb)
	defer m.clear(rdb)
	want := map[int]bool{b: true, cc: true}
	for i, o := range m.owners {
		self := recordAt{key: o.wait.key, field: o.wait.field, value: o.wait.value,
			rec: waitrec.Record{Owner: o.field, Name: o.wait.name, Kind: o.wait.kind, Since: o.wait.since}}
		if got := c.lookFor(t.Context(), self, nil) != nil; got != want[i] {
			t.Errorf("owner %c: ended %v, want %v", "ABCD"[i], got, want[i])
		}
	}
}

// TestDeadlockSharedReadForgotten: a read of another Client's record hash
// that the looks of a Client share is dropped once stale, even when no
// later look reads that hash again: the Client does not keep another
// Client's records for ever.
func TestDeadlockSharedReadForgotten(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	c := lookCore(t, rdb)
	m := ring(fmt.Sprintf("dlforget:%d:", time.Now().UnixNano()), 2)
	m.write(t, rdb)
	defer m.clear(rdb)
	o := m.owners[0]
	self := recordAt{key: o.wait.key, field: o.wait.field, value: o.wait.value,
		rec: waitrec.Record{Owner: o.field, Name: o.wait.name, Kind: o.wait.kind, Since: o.wait.since}}
	c.lookFor(t.Context(), self, nil)
	reads := func() int {
		c.recordReads.mu.Lock()
		defer c.recordReads.mu.Unlock()
		return len(c.recordReads.m)
	}
	if reads() == 0 {
		t.Fatal("the look shared no read")
	}
	deadline := time.Now().Add(5 * time.Second)
	for reads() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d reads kept after %v", reads(), RecordsFresh)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// lookCore is a Core on rdb for a test's looks, closed when the test ends.
func lookCore(t *testing.T, rdb rueidis.Client) *Core {
	t.Helper()
	c, err := NewCore(Config{RDB: rdb})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestDeadlockSharedReadSenderEnded: a look that joined another look's
// read of a Client's record hash, and whose own context is live, is not
// ended by the end of the sender's context (its caller gave up, or its
// wait limit passed, while the read was on its way): it reads
// the hash itself. A look that took the sender's context error as its own
// ended nothing, and the victim of a cycle waited one more delay, or for
// as long as its looks kept joining reads whose senders ended.
func TestDeadlockSharedReadSenderEnded(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	c := lookCore(t, rdb)
	m := ring(fmt.Sprintf("dlsender:%d:", time.Now().UnixNano()), 2)
	m.write(t, rdb)
	defer m.clear(rdb)
	// Owner 1's wait is the youngest: its look reads owner 0's Client's
	// hash, which another look of the Client is reading (sent in the
	// future: fresh for the whole test, however slow the machine).
	r := &recordRead{sent: time.Now().Add(time.Hour), done: make(chan struct{})}
	c.recordReads.mu.Lock()
	c.recordReads.m = map[string]*recordRead{m.owners[0].client: r}
	c.recordReads.mu.Unlock()
	o := m.owners[1]
	self := recordAt{key: o.wait.key, field: o.wait.field, value: o.wait.value,
		rec: waitrec.Record{Owner: o.field, Name: o.wait.name, Kind: o.wait.kind, Since: o.wait.since}}
	found := make(chan bool)
	go func() { found <- c.lookFor(t.Context(), self, nil) != nil }()
	// The sender's context ends before the reply (its read failed with
	// its context's error).
	r.err = context.Canceled
	close(r.done)
	if !<-found {
		t.Error("the victim's look ended nothing: it took the sender's context error as its own")
	}
}
