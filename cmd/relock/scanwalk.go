package main

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/layout"
)

// The keyspace walk of scan: SCAN on every master, each key classified by
// internal/layout, grouped by lock name.

// maxLockFields bounds the hashes scan reads whole: a lock has a few
// holders; a hash with more fields is not taken for one.
const maxLockFields = 10000

// found is what the walk saw of one lock name.
type found struct {
	name, node string
	// extra are the keys found under the name whose names only the walk
	// knows: Redisson's unlock latches and read-write locks' read leases.
	extra []layout.Key
	// semWaiters and latchWaiters: its semaphore's or latch's channel has
	// subscribers (a count alone is found only that way).
	semWaiters, latchWaiters bool
	hash                     bool // the name's key is a hash that looks like a lock
}

// attachOnly are the roles of keys that are listed with a lock found by
// its other keys but never make one on their own: a lingering wake-one
// registry, a semaphore's queue, a latch's mark of its last opening.
var attachOnly = map[layout.Role]bool{
	layout.RoleWakers:        true,
	layout.RoleKnocks:        true,
	layout.RoleGrantees:      true,
	layout.RoleWaitQueue:     true,
	layout.RoleWaitDeadlines: true,
	layout.RoleLatchOpened:   true,
	layout.RoleHolders:       true,
}

// scanResult is what scanLocks found.
type scanResult struct {
	locks []*scanEntry
	keys  int // keys scanned
	nodes int // masters scanned
}

// scanLocks walks every master's keyspace and reads each lock found whose
// name matches match ("" for all). With a prefix, only the names under it
// are read, match is matched against the rest, and that rest is the name
// shown (the keys are shown whole).
func scanLocks(ctx context.Context, rdb rueidis.Client, match, prefix string) (*scanResult, error) {
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
		name, under := strings.CutPrefix(f.name, prefix)
		if !under || name == "" || match != "" && !globMatch(match, name) {
			continue
		}
		e, err := readFound(ctx, rdb, f)
		if err != nil {
			return nil, err
		}
		if e != nil {
			e.Name = name
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
		key string
		m   layout.Match
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
			m, ok := layout.Classify(k, typ)
			switch {
			case !ok:
			case m.Role == layout.RoleLock:
				hashes = append(hashes, k)
			default:
				later = append(later, pending{k, m})
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
		name, alt := p.m.Name, p.m.Alt
		if alt != "" && byName[alt] != nil && byName[alt].hash && (byName[name] == nil || !byName[name].hash) {
			name = alt // "prefix:{a}" of the lock named "{a}"
		}
		if attachOnly[p.m.Role] && byName[name] == nil {
			continue
		}
		f := get(name)
		if p.m.Role == layout.RoleUnlockLatch || p.m.Role == layout.RoleReadLease {
			f.extra = append(f.extra, layout.Key{Name: p.key, Type: layout.TypeString, Role: p.m.Role})
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
// lock's mode; or like a rate limiter's configuration (at most its four
// fields, one of them).
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
		if field == layout.ModeField || layout.IsHolderField(field) ||
			n <= 4 && layout.IsRateConfig(map[string]string{field: ""}) { // a rate limiter's configuration
			out = append(out, k)
		}
	}
	return out, nil
}

// waitedOn returns the semaphores and count-down latches whose channels
// have subscribers on node.
func waitedOn(ctx context.Context, node rueidis.Client, addr string) ([]*found, error) {
	var out []*found
	patterns := []string{layout.SemaphoreChannelPrefix + ":*", layout.CountDownLatchChannelPrefix + "*"}
	for _, sharded := range []bool{false, true} {
		for _, pattern := range patterns {
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
				m, ok := layout.ClassifyChannel(ch)
				switch {
				case !ok:
				case m.Role == layout.RoleSemChannel:
					out = append(out, &found{name: m.Name, node: addr, semWaiters: true})
				case m.Role == layout.RoleLatchChannel:
					out = append(out, &found{name: m.Name, node: addr, latchWaiters: true})
				}
			}
		}
	}
	return out, nil
}
