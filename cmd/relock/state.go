package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/lockcore"
)

// errNotALock: the key of a lock name holds something else.
var errNotALock = errors.New("not a lock")

// lockState is what Redis holds about one lock, read in one transaction.
// Its JSON form is the output of 'relock status --json'; the field names
// are stable.
type lockState struct {
	Name   string `json:"name"`
	Locked bool   `json:"locked"`
	// LeaseRemainingMs is the lock's remaining lease: 0 when it is free,
	// -1 when its key has no expiry (not written by relock or Redisson).
	LeaseRemainingMs int64        `json:"lease_remaining_ms"`
	Holders          []holderInfo `json:"holders"`
	// Queue is a fair lock's waiter queue, head first (empty for a plain
	// lock).
	Queue []waiterInfo `json:"queue"`
	// FencingCounter is the last fencing token handed out for the name,
	// null when it was never locked as a fenced lock.
	FencingCounter *int64 `json:"fencing_counter"`
	// ServerTimeMs is the Redis server's clock (unix ms) when the state was
	// read; waiter deadlines are on that clock.
	ServerTimeMs int64     `json:"server_time_ms"`
	Keys         stateKeys `json:"keys"`
}

// holderInfo is one field of the lock hash.
type holderInfo struct {
	Field     string `json:"field"`     // <clientID>:<owner>
	ClientID  string `json:"client_id"` // the UUID of the holder's client
	Owner     string `json:"owner"`
	HoldCount int64  `json:"hold_count"`
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

// stateKeys are the Redis keys a lock name uses.
type stateKeys struct {
	Lock    string `json:"lock"`
	Queue   string `json:"queue"`
	Timeout string `json:"timeout"`
	Token   string `json:"token"`
	Channel string `json:"channel"`
}

func keysOf(name string) stateKeys {
	return stateKeys{
		Lock:    name,
		Queue:   lockcore.Derived(lockcore.QueuePrefix, name),
		Timeout: lockcore.Derived(lockcore.TimeoutPrefix, name),
		Token:   lockcore.Derived(lockcore.TokenPrefix, name),
		Channel: lockcore.Channel(name),
	}
}

// splitField splits a hash field "<clientID>:<owner>". The client ID (a
// UUID) has no colon; the owner may.
func splitField(field string) (clientID, owner string) {
	clientID, owner, ok := strings.Cut(field, ":")
	if !ok {
		return "", field
	}
	return clientID, owner
}

// readLockState reads the state of lock name in one MULTI/EXEC, so that
// every part of it is from the same instant.
func readLockState(ctx context.Context, rdb rueidis.Client, name string) (*lockState, error) {
	k := keysOf(name)
	b := rdb.B()
	replies := rdb.DoMulti(ctx,
		b.Multi().Build(),
		b.Time().Build(),
		b.Type().Key(k.Lock).Build(),
		b.Hgetall().Key(k.Lock).Build(),
		b.Pttl().Key(k.Lock).Build(),
		b.Lrange().Key(k.Queue).Start(0).Stop(-1).Build(),
		b.Zrange().Key(k.Timeout).Min("0").Max("-1").Withscores().Build(),
		b.Get().Key(k.Token).Build(),
		b.Exec().Build(),
	)
	for _, r := range replies[:len(replies)-1] {
		if err := r.Error(); err != nil {
			return nil, fmt.Errorf("reading lock %q: %w", name, err)
		}
	}
	res, err := replies[len(replies)-1].ToArray()
	if err != nil {
		return nil, fmt.Errorf("reading lock %q: %w", name, err)
	}
	if len(res) != 7 {
		return nil, fmt.Errorf("reading lock %q: EXEC returned %d replies, want 7", name, len(res))
	}
	st := &lockState{Name: name, Keys: k, Holders: []holderInfo{}, Queue: []waiterInfo{}}

	now, err := res[0].AsStrSlice()
	if err != nil || len(now) != 2 {
		return nil, fmt.Errorf("TIME: %v %v", now, err)
	}
	sec, err1 := strconv.ParseInt(now[0], 10, 64)
	usec, err2 := strconv.ParseInt(now[1], 10, 64)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("TIME answered %v", now)
	}
	st.ServerTimeMs = sec*1000 + usec/1000

	typ, err := res[1].ToString()
	if err != nil {
		return nil, fmt.Errorf("TYPE %s: %w", k.Lock, err)
	}
	if typ != "hash" && typ != "none" {
		return nil, fmt.Errorf("key %q is a %s: %w (a lock is a hash)", k.Lock, typ, errNotALock)
	}
	fields, err := res[2].AsStrMap()
	if err != nil {
		return nil, fmt.Errorf("HGETALL %s: %w", k.Lock, err)
	}
	for field, v := range fields {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("key %q is a hash but %w: field %q is %q, not a hold count", k.Lock, errNotALock, field, v)
		}
		id, owner := splitField(field)
		st.Holders = append(st.Holders, holderInfo{Field: field, ClientID: id, Owner: owner, HoldCount: n})
	}
	sort.Slice(st.Holders, func(i, j int) bool { return st.Holders[i].Field < st.Holders[j].Field })
	st.Locked = len(st.Holders) > 0

	pttl, err := res[3].AsInt64()
	if err != nil {
		return nil, fmt.Errorf("PTTL %s: %w", k.Lock, err)
	}
	switch {
	case pttl == -2:
		st.LeaseRemainingMs = 0
	case pttl < 0:
		st.LeaseRemainingMs = -1
	default:
		st.LeaseRemainingMs = pttl
	}

	queue, err := res[4].AsStrSlice()
	if err != nil {
		return nil, fmt.Errorf("LRANGE %s: %w", k.Queue, err)
	}
	deadlines, err := res[5].AsZScores()
	if err != nil {
		return nil, fmt.Errorf("ZRANGE %s: %w", k.Timeout, err)
	}
	byField := make(map[string]int64, len(deadlines))
	for _, z := range deadlines {
		byField[z.Member] = int64(z.Score)
	}
	for i, field := range queue {
		id, owner := splitField(field)
		w := waiterInfo{Position: i + 1, Field: field, ClientID: id, Owner: owner}
		if d, ok := byField[field]; ok {
			rem := d - st.ServerTimeMs
			w.DeadlineMs, w.RemainingMs = &d, &rem
		}
		st.Queue = append(st.Queue, w)
	}

	if !res[6].IsNil() {
		token, err := res[6].AsInt64()
		if err != nil {
			return nil, fmt.Errorf("GET %s: %w", k.Token, err)
		}
		st.FencingCounter = &token
	}
	return st, nil
}
