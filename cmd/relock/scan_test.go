package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// scanJSON mirrors one line of scan --json; its tags are the stable field
// names.
type scanJSON struct {
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	TTLMs   int64  `json:"ttl_ms"`
	Holders []struct {
		Field     string `json:"field"`
		ClientID  string `json:"client_id"`
		Owner     string `json:"owner"`
		HoldCount int64  `json:"hold_count"`
		Role      string `json:"role"`
		LeaseMs   *int64 `json:"lease_ms"`
	} `json:"holders"`
	Leaked bool     `json:"leaked"`
	Leaks  []string `json:"leaks"`
	Keys   []string `json:"keys"`
	Node   string   `json:"node"`
	Mode   string   `json:"mode"`
	Queue  []struct {
		Position    int    `json:"position"`
		Field       string `json:"field"`
		DeadlineMs  *int64 `json:"deadline_ms"`
		RemainingMs *int64 `json:"remaining_ms"`
	} `json:"queue"`
	FencingCounter *int64 `json:"fencing_counter"`
	Permits        *int64 `json:"permits_available"`
	Count          *int64 `json:"count"`
}

// scanAll runs scan --json on addr and returns its exit code and the locks
// by name.
func scanAll(t *testing.T, addr string, args ...string) (int, map[string]scanJSON) {
	t.Helper()
	r := relock(t, append([]string{"scan", "--json", "--redis", addr}, args...)...)
	require.Contains(t, []int{0, 1}, r.code, "scan exit code\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	out := map[string]scanJSON{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if line == "" {
			continue
		}
		var e scanJSON
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		require.NoError(t, dec.Decode(&e), "scan --json line %q", line)
		assert.NotContains(t, out, e.Name, "lock listed twice")
		out[e.Name] = e
	}
	return r.code, out
}

// do runs a raw command on srv, failing t on an error.
func do(t *testing.T, srv *redistest.Server, args ...string) rueidis.RedisMessage {
	t.Helper()
	m, err := srv.Do(t.Context(), args...)
	require.NoError(t, err, "%v", args)
	return m
}

// serverMs is srv's clock in unix milliseconds.
func serverMs(t *testing.T, srv *redistest.Server) int64 {
	t.Helper()
	m := do(t, srv, "TIME")
	now, err := serverTime(m)
	require.NoError(t, err)
	return now
}

const otherClient = "11111111-2222-3333-4444-555555555555"

// TestScanLayouts creates each layout (the locks relock takes itself; the
// read-write lock, the semaphore, the count-down latch and the unlock
// latch with raw commands, as Redisson writes them) on a server of its
// own, and checks what scan says of each, and that it ignores the rest.
func TestScanLayouts(t *testing.T) {
	srv := redistest.Start(t)
	c := relocktest.ClientOn(t, srv)
	ctx := rlock.WithOwner(t.Context(), "worker-1")

	plain := c.GetLock("orders:42")
	for range 2 {
		require.NoError(t, plain.Lock(ctx))
	}
	fenced := c.GetFencedLock("ledger")
	require.NoError(t, fenced.Lock(ctx))
	freeFenced := c.GetFencedLock("ledger:old")
	require.NoError(t, freeFenced.Lock(ctx))
	require.NoError(t, freeFenced.Unlock(ctx))
	fair := c.GetFairLock("jobs{eu}")
	require.NoError(t, fair.Lock(ctx))
	// A waiter of another client whose deadline is a minute away.
	now := serverMs(t, srv)
	waiter := otherClient + ":queued"
	do(t, srv, "RPUSH", "redisson_lock_queue:jobs{eu}", waiter)
	do(t, srv, "ZADD", "redisson_lock_timeout:jobs{eu}", strconv.FormatInt(now+60000, 10), waiter)

	// Redisson's read-write lock: read mode, two read levels of one
	// thread, each with its timeout key.
	do(t, srv, "HSET", "cache", "mode", "read", otherClient+":7", "2")
	do(t, srv, "PEXPIRE", "cache", "30000")
	for i := 1; i <= 2; i++ {
		do(t, srv, "SET", fmt.Sprintf("{cache}:%s:7:rwlock_timeout:%d", otherClient, i), "1", "PX", "30000")
	}
	// A write-locked one.
	do(t, srv, "HSET", "table", "mode", "write", otherClient+":8:write", "1")
	do(t, srv, "PEXPIRE", "table", "30000")
	// A permit-expirable semaphore: 2 permits left, one out on a lease,
	// one without (raw 16-byte IDs).
	do(t, srv, "SET", "pool", "2")
	do(t, srv, "ZADD", "{pool}:timeout", strconv.FormatInt(now+20000, 10), "\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10",
		"922337203685477", "ABCDEFGHIJKLMNOP")
	// An unlock latch with its TTL, as Redisson writes it after a release.
	do(t, srv, "SET", "redisson_unlock_latch:{orders:42}:0123456789abcdef0123456789abcdef", "0", "PX", "15000")
	// A count-down latch someone waits on.
	sub := srv.Client(t)
	subCtx, stopSub := context.WithCancel(context.Background())
	subscribed := make(chan error, 1)
	go func() {
		subscribed <- sub.Receive(subCtx, sub.B().Subscribe().Channel("redisson_countdownlatch__channel__{start}").Build(),
			func(rueidis.PubSubMessage) {})
	}()
	defer func() { stopSub(); <-subscribed }()
	do(t, srv, "SET", "start", "3")
	waitUntil(t, 5*time.Second, "the latch's subscriber", func() (bool, error) {
		m, err := srv.Do(t.Context(), "PUBSUB", "NUMSUB", "redisson_countdownlatch__channel__{start}")
		if err != nil {
			return false, err
		}
		a, err := m.ToArray()
		if err != nil || len(a) != 2 {
			return false, fmt.Errorf("PUBSUB NUMSUB answered %v, %v", a, err)
		}
		n, err := a[1].AsInt64()
		return n == 1, err
	})

	// relock's wake-one registry: listed with its lock, never a lock alone.
	do(t, srv, "ZADD", "relock_wakers:{orders:42}", strconv.FormatInt(now+3000, 10), otherClient)
	do(t, srv, "ZADD", "relock_wakers:{lonely}", strconv.FormatInt(now+3000, 10), otherClient)

	// Other layouts: ignored.
	do(t, srv, "HSET", "user:1", "name", "ann", "age", "40")
	do(t, srv, "HSET", "stats", otherClient+":x", "not a number")
	do(t, srv, "SET", "visits", "12")
	do(t, srv, "ZADD", "{board}:timeout", "1", "a")
	do(t, srv, "SET", "board", "top")
	do(t, srv, "RPUSH", "redisson_lock_queue:nothing-with-braces-missing", "x")
	do(t, srv, "SET", "redisson_unlock_latch:{x}:not-an-id", "1")

	code, got := scanAll(t, srv.Addr)
	assert.Equal(t, 0, code, "scan exit code (nothing leaked): %+v", got)
	want := []string{"cache", "jobs{eu}", "ledger", "ledger:old", "orders:42", "pool", "start", "table"}
	assert.Equal(t, want, slices.Sorted(maps.Keys(got)), "locks")

	kinds := map[string]string{"orders:42": "lock", "ledger": "fenced", "ledger:old": "fenced", "jobs{eu}": "fair",
		"cache": "rwlock", "table": "rwlock", "pool": "semaphore", "start": "countdownlatch"}
	for name, kind := range kinds {
		e := got[name]
		assert.Equal(t, kind, e.Kind, "%s: kind", name)
		assert.False(t, e.Leaked, "%s: leaked", name)
		assert.Empty(t, e.Leaks, "%s: leaks", name)
		assert.Equal(t, srv.Addr, e.Node, "%s: node", name)
	}

	field := c.ID() + ":worker-1"
	e := got["orders:42"]
	if assert.Len(t, e.Holders, 1, "orders:42 holders") {
		h := e.Holders[0]
		assert.Equal(t, field, h.Field, "orders:42 holder")
		assert.Equal(t, c.ID(), h.ClientID, "orders:42 holder's client")
		assert.Equal(t, "worker-1", h.Owner, "orders:42 holder's owner")
		assert.EqualValues(t, 2, h.HoldCount, "orders:42 hold count")
	}
	assert.True(t, e.TTLMs > 0 && e.TTLMs <= 30000, "orders:42 ttl_ms %d, want the watchdog's lease", e.TTLMs)
	assert.Contains(t, e.Keys, "redisson_unlock_latch:{orders:42}:0123456789abcdef0123456789abcdef", "orders:42 keys lack its unlock latch")
	assert.Contains(t, e.Keys, "relock_wakers:{orders:42}", "orders:42 keys lack its wake-one registry")

	e = got["ledger"]
	assert.Equal(t, ptr(int64(1)), e.FencingCounter, "ledger: fencing counter")
	assert.Len(t, e.Holders, 1, "ledger: holders")
	e = got["ledger:old"]
	assert.Equal(t, ptr(int64(1)), e.FencingCounter, "ledger:old: fencing counter")
	assert.Empty(t, e.Holders, "ledger:old: a free lock")
	assert.EqualValues(t, -1, e.TTLMs, "ledger:old: ttl_ms")

	e = got["jobs{eu}"]
	assert.Len(t, e.Holders, 1, "jobs{eu}: holders")
	if assert.Len(t, e.Queue, 1, "jobs{eu}: queue") {
		assert.Equal(t, waiter, e.Queue[0].Field, "jobs{eu}: waiter")
		if assert.NotNil(t, e.Queue[0].RemainingMs, "jobs{eu}: waiter's deadline") {
			assert.Positive(t, *e.Queue[0].RemainingMs, "jobs{eu}: waiter's time left")
		}
	}

	e = got["cache"]
	assert.Equal(t, "read", e.Mode, "cache: mode")
	if assert.Len(t, e.Holders, 1, "cache: holders") {
		assert.Equal(t, "read", e.Holders[0].Role, "cache: holder's role")
		assert.EqualValues(t, 2, e.Holders[0].HoldCount, "cache: reader's levels")
	}
	assert.Len(t, e.Keys, 3, "cache: the hash and two timeout keys: %q", e.Keys)

	e = got["table"]
	assert.Equal(t, "write", e.Mode, "table: mode")
	if assert.Len(t, e.Holders, 1, "table: holders") {
		assert.Equal(t, "write", e.Holders[0].Role, "table: holder's role")
		assert.Equal(t, "8", e.Holders[0].Owner, "table: writer")
	}

	e = got["pool"]
	assert.Equal(t, ptr(int64(2)), e.Permits, "pool: permits available")
	leases := map[string]int64{}
	for _, h := range e.Holders {
		if assert.NotNil(t, h.LeaseMs, "pool: permit %s's lease", h.Field) {
			leases[h.Field] = *h.LeaseMs
		}
	}
	assert.Len(t, leases, 2, "pool: permits out")
	l := leases["0102030405060708090a0b0c0d0e0f10"]
	assert.True(t, l > 0 && l <= 20000, "pool: permit leases %v, want one of up to 20s", leases)
	assert.EqualValues(t, -1, leases["4142434445464748494a4b4c4d4e4f50"], "pool: a permit without a lease")

	assert.Equal(t, ptr(int64(3)), got["start"].Count, "start: count")
}

// TestScanLeaks: a lock hash without a TTL, a fair-lock waiter past its
// deadline, an unlock latch without a TTL and a read-hold timeout key
// without one are each flagged, and scan exits 1.
func TestScanLeaks(t *testing.T) {
	srv := redistest.Start(t)
	do(t, srv, "HSET", "stuck", otherClient+":crashed", "1")
	c := relocktest.ClientOn(t, srv)
	ctx := rlock.WithOwner(t.Context(), "holder")
	require.NoError(t, c.GetFairLock("queue").Lock(ctx))
	now := serverMs(t, srv)
	dead := otherClient + ":dead"
	do(t, srv, "RPUSH", "redisson_lock_queue:{queue}", dead)
	do(t, srv, "ZADD", "redisson_lock_timeout:{queue}", strconv.FormatInt(now-5000, 10), dead)
	require.NoError(t, c.GetLock("latched").Lock(ctx))
	do(t, srv, "SET", "redisson_unlock_latch:{latched}:0123456789abcdef0123456789abcdef", "1")
	do(t, srv, "HSET", "reads", "mode", "read", otherClient+":3", "1")
	do(t, srv, "PEXPIRE", "reads", "30000")
	do(t, srv, "SET", "{reads}:"+otherClient+":3:rwlock_timeout:1", "1")

	code, got := scanAll(t, srv.Addr)
	assert.Equal(t, 1, code, "scan exit code")
	for name, want := range map[string]string{
		"stuck":   "no TTL",
		"queue":   "past its deadline",
		"latched": "unlock latch",
		"reads":   "read-hold timeout key",
	} {
		e := got[name]
		assert.True(t, e.Leaked, "%s: leaked", name)
		if assert.Len(t, e.Leaks, 1, "%s: leaks", name) {
			assert.Contains(t, e.Leaks[0], want, "%s: leak", name)
		}
	}
	e := got["stuck"]
	assert.EqualValues(t, -1, e.TTLMs, "stuck: ttl_ms")
	assert.Equal(t, "lock", e.Kind, "stuck: kind")
	if assert.Len(t, e.Holders, 1, "stuck: holders") {
		assert.Equal(t, "crashed", e.Holders[0].Owner, "stuck: holder")
	}
	e = got["queue"]
	if assert.Len(t, e.Queue, 1, "queue: waiters") && assert.NotNil(t, e.Queue[0].RemainingMs, "queue: deadline") {
		assert.LessOrEqual(t, *e.Queue[0].RemainingMs, int64(-4000), "queue: its waiter about 5s past its deadline")
	}

	// The text form says the same, and exits 1 too.
	r := relock(t, "scan", "--redis", srv.Addr)
	wantCode(t, r, 1)
	for _, want := range []string{
		"stuck  lock  no TTL  LEAKED",
		"leak: the lock hash has no TTL",
		"deadline passed",
		"4 leaked",
	} {
		assert.Contains(t, r.stdout, want, "scan's output")
	}

	// Once they are cleaned up, scan exits 0.
	do(t, srv, "DEL", "stuck", "redisson_unlock_latch:{latched}:0123456789abcdef0123456789abcdef",
		"{reads}:"+otherClient+":3:rwlock_timeout:1")
	do(t, srv, "LREM", "redisson_lock_queue:{queue}", "0", dead)
	do(t, srv, "ZREM", "redisson_lock_timeout:{queue}", dead)
	code, got = scanAll(t, srv.Addr)
	assert.Equal(t, 0, code, "scan's exit code after the clean-up")
	assert.Equal(t, []string{"latched", "queue", "reads"}, slices.Sorted(maps.Keys(got)), "locks after the clean-up")
}

// TestScanMatch: --match selects lock names, with their derived keys.
func TestScanMatch(t *testing.T) {
	srv := redistest.Start(t)
	c := relocktest.ClientOn(t, srv)
	ctx := t.Context()
	for _, name := range []string{"orders:1", "orders:2", "users:1"} {
		require.NoError(t, c.GetFencedLock(name).Lock(ctx))
	}
	do(t, srv, "HSET", "orders:leaked", otherClient+":x", "1")
	for _, tc := range []struct {
		pattern string
		want    []string
		code    int
	}{
		{"orders:[12]", []string{"orders:1", "orders:2"}, 0},
		{"orders:*", []string{"orders:1", "orders:2", "orders:leaked"}, 1},
		{"users:?", []string{"users:1"}, 0},
		{"nothing*", nil, 0},
	} {
		code, got := scanAll(t, srv.Addr, "--match", tc.pattern)
		for n, e := range got {
			if n != "orders:leaked" {
				assert.NotNil(t, e.FencingCounter, "--match %s: %s's fencing counter", tc.pattern, n)
				assert.Len(t, e.Holders, 1, "--match %s: %s's holders", tc.pattern, n)
			}
		}
		if len(tc.want) == 0 {
			assert.Empty(t, got, "--match %s", tc.pattern)
		} else {
			assert.Equal(t, tc.want, slices.Sorted(maps.Keys(got)), "--match %s", tc.pattern)
		}
		assert.Equal(t, tc.code, code, "--match %s: exit code", tc.pattern)
	}
}

func TestScanExitCodes(t *testing.T) {
	srv := redistest.Start(t)
	// An empty server: nothing found, exit 0.
	r := relock(t, "scan", "--redis", srv.Addr)
	wantCode(t, r, 0)
	assert.Contains(t, r.stdout, "0 lock(s), 0 leaked", "scan of an empty server")
	wantCode(t, relock(t, "scan", "--redis", srv.Addr, "stray"), exitUsage)
	srv.Kill()
	r = relock(t, "scan", "--redis", srv.Addr)
	wantCode(t, r, exitUnavailable)
}

// TestScanCluster: scan walks every master of a Redis Cluster, given one
// node's address.
func TestScanCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	c, err := rlock.NewClient(cl.ClientOption())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	// One lock per node.
	var names []string
	seen := map[string]bool{}
	for i := 0; len(seen) < len(cl.Nodes) && i < 1000; i++ {
		name := fmt.Sprintf("scan-%d", i)
		node, err := cl.NodeFor(t.Context(), name)
		require.NoError(t, err)
		if !seen[node.Addr] {
			seen[node.Addr] = true
			names = append(names, name)
			require.NoError(t, c.GetFairLock(name).Lock(t.Context()))
		}
	}
	leakNode, err := cl.NodeFor(t.Context(), "leaked")
	require.NoError(t, err)
	do(t, leakNode, "HSET", "leaked", otherClient+":x", "1")

	code, got := scanAll(t, cl.Nodes[0].Addr)
	assert.Equal(t, 1, code, "exit code")
	nodes := map[string]bool{}
	for _, name := range names {
		e, ok := got[name]
		assert.True(t, ok, "%s not found", name)
		assert.Len(t, e.Holders, 1, "%s: holders", name)
		nodes[e.Node] = true
	}
	assert.Len(t, nodes, len(cl.Nodes), "nodes the locks were found on")
	assert.True(t, got["leaked"].Leaked, "leaked: flagged")
	assert.Equal(t, leakNode.Addr, got["leaked"].Node, "leaked: node")
}

// ptr is a pointer to v, to compare optional fields with.
func ptr[T any](v T) *T { return &v }

// TestScanPermitHolder: scan names who took each permit of a semaphore,
// as it names a lock's holders.
func TestScanPermitHolder(t *testing.T) {
	srv := server(t)
	c := relocktest.Client(t)
	name := relocktest.Name(t)
	s := c.GetSemaphore(name)
	_, err := s.TrySetPermits(t.Context(), 2)
	require.NoError(t, err)
	id, err := s.Acquire(rlock.WithOwner(t.Context(), "worker-1"), time.Minute)
	require.NoError(t, err)
	defer s.Release(t.Context(), id)
	_, got := scanAll(t, srv.Addr, "--match", name)
	e, ok := got[name]
	require.True(t, ok, "scan found no %q: %v", name, got)
	require.Len(t, e.Holders, 1, "permits held")
	assert.Equal(t, id, e.Holders[0].Field, "the permit")
	assert.Equal(t, "worker-1", e.Holders[0].Owner, "who took it")
	assert.Equal(t, c.ID(), e.Holders[0].ClientID, "its Client")
	out := relock(t, "scan", "--redis", srv.Addr, "--match", name)
	assert.Contains(t, out.stdout, "holder "+id+" (taken by "+c.ID()+":worker-1)", "scan's text")
}
