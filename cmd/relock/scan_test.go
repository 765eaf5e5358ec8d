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
	if r.code != 0 && r.code != 1 {
		t.Fatalf("scan exit code %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	out := map[string]scanJSON{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if line == "" {
			continue
		}
		var e scanJSON
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("scan --json line %q: %v", line, err)
		}
		if _, dup := out[e.Name]; dup {
			t.Errorf("lock %q listed twice", e.Name)
		}
		out[e.Name] = e
	}
	return r.code, out
}

// do runs a raw command on srv, failing t on an error.
func do(t *testing.T, srv *redistest.Server, args ...string) rueidis.RedisMessage {
	t.Helper()
	m, err := srv.Do(t.Context(), args...)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return m
}

// serverMs is srv's clock in unix milliseconds.
func serverMs(t *testing.T, srv *redistest.Server) int64 {
	t.Helper()
	m := do(t, srv, "TIME")
	now, err := serverTime(m)
	if err != nil {
		t.Fatal(err)
	}
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
		if err := plain.Lock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	fenced := c.GetFencedLock("ledger")
	if err := fenced.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	freeFenced := c.GetFencedLock("ledger:old")
	if err := freeFenced.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := freeFenced.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	fair := c.GetFairLock("jobs{eu}")
	if err := fair.Lock(ctx); err != nil {
		t.Fatal(err)
	}
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
	relocktest.Eventually(t, 5*time.Second, "the latch's subscriber", func() bool {
		m := do(t, srv, "PUBSUB", "NUMSUB", "redisson_countdownlatch__channel__{start}")
		a, _ := m.ToArray()
		n, _ := a[1].AsInt64()
		return n == 1
	})

	// Other layouts: ignored.
	do(t, srv, "HSET", "user:1", "name", "ann", "age", "40")
	do(t, srv, "HSET", "stats", otherClient+":x", "not a number")
	do(t, srv, "SET", "visits", "12")
	do(t, srv, "ZADD", "{board}:timeout", "1", "a")
	do(t, srv, "SET", "board", "top")
	do(t, srv, "RPUSH", "redisson_lock_queue:nothing-with-braces-missing", "x")
	do(t, srv, "SET", "redisson_unlock_latch:{x}:not-an-id", "1")

	code, got := scanAll(t, srv.Addr)
	if code != 0 {
		t.Errorf("scan exit code %d, want 0 (nothing leaked): %+v", code, got)
	}
	want := []string{"cache", "jobs{eu}", "ledger", "ledger:old", "orders:42", "pool", "start", "table"}
	if names := slices.Sorted(maps.Keys(got)); !slices.Equal(names, want) {
		t.Errorf("locks %q, want %q", names, want)
	}

	kinds := map[string]string{"orders:42": "lock", "ledger": "fenced", "ledger:old": "fenced", "jobs{eu}": "fair",
		"cache": "rwlock", "table": "rwlock", "pool": "semaphore", "start": "countdownlatch"}
	for name, kind := range kinds {
		e := got[name]
		if e.Kind != kind {
			t.Errorf("%s: kind %q, want %q", name, e.Kind, kind)
		}
		if e.Leaked || len(e.Leaks) != 0 {
			t.Errorf("%s: leaked %v %q, want no leak", name, e.Leaked, e.Leaks)
		}
		if e.Node != srv.Addr {
			t.Errorf("%s: node %q, want %q", name, e.Node, srv.Addr)
		}
	}

	field := c.ID() + ":worker-1"
	e := got["orders:42"]
	if len(e.Holders) != 1 || e.Holders[0].Field != field || e.Holders[0].HoldCount != 2 ||
		e.Holders[0].ClientID != c.ID() || e.Holders[0].Owner != "worker-1" {
		t.Errorf("orders:42 holders %+v, want %s with count 2", e.Holders, field)
	}
	if e.TTLMs <= 0 || e.TTLMs > 30000 {
		t.Errorf("orders:42 ttl_ms %d, want the watchdog's lease", e.TTLMs)
	}
	if !slices.Contains(e.Keys, "redisson_unlock_latch:{orders:42}:0123456789abcdef0123456789abcdef") {
		t.Errorf("orders:42 keys %q lack its unlock latch", e.Keys)
	}
	if e := got["ledger"]; e.FencingCounter == nil || *e.FencingCounter != 1 || len(e.Holders) != 1 {
		t.Errorf("ledger: %+v, want one holder and fencing counter 1", e)
	}
	if e := got["ledger:old"]; e.FencingCounter == nil || *e.FencingCounter != 1 || len(e.Holders) != 0 || e.TTLMs != -1 {
		t.Errorf("ledger:old: %+v, want a free lock with fencing counter 1, ttl_ms -1", e)
	}
	if e := got["jobs{eu}"]; len(e.Holders) != 1 || len(e.Queue) != 1 || e.Queue[0].Field != waiter ||
		e.Queue[0].RemainingMs == nil || *e.Queue[0].RemainingMs <= 0 {
		t.Errorf("jobs{eu}: %+v, want a holder and the queued waiter", e)
	}
	if e := got["cache"]; e.Mode != "read" || len(e.Holders) != 1 || e.Holders[0].Role != "read" ||
		e.Holders[0].HoldCount != 2 || len(e.Keys) != 3 {
		t.Errorf("cache: %+v, want read mode, one reader with 2 levels, the hash and two timeout keys", e)
	}
	if e := got["table"]; e.Mode != "write" || len(e.Holders) != 1 || e.Holders[0].Role != "write" || e.Holders[0].Owner != "8" {
		t.Errorf("table: %+v, want write mode, its writer", e)
	}
	if e := got["pool"]; e.Permits == nil || *e.Permits != 2 || len(e.Holders) != 2 {
		t.Errorf("pool: %+v, want 2 permits available and 2 out", e)
	} else {
		leases := map[string]int64{}
		for _, h := range e.Holders {
			leases[h.Field] = *h.LeaseMs
		}
		if l := leases["0102030405060708090a0b0c0d0e0f10"]; l <= 0 || l > 20000 {
			t.Errorf("pool: permit leases %v, want one of up to 20s", leases)
		}
		if l := leases["4142434445464748494a4b4c4d4e4f50"]; l != -1 {
			t.Errorf("pool: permit leases %v, want one without a lease (-1)", leases)
		}
	}
	if e := got["start"]; e.Count == nil || *e.Count != 3 {
		t.Errorf("start: %+v, want count 3", e)
	}
}

// TestScanLeaks: a lock hash without a TTL, a fair-lock waiter past its
// deadline, an unlock latch without a TTL and a read-hold timeout key
// without one are each flagged, and scan exits 1.
func TestScanLeaks(t *testing.T) {
	srv := redistest.Start(t)
	do(t, srv, "HSET", "stuck", otherClient+":crashed", "1")
	c := relocktest.ClientOn(t, srv)
	ctx := rlock.WithOwner(t.Context(), "holder")
	if err := c.GetFairLock("queue").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	now := serverMs(t, srv)
	dead := otherClient + ":dead"
	do(t, srv, "RPUSH", "redisson_lock_queue:{queue}", dead)
	do(t, srv, "ZADD", "redisson_lock_timeout:{queue}", strconv.FormatInt(now-5000, 10), dead)
	if err := c.GetLock("latched").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	do(t, srv, "SET", "redisson_unlock_latch:{latched}:0123456789abcdef0123456789abcdef", "1")
	do(t, srv, "HSET", "reads", "mode", "read", otherClient+":3", "1")
	do(t, srv, "PEXPIRE", "reads", "30000")
	do(t, srv, "SET", "{reads}:"+otherClient+":3:rwlock_timeout:1", "1")

	code, got := scanAll(t, srv.Addr)
	if code != 1 {
		t.Errorf("scan exit code %d, want 1", code)
	}
	for name, want := range map[string]string{
		"stuck":   "no TTL",
		"queue":   "past its deadline",
		"latched": "unlock latch",
		"reads":   "read-hold timeout key",
	} {
		e := got[name]
		if !e.Leaked || len(e.Leaks) != 1 || !strings.Contains(e.Leaks[0], want) {
			t.Errorf("%s: leaked %v, leaks %q; want one leak about %q", name, e.Leaked, e.Leaks, want)
		}
	}
	if e := got["stuck"]; e.TTLMs != -1 || e.Kind != "lock" || len(e.Holders) != 1 || e.Holders[0].Owner != "crashed" {
		t.Errorf("stuck: %+v, want a lock held by crashed with ttl_ms -1", e)
	}
	if e := got["queue"]; len(e.Queue) != 1 || e.Queue[0].RemainingMs == nil || *e.Queue[0].RemainingMs > -4000 {
		t.Errorf("queue: %+v, want its waiter about 5s past its deadline", e.Queue)
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
		if !strings.Contains(r.stdout, want) {
			t.Errorf("scan's output lacks %q:\n%s", want, r.stdout)
		}
	}

	// Once they are cleaned up, scan exits 0.
	do(t, srv, "DEL", "stuck", "redisson_unlock_latch:{latched}:0123456789abcdef0123456789abcdef",
		"{reads}:"+otherClient+":3:rwlock_timeout:1")
	do(t, srv, "LREM", "redisson_lock_queue:{queue}", "0", dead)
	do(t, srv, "ZREM", "redisson_lock_timeout:{queue}", dead)
	if code, got := scanAll(t, srv.Addr); code != 0 || len(got) != 3 {
		t.Errorf("scan after the clean-up: exit %d, %d locks; want 0, 3 (queue, latched, reads)", code, len(got))
	}
}

// TestScanMatch: --match selects lock names, with their derived keys.
func TestScanMatch(t *testing.T) {
	srv := redistest.Start(t)
	c := relocktest.ClientOn(t, srv)
	ctx := t.Context()
	for _, name := range []string{"orders:1", "orders:2", "users:1"} {
		if err := c.GetFencedLock(name).Lock(ctx); err != nil {
			t.Fatal(err)
		}
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
			if n != "orders:leaked" && (e.FencingCounter == nil || len(e.Holders) != 1) {
				t.Errorf("--match %s: %s: %+v, want its holder and fencing counter", tc.pattern, n, e)
			}
		}
		if names := slices.Sorted(maps.Keys(got)); !slices.Equal(names, tc.want) || code != tc.code {
			t.Errorf("--match %s: %q, exit %d; want %q, exit %d", tc.pattern, names, code, tc.want, tc.code)
		}
	}
}

func TestScanExitCodes(t *testing.T) {
	srv := redistest.Start(t)
	// An empty server: nothing found, exit 0.
	r := relock(t, "scan", "--redis", srv.Addr)
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, "0 lock(s), 0 leaked") {
		t.Errorf("scan of an empty server printed %q", r.stdout)
	}
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
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	// One lock per node.
	var names []string
	seen := map[string]bool{}
	for i := 0; len(seen) < len(cl.Nodes) && i < 1000; i++ {
		name := fmt.Sprintf("scan-%d", i)
		node, err := cl.NodeFor(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		if !seen[node.Addr] {
			seen[node.Addr] = true
			names = append(names, name)
			if err := c.GetFairLock(name).Lock(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	}
	leakNode, err := cl.NodeFor(t.Context(), "leaked")
	if err != nil {
		t.Fatal(err)
	}
	do(t, leakNode, "HSET", "leaked", otherClient+":x", "1")

	code, got := scanAll(t, cl.Nodes[0].Addr)
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	nodes := map[string]bool{}
	for _, name := range names {
		e, ok := got[name]
		if !ok || len(e.Holders) != 1 {
			t.Errorf("%s: %+v, want it found with its holder", name, e)
		}
		nodes[e.Node] = true
	}
	if len(nodes) != len(cl.Nodes) {
		t.Errorf("locks found on %d nodes, want %d", len(nodes), len(cl.Nodes))
	}
	if e := got["leaked"]; !e.Leaked || e.Node != leakNode.Addr {
		t.Errorf("leaked: %+v, want it flagged, on %s", e, leakNode.Addr)
	}
}

func TestGlobMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"*", "", true},
		{"*", "abc", true},
		{"a*c", "abbbc", true},
		{"a*c", "abbbd", false},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{"[abc]x", "bx", true},
		{"[^abc]x", "bx", false},
		{"[a-c]x", "cx", true},
		{"[a-c]x", "dx", false},
		{`a\*`, "a*", true},
		{`a\*`, "ab", false},
		{"orders:*", "orders:42", true},
		{"orders:*", "order:42", false},
		{"*{eu}", "jobs{eu}", true},
		{"**x", "abx", true},
	} {
		if got := globMatch(tc.pattern, tc.s); got != tc.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		key, typ  string
		role      keyRole
		name, alt string
	}{
		{"redisson_lock_queue:{a}", "list", roleQueue, "a", "{a}"},
		{"redisson_lock_queue:x{t}y", "list", roleQueue, "x{t}y", ""},
		{"redisson_lock_queue:plain", "list", roleNone, "", ""},
		{"redisson_lock_queue:{a}", "hash", roleMain, "redisson_lock_queue:{a}", ""},
		{"redisson_lock_timeout:{a}", "zset", roleTimeout, "a", "{a}"},
		{"redisson_lock_token:{a:b}", "string", roleToken, "a:b", "{a:b}"},
		{"redisson_unlock_latch:{a}:0123456789abcdef0123456789abcdef", "string", roleLatch, "a", "{a}"},
		{"redisson_unlock_latch:{a}:nothex", "string", roleNone, "", ""},
		{"{a}:" + otherClient + ":7:rwlock_timeout:2", "string", roleRWTimeout, "a", "{a}"},
		{"x{t}:" + otherClient + ":owner:with:colons:rwlock_timeout:1", "string", roleRWTimeout, "x{t}", ""},
		{"{a}:timeout", "zset", roleSemZset, "a", "{a}"},
		{"a:timeout", "zset", roleNone, "", ""},
		{"anything", "hash", roleMain, "anything", ""},
		{"anything", "string", roleNone, "", ""},
	} {
		role, name, alt := classify(tc.key, tc.typ)
		if role != tc.role || name != tc.name || alt != tc.alt {
			t.Errorf("classify(%q, %s) = %v %q %q, want %v %q %q", tc.key, tc.typ, role, name, alt, tc.role, tc.name, tc.alt)
		}
	}
}
