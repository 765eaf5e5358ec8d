package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/lockcore"
)

const scanUsage = `Usage: relock [CONNECTION FLAGS] scan [--match PATTERN] [--json]

Walk the keyspace with SCAN (never KEYS; on a Redis Cluster, on every
master) and list every lock relock or Redisson keeps there: reentrant and
fenced locks, fair locks (queue and deadlines), read-write locks,
permit-expirable semaphores, count-down latches, with their holders, hold
counts and TTL. Keys of other layouts are ignored.

It flags leaks, the states nothing will ever clean up:
  - a lock hash without a TTL: a holder that crashed never lets it go;
  - a fair-lock waiter past its deadline (on the server's clock) or without
    one: it blocks the queue until it reaches the head;
  - an unlock latch (redisson_unlock_latch:{NAME}:ID, written by Redisson)
    or a read-lock timeout key without a TTL.

--match PATTERN selects lock names (not keys) with Redis' glob syntax
(* ? [abc] [^a-z] \x): --match 'orders:*' finds the lock orders:42 with its
queue, latches and fencing counter.

A count-down latch, and a semaphore with no permit out, is a plain integer
key like any counter: scan finds one only while someone waits on it (its
channel has subscribers).

--json prints one object per lock, one per line, with the stable fields
  name, kind (lock, fenced, fair, rwlock, semaphore, countdownlatch),
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
	rdb, _, code := cl.connect()
	if code >= 0 {
		return code
	}
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	res, err := scanLocks(ctx, rdb, *match)
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

// Kinds of lock that scan tells apart.
const (
	kindLock           = "lock"
	kindFenced         = "fenced"
	kindFair           = "fair"
	kindRWLock         = "rwlock"
	kindSemaphore      = "semaphore"
	kindCountDownLatch = "countdownlatch"
)

// scanEntry is one lock found by scan. Its JSON form is a line of
// 'relock scan --json'; the field names are stable.
type scanEntry struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// TTLMs is the lock key's remaining TTL: -1 when it has none, or when
	// there is no lock key (a free fenced or fair lock, a latch).
	TTLMs   int64        `json:"ttl_ms"`
	Holders []scanHolder `json:"holders"`
	Leaked  bool         `json:"leaked"`
	Leaks   []string     `json:"leaks"`
	Keys    []string     `json:"keys"`
	// Node is the address of the server the keys are on.
	Node string `json:"node"`

	Mode           string       `json:"mode,omitempty"`  // rwlock: read or write
	Queue          []scanWaiter `json:"queue,omitempty"` // fair
	FencingCounter *int64       `json:"fencing_counter,omitempty"`
	Permits        *int64       `json:"permits_available,omitempty"` // semaphore
	Count          *int64       `json:"count,omitempty"`             // count-down latch
}

// scanHolder is one holder: a hash field, or a semaphore's permit.
type scanHolder struct {
	Field     string `json:"field"`
	ClientID  string `json:"client_id"`
	Owner     string `json:"owner"`
	HoldCount int64  `json:"hold_count"`
	// Role is read or write in a read-write lock.
	Role string `json:"role,omitempty"`
	// LeaseMs is a semaphore permit's remaining lease (-1: none).
	LeaseMs *int64 `json:"lease_ms,omitempty"`
}

// scanWaiter is a fair lock's waiter.
type scanWaiter struct {
	Position    int    `json:"position"`
	Field       string `json:"field"`
	DeadlineMs  *int64 `json:"deadline_ms"`
	RemainingMs *int64 `json:"remaining_ms"`
}

// scanResult is what scanLocks found.
type scanResult struct {
	locks []*scanEntry
	keys  int // keys scanned
	nodes int // masters scanned
}

// Layout details.
const (
	// maxLockFields bounds the hashes scan reads whole: a lock has a few
	// holders; a hash with more fields is not taken for one.
	maxLockFields = 10000
	// noLeaseScore is the score of a semaphore permit without a lease.
	noLeaseScore = 922337203685477
	// latchChannelPrefix is a count-down latch's channel, "<prefix>{N}".
	latchChannelPrefix = "redisson_countdownlatch__channel__"
	semaphoreChannel   = "redisson_sc"
	rwTimeoutMark      = ":rwlock_timeout:"
)

var (
	uuidRE      = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}:`)
	uuidInKeyRE = regexp.MustCompile(`:[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}:`)
	hex32RE     = regexp.MustCompile(`^[0-9a-fA-F]{32}$`)
)

// lockField reports whether a hash field looks like a holder's:
// "<clientID UUID>:<owner>".
func lockField(f string) bool { return uuidRE.MatchString(f) }

// found is what the keyspace walk saw of one lock name.
type found struct {
	name, node                     string
	hash                           bool   // the name's key is a hash that looks like a lock
	queue, timeout, token, semZset string // keys seen ("" when not)
	latches, rwTimeouts            []string
	semWaiters, latchWaiters       bool // its channel has subscribers
}

// unprefix returns the lock name of key prefix:{NAME} or, for a name with
// its own hash tag, prefix:NAME (Redisson's rule), and the other reading
// of an ambiguous key (prefix:{a} is also the key of the name "{a}").
func unprefix(key, prefix string) (name, alt string, ok bool) {
	rest, ok := strings.CutPrefix(key, prefix+":")
	if !ok || rest == "" {
		return "", "", false
	}
	return untag(rest)
}

// untag reverses the wrapping of a name: "{NAME}" for a name without '{',
// the name itself when it has one.
func untag(s string) (name, alt string, ok bool) {
	if len(s) > 2 && s[0] == '{' && s[len(s)-1] == '}' && !strings.Contains(s[1:len(s)-1], "{") {
		return s[1 : len(s)-1], s, true
	}
	if strings.Contains(s, "{") {
		return s, "", true
	}
	return "", "", false
}

// keyRole is what a key is to its lock.
type keyRole int

const (
	roleNone keyRole = iota
	roleMain         // the lock's own key (a hash)
	roleQueue
	roleTimeout
	roleToken
	roleLatch
	roleRWTimeout
	roleSemZset
)

// classify says what key, of Redis type typ, is to which lock.
func classify(key, typ string) (role keyRole, name, alt string) {
	try := func(r keyRole, want, prefix string) bool {
		if typ != want {
			return false
		}
		var ok bool
		name, alt, ok = unprefix(key, prefix)
		if ok {
			role = r
		}
		return ok
	}
	switch {
	case try(roleQueue, "list", lockcore.QueuePrefix),
		try(roleTimeout, "zset", lockcore.TimeoutPrefix),
		try(roleToken, "string", lockcore.TokenPrefix):
		return role, name, alt
	}
	if typ == "string" && strings.HasPrefix(key, lockcore.LatchPrefix+":") {
		// redisson_unlock_latch:<prefixed name>:<32 hex request ID>
		i := strings.LastIndexByte(key, ':')
		if hex32RE.MatchString(key[i+1:]) {
			if name, alt, ok := unprefix(key[:i], lockcore.LatchPrefix); ok {
				return roleLatch, name, alt
			}
		}
	}
	if typ == "string" {
		// <suffixed name>:<clientID>:<thread>:rwlock_timeout:<n>
		if i := strings.LastIndex(key, rwTimeoutMark); i > 0 && digits(key[i+len(rwTimeoutMark):]) {
			if loc := uuidInKeyRE.FindStringIndex(key[:i+1]); loc != nil {
				if name, alt, ok := unsuffix(key[:loc[0]]); ok {
					return roleRWTimeout, name, alt
				}
			}
		}
	}
	if typ == "zset" && strings.HasSuffix(key, ":timeout") {
		if name, alt, ok := unsuffix(strings.TrimSuffix(key, ":timeout")); ok {
			return roleSemZset, name, alt
		}
	}
	if typ == "hash" {
		return roleMain, key, ""
	}
	return roleNone, "", ""
}

// unsuffix reverses Redisson's suffixName: "{NAME}" for a name without
// '{', the name itself when it has one.
func unsuffix(s string) (name, alt string, ok bool) { return untag(s) }

func digits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// scanLocks walks every master's keyspace and reads each lock found whose
// name matches match ("" for all).
func scanLocks(ctx context.Context, rdb rueidis.Client, match string) (*scanResult, error) {
	res := &scanResult{}
	var all []*found
	byName := map[string]*found{}
	nodes := rdb.Nodes()
	addrs := make([]string, 0, len(nodes))
	for addr := range nodes {
		addrs = append(addrs, addr)
	}
	sort.Strings(addrs)
	for _, addr := range addrs {
		node := nodes[addr]
		master, err := isMaster(ctx, node)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", addr, err)
		}
		var fs []*found
		if master {
			res.nodes++
			var n int
			if fs, n, err = scanNode(ctx, node, addr); err != nil {
				return nil, fmt.Errorf("%s: %w", addr, err)
			}
			res.keys += n
		}
		// Waiters of latches and semaphores may be subscribed on any node.
		waiting, err := waitedOn(ctx, node, addr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", addr, err)
		}
		for _, f := range append(fs, waiting...) {
			if g := byName[f.name]; g != nil {
				g.semWaiters = g.semWaiters || f.semWaiters
				g.latchWaiters = g.latchWaiters || f.latchWaiters
				continue
			}
			byName[f.name] = f
			all = append(all, f)
		}
	}
	for _, f := range all {
		if match != "" && !globMatch(match, f.name) {
			continue
		}
		e, err := readFound(ctx, rdb, f)
		if err != nil {
			return nil, err
		}
		if e != nil {
			res.locks = append(res.locks, e)
		}
	}
	sort.Slice(res.locks, func(i, j int) bool { return res.locks[i].Name < res.locks[j].Name })
	return res, nil
}

// isMaster reports whether node is a master (a single server is one).
func isMaster(ctx context.Context, node rueidis.Client) (bool, error) {
	role, err := node.Do(ctx, node.B().Role().Build()).ToArray()
	if err != nil {
		if _, isReply := rueidis.IsRedisErr(err); isReply {
			return true, nil // ROLE not allowed: take it for a master
		}
		return false, err
	}
	if len(role) == 0 {
		return true, nil
	}
	r, _ := role[0].ToString()
	return r == "master", nil
}

// scanNode walks node's keyspace and returns the locks whose keys it
// holds, and how many keys it saw.
func scanNode(ctx context.Context, node rueidis.Client, addr string) ([]*found, int, error) {
	byName := map[string]*found{}
	get := func(name string) *found {
		f := byName[name]
		if f == nil {
			f = &found{name: name, node: addr}
			byName[name] = f
		}
		return f
	}
	type pending struct {
		role      keyRole
		key       string
		name, alt string
	}
	var later []pending // keys whose name may read two ways
	keys := 0
	var cursor uint64
	for {
		entry, err := node.Do(ctx, node.B().Scan().Cursor(cursor).Count(1000).Build()).AsScanEntry()
		if err != nil {
			return nil, 0, fmt.Errorf("SCAN: %w", err)
		}
		keys += len(entry.Elements)
		types, err := pipeline(ctx, node, entry.Elements, func(k string) rueidis.Completed {
			return node.B().Type().Key(k).Build()
		})
		if err != nil {
			return nil, 0, err
		}
		var hashes []string
		for i, k := range entry.Elements {
			typ, err := types[i].ToString()
			if err != nil {
				continue // gone, or moved: not ours to judge
			}
			role, name, alt := classify(k, typ)
			switch role {
			case roleNone:
			case roleMain:
				hashes = append(hashes, k)
			default:
				later = append(later, pending{role, k, name, alt})
			}
		}
		locks, err := lockHashes(ctx, node, hashes)
		if err != nil {
			return nil, 0, err
		}
		for _, k := range locks {
			get(k).hash = true
		}
		cursor = entry.Cursor
		if cursor == 0 {
			break
		}
	}
	for _, p := range later {
		name := p.name
		if p.alt != "" && byName[p.alt] != nil && byName[p.alt].hash && (byName[name] == nil || !byName[name].hash) {
			name = p.alt // "prefix:{a}" of the lock named "{a}"
		}
		f := get(name)
		switch p.role {
		case roleQueue:
			f.queue = p.key
		case roleTimeout:
			f.timeout = p.key
		case roleToken:
			f.token = p.key
		case roleLatch:
			f.latches = append(f.latches, p.key)
		case roleRWTimeout:
			f.rwTimeouts = append(f.rwTimeouts, p.key)
		case roleSemZset:
			f.semZset = p.key
		}
	}
	out := make([]*found, 0, len(byName))
	for _, f := range byName {
		out = append(out, f)
	}
	return out, keys, nil
}

// pipeline sends one command per key to node in one round trip.
func pipeline(ctx context.Context, node rueidis.Client, keys []string, cmd func(string) rueidis.Completed) ([]rueidis.RedisResult, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	cmds := make(rueidis.Commands, len(keys))
	for i, k := range keys {
		cmds[i] = cmd(k)
	}
	res := node.DoMulti(ctx, cmds...)
	for _, r := range res {
		if err := r.Error(); err != nil && !rueidis.IsRedisNil(err) {
			if _, isReply := rueidis.IsRedisErr(err); !isReply {
				return nil, err // the connection failed
			}
		}
	}
	return res, nil
}

// lockHashes returns the hashes among keys that look like locks: not too
// many fields, and a random field that is a holder's or a read-write
// lock's mode.
func lockHashes(ctx context.Context, node rueidis.Client, keys []string) ([]string, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	cmds := make(rueidis.Commands, 0, 2*len(keys))
	for _, k := range keys {
		cmds = append(cmds, node.B().Hlen().Key(k).Build(), node.B().Hrandfield().Key(k).Build())
	}
	res := node.DoMulti(ctx, cmds...)
	var out []string
	for i, k := range keys {
		n, err := res[2*i].AsInt64()
		if err != nil {
			if _, isReply := rueidis.IsRedisErr(err); !isReply {
				return nil, err
			}
			continue
		}
		field, err := res[2*i+1].ToString()
		if err != nil || n == 0 || n > maxLockFields {
			continue
		}
		if field == "mode" || lockField(field) {
			out = append(out, k)
		}
	}
	return out, nil
}

// waitedOn returns the semaphores and count-down latches whose channels
// have subscribers on node.
func waitedOn(ctx context.Context, node rueidis.Client, addr string) ([]*found, error) {
	var out []*found
	for _, sharded := range []bool{false, true} {
		for _, pattern := range []string{semaphoreChannel + ":*", latchChannelPrefix + "*"} {
			var cmd rueidis.Completed
			if sharded {
				cmd = node.B().PubsubShardchannels().Pattern(pattern).Build()
			} else {
				cmd = node.B().PubsubChannels().Pattern(pattern).Build()
			}
			chans, err := node.Do(ctx, cmd).AsStrSlice()
			if err != nil {
				if _, isReply := rueidis.IsRedisErr(err); isReply {
					continue // not allowed, or no sharded pub/sub
				}
				return nil, err
			}
			for _, ch := range chans {
				if name, _, ok := unprefix(ch, semaphoreChannel); ok {
					out = append(out, &found{name: name, node: addr, semWaiters: true})
				} else if rest, ok := strings.CutPrefix(ch, latchChannelPrefix+"{"); ok && strings.HasSuffix(rest, "}") {
					out = append(out, &found{name: strings.TrimSuffix(rest, "}"), node: addr, latchWaiters: true})
				}
			}
		}
	}
	return out, nil
}

// readFound reads the lock f in one transaction and judges it; nil when it
// turns out not to be a lock (or to be gone).
func readFound(ctx context.Context, rdb rueidis.Client, f *found) (*scanEntry, error) {
	b := rdb.B()
	mainType := "hash"
	if !f.hash {
		t, err := rdb.Do(ctx, b.Type().Key(f.name).Build()).ToString()
		if err != nil {
			return nil, fmt.Errorf("TYPE %s: %w", f.name, err)
		}
		mainType = t
	}
	cmds := rueidis.Commands{b.Multi().Build(), b.Time().Build(), b.Pttl().Key(f.name).Build()}
	switch mainType {
	case "hash":
		cmds = append(cmds, b.Hgetall().Key(f.name).Build())
	case "string":
		cmds = append(cmds, b.Get().Key(f.name).Build())
	default:
		cmds = append(cmds, b.Exists().Key(f.name).Build())
	}
	at := map[string]int{}
	add := func(what string, c rueidis.Completed) {
		at[what] = len(cmds) - 1 // position in EXEC's reply (MULTI has none)
		cmds = append(cmds, c)
	}
	if f.queue != "" {
		add("queue", b.Lrange().Key(f.queue).Start(0).Stop(-1).Build())
	}
	if f.timeout != "" {
		add("timeout", b.Zrange().Key(f.timeout).Min("0").Max("-1").Withscores().Build())
	}
	if f.token != "" {
		add("token", b.Get().Key(f.token).Build())
	}
	if f.semZset != "" {
		add("sem", b.Zrange().Key(f.semZset).Min("0").Max("-1").Withscores().Build())
	}
	for _, k := range f.latches {
		add("pttl "+k, b.Pttl().Key(k).Build())
	}
	for _, k := range f.rwTimeouts {
		add("pttl "+k, b.Pttl().Key(k).Build())
	}
	cmds = append(cmds, b.Exec().Build())
	replies := rdb.DoMulti(ctx, cmds...)
	for _, r := range replies[:len(replies)-1] {
		if err := r.Error(); err != nil {
			return nil, fmt.Errorf("reading %q: %w", f.name, err)
		}
	}
	res, err := replies[len(replies)-1].ToArray()
	if err != nil {
		if rueidis.IsRedisNil(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading %q: %w", f.name, err)
	}
	now, err := serverTime(res[0])
	if err != nil {
		return nil, err
	}
	e := &scanEntry{Name: f.name, Node: f.node, TTLMs: -1, Holders: []scanHolder{}, Leaks: []string{}}
	pttl, _ := res[1].AsInt64()
	if pttl >= 0 {
		e.TTLMs = pttl
	}
	reply := func(what string) (rueidis.RedisMessage, bool) {
		i, ok := at[what]
		if !ok || res[i].Error() != nil {
			return rueidis.RedisMessage{}, false
		}
		return res[i], true
	}

	held := false
	switch mainType {
	case "hash":
		fields, err := res[2].AsStrMap()
		if err != nil {
			return nil, nil // changed since the walk
		}
		if !judgeHash(e, fields) {
			return nil, nil // not a lock after all
		}
		held = true
		e.Keys = append(e.Keys, f.name)
	case "string":
		if f.semZset == "" && !f.semWaiters && !f.latchWaiters {
			break
		}
		v, err := res[2].ToString()
		n, perr := strconv.ParseInt(v, 10, 64)
		if err != nil || perr != nil {
			return nil, nil // not a semaphore's or a latch's count
		}
		e.Keys = append(e.Keys, f.name)
		if f.semZset != "" || f.semWaiters {
			e.Kind, e.Permits = kindSemaphore, &n
		} else {
			e.Kind, e.Count = kindCountDownLatch, &n
		}
	}
	if e.Kind == kindSemaphore {
		if m, ok := reply("sem"); ok {
			permits, err := m.AsZScores()
			if err == nil {
				e.Keys = append(e.Keys, f.semZset)
				for _, p := range permits {
					h := scanHolder{Field: permitID(p.Member), HoldCount: 1}
					lease := int64(-1)
					if int64(p.Score) != noLeaseScore {
						lease = int64(p.Score) - now
					}
					h.LeaseMs = &lease
					e.Holders = append(e.Holders, h)
				}
			}
		}
	}

	if m, ok := reply("queue"); ok && f.queue != "" {
		queue, _ := m.AsStrSlice()
		var deadlines map[string]int64
		if t, ok := reply("timeout"); ok {
			zs, _ := t.AsZScores()
			deadlines = make(map[string]int64, len(zs))
			for _, z := range zs {
				deadlines[z.Member] = int64(z.Score)
			}
			e.Keys = append(e.Keys, f.timeout)
		}
		e.Keys = append(e.Keys, f.queue)
		for i, field := range queue {
			w := scanWaiter{Position: i + 1, Field: field}
			if d, ok := deadlines[field]; ok {
				rem := d - now
				w.DeadlineMs, w.RemainingMs = &d, &rem
				if rem < 0 {
					e.Leaks = append(e.Leaks, fmt.Sprintf("fair-lock waiter %s is %s past its deadline", field, ms(-rem)))
				}
			} else {
				e.Leaks = append(e.Leaks, fmt.Sprintf("fair-lock waiter %s has no deadline", field))
			}
			e.Queue = append(e.Queue, w)
		}
	} else if f.timeout != "" {
		e.Keys = append(e.Keys, f.timeout)
	}
	if e.Kind == "" && (f.queue != "" || f.timeout != "") {
		e.Kind = kindFair
	}
	if m, ok := reply("token"); ok {
		if n, err := m.AsInt64(); err == nil {
			e.FencingCounter = &n
			e.Keys = append(e.Keys, f.token)
			if e.Kind == "" {
				e.Kind = kindFenced
			}
		}
	}
	for _, k := range f.latches {
		if m, ok := reply("pttl " + k); ok {
			e.Keys = append(e.Keys, k)
			if n, _ := m.AsInt64(); n == -1 {
				e.Leaks = append(e.Leaks, "unlock latch "+k+" has no TTL")
			}
		}
	}
	for _, k := range f.rwTimeouts {
		if m, ok := reply("pttl " + k); ok {
			e.Keys = append(e.Keys, k)
			if n, _ := m.AsInt64(); n == -1 {
				e.Leaks = append(e.Leaks, "read-hold timeout key "+k+" has no TTL")
			}
		}
	}
	if len(e.Keys) == 0 {
		return nil, nil // all gone since the walk
	}
	if e.Kind == "" {
		e.Kind = kindLock
	}
	if held && e.TTLMs < 0 {
		e.Leaks = append([]string{"the lock hash has no TTL: a holder that crashed holds it forever"}, e.Leaks...)
	}
	e.Leaked = len(e.Leaks) > 0
	return e, nil
}

// judgeHash fills e from a lock hash's fields; false when they are not a
// lock's.
func judgeHash(e *scanEntry, fields map[string]string) bool {
	if len(fields) == 0 {
		return false
	}
	mode, rw := fields["mode"]
	if rw && mode != "read" && mode != "write" {
		return false
	}
	for field, v := range fields {
		if field == "mode" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || !lockField(field) {
			return false
		}
		id, owner := splitField(field)
		h := scanHolder{Field: field, ClientID: id, Owner: owner, HoldCount: n}
		if rw {
			h.Role = "read"
			if o, ok := strings.CutSuffix(owner, ":write"); ok {
				h.Owner, h.Role = o, "write"
			}
		}
		e.Holders = append(e.Holders, h)
	}
	sort.Slice(e.Holders, func(i, j int) bool { return e.Holders[i].Field < e.Holders[j].Field })
	if rw {
		e.Kind, e.Mode = kindRWLock, mode
	}
	return true
}

// permitID shows a semaphore permit's zset member: Redisson stores the 16
// raw bytes of the ID (older versions its 32 hex characters).
func permitID(member string) string {
	if len(member) == 16 {
		return hex.EncodeToString([]byte(member))
	}
	return member
}

// serverTime is TIME's reply in unix milliseconds.
func serverTime(m rueidis.RedisMessage) (int64, error) {
	now, err := m.AsStrSlice()
	if err != nil || len(now) != 2 {
		return 0, fmt.Errorf("TIME: %v %v", now, err)
	}
	sec, err1 := strconv.ParseInt(now[0], 10, 64)
	usec, err2 := strconv.ParseInt(now[1], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, errors.New("TIME answered " + strings.Join(now, " "))
	}
	return sec*1000 + usec/1000, nil
}

// writeScan prints what scan found, for people.
func writeScan(w io.Writer, res *scanResult) {
	var b strings.Builder
	for _, e := range res.locks {
		fmt.Fprintf(&b, "%s  %s", e.Name, e.Kind)
		if e.Mode != "" {
			fmt.Fprintf(&b, " (%s)", e.Mode)
		}
		switch {
		case e.TTLMs >= 0:
			fmt.Fprintf(&b, "  ttl %s", ms(e.TTLMs))
		case len(e.Holders) > 0 && e.Kind != kindSemaphore:
			b.WriteString("  no TTL")
		case len(e.Holders) == 0 && e.Count == nil && e.Permits == nil:
			b.WriteString("  free")
		}
		if e.Permits != nil {
			fmt.Fprintf(&b, "  %d permit(s) available", *e.Permits)
		}
		if e.Count != nil {
			fmt.Fprintf(&b, "  count %d", *e.Count)
		}
		if e.FencingCounter != nil {
			fmt.Fprintf(&b, "  fencing counter %d", *e.FencingCounter)
		}
		if e.Leaked {
			b.WriteString("  LEAKED")
		}
		b.WriteString("\n")
		for _, h := range e.Holders {
			fmt.Fprintf(&b, "  holder %s", h.Field)
			if h.Role != "" {
				fmt.Fprintf(&b, " (%s)", h.Role)
			}
			if h.LeaseMs != nil {
				if *h.LeaseMs < 0 {
					b.WriteString("  no lease")
				} else {
					fmt.Fprintf(&b, "  lease %s left", ms(*h.LeaseMs))
				}
			} else {
				fmt.Fprintf(&b, "  hold count %d", h.HoldCount)
			}
			b.WriteString("\n")
		}
		for _, q := range e.Queue {
			fmt.Fprintf(&b, "  waiter %d. %s", q.Position, q.Field)
			switch {
			case q.RemainingMs == nil:
				b.WriteString("  no deadline")
			case *q.RemainingMs >= 0:
				fmt.Fprintf(&b, "  deadline in %s", ms(*q.RemainingMs))
			default:
				fmt.Fprintf(&b, "  deadline passed %s ago", ms(-*q.RemainingMs))
			}
			b.WriteString("\n")
		}
		for _, l := range e.Leaks {
			fmt.Fprintf(&b, "  leak: %s\n", l)
		}
	}
	io.WriteString(w, b.String())
}

// globMatch reports whether s matches pattern, with Redis' glob rules
// (those of SCAN's MATCH): * any run, ? one character, [abc] [^abc] [a-z]
// a set, \x the character x.
func globMatch(pattern, s string) bool {
	for len(pattern) > 0 {
		switch pattern[0] {
		case '*':
			for len(pattern) > 1 && pattern[1] == '*' {
				pattern = pattern[1:]
			}
			if len(pattern) == 1 {
				return true
			}
			for i := 0; i <= len(s); i++ {
				if globMatch(pattern[1:], s[i:]) {
					return true
				}
			}
			return false
		case '?':
			if len(s) == 0 {
				return false
			}
			s = s[1:]
			pattern = pattern[1:]
		case '[':
			if len(s) == 0 {
				return false
			}
			p := pattern[1:]
			not := len(p) > 0 && p[0] == '^'
			if not {
				p = p[1:]
			}
			matched := false
			for len(p) > 0 && p[0] != ']' {
				switch {
				case p[0] == '\\' && len(p) >= 2:
					matched = matched || p[1] == s[0]
					p = p[2:]
				case len(p) >= 3 && p[1] == '-' && p[2] != ']':
					lo, hi := p[0], p[2]
					if lo > hi {
						lo, hi = hi, lo
					}
					matched = matched || (s[0] >= lo && s[0] <= hi)
					p = p[3:]
				default:
					matched = matched || p[0] == s[0]
					p = p[1:]
				}
			}
			if len(p) == 0 { // no closing ']': the rest of the pattern was the set
				pattern = ""
			} else {
				pattern = p[1:]
			}
			if matched == not {
				return false
			}
			s = s[1:]
		case '\\':
			if len(pattern) >= 2 {
				pattern = pattern[1:]
			}
			fallthrough
		default:
			if len(s) == 0 || s[0] != pattern[0] {
				return false
			}
			s = s[1:]
			pattern = pattern[1:]
		}
	}
	return len(s) == 0
}
