package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/layout"
)

// snapshot is what Redis held under one lock name at one instant: the
// keys status and scan read, each with its type, TTL and value, read in
// one MULTI/EXEC.
type snapshot struct {
	name string
	now  int64 // the server's clock, unix ms
	keys []*keyState
}

// keyState is one key of a snapshot.
type keyState struct {
	layout.Key
	// Type is what TYPE answered: "none" for a missing key. The value
	// fields below are set only when it is the type the layout expects.
	Type string
	// PTTL is the key's PTTL: -2 when it is missing, -1 with no expiry.
	PTTL int64
	Hash map[string]string
	List []string
	ZSet []rueidis.ZScore
	Str  string
}

// ok reports whether the key exists with the type the layout gives it.
func (k *keyState) ok() bool { return k != nil && k.Type == k.Key.Type }

// role is the key of role r, or nil when the snapshot did not read one.
// With several keys of one role (read leases, unlock latches), the first.
func (s *snapshot) role(r layout.Role) *keyState {
	for _, k := range s.keys {
		if k.Role == r {
			return k
		}
	}
	return nil
}

// present reports whether any of the keys of the roles exists, with its
// layout's type.
func (s *snapshot) present(roles ...layout.Role) bool {
	for _, k := range s.keys {
		for _, r := range roles {
			if k.Role == r && k.ok() {
				return true
			}
		}
	}
	return false
}

// readSnapshot reads keys of the lock name, with the server's clock, in
// one MULTI/EXEC. A key of another type than its layout's is read as
// type and TTL only.
func readSnapshot(ctx context.Context, rdb rueidis.Client, name string, keys []layout.Key) (*snapshot, error) {
	b := rdb.B()
	cmds := make([]rueidis.Completed, 0, 1+3*len(keys))
	cmds = append(cmds, b.Time().Build())
	for _, k := range keys {
		var read rueidis.Completed
		switch k.Type {
		case layout.TypeHash:
			read = b.Hgetall().Key(k.Name).Build()
		case layout.TypeList:
			read = b.Lrange().Key(k.Name).Start(0).Stop(-1).Build()
		case layout.TypeZSet:
			read = b.Zrange().Key(k.Name).Min("0").Max("-1").Withscores().Build()
		default:
			read = b.Get().Key(k.Name).Build()
		}
		cmds = append(cmds, b.Type().Key(k.Name).Build(), b.Pttl().Key(k.Name).Build(), read)
	}
	res, err := execAll(ctx, rdb, name, cmds...)
	if err != nil {
		return nil, err
	}
	s := &snapshot{name: name}
	if s.now, err = serverTime(res[0]); err != nil {
		return nil, err
	}
	for i, k := range keys {
		r := res[1+3*i:]
		ks := &keyState{Key: k}
		if ks.Type, err = r[0].ToString(); err != nil {
			return nil, fmt.Errorf("TYPE %s: %w", k.Name, err)
		}
		if ks.PTTL, err = r[1].AsInt64(); err != nil {
			return nil, fmt.Errorf("PTTL %s: %w", k.Name, err)
		}
		if ks.ok() {
			if err := ks.parse(r[2]); err != nil {
				return nil, fmt.Errorf("reading %s: %w", k.Name, err)
			}
		}
		s.keys = append(s.keys, ks)
	}
	return s, nil
}

// parse reads the key's value from m, the reply to its read.
func (k *keyState) parse(m rueidis.RedisMessage) (err error) {
	switch k.Key.Type {
	case layout.TypeHash:
		k.Hash, err = m.AsStrMap()
	case layout.TypeList:
		k.List, err = m.AsStrSlice()
	case layout.TypeZSet:
		k.ZSet, err = m.AsZScores()
	default:
		k.Str, err = m.ToString()
	}
	return err
}

// execAll runs cmds in one MULTI/EXEC and returns their replies. An
// error reply of one command is in its reply, not in err.
func execAll(ctx context.Context, rdb rueidis.Client, name string, cmds ...rueidis.Completed) ([]rueidis.RedisMessage, error) {
	all := append(append([]rueidis.Completed{rdb.B().Multi().Build()}, cmds...), rdb.B().Exec().Build())
	replies := rdb.DoMulti(ctx, all...)
	for _, r := range replies[:len(replies)-1] {
		if err := r.Error(); err != nil {
			return nil, fmt.Errorf("reading %q: %w", name, err)
		}
	}
	res, err := replies[len(replies)-1].ToArray()
	if err == nil && len(res) != len(cmds) {
		err = fmt.Errorf("EXEC returned %d replies, want %d", len(res), len(cmds))
	}
	if err != nil {
		return nil, fmt.Errorf("reading %q: %w", name, err)
	}
	return res, nil
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

// remaining turns a PTTL into a lease: 0 when the key is gone, -1 when it
// has no expiry.
func remaining(pttl int64) int64 {
	switch {
	case pttl == -2:
		return 0
	case pttl < 0:
		return -1
	}
	return pttl
}
