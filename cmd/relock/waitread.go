package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/waitrec"
)

// Reading the wait records (internal/waitrec) that Clients keep while
// they wait, and the holders of the names they wait for: what waits,
// status and top show.

// waiter is one waiting call, read from a wait record. Its JSON form is
// an element of waiters[] in 'relock waits --json' and 'relock status
// --json'; the field names are stable.
type waiter struct {
	// Field is the waiter as a lock's hash names a holder:
	// "<clientID>:<owner>".
	Field    string `json:"field"`
	ClientID string `json:"client_id"`
	Owner    string `json:"owner"`
	// Kind is what the call waits for: lock, fenced, fair, read, write,
	// semaphore, counting_semaphore, rate_limiter, spin or latch.
	Kind string `json:"kind"`
	// SinceMs is when the wait began (unix ms, server clock: a record is
	// written once its wait has lasted 100ms, its since set back to the
	// wait's start); WaitingMs how long ago that was, on the clock of the
	// server that keeps the record.
	SinceMs   int64 `json:"since_ms"`
	WaitingMs int64 `json:"waiting_ms"`

	name string // the name waited for, with its key prefix
	key  string // the record hash
	id   string // the record's field in the hash
}

// waitScan is what readWaiters found.
type waitScan struct {
	waiters []*waiter
	nodes   int // masters scanned
	bad     int // record fields that are not records
}

// waitPattern matches the wait record hashes of every key prefix: a
// waiter under one prefix may wait for a name that a Client without it
// (or with another) names whole.
var waitPattern = "*" + waitrec.Pattern("")

// recordClientID is the Client ID of a wait record hash's key, whatever
// key prefix it has.
func recordClientID(key string) (string, bool) {
	i := strings.LastIndex(key, waitrec.Base+":{")
	if i < 0 {
		return "", false
	}
	return waitrec.ClientID(key[:i], key)
}

// readWaiters walks every master with SCAN for wait record hashes and
// reads them; keep, when not nil, says which names waited for to keep.
// The waiters are sorted by name, then longest wait first.
func readWaiters(ctx context.Context, rdb rueidis.Client, keep func(name string) bool) (*waitScan, error) {
	res := &waitScan{}
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
		if !master {
			continue
		}
		res.nodes++
		if err := readNodeWaiters(ctx, node, res, keep); err != nil {
			return nil, fmt.Errorf("%s: %w", addr, err)
		}
	}
	sort.SliceStable(res.waiters, func(i, j int) bool {
		a, b := res.waiters[i], res.waiters[j]
		if a.name != b.name {
			return a.name < b.name
		}
		if a.SinceMs != b.SinceMs {
			return a.SinceMs < b.SinceMs
		}
		return a.Field < b.Field
	})
	return res, nil
}

// readNodeWaiters adds the records on node to res.
func readNodeWaiters(ctx context.Context, node rueidis.Client, res *waitScan, keep func(string) bool) error {
	var keys []string
	var cursor uint64
	for {
		entry, err := node.Do(ctx, node.B().Scan().Cursor(cursor).Match(waitPattern).Count(1000).Type(layout.TypeHash).Build()).AsScanEntry()
		if err != nil {
			return fmt.Errorf("SCAN: %w", err)
		}
		keys = append(keys, entry.Elements...)
		cursor = entry.Cursor
		if cursor == 0 {
			break
		}
	}
	t, err := node.Do(ctx, node.B().Time().Build()).ToMessage()
	if err != nil {
		return fmt.Errorf("TIME: %w", err)
	}
	now, err := serverTime(t)
	if err != nil {
		return err
	}
	hashes, err := pipeline(ctx, node, keys, func(k string) rueidis.Completed {
		return node.B().Hgetall().Key(k).Build()
	})
	if err != nil {
		return err
	}
	for i, key := range keys {
		if _, ok := recordClientID(key); !ok {
			continue
		}
		fields, err := hashes[i].AsStrMap()
		if err != nil {
			continue // gone, or moved
		}
		for id, value := range fields {
			r, err := waitrec.Decode(value)
			if err != nil {
				res.bad++
				continue
			}
			if keep != nil && !keep(r.Name) {
				continue
			}
			cid, owner := layout.SplitField(r.Owner)
			res.waiters = append(res.waiters, &waiter{
				Field: r.Owner, ClientID: cid, Owner: owner, Kind: r.Kind,
				SinceMs: r.Since, WaitingMs: max(0, now-r.Since),
				name: r.Name, key: key, id: id,
			})
		}
	}
	return nil
}

// waitedName is a name someone waits for: what Redis holds under it and
// who waits. Its JSON form is a line of 'relock waits --json' (type
// "name"); the field names are stable.
type waitedName struct {
	Type string `json:"type"` // "name"
	Name string `json:"name"` // without --prefix
	// Kind is what Redis holds under the name (as scan names kinds), ""
	// when nothing is there.
	Kind layout.Kind `json:"kind"`
	// Mode is a read-write lock's: read, write, or "" when free.
	Mode    string        `json:"mode,omitempty"`
	Holders []graphHolder `json:"holders"`
	// Available is the permits available of a semaphore, a counting
	// semaphore or a rate limiter (left in the window); Count a
	// count-down latch's count.
	Available *int64    `json:"available,omitempty"`
	Count     *int64    `json:"count,omitempty"`
	Waiters   []*waiter `json:"waiters"`
	// LongestWaitMs is the longest WaitingMs among the waiters.
	LongestWaitMs int64 `json:"longest_wait_ms"`
	// InCycle is set when a waiter of the name is in a cycle.
	InCycle bool `json:"in_cycle"`
	// Error says why what is under the name could not be read as a lock.
	Error string `json:"error,omitempty"`

	full string // the name with its key prefix
	// fencing is a fenced lock's counter, and state what readStatus
	// returned, for top.
	fencing *int64
	state   any
}

// graphHolder is one holder of a waited-for name.
type graphHolder struct {
	// Field is the holder's hash field; for a read-write lock's writer it
	// ends with ":write".
	Field     string `json:"field"`
	ClientID  string `json:"client_id"`
	Owner     string `json:"owner"`
	HoldCount int64  `json:"hold_count"`
	// Mode is read or write for a read-write lock's holders.
	Mode string `json:"mode,omitempty"`
}

// node is the holder as a waiter names itself: its field without a
// writer's suffix.
func (h graphHolder) node() string {
	return strings.TrimSuffix(h.Field, layout.WriteSuffix)
}

// readWaited reads what is under name (with its key prefix) and joins its
// waiters; shown is the name to show.
func readWaited(ctx context.Context, rdb rueidis.Client, full, shown string, ws []*waiter) (*waitedName, error) {
	n := &waitedName{Type: "name", Name: shown, full: full, Holders: []graphHolder{}, Waiters: ws}
	for _, w := range ws {
		n.LongestWaitMs = max(n.LongestWaitMs, w.WaitingMs)
	}
	st, err := readStatus(ctx, rdb, full, nil)
	switch {
	case errors.Is(err, errNoSuchLock):
		return n, nil
	case errors.Is(err, errNotALock):
		n.Error = err.Error()
		return n, nil
	case err != nil:
		return nil, err
	}
	n.state = st
	n.fill(st)
	return n, nil
}

// fill sets the kind and holders of n from a state of readStatus.
func (n *waitedName) fill(st any) {
	switch st := st.(type) {
	case *lockState:
		n.Kind, n.fencing = st.Kind, st.FencingCounter
		for _, h := range st.Holders {
			n.Holders = append(n.Holders, graphHolder{Field: h.Field, ClientID: h.ClientID, Owner: h.Owner, HoldCount: h.HoldCount})
		}
	case *rwState:
		n.Kind, n.Mode = layout.KindRWLock, st.Mode
		if w := st.Writer; w != nil {
			n.Holders = append(n.Holders, graphHolder{Field: w.Field, ClientID: w.ClientID, Owner: w.Owner, HoldCount: w.HoldCount, Mode: layout.ModeWrite})
		}
		for _, r := range st.Readers {
			n.Holders = append(n.Holders, graphHolder{Field: r.Field, ClientID: r.ClientID, Owner: r.Owner, HoldCount: r.HoldCount, Mode: layout.ModeRead})
		}
	case *semState:
		n.Kind, n.Available = layout.KindSemaphore, &st.Available
	case *countingState:
		n.Kind, n.Available = layout.KindCountingSemaphore, &st.Available
	case *rateState:
		n.Kind, n.Available = layout.KindRateLimiter, st.Available
	case *latchState:
		switch {
		case st.Count != nil:
			n.Kind, n.Count = layout.KindLatch, st.Count
		default: // a count alone: the waiters' kind says whose
			n.Kind = kindCounter
			switch n.waiterKind() {
			case "latch":
				n.Kind, n.Count = layout.KindLatch, st.Value
			case "semaphore":
				n.Kind, n.Available = layout.KindSemaphore, st.Value
			case "counting_semaphore":
				n.Kind, n.Available = layout.KindCountingSemaphore, st.Value
			}
		}
	}
}

// waiterKind is the kind its waiters wait for, when they agree.
func (n *waitedName) waiterKind() string {
	kind := ""
	for _, w := range n.Waiters {
		if kind != "" && w.Kind != kind {
			return ""
		}
		kind = w.Kind
	}
	return kind
}

// shownName is the name to show of full under --prefix prefix, and false
// when full is not under it or does not match match.
func shownName(full, prefix, match string) (string, bool) {
	name, under := strings.CutPrefix(full, prefix)
	if !under || name == "" || match != "" && !globMatch(match, name) {
		return "", false
	}
	return name, true
}
