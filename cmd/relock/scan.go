package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/relock-go/relock/internal/lockcore"
)

const scanUsage = `Usage: relock [CONNECTION FLAGS] scan [--match PATTERN] [--json]

Walk the keyspace with SCAN (never KEYS; on a Redis Cluster, on every
master) and list every lock relock or Redisson keeps there: reentrant and
fenced locks, fair locks (queue and deadlines), read-write locks,
permit-expirable semaphores, counting semaphores, rate limiters,
count-down latches, with their holders, hold counts and TTL. Keys of other layouts are
ignored.

It flags leaks, the states nothing will ever clean up:
  - a lock hash without a TTL: a holder that crashed never lets it go;
  - a fair-lock waiter past its deadline (on the server's clock) or without
    one: it blocks the queue until it reaches the head;
  - an unlock latch (redisson_unlock_latch:{NAME}:ID, written by Redisson),
    a read-lock timeout key or a counting semaphore's grants without a TTL.

--match PATTERN selects lock names (not keys) with Redis' glob syntax
(* ? [abc] [^a-z] \x): --match 'orders:*' finds the lock orders:42 with its
queue, latches and fencing counter.

A count-down latch, a counting semaphore, and a semaphore with no permit
out, is a plain integer key like any counter: scan finds one only while
someone waits on it (its channel has subscribers), or, for a counting
semaphore, within 10s of a relock acquisition (its grants key). A count
with waiters on the semaphore channel and no lease set is shown as a
counting semaphore (a semaphore with no permit out looks the same).

--json prints one object per lock, one per line, with the stable fields
  name, kind (lock, fenced, fair, rwlock, semaphore, countdownlatch,
  counting_semaphore, rate_limiter),
  ttl_ms (-1: no TTL, or no lock key), holders[]{field, client_id, owner,
  hold_count, role, lease_ms}, leaked, leaks[], keys[], node, and, by kind,
  mode, queue[]{position, field, deadline_ms, remaining_ms},
  fencing_counter, permits_available, count.

Exit codes: 0 nothing flagged, 1 a leak was flagged, 64 bad command line,
69 Redis could not be reached (or refused the password, or TLS failed, or
failed during the scan).`

func (cl *cli) scan(args []string) int {
	fs := cl.newConnFlagSet("scan", scanUsage)
	match := fs.String("match", "", "only locks whose name matches PATTERN (Redis glob)")
	asJSON := fs.Bool("json", false, "print one JSON object per lock, one per line")
	pos, _, code := cl.parse(fs, args, -1)
	if code >= 0 {
		return code
	}
	if len(pos) != 0 {
		return cl.usageError(fs, "scan takes no arguments (got %q); use --match PATTERN", pos)
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
	res, err := scanLocks(ctx, rdb, *match, cl.conn.prefix)
	if err != nil {
		return cl.errorf(exitUnavailable, "scan: %v", err)
	}
	leaked := 0
	for _, e := range res.locks {
		if e.Leaked {
			leaked++
		}
	}
	if *asJSON {
		enc := json.NewEncoder(cl.stdout)
		for _, e := range res.locks {
			if err := enc.Encode(e); err != nil {
				return cl.errorf(exitFailure, "%v", err)
			}
		}
	} else {
		writeScan(cl.stdout, res)
		fmt.Fprintf(cl.stdout, "%d keys scanned on %d node(s): %d lock(s), %d leaked\n",
			res.keys, res.nodes, len(res.locks), leaked)
	}
	if leaked > 0 {
		return exitFailure
	}
	return exitOK
}
