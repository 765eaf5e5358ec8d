package main

import (
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/relock-go/relock/internal/layout"
)

// errNotALock: the key of a lock name holds something else.
var errNotALock = errors.New("not a lock")

// kindCounter is a count alone under a name: a semaphore with no permit
// out, a counting semaphore, or a count-down latch, which nothing in
// Redis tells apart.
const kindCounter layout.Kind = "counter"

// detect tells from s what its name is: a kind of layout, kindCounter, or
// "" when no key of any kind is there. The error matches errNotALock when
// the key under the name is of another type, or holds what no lock does.
func detect(s *snapshot) (layout.Kind, error) {
	main := s.role(layout.RoleLock)
	if main == nil {
		main = s.role(layout.RoleCount)
	}
	typ := "none"
	if main != nil {
		typ = main.Type
	}
	switch typ {
	case layout.TypeHash:
		if layout.IsRateConfig(main.Hash) {
			return layout.KindRateLimiter, nil
		}
		if _, err := holdersOf(s.name, main.Hash); err != nil {
			return "", err
		}
		if _, rw := main.Hash[layout.ModeField]; rw {
			return layout.KindRWLock, nil
		}
		return lockKind(s), nil
	case layout.TypeString:
		if _, err := countOf(s); err != nil {
			return "", err
		}
		if s.present(layout.RoleLeases, layout.RoleWaitQueue, layout.RoleWaitDeadlines) {
			return layout.KindSemaphore, nil
		}
		if s.present(layout.RoleGrants) {
			return layout.KindCountingSemaphore, nil
		}
		return kindCounter, nil
	case "none":
		switch {
		case s.present(layout.RoleQueue, layout.RoleTimeouts, layout.RoleToken, layout.RoleWakers, layout.RoleKnocks, layout.RoleGrantees):
			return lockKind(s), nil
		case s.present(layout.RoleLeases, layout.RoleWaitQueue, layout.RoleWaitDeadlines):
			return layout.KindSemaphore, nil
		case s.present(layout.RoleGrants):
			return layout.KindCountingSemaphore, nil
		case s.present(layout.RoleRateValue, layout.RoleRatePermits):
			return layout.KindRateLimiter, nil
		}
		return "", nil
	}
	return "", fmt.Errorf("key %q is a %s: %w (a lock is a hash; a semaphore's or a latch's count is a string)", s.name, typ, errNotALock)
}

// lockKind is the kind of a lock that is not a read-write lock: fair when
// it has a queue, fenced when it has a fencing counter.
func lockKind(s *snapshot) layout.Kind {
	switch {
	case s.present(layout.RoleQueue, layout.RoleTimeouts):
		return layout.KindFair
	case s.present(layout.RoleToken):
		return layout.KindFenced
	}
	return layout.KindLock
}

// holder is one hold of a lock: a field of its hash.
type holder struct {
	Field     string `json:"field"`     // <clientID>:<owner>
	ClientID  string `json:"client_id"` // the UUID of the holder's client
	Owner     string `json:"owner"`
	HoldCount int64  `json:"hold_count"`
}

// holdersOf reads a lock hash: its holders, sorted by field, without a
// read-write lock's mode. The error matches errNotALock when a field is
// not a holder's or a value not a hold count, or the mode is none of
// read-write lock's.
func holdersOf(name string, fields map[string]string) ([]holder, error) {
	hs := make([]holder, 0, len(fields))
	for field, v := range fields {
		if field == layout.ModeField {
			if v != layout.ModeRead && v != layout.ModeWrite {
				return nil, fmt.Errorf("key %q is a hash but %w: its %q field is %q", name, errNotALock, field, v)
			}
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || !layout.IsHolderField(field) {
			return nil, fmt.Errorf("key %q is a hash but %w: field %q is %q, not a holder's hold count", name, errNotALock, field, v)
		}
		id, owner := layout.SplitField(field)
		hs = append(hs, holder{Field: field, ClientID: id, Owner: owner, HoldCount: n})
	}
	sort.Slice(hs, func(i, j int) bool { return hs[i].Field < hs[j].Field })
	return hs, nil
}

// countOf is the count under the name (a semaphore's permits available,
// a latch's count), 0 when there is none. The error matches errNotALock
// when the key holds something else.
func countOf(s *snapshot) (n int64, err error) {
	k := s.role(layout.RoleCount)
	if !k.ok() {
		return 0, nil
	}
	if n, err = strconv.ParseInt(k.Str, 10, 64); err != nil {
		return 0, fmt.Errorf("key %q is %w: its value %q is not a count", s.name, errNotALock, k.Str)
	}
	return n, nil
}

// writer splits a read-write lock's field: a writer's ends with
// layout.WriteSuffix.
func writer(field string) (readField string, isWriter bool) {
	return strings.CutSuffix(field, layout.WriteSuffix)
}

// permitID shows a semaphore permit's zset member: Redisson stores the 16
// raw bytes of the ID (older versions its 32 hex characters).
func permitID(member string) string {
	if len(member) == 16 {
		return hex.EncodeToString([]byte(member))
	}
	return member
}

// leaseEnd is a permit's lease end from its score: ok is false for a
// permit without a lease.
func leaseEnd(score float64) (end int64, ok bool) {
	end = int64(score)
	return end, end != layout.NoLeaseScore
}
