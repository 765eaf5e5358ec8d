package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/lockcore"
)

const topUsage = `Usage: relock [CONNECTION FLAGS] top [--match PATTERN] [--once] [--interval DUR] [--limit N]

A live view of the busiest locks: every --interval (1s) it reads the wait
records (as 'relock waits' does) and the holders of the busiest names, and
shows one line per name, most waiters first, then most acquisitions:

  NAME       the name (without --prefix)
  KIND       what Redis holds under it: lock, fenced, fair, rwlock,
             semaphore, counting (semaphore), rate (limiter), latch; when
             nothing is, what its waiters wait for, or free
  HOLDERS    its first holder's owner (the part after the client ID) and
             "+N" for N more; for a semaphore or rate limiter the permits
             available, for a latch its count
  WAIT       how many calls wait for it (relock's waiters: Redisson's record
             nothing)
  LONGEST    the longest of those waits, on the server's clock
  ACQ/S      acquisitions per second over the last interval
  HAND/S     hand-offs per second: releases while someone waited, which
             give the lock to a waiter

The names shown are those waited for and those released during the last
interval that match --match PATTERN (Redis' glob syntax, against the name
without --prefix); a lock held and released by nobody else, that nobody
waits for, is not busy and not shown.

How the rates are counted. top subscribes (PSUBSCRIBE) to the channels on
which relock and Redisson announce a release: the unlock channel of the
plain, fenced and spin locks (the message that frees the lock), a fair
lock's waiter channels (the release that hands the lock to its first
waiter), a read-write lock's channel (a write release, the last read
release). Acquisitions over an interval are the releases heard, less the
hold that was there at its start (it was one of them), plus the hold there
at its end (taken and not yet released); a fenced lock's acquisitions are
exact, the rise of its fencing counter; a rate limiter's are its grants in
the interval, a semaphore's the permits that were not held at the last
refresh. Hand-offs are the releases heard while the name had waiters
(records at the last refresh), every fair-lock release to a waiter, and
every grant on release (relock's mark "3" on the lock's channel: a
release that wrote the next holder's hold itself and woke nobody).
The numbers are approximate: a lease that ends (a dead holder) announces
nothing; a fair lock released with no waiter announces nothing (a hold
taken and released within one interval is then missed); read holds
released while other readers hold on announce nothing; a counting
semaphore's and a latch's are not counted ("-"); Clients made with
sharded pub/sub (WithShardedPubSub) announce on shard channels, which no
pattern reaches: only the holds seen at each refresh are counted then. The
first frame has no rates yet ("-"). Nothing is written to Redis, and the
server's configuration is never changed.

Each refresh walks the keyspace with SCAN for the wait records (MATCH, so
the server does the filtering): on a keyspace of millions of keys, give a
longer --interval.

On a terminal the view is redrawn in place until q (or Ctrl-C). When
stdout is not a terminal, a frame is printed after each interval, one
after another, until interrupted. --once waits one interval (for the
rates), prints one frame and exits: for scripts and tests.

Exit codes: 0 quit (q, Ctrl-C, or --once done), 64 bad command line, 69
Redis could not be reached (or refused the password, or TLS failed, or
failed while read).`

func (cl *cli) top(args []string) int {
	fs := cl.newConnFlagSet("top", topUsage)
	match := fs.String("match", "", "only names that match PATTERN (Redis glob)")
	once := fs.Bool("once", false, "print one frame (after one interval) and exit")
	interval := fs.duration("interval", time.Second, "time between refreshes")
	limit := fs.Int("limit", 20, "show at most `N` names")
	pos, _, code := cl.parse(fs, args, -1)
	if code >= 0 {
		return code
	}
	if len(pos) != 0 {
		return cl.usageError(fs, "top takes no arguments (got %q); use --match PATTERN", pos)
	}
	if interval.d < 10*time.Millisecond {
		return cl.usageError(fs, "--interval %v is too short (at least 10ms)", interval.d)
	}
	if *limit < 1 {
		return cl.usageError(fs, "--limit %d: give at least 1", *limit)
	}
	if err := lockcore.CheckKeyPrefix(cl.conn.prefix); err != nil {
		return cl.usageError(fs, "--prefix: %v", err)
	}
	rdb, t, code := cl.connect()
	if code >= 0 {
		return code
	}
	// Deferred first, run last: once the context is cancelled and the
	// client closed, the subscription's goroutine ends; top returns after
	// it.
	var listeners sync.WaitGroup
	defer listeners.Wait()
	defer rdb.Close()

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	tp := &topper{rdb: rdb, prefix: cl.conn.prefix, match: *match, limit: *limit, where: t.where,
		interval: interval.d, prev: map[string]*topRow{}, heard: map[string]*heardCount{}, waited: map[string]bool{},
		listening: &listeners}
	listening := tp.listen(ctx)
	select {
	case err := <-listening:
		if err != nil {
			// No pub/sub (an ACL, a proxy): the rates come from the
			// refreshes alone.
			cl.warnf("top: cannot subscribe to the release channels (%v): rates count only what each refresh sees", err)
		}
	case <-time.After(3 * time.Second):
		cl.warnf("top: the subscription to the release channels was not confirmed: rates may miss releases")
	case <-sigs:
		return exitOK
	}

	tty := !*once && isTerminal(cl.stdout)
	var keys <-chan byte
	if tty {
		io.WriteString(cl.stdout, ansiHideCursor)
		defer io.WriteString(cl.stdout, ansiShowCursor)
		if isTerminal(os.Stdin) {
			if restore, err := cbreak(int(os.Stdin.Fd())); err == nil {
				defer restore()
			}
			keys = readKeys(os.Stdin)
		}
	}
	frame := func() (bool, int) {
		rows, err := tp.refresh(ctx)
		if err != nil {
			return false, cl.errorf(exitUnavailable, "top: %v", err)
		}
		text := tp.render(rows, time.Now())
		if tty {
			io.WriteString(cl.stdout, redraw(text))
		} else {
			io.WriteString(cl.stdout, text+"\n")
		}
		return true, -1
	}
	if _, err := tp.refresh(ctx); err != nil { // the start of the first interval
		return cl.errorf(exitUnavailable, "top: %v", err)
	}
	if tty {
		io.WriteString(cl.stdout, "\x1b[H\x1b[2J"+redraw(tp.render(tp.last, time.Now())))
	}
	tick := time.NewTicker(interval.d)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			if ok, code := frame(); !ok {
				return code
			}
			if *once {
				return exitOK
			}
		case k := <-keys:
			if k == 'q' || k == 'Q' {
				return exitOK
			}
		case <-sigs:
			return exitOK
		}
	}
}

// redraw is text drawn over the screen from its top left corner: each
// line clears what is left of the old one, and what is below the text
// is cleared.
func redraw(text string) string {
	return "\x1b[H" + strings.ReplaceAll(text, "\n", "\x1b[K\n") + "\x1b[J"
}

// readKeys passes on the bytes read from f until it fails; the goroutine
// ends with the process (a read of a terminal cannot be interrupted).
func readKeys(f *os.File) <-chan byte {
	keys := make(chan byte, 16)
	go func() {
		var b [16]byte
		for {
			n, err := f.Read(b[:])
			for _, c := range b[:n] {
				select {
				case keys <- c:
				default:
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return keys
}

// topper keeps what top needs from one refresh to the next.
type topper struct {
	rdb           rueidis.Client
	prefix, match string
	where         string
	limit         int
	interval      time.Duration
	listening     *sync.WaitGroup // counts listen's goroutine

	mu     sync.Mutex
	heard  map[string]*heardCount // releases heard since the last refresh, by full name
	waited map[string]bool        // full names with waiters at the last refresh

	prev   map[string]*topRow // the names read at the last refresh
	prevAt time.Time
	last   []*topRow
	nodes  int
	cycles int
}

// heardCount counts what the release channels of one name said.
type heardCount struct {
	releases, handoffs int
}

// topRow is one name in a frame.
type topRow struct {
	*waitedName
	holds     map[string]bool // the holders' fields, or a semaphore's permits
	acq, hand float64
	rated     bool // acq and hand are known
	counted   bool // acq is counted for this kind
}

// releasePatterns are the channels on which releases are announced.
var releasePatterns = []string{layout.ChannelPrefix + ":*", layout.RWLockChannelPrefix + ":*"}

// listen subscribes to the release channels until ctx ends, again a
// second after the subscription ends (a lost connection, a restart); the
// channel it returns says once that the first subscription was confirmed
// (nil) or failed. tp.listening counts its goroutine.
func (tp *topper) listen(ctx context.Context) <-chan error {
	done := make(chan error, 1)
	var once sync.Once
	tp.listening.Add(1)
	go func() {
		defer tp.listening.Done()
		for ctx.Err() == nil {
			confirmed := 0
			hooked := rueidis.WithOnSubscriptionHook(ctx, func(s rueidis.PubSubSubscription) {
				if s.Kind == "psubscribe" {
					if confirmed++; confirmed == len(releasePatterns) {
						once.Do(func() { done <- nil })
					}
				}
			})
			err := tp.rdb.Receive(hooked, tp.rdb.B().Psubscribe().Pattern(releasePatterns...).Build(), tp.heardMessage)
			if ctx.Err() != nil {
				return
			}
			once.Do(func() { done <- fmt.Errorf("subscription ended: %v", err) })
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	return done
}

// heardMessage counts one message on a release channel.
func (tp *topper) heardMessage(m rueidis.PubSubMessage) {
	c, ok := layout.ClassifyChannel(m.Channel)
	if !ok {
		return
	}
	key, handoff := "", false
	switch c.Role {
	case layout.RoleChannel: // "0" frees the lock; "1" is a shorter lease, "2" a wake-one mark, "3" a grant on release (a fair lock's too)
		switch m.Message {
		case layout.UnlockMessage:
		case layout.GrantedMessage: // handed to a waiter of the releasing Client
			handoff = true
		default:
			return
		}
		key = layout.Channel(c.Name)
	case layout.RoleWaiterChannel: // a fair lock handed to its first waiter
		key, handoff = layout.Channel(c.Name), true
	case layout.RoleRWChannel: // "0" the last read release, "1" a write release
		if m.Message != layout.UnlockMessage && m.Message != layout.WakeAllMessage {
			return
		}
		key = layout.RWChannel(c.Name)
	default:
		return
	}
	tp.mu.Lock()
	defer tp.mu.Unlock()
	h := tp.heard[key]
	if h == nil {
		h = &heardCount{}
		tp.heard[key] = h
	}
	h.releases++
	if handoff || tp.waited[key] {
		h.handoffs++
	}
}

// refresh reads the names to show and works out their rates since the
// last refresh; the rows are sorted, busiest first.
func (tp *topper) refresh(ctx context.Context) ([]*topRow, error) {
	ws, err := readWaiters(ctx, tp.rdb, nil)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tp.mu.Lock()
	heard := tp.heard
	tp.heard = map[string]*heardCount{}
	tp.mu.Unlock()

	// The candidates: names waited for, and names released.
	byName := map[string][]*waiter{}
	var names []string
	for _, w := range ws.waiters {
		if _, ok := byName[w.name]; !ok {
			names = append(names, w.name)
		}
		byName[w.name] = append(byName[w.name], w)
	}
	// A channel "...:{x}" is derived from the name x and from the name
	// {x} alike: the name waited for, when one is, else x.
	releasedNames := map[string]int{}
	for key, h := range heard {
		m, ok := layout.ClassifyChannel(key)
		if !ok {
			continue
		}
		name := m.Name
		if _, waited := byName[m.Alt]; m.Alt != "" && waited {
			name = m.Alt
		}
		releasedNames[name] += h.releases
	}
	for name := range releasedNames {
		if _, ok := byName[name]; !ok {
			names = append(names, name)
			byName[name] = nil
		}
	}
	type cand struct {
		full, shown string
		waiters     int
		released    int
	}
	var cands []cand
	for _, full := range names {
		shown, ok := shownName(full, tp.prefix, tp.match)
		if !ok {
			continue
		}
		cands = append(cands, cand{full, shown, len(byName[full]), releasedNames[full]})
	}
	sort.Slice(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if a.waiters != b.waiters {
			return a.waiters > b.waiters
		}
		if a.released != b.released {
			return a.released > b.released
		}
		return a.shown < b.shown
	})
	if len(cands) > tp.limit {
		cands = cands[:tp.limit]
	}
	rows := make([]*topRow, 0, len(cands))
	var read []*waitedName
	next := map[string]*topRow{}
	waited := map[string]bool{}
	elapsed := now.Sub(tp.prevAt).Seconds()
	for _, c := range cands {
		n, err := readWaited(ctx, tp.rdb, c.full, c.shown, byName[c.full])
		if err != nil {
			return nil, err
		}
		read = append(read, n)
		r := &topRow{waitedName: n, holds: holdsOf(n)}
		h := heard[layout.Channel(c.full)]
		if h == nil {
			h = heard[layout.RWChannel(c.full)]
		}
		if h == nil {
			h = &heardCount{}
		}
		if !tp.prevAt.IsZero() && elapsed > 0 {
			acq, counted := acquisitions(tp.prev[c.full], r, h.releases, tp.prevAt, now)
			r.acq, r.hand, r.rated, r.counted = float64(acq)/elapsed, float64(h.handoffs)/elapsed, true, counted
		}
		rows = append(rows, r)
		next[c.full] = r
		if len(n.Waiters) > 0 {
			waited[layout.Channel(c.full)], waited[layout.RWChannel(c.full)] = true, true
		}
	}
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if len(a.Waiters) != len(b.Waiters) {
			return len(a.Waiters) > len(b.Waiters)
		}
		return a.acq > b.acq
	})
	tp.mu.Lock()
	tp.waited = waited
	tp.mu.Unlock()
	tp.prev, tp.prevAt, tp.last, tp.nodes = next, now, rows, ws.nodes
	tp.cycles = len(findCycles(edgesOf(read)))
	return rows, nil
}

// holdsOf are the holds of a name: its holders' fields, or a semaphore's
// permits, or a rate limiter's grants.
func holdsOf(n *waitedName) map[string]bool {
	out := map[string]bool{}
	for _, h := range n.Holders {
		out[h.Field] = true
	}
	switch st := n.state.(type) {
	case *semState:
		for _, p := range st.Held {
			out[p.PermitID] = true
		}
	case *rateState:
		for _, g := range st.Grants {
			out[fmt.Sprintf("%s@%d", g.ID, g.AtMs)] = true
		}
	}
	return out
}

// acquisitions estimates the acquisitions of r's name between the refresh
// prev (nil when the name was not read then) and now, with the releases
// heard in between; counted is false for the kinds it does not count.
func acquisitions(prev, r *topRow, released int, prevAt, now time.Time) (n int, counted bool) {
	switch st := r.state.(type) {
	case *rateState:
		for _, g := range st.Grants {
			if g.AtMs > prevAt.UnixMilli() {
				n += int(g.Permits)
			}
		}
		return n, true
	case *semState:
		if prev == nil {
			return 0, true
		}
		for p := range r.holds {
			if !prev.holds[p] {
				n++
			}
		}
		return n, true
	case *lockState, *rwState:
	case nil: // nothing under the name: a lock, free at the refresh
		if r.Error != "" {
			return 0, false
		}
	default:
		return 0, false
	}
	if prev == nil {
		return released, true
	}
	if r.fencing != nil && prev.fencing != nil {
		return int(*r.fencing - *prev.fencing), true
	}
	// Each release heard ended a hold: the one there at the last refresh
	// (if any) or one taken since; the hold there now was taken since
	// unless it is the one of the last refresh and nothing was released.
	heldBefore, heldNow := len(prev.holds) > 0, len(r.holds) > 0
	n = released
	if heldBefore && released > 0 {
		n--
	}
	fresh := 0
	for f := range r.holds {
		if !prev.holds[f] {
			fresh++
		}
	}
	if heldNow && (released > 0 || fresh > 0) {
		n++
	}
	return max(n, fresh), true
}

// render is a frame of rows at now, for people: lines under 80 columns
// for names up to 24 characters.
func (tp *topper) render(rows []*topRow, now time.Time) string {
	var b strings.Builder
	scope := "every name"
	if tp.match != "" {
		scope = fmt.Sprintf("names matching %q", tp.match)
	}
	if tp.prefix != "" {
		scope += fmt.Sprintf(" under %q", tp.prefix)
	}
	fmt.Fprintf(&b, "relock top  %s  %s on %d node(s)  every %v  %s\n", tp.where, scope, tp.nodes, tp.interval, now.Format("15:04:05"))
	fmt.Fprintf(&b, "%-24s %-10s %-16s %4s %8s %7s %7s\n", "NAME", "KIND", "HOLDERS", "WAIT", "LONGEST", "ACQ/S", "HAND/S")
	waiting := 0
	for _, r := range rows {
		waiting += len(r.Waiters)
		kind := topKind(r.Kind)
		if kind == "" { // nothing under the name: free, a lock by its waiters
			if kind = r.waiterKind(); kind == "" {
				kind = "free"
			}
		}
		longest, acq, hand := "-", "-", "-"
		if len(r.Waiters) > 0 {
			longest = ms(r.LongestWaitMs)
		}
		if r.rated {
			hand = fmt.Sprintf("%.1f", r.hand)
			if r.counted {
				acq = fmt.Sprintf("%.1f", r.acq)
			}
		}
		fmt.Fprintf(&b, "%-24s %-10s %-16s %4d %8s %7s %7s\n", r.Name, clipTo(kind, 10), clipTo(holdersText(r.waitedName), 16),
			len(r.Waiters), longest, acq, hand)
	}
	switch {
	case len(rows) == 0:
		b.WriteString("nothing waited for or released in the last interval\n")
	default:
		fmt.Fprintf(&b, "%s, %s", plural(int64(len(rows)), "name"), plural(int64(waiting), "waiting call"))
		if tp.cycles > 0 {
			fmt.Fprintf(&b, ", %s among them (relock waits confirms and shows)", plural(int64(tp.cycles), "cycle"))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// topKind is the KIND column: a kind by the name status's --kind gives it.
func topKind(k layout.Kind) string {
	switch k {
	case layout.KindCountingSemaphore:
		return "counting"
	case layout.KindRateLimiter:
		return "rate"
	case layout.KindLatch:
		return "latch"
	}
	return string(k)
}

// holdersText is the HOLDERS column of a name.
func holdersText(n *waitedName) string {
	switch {
	case n.Count != nil:
		return fmt.Sprintf("count %d", *n.Count)
	case n.Available != nil:
		return fmt.Sprintf("%d avail", *n.Available)
	case len(n.Holders) == 0:
		return "-"
	}
	s := n.Holders[0].Owner
	if n.Holders[0].Mode != "" {
		s += "(" + n.Holders[0].Mode[:1] + ")"
	}
	if len(n.Holders) > 1 {
		s = fmt.Sprintf("%s +%d", clipTo(s, 12), len(n.Holders)-1)
	}
	return s
}

// clipTo shortens s to width columns, ending with "…" when cut.
func clipTo(s string, width int) string {
	r := []rune(s)
	if len(r) <= width {
		return s
	}
	return string(r[:width-1]) + "…"
}
