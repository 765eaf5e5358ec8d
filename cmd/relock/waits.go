package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/lockcore"
)

const waitsUsage = `Usage: relock [CONNECTION FLAGS] waits [--match PATTERN] [--json]

Show who waits for what, and flag deadlocks. A relock Client records each
call that waits (for a lock, fenced lock, fair lock, spin lock, read or
write lock, semaphore, counting semaphore, rate limiter or latch) in a hash
of its own, relock_waits:{<clientID>} (after the Client's key prefix), once
it has waited 100ms, until the wait ends; a Client that dies leaves
records that expire with its watchdog lease. waits walks every master with
SCAN (never KEYS) for those hashes, then reads what is held under each
name waited for, one name at a time (on a Redis Cluster, names waited for
are on any node).

For each name waited for it shows what the name is, its holders (owner
field <clientID>:<owner> and hold count; for a read-write lock, read or
write), what is left of a semaphore, rate limiter or latch, and its
waiters: owner field, what each waits for, and for how long (on the clock
of the server that keeps the record), longest wait first.

It flags cycles: owners that wait for one another in a ring (A holds X and
waits for Y, while B holds Y and waits for X; rings of any length, across
Clients, processes and kinds). An owner that holds a read lock and waits
for the write lock of the same name waits for itself: a cycle of one. A
cycle is reported only when a second reading of the graph finds every
wait and hold of it again (the same records, the same holders): waits
that began or ended while the graph was read are not taken for one. Each
group of owners that wait for one another is reported once, as the
shortest ring through one of them. Semaphores, counting semaphores, rate
limiters and latches name no owner that holds them: their waiters are
shown, and are in no cycle. Redisson's waiters record nothing: a name
Redisson waits for shows only relock's waiters.

--match PATTERN selects the names shown (Redis' glob syntax, * ? [abc]
\x, against the name without --prefix); cycles are found in the whole
graph and shown when one of their names is.

--json prints one object per line: first one per name waited for, with
the stable fields
  type ("name"), name, kind (lock, fenced, fair, rwlock, semaphore,
  counting_semaphore, rate_limiter, countdownlatch; "" when nothing is
  under the name), mode (rwlock: read or write), holders[]{field,
  client_id, owner, hold_count, mode}, available (semaphores and rate
  limiters), count (latches), waiters[]{field, client_id, owner, kind,
  since_ms, waiting_ms}, longest_wait_ms, in_cycle, error
then one per cycle:
  type ("cycle"), owners[] (the owner fields, in the ring's order),
  edges[]{waiter, name, kind, holder} (waiter waits, a wait of kind, for
  name, held by holder: its hash field, ":write" at the end for a writer)

Exit codes: 0 no cycle, 3 a cycle (a deadlock) was found, 64 bad command
line, 69 Redis could not be reached (or refused the password, or TLS
failed, or failed while read).`

func (cl *cli) waits(args []string) int {
	fs := cl.newConnFlagSet("waits", waitsUsage)
	match := fs.String("match", "", "only names that match PATTERN (Redis glob)")
	asJSON := fs.Bool("json", false, "print one JSON object per line")
	pos, _, code := cl.parse(fs, args, -1)
	if code >= 0 {
		return code
	}
	if len(pos) != 0 {
		return cl.usageError(fs, "waits takes no arguments (got %q); use --match PATTERN", pos)
	}
	if err := lockcore.CheckKeyPrefix(cl.conn.prefix); err != nil {
		return cl.usageError(fs, "--prefix: %v", err)
	}
	rdb, _, code := cl.connect()
	if code >= 0 {
		return code
	}
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	g, err := readGraph(ctx, rdb, cl.conn.prefix, *match)
	if err != nil {
		return cl.errorf(exitUnavailable, "waits: %v", err)
	}
	if *asJSON {
		enc := json.NewEncoder(cl.stdout)
		for _, n := range g.names {
			if err := enc.Encode(n); err != nil {
				return cl.errorf(exitFailure, "%v", err)
			}
		}
		for _, c := range g.cycles {
			if err := enc.Encode(c); err != nil {
				return cl.errorf(exitFailure, "%v", err)
			}
		}
	} else {
		writeWaits(cl.stdout, g)
	}
	if g.bad > 0 {
		cl.warnf("%d wait record(s) could not be read (not relock's format)", g.bad)
	}
	if len(g.cycles) > 0 {
		return exitCycle
	}
	return exitOK
}

// waitGraph is the wait-for graph: the names shown, and the cycles.
type waitGraph struct {
	names   []*waitedName // the names shown
	all     []*waitedName // every name waited for
	cycles  []cycle
	waiters int // waiting calls shown
	nodes   int
	bad     int
}

// readGraph reads the wait records and the holders of every name waited
// for, and finds the cycles, confirmed by a second reading. The names
// shown are those under prefix that match match.
func readGraph(ctx context.Context, rdb rueidis.Client, prefix, match string) (*waitGraph, error) {
	g, err := readGraphOnce(ctx, rdb, prefix, match)
	if err != nil {
		return nil, err
	}
	cs := findCycles(edgesOf(g.all))
	if len(cs) > 0 {
		again, err := readGraphOnce(ctx, rdb, prefix, match)
		if err != nil {
			return nil, err
		}
		cs = confirmed(cs, edgesOf(again.all))
	}
	shown := map[string]*waitedName{}
	for _, n := range g.names {
		shown[n.Name] = n
	}
	for _, c := range cs {
		touches := false
		for _, e := range c.Edges {
			if n := shown[e.Name]; n != nil {
				n.InCycle, touches = true, true
			}
		}
		if touches {
			g.cycles = append(g.cycles, c)
		}
	}
	return g, nil
}

// readGraphOnce reads the graph once.
func readGraphOnce(ctx context.Context, rdb rueidis.Client, prefix, match string) (*waitGraph, error) {
	ws, err := readWaiters(ctx, rdb, nil)
	if err != nil {
		return nil, err
	}
	g := &waitGraph{nodes: ws.nodes, bad: ws.bad}
	for i := 0; i < len(ws.waiters); {
		j := i
		full := ws.waiters[i].name
		for j < len(ws.waiters) && ws.waiters[j].name == full {
			j++
		}
		name, show := shownName(full, prefix, match)
		if !show {
			name = full
		}
		n, err := readWaited(ctx, rdb, full, name, ws.waiters[i:j])
		if err != nil {
			return nil, err
		}
		g.all = append(g.all, n)
		if show {
			g.names = append(g.names, n)
			g.waiters += len(n.Waiters)
		}
		i = j
	}
	return g, nil
}

// writeWaits prints the graph for people.
func writeWaits(w io.Writer, g *waitGraph) {
	var b strings.Builder
	for _, n := range g.names {
		fmt.Fprintf(&b, "%s  %s\n", n.Name, describeWaited(n))
		for _, h := range n.Holders {
			fmt.Fprintf(&b, "  holder %s", h.Field)
			if h.Mode != "" {
				fmt.Fprintf(&b, " (%s)", h.Mode)
			}
			fmt.Fprintf(&b, "  hold count %d\n", h.HoldCount)
		}
		for _, wt := range n.Waiters {
			fmt.Fprintf(&b, "  waiter %s  %s  waiting %s\n", wt.Field, wt.Kind, ms(wt.WaitingMs))
		}
	}
	for _, c := range g.cycles {
		fmt.Fprintf(&b, "CYCLE (a deadlock) of %s:\n", plural(int64(len(c.Owners)), "owner"))
		for _, e := range c.Edges {
			fmt.Fprintf(&b, "  %s waits (%s) for %s, held by %s\n", e.Waiter, e.Kind, e.Name, e.Holder)
		}
	}
	if len(g.names) == 0 {
		fmt.Fprintf(&b, "nobody waits (wait records read on %d node(s))\n", g.nodes)
	} else {
		fmt.Fprintf(&b, "%s for %s on %d node(s), %s\n", plural(int64(g.waiters), "waiting call"),
			plural(int64(len(g.names)), "name"), g.nodes, plural(int64(len(g.cycles)), "cycle"))
	}
	io.WriteString(w, b.String())
}

// describeWaited says what is under a name waited for, on one line.
func describeWaited(n *waitedName) string {
	switch {
	case n.Error != "":
		return "unreadable: " + n.Error
	case n.Kind == "":
		return "free (nothing in Redis under the name)"
	}
	s := noun(n.Kind)
	switch {
	case n.Mode != "":
		s += ", " + n.Mode + " mode"
	case n.Kind == layout.KindRWLock:
		s += ", free"
	case n.Available != nil:
		s += ", " + plural(*n.Available, "permit") + " available"
	case n.Count != nil:
		s += fmt.Sprintf(", count %d", *n.Count)
	case isLockKind(n.Kind) && len(n.Holders) == 0:
		s += ", free"
	}
	return s
}
