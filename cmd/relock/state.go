package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/layout"
)

// The states status prints: one type per kind, built from a snapshot.
// Their JSON forms are the output of 'relock status --json'; the field
// names are stable.

// lockState is a lock, fenced lock or fair lock.
type lockState struct {
	Name string `json:"name"`
	// Kind is "lock", "fenced" (it has a fencing counter) or "fair" (it
	// has a waiter queue).
	Kind   layout.Kind `json:"kind"`
	Locked bool        `json:"locked"`
	// LeaseRemainingMs is the lock's remaining lease: 0 when it is free,
	// -1 when its key has no expiry (not written by relock or Redisson).
	LeaseRemainingMs int64    `json:"lease_remaining_ms"`
	Holders          []holder `json:"holders"`
	// Queue is a fair lock's waiter queue, head first (empty for the
	// others).
	Queue []waiterInfo `json:"queue"`
	// FencingCounter is the last fencing token handed out for the name,
	// null when it was never locked as a fenced lock.
	FencingCounter *int64 `json:"fencing_counter"`
	// ServerTimeMs is the Redis server's clock (unix ms) when the state was
	// read; waiter deadlines are on that clock.
	ServerTimeMs int64 `json:"server_time_ms"`
	// Waiters are the calls that wait for the name, from their wait
	// records, longest wait first (see waiter).
	Waiters []*waiter `json:"waiters"`
	Keys    struct {
		Lock    string `json:"lock"`
		Queue   string `json:"queue"`
		Timeout string `json:"timeout"`
		Token   string `json:"token"`
		Channel string `json:"channel"`
	} `json:"keys"`
}

// waiterInfo is one waiter in a fair lock's queue.
type waiterInfo struct {
	Position int    `json:"position"` // 1 is the head
	Field    string `json:"field"`
	ClientID string `json:"client_id"`
	Owner    string `json:"owner"`
	// DeadlineMs is when the waiter is dropped if it has not refreshed its
	// place by then (unix ms, server clock); RemainingMs is DeadlineMs
	// minus ServerTimeMs. Both are null when the waiter has no deadline.
	DeadlineMs  *int64 `json:"deadline_ms"`
	RemainingMs *int64 `json:"remaining_ms"`
}

// lockStateOf reads the lock of kind in s. The error matches errNotALock
// when the fencing counter holds something else than a number.
func lockStateOf(s *snapshot, kind layout.Kind) (*lockState, error) {
	st := &lockState{Name: s.name, Kind: kind, ServerTimeMs: s.now, Holders: []holder{}, Queue: []waiterInfo{}, Waiters: []*waiter{}}
	st.Keys.Lock, st.Keys.Queue, st.Keys.Timeout = s.name, layout.Queue(s.name), layout.Timeouts(s.name)
	st.Keys.Token, st.Keys.Channel = layout.Token(s.name), layout.Channel(s.name)
	if main := s.role(layout.RoleLock); main.ok() {
		hs, err := holdersOf(s.name, main.Hash)
		if err != nil {
			return nil, err
		}
		st.Holders = hs
		st.LeaseRemainingMs = remaining(main.PTTL)
	}
	st.Locked = len(st.Holders) > 0
	st.Queue = queueOf(s)
	if k := s.role(layout.RoleToken); k.ok() {
		n, err := strconv.ParseInt(k.Str, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("fencing counter %q is %q: %w", k.Name, k.Str, errNotALock)
		}
		st.FencingCounter = &n
	}
	return st, nil
}

// queueOf is a fair lock's queue, head first, each waiter with its
// deadline.
func queueOf(s *snapshot) []waiterInfo {
	out := []waiterInfo{}
	q := s.role(layout.RoleQueue)
	if !q.ok() {
		return out
	}
	deadlines := map[string]int64{}
	if t := s.role(layout.RoleTimeouts); t.ok() {
		for _, z := range t.ZSet {
			deadlines[z.Member] = int64(z.Score)
		}
	}
	for i, field := range q.List {
		id, owner := layout.SplitField(field)
		w := waiterInfo{Position: i + 1, Field: field, ClientID: id, Owner: owner}
		if d, ok := deadlines[field]; ok {
			rem := d - s.now
			w.DeadlineMs, w.RemainingMs = &d, &rem
		}
		out = append(out, w)
	}
	return out
}

// rwState is a read-write lock.
type rwState struct {
	Name             string     `json:"name"`
	Kind             string     `json:"kind"`
	Locked           bool       `json:"locked"`
	Mode             string     `json:"mode"` // read, write, "" when free
	LeaseRemainingMs int64      `json:"lease_remaining_ms"`
	Writer           *holder    `json:"writer"`
	Readers          []rwReader `json:"readers"`
	Waiters          []*waiter  `json:"waiters"`
	Keys             struct {
		Lock    string `json:"lock"`
		Channel string `json:"channel"`
	} `json:"keys"`
}

type rwReader struct {
	holder
	Levels []rwLevel `json:"levels"`
}

// rwLevel is one level of a read hold, with its lease key's PTTL (-2: the
// key is gone).
type rwLevel struct {
	Level       int    `json:"level"`
	Key         string `json:"key"`
	RemainingMs int64  `json:"remaining_ms"`
}

// maxLevels bounds the read levels status reads per reader.
const maxLevels = 1000

// readRWState reads the read-write lock in s, and then, in one more
// transaction, the lease keys of its read levels.
func readRWState(ctx context.Context, rdb rueidis.Client, s *snapshot) (*rwState, error) {
	st := &rwState{Name: s.name, Kind: string(layout.KindRWLock), Readers: []rwReader{}, Waiters: []*waiter{}}
	st.Keys.Lock, st.Keys.Channel = s.name, layout.RWChannel(s.name)
	main := s.role(layout.RoleLock)
	if !main.ok() {
		return st, nil
	}
	hs, err := holdersOf(s.name, main.Hash)
	if err != nil {
		return nil, err
	}
	st.Mode, st.LeaseRemainingMs = main.Hash[layout.ModeField], remaining(main.PTTL)
	st.Locked = st.Mode != ""
	var leases []layout.Key
	for _, h := range hs {
		if owner, ok := writer(h.Owner); ok {
			h.Owner = owner
			st.Writer = &h
			continue
		}
		r := rwReader{holder: h}
		for level := 1; level <= int(h.HoldCount) && level <= maxLevels; level++ {
			key := layout.ReadLeaseKey(s.name, h.Field, level)
			r.Levels = append(r.Levels, rwLevel{Level: level, Key: key})
			leases = append(leases, layout.Key{Name: key, Type: layout.TypeString, Role: layout.RoleReadLease})
		}
		st.Readers = append(st.Readers, r)
	}
	if len(leases) == 0 {
		return st, nil
	}
	ls, err := readSnapshot(ctx, rdb, s.name, leases)
	if err != nil {
		return nil, err
	}
	i := 0
	for r := range st.Readers {
		for l := range st.Readers[r].Levels {
			st.Readers[r].Levels[l].RemainingMs = ls.keys[i].PTTL
			i++
		}
	}
	return st, nil
}

// semState is a semaphore.
type semState struct {
	Name         string      `json:"name"`
	Kind         string      `json:"kind"`
	Set          bool        `json:"set"` // false: its permits were never set
	Available    int64       `json:"available"`
	Held         []semPermit `json:"held"`
	Queue        []semWaiter `json:"queue"`
	ServerTimeMs int64       `json:"server_time_ms"`
	Waiters      []*waiter   `json:"waiters"`
	Keys         struct {
		Available    string `json:"available"`
		Leases       string `json:"leases"`
		Channel      string `json:"channel"`
		Queue        string `json:"queue"`
		QueueTimeout string `json:"queue_timeout"`
		Holders      string `json:"holders"`
	} `json:"keys"`
}

// semPermit is a permit held. A permit whose lease ended is still there
// until the semaphore's next call gives it back (status changes nothing).
type semPermit struct {
	PermitID    string `json:"permit_id"`
	LeaseEndMs  *int64 `json:"lease_end_ms"` // null: no lease
	RemainingMs *int64 `json:"remaining_ms"`
	// ClientID and Owner say who took the permit, from relock's record
	// of its permits' holders; "" for a permit of Redisson's (or taken
	// before the record existed).
	ClientID string `json:"client_id"`
	Owner    string `json:"owner"`
}

type semWaiter struct {
	Position   int    `json:"position"`
	PermitID   string `json:"permit_id"`
	JoinedMs   int64  `json:"joined_ms"`
	DeadlineMs *int64 `json:"deadline_ms"`
}

// semStateOf reads the semaphore in s.
func semStateOf(s *snapshot) (*semState, error) {
	k := layout.Semaphore(s.name)
	st := &semState{Name: s.name, Kind: string(layout.KindSemaphore), ServerTimeMs: s.now, Held: []semPermit{}, Queue: []semWaiter{}, Waiters: []*waiter{}}
	st.Keys.Available, st.Keys.Leases, st.Keys.Channel = k.Available, k.Leases, k.Channel
	st.Keys.Queue, st.Keys.QueueTimeout, st.Keys.Holders = k.Queue, k.QueueDeadlines, k.Holders
	n, err := countOf(s)
	if err != nil {
		return nil, err
	}
	st.Set, st.Available = s.present(layout.RoleCount), n
	if l := s.role(layout.RoleLeases); l.ok() {
		for _, z := range l.ZSet {
			p := semPermit{PermitID: permitID(z.Member)}
			p.ClientID, p.Owner = permitHolder(s, z.Member)
			if end, ok := leaseEnd(z.Score); ok {
				rem := end - s.now
				p.LeaseEndMs, p.RemainingMs = &end, &rem
			}
			st.Held = append(st.Held, p)
		}
	}
	due := map[string]int64{}
	if d := s.role(layout.RoleWaitDeadlines); d.ok() {
		for _, z := range d.ZSet {
			due[z.Member] = int64(z.Score)
		}
	}
	if q := s.role(layout.RoleWaitQueue); q.ok() {
		for i, z := range q.ZSet {
			w := semWaiter{Position: i + 1, PermitID: permitID(z.Member), JoinedMs: int64(z.Score)}
			if d, ok := due[z.Member]; ok {
				w.DeadlineMs = &d
			}
			st.Queue = append(st.Queue, w)
		}
	}
	return st, nil
}

// permitHolder is who took the permit member (its raw ID), from the
// semaphore's record of holders in s; "" and "" when it has none.
func permitHolder(s *snapshot, member string) (clientID, owner string) {
	h := s.role(layout.RoleHolders)
	if !h.ok() {
		return "", ""
	}
	field, ok := h.Hash[member]
	if !ok {
		return "", ""
	}
	return layout.SplitField(field)
}

// rateState is a rate limiter (Redisson's RRateLimiter).
type rateState struct {
	Name         string      `json:"name"`
	Kind         string      `json:"kind"`
	Set          bool        `json:"set"` // false: no configuration
	Rate         int64       `json:"rate"`
	IntervalMs   int64       `json:"interval_ms"`
	Type         string      `json:"type"` // "overall" or "per_client"
	KeepAliveMs  int64       `json:"keep_alive_ms"`
	Available    *int64      `json:"available"` // type overall: permits left in the window now
	Grants       []rateGrant `json:"grants"`
	ServerTimeMs int64       `json:"server_time_ms"`
	Waiters      []*waiter   `json:"waiters"`
	Keys         struct {
		Config  string `json:"config"`
		Value   string `json:"value"`
		Permits string `json:"permits"`
		Channel string `json:"channel"`
	} `json:"keys"`
}

// rateGrant is a grant in a rate limiter's window (type overall).
type rateGrant struct {
	ID         string `json:"id"`
	Permits    int64  `json:"permits"`
	AtMs       int64  `json:"at_ms"`
	LeavesInMs int64  `json:"leaves_in_ms"`
}

// rateStateOf reads the rate limiter in s. Grants that have left the
// window are not shown (the limiter's next call removes them).
func rateStateOf(s *snapshot) *rateState {
	k := layout.RateLimiter(s.name)
	st := &rateState{Name: s.name, Kind: string(layout.KindRateLimiter), ServerTimeMs: s.now, Grants: []rateGrant{}, Waiters: []*waiter{}}
	st.Keys.Config, st.Keys.Value, st.Keys.Permits, st.Keys.Channel = k.Config, k.Value, k.Permits, k.Channel
	cfg := s.role(layout.RoleLock)
	if !cfg.ok() || !layout.IsRateConfig(cfg.Hash) {
		return st
	}
	num := func(f string) int64 { n, _ := strconv.ParseInt(cfg.Hash[f], 10, 64); return n }
	st.Set, st.Rate, st.IntervalMs, st.KeepAliveMs = true, num(layout.RateField), num(layout.RateIntervalField), num(layout.RateKeepAliveField)
	st.Type = "overall"
	if cfg.Hash[layout.RateTypeField] == layout.RatePerClient {
		st.Type = "per_client" // each client's window is under keys of its own
		return st
	}
	used := int64(0)
	if g := s.role(layout.RoleRatePermits); g.ok() {
		for _, z := range g.ZSet {
			id, n, ok := layout.UnpackGrant(z.Member)
			at := int64(z.Score)
			if !ok || at <= s.now-st.IntervalMs {
				continue
			}
			used += n
			st.Grants = append(st.Grants, rateGrant{ID: hex.EncodeToString([]byte(id)), Permits: n, AtMs: at, LeavesInMs: at + st.IntervalMs - s.now})
		}
	}
	left := st.Rate - used
	st.Available = &left
	return st
}

// countingState is a counting semaphore (Redisson's RSemaphore).
type countingState struct {
	Name      string    `json:"name"`
	Kind      string    `json:"kind"`
	Set       bool      `json:"set"`
	Available int64     `json:"available"`
	Grants    int       `json:"grants"`
	Waiters   []*waiter `json:"waiters"`
	Keys      struct {
		Count   string `json:"count"`
		Grants  string `json:"grants"`
		Channel string `json:"channel"`
	} `json:"keys"`
}

// countingStateOf reads the counting semaphore in s.
func countingStateOf(s *snapshot) (*countingState, error) {
	k := layout.CountingSemaphore(s.name)
	st := &countingState{Name: s.name, Kind: string(layout.KindCountingSemaphore), Waiters: []*waiter{}}
	st.Keys.Count, st.Keys.Grants, st.Keys.Channel = k.Count, k.Grants, k.Channel
	n, err := countOf(s)
	if err != nil {
		return nil, err
	}
	st.Set, st.Available = s.present(layout.RoleCount), n
	if g := s.role(layout.RoleGrants); g.ok() {
		for _, z := range g.ZSet {
			if int64(z.Score) > s.now {
				st.Grants++
			}
		}
	}
	return st, nil
}

// latchState is a count-down latch (kind "latch"), or a count that may be
// a latch's or a semaphore's (kind "counter", with Value).
type latchState struct {
	Name    string    `json:"name"`
	Kind    string    `json:"kind"`
	Count   *int64    `json:"count,omitempty"`
	Open    *bool     `json:"open,omitempty"`
	Value   *int64    `json:"value,omitempty"`
	Waiters []*waiter `json:"waiters"`
	Keys    struct {
		Count   string `json:"count"`
		Channel string `json:"channel,omitempty"`
	} `json:"keys"`
}

// latchStateOf reads the count in s as a latch's, or as a counter's.
func latchStateOf(s *snapshot, asCounter bool) (*latchState, error) {
	n, err := countOf(s)
	if err != nil {
		return nil, err
	}
	st := &latchState{Name: s.name, Kind: "latch", Waiters: []*waiter{}}
	st.Keys.Count = s.name
	if asCounter {
		st.Kind, st.Value = string(kindCounter), &n
		return st, nil
	}
	open := n <= 0
	st.Count, st.Open = &n, &open
	st.Keys.Channel = layout.LatchChannel(s.name)
	return st, nil
}

// readLock reads the lock name (a lock, fenced lock or fair lock; free
// when nothing is there). The error matches errNotALock when name is
// another kind, or holds something else.
func readLock(ctx context.Context, rdb rueidis.Client, name string) (*lockState, error) {
	s, err := readSnapshot(ctx, rdb, name, layout.KeysOf(name))
	if err != nil {
		return nil, err
	}
	kind, err := detect(s)
	switch {
	case err != nil:
		return nil, err
	case kind == "":
		kind = layout.KindLock
	case !isLockKind(kind):
		return nil, fmt.Errorf("%q is a %s: %w", name, noun(kind), errNotALock)
	}
	return lockStateOf(s, kind)
}

// isLockKind reports whether k is a lock that lockState shows.
func isLockKind(k layout.Kind) bool {
	return k == layout.KindLock || k == layout.KindFenced || k == layout.KindFair
}

// noun names kind k to people.
func noun(k layout.Kind) string {
	if s, ok := layout.SpecOf(k); ok {
		return s.Noun
	}
	if k == kindCounter {
		return "count (a semaphore's, a counting semaphore's or a count-down latch's)"
	}
	return string(k)
}
