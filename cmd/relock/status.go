package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/layout"
)

const statusUsage = `Usage: relock [CONNECTION FLAGS] status [--json] NAME
       relock [CONNECTION FLAGS] status [--json] --kind KIND NAME

Show what Redis holds about the lock (or synchronizer) NAME, read in one
transaction. KIND is what NAME is; by default it is told from the keys:

  lock       a lock, fenced lock or fair lock: its holders (hash field
             <clientID>:<owner> and hold count) and its remaining lease;
             a fair lock's waiter queue (position, field, and the deadline
             by which the waiter must refresh its place, counted on the
             server's clock); a fenced lock's fencing counter (the last
             token handed out).
  rwlock     a read-write lock (its hash has a "mode" field): the mode, the
             writer, the readers with their hold counts and the remaining
             lease of each read level's key.
  semaphore  a semaphore (a count, with a lease set {NAME}:timeout): the
             permits available, the permits held with their lease, and the
             waiters queued.
  latch      a count-down latch (a count): the count.
  rate       a rate limiter (Redisson's RRateLimiter: a hash with the
             fields rate, interval, type): the rate, the permits left in
             the window and the grants in it, on the server's clock.
  counting   a counting semaphore (Redisson's RSemaphore: a count, and
             relock's record of its recent grants {NAME}:relock_grants):
             the permits available.

Every kind also shows its waiters: the calls of relock Clients that wait
for NAME, from the wait records the Clients keep while they wait (see
'relock waits'), longest wait first: owner field, what each waits for
(lock, fenced, fair, spin, read, write, semaphore, counting_semaphore,
rate_limiter, latch) and for how long, on the server's clock. They are
found with a SCAN of every master for the records (relock_waits:{*}), which
on a large keyspace takes a while: --no-waiters skips it. Redisson's
waiters record nothing.

Only what NAME has is shown: a fair lock is told by its queue, a fenced
lock by its fencing counter (a fair lock nobody waits for shows as a
lock), a counting semaphore by grants made in the last 10s. A count
alone is a semaphore with no permit held, a counting semaphore or a
latch; it is shown as any of them unless --kind says which.

When nothing at all is under NAME (no key of any kind), status says "no
such lock" and exits 4. A free lock that is neither fenced nor fair keeps
nothing in Redis, and neither does an open latch: they look the same.

--json prints one object. For a lock, with these stable fields:
  name, kind ("lock", "fenced" or "fair"), locked, lease_remaining_ms
  (0: free, -1: no expiry), holders[]{field, client_id, owner, hold_count},
  queue[]{position, field, client_id, owner, deadline_ms, remaining_ms},
  fencing_counter (null if never used), server_time_ms,
  keys{lock, queue, timeout, token, channel}
Every kind has waiters[]{field, client_id, owner, kind, since_ms,
waiting_ms} (empty with --no-waiters).
For the others, "kind" ("rwlock", "semaphore", "latch",
"counting_semaphore", "rate_limiter", or "counter" for a count that may be a semaphore's,
a latch's or a counting semaphore's) and:
  rwlock:    name, locked, mode ("read", "write", "" when free),
             lease_remaining_ms, writer{field, client_id, owner, hold_count}
             (null when none), readers[]{field, client_id, owner, hold_count,
             levels[]{level, key, remaining_ms (-2: the key is gone)}},
             keys{lock, channel}
  semaphore: name, set (false: never set), available,
             held[]{permit_id, lease_end_ms, remaining_ms (null: no lease),
             client_id, owner (who took it; "" for a permit of Redisson's)},
             queue[]{position, permit_id, joined_ms, deadline_ms},
             server_time_ms, keys{available, leases, channel, queue,
             queue_timeout, holders}
  latch:     name, count, open, keys{count, channel}
  rate_limiter: name, set, rate, interval_ms, type ("overall" or
             "per_client"), keep_alive_ms, available (null for per_client),
             grants[]{id, permits, at_ms, leaves_in_ms}, server_time_ms,
             keys{config, value, permits, channel}
  counting_semaphore: name, set (false: never set), available (below 0
             when more were taken away than were free), grants (recent
             acquisitions relock remembers), keys{count, grants, channel}
  counter:   name, value, keys{count}

Exit codes: 0 NAME is there (held or not), 1 the key is none of these (or
not the KIND asked for), 4 no such lock: nothing under NAME, 64 bad command
line, 69 Redis could not be reached (or refused the password, or TLS
failed).`

// statusKinds are the values of --kind, and the kinds of layout each
// covers.
var statusKinds = map[string][]layout.Kind{
	"auto":      nil,
	"lock":      {layout.KindLock, layout.KindFenced, layout.KindFair},
	"rwlock":    {layout.KindRWLock},
	"semaphore": {layout.KindSemaphore},
	"latch":     {layout.KindLatch},
	"counting":  {layout.KindCountingSemaphore},
	"rate":      {layout.KindRateLimiter},
}

func (cl *cli) status(args []string) int {
	fs := cl.newConnFlagSet("status", statusUsage)
	asJSON := fs.Bool("json", false, "print JSON instead of text")
	noWaiters := fs.Bool("no-waiters", false, "do not look for the waiters' records (a SCAN of the keyspace)")
	kindFlag := fs.String("kind", "auto", "what NAME is: auto, lock, rwlock, semaphore, latch, counting or rate")
	pos, _, code := cl.parse(fs, args, -1)
	if code >= 0 {
		return code
	}
	if len(pos) != 1 {
		return cl.usageError(fs, "status needs exactly one lock NAME (got %d arguments)", len(pos))
	}
	// Under --prefix, NAME is read as prefix+NAME, the name shown.
	name, err := cl.conn.lockName(pos[0])
	if err != nil {
		return cl.usageError(fs, "%v", err)
	}
	want, known := statusKinds[*kindFlag]
	if !known {
		return cl.usageError(fs, "unknown --kind %q (auto, lock, rwlock, semaphore, latch, counting or rate)", *kindFlag)
	}
	rdb, _, code := cl.connect()
	if code >= 0 {
		return code
	}
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	st, err := readStatus(ctx, rdb, name, want)
	switch {
	case errors.Is(err, errNoSuchLock):
		waiting := ""
		if !*noWaiters {
			ws, err := readWaiters(ctx, rdb, func(n string) bool { return n == name })
			switch {
			case err != nil:
			case len(ws.waiters) == 1:
				waiting = "; yet a call waits for it ('relock waits' shows it)"
			case len(ws.waiters) > 1:
				waiting = fmt.Sprintf("; yet %d calls wait for it ('relock waits' shows them)", len(ws.waiters))
			}
		}
		return cl.errorf(exitNoSuchLock, "no such lock: nothing in Redis under %q (no key of any kind; "+
			"a free lock that is neither fenced nor fair, or an open latch, keeps none)%s", name, waiting)
	case errors.Is(err, errNotALock):
		return cl.errorf(exitFailure, "%v", err)
	case err != nil:
		return cl.errorf(exitUnavailable, "%v", err)
	}
	if !*noWaiters {
		wctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		ws, err := readWaiters(wctx, rdb, func(n string) bool { return n == name })
		if err != nil {
			return cl.errorf(exitUnavailable, "reading the waiters' records: %v", err)
		}
		setWaiters(st, ws.waiters)
	}
	if *asJSON {
		enc := json.NewEncoder(cl.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(st); err != nil {
			return cl.errorf(exitFailure, "%v", err)
		}
		return exitOK
	}
	writeState(cl.stdout, st)
	return exitOK
}

// errNoSuchLock: no key of any kind is under the name.
var errNoSuchLock = errors.New("no such lock")

// readStatus reads everything under name in one transaction (one more for
// a read-write lock's read levels) and returns the state of the kind it
// finds: a *lockState, *rwState, *semState, *countingState or
// *latchState. want, when not
// empty, is the kinds the caller says name is: another kind found is an
// error matching errNotALock, and a count is read as want's. The error
// matches errNoSuchLock when nothing is there.
func readStatus(ctx context.Context, rdb rueidis.Client, name string, want []layout.Kind) (any, error) {
	s, err := readSnapshot(ctx, rdb, name, layout.KeysOf(name))
	if err != nil {
		return nil, err
	}
	kind, err := detect(s)
	if err != nil {
		return nil, err
	}
	if kind == "" {
		return nil, errNoSuchLock
	}
	if kind == kindCounter && len(want) == 1 {
		kind = want[0] // a semaphore's count or a latch's, as the caller says
	}
	if len(want) > 0 && !slices.Contains(want, kind) {
		return nil, fmt.Errorf("%q is a %s, not a %s: %w", name, noun(kind), noun(want[0]), errNotALock)
	}
	switch kind {
	case layout.KindRWLock:
		return readRWState(ctx, rdb, s)
	case layout.KindSemaphore:
		return semStateOf(s)
	case layout.KindCountingSemaphore:
		return countingStateOf(s)
	case layout.KindRateLimiter:
		return rateStateOf(s), nil
	case layout.KindLatch, kindCounter:
		return latchStateOf(s, kind == kindCounter)
	}
	return lockStateOf(s, kind)
}

// writeState prints a state of readStatus for people.
func writeState(w io.Writer, st any) {
	switch st := st.(type) {
	case *lockState:
		writeLock(w, st)
	case *rwState:
		writeRW(w, st)
	case *semState:
		writeSem(w, st)
	case *latchState:
		writeLatch(w, st)
	case *countingState:
		writeCounting(w, st)
	case *rateState:
		writeRate(w, st)
	}
	writeWaiters(w, waitersOf(st))
}

// setWaiters puts ws in a state of readStatus.
func setWaiters(st any, ws []*waiter) {
	if ws == nil {
		ws = []*waiter{}
	}
	switch st := st.(type) {
	case *lockState:
		st.Waiters = ws
	case *rwState:
		st.Waiters = ws
	case *semState:
		st.Waiters = ws
	case *latchState:
		st.Waiters = ws
	case *countingState:
		st.Waiters = ws
	case *rateState:
		st.Waiters = ws
	}
}

// waitersOf are the waiters of a state of readStatus.
func waitersOf(st any) []*waiter {
	switch st := st.(type) {
	case *lockState:
		return st.Waiters
	case *rwState:
		return st.Waiters
	case *semState:
		return st.Waiters
	case *latchState:
		return st.Waiters
	case *countingState:
		return st.Waiters
	case *rateState:
		return st.Waiters
	}
	return nil
}
