package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/layout"
)

// What scan says of one lock, and the leak rules.

// scanEntry is one lock found by scan. Its JSON form is a line of
// 'relock scan --json'; the field names are stable.
type scanEntry struct {
	Name string      `json:"name"`
	Kind layout.Kind `json:"kind"`
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
	Permits        *int64       `json:"permits_available,omitempty"` // semaphore, counting semaphore, rate limiter (left in the window)
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
	// LeaseMs is a semaphore permit's remaining lease (-1: none; 0: it
	// has ended, see LeaseEndedMsAgo).
	LeaseMs *int64 `json:"lease_ms,omitempty"`
	// LeaseEndedMsAgo is how long ago a semaphore permit's lease ended:
	// the permit is no leak, the next call on the semaphore takes it back.
	LeaseEndedMsAgo *int64 `json:"lease_ended_ms_ago,omitempty"`
}

// scanWaiter is a fair lock's waiter.
type scanWaiter struct {
	Position    int    `json:"position"`
	Field       string `json:"field"`
	DeadlineMs  *int64 `json:"deadline_ms"`
	RemainingMs *int64 `json:"remaining_ms"`
}

// readFound reads the lock f in one transaction and judges it; nil when it
// turns out not to be a lock (or to be gone).
func readFound(ctx context.Context, rdb rueidis.Client, f *found) (*scanEntry, error) {
	s, err := readSnapshot(ctx, rdb, f.name, append(layout.KeysOf(f.name), f.extra...))
	if err != nil {
		return nil, err
	}
	kind, err := detect(s)
	if errors.Is(err, errNotALock) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if kind == kindCounter {
		switch {
		case f.semWaiters:
			// A semaphore with no permit out and no waiter in relock's
			// queue looks the same: waiters on a count alone are far more
			// often a counting semaphore's.
			kind = layout.KindCountingSemaphore
		case f.latchWaiters:
			kind = layout.KindLatch
		default:
			return nil, nil // an integer like any other
		}
	}
	if kind == "" {
		return nil, nil // gone since the walk
	}
	e := &scanEntry{Name: f.name, Kind: kind, Node: f.node, TTLMs: -1, Holders: []scanHolder{}, Leaks: []string{}}
	for _, k := range s.keys {
		if k.ok() {
			e.Keys = append(e.Keys, k.Name)
		}
	}
	main := s.role(layout.RoleLock)
	if main.ok() || s.present(layout.RoleCount) {
		e.TTLMs = max(main.PTTL, -1)
	}
	switch kind {
	case layout.KindSemaphore:
		e.Holders = permitsOf(s)
		n, _ := countOf(s)
		e.Permits = &n
	case layout.KindCountingSemaphore:
		n, _ := countOf(s)
		e.Permits = &n
	case layout.KindRateLimiter:
		e.Permits = rateStateOf(s).Available
	case layout.KindLatch:
		n, _ := countOf(s)
		e.Count = &n
	default:
		hs, _ := holdersOf(s.name, main.Hash) // detect checked them
		for _, h := range hs {
			sh := scanHolder{Field: h.Field, ClientID: h.ClientID, Owner: h.Owner, HoldCount: h.HoldCount}
			if kind == layout.KindRWLock {
				sh.Role = layout.ModeRead
				if owner, ok := writer(h.Owner); ok {
					sh.Owner, sh.Role = owner, layout.ModeWrite
				}
			}
			e.Holders = append(e.Holders, sh)
		}
		if kind == layout.KindRWLock {
			e.Mode = main.Hash[layout.ModeField]
		}
	}
	for _, w := range queueOf(s) {
		e.Queue = append(e.Queue, scanWaiter{Position: w.Position, Field: w.Field, DeadlineMs: w.DeadlineMs, RemainingMs: w.RemainingMs})
	}
	if t := s.role(layout.RoleToken); t.ok() {
		if n, err := strconv.ParseInt(t.Str, 10, 64); err == nil {
			e.FencingCounter = &n
		}
	}
	e.Leaks = leaks(s, e)
	e.Leaked = len(e.Leaks) > 0
	return e, nil
}

// permitsOf are a semaphore's permits held, each with its lease.
func permitsOf(s *snapshot) []scanHolder {
	hs := []scanHolder{}
	l := s.role(layout.RoleLeases)
	if !l.ok() {
		return hs
	}
	for _, z := range l.ZSet {
		h := scanHolder{Field: permitID(z.Member), HoldCount: 1}
		h.ClientID, h.Owner = permitHolder(s, z.Member)
		lease := int64(-1)
		if end, ok := leaseEnd(z.Score); ok {
			lease = end - s.now
			if lease <= 0 {
				ago := -lease
				h.LeaseEndedMsAgo = &ago
				lease = 0
			}
		}
		h.LeaseMs = &lease
		hs = append(hs, h)
	}
	return hs
}

// leaks are the states of the lock in s that nothing will ever clean up:
//   - a lock hash without a TTL: a holder that crashed never lets it go;
//   - a fair-lock waiter past its deadline, or without one: it blocks the
//     queue until it reaches the head;
//   - an unlock latch, a read-hold lease key or a counting semaphore's
//     grants without a TTL.
func leaks(s *snapshot, e *scanEntry) []string {
	out := []string{}
	if s.role(layout.RoleLock).ok() && e.TTLMs < 0 && e.Kind != layout.KindRateLimiter {
		out = append(out, "the lock hash has no TTL: a holder that crashed holds it forever")
	}
	for _, w := range e.Queue {
		switch {
		case w.RemainingMs == nil:
			out = append(out, fmt.Sprintf("fair-lock waiter %s has no deadline", w.Field))
		case *w.RemainingMs < 0:
			out = append(out, fmt.Sprintf("fair-lock waiter %s is %s past its deadline", w.Field, ms(-*w.RemainingMs)))
		}
	}
	for _, k := range s.keys {
		if !k.ok() || k.PTTL != -1 {
			continue
		}
		switch k.Role {
		case layout.RoleUnlockLatch:
			out = append(out, "unlock latch "+k.Name+" has no TTL")
		case layout.RoleReadLease:
			out = append(out, "read-hold timeout key "+k.Name+" has no TTL")
		case layout.RoleGrants:
			out = append(out, "counting semaphore's grants "+k.Name+" have no TTL")
		}
	}
	return out
}
