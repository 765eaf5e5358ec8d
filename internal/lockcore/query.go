package lockcore

import (
	"context"
	"fmt"
	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/layout"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/lua"
)

// LockedChecker is implemented by a Kind that tells whether its lock is
// held by another call than EXISTS on its key (a side of a read-write
// lock); it returns Redis' errors as they are.
type LockedChecker interface {
	IsLocked(ctx context.Context, c *Core, name string) (bool, error)
}

// IsLocked reports whether anyone holds the lock.
func (m *Mutex) IsLocked(ctx context.Context) (bool, error) {
	if err := m.check(); err != nil {
		return false, err
	}
	var locked bool
	var err error
	if lc, ok := m.kind.(LockedChecker); ok {
		locked, err = lc.IsLocked(ctx, m.core, m.name)
	} else {
		var n int64
		n, err = m.core.RDB.Do(ctx, m.core.RDB.B().Exists().Key(m.name).Build()).AsInt64()
		locked = n == 1
	}
	if err != nil {
		return false, m.core.closedOr(redisError("is locked", m.name, err))
	}
	return locked, nil
}

// HoldCount is the hold count of the owner in ctx (or of the Client's
// anonymous hold) as Redis has it; 0 when it holds nothing.
func (m *Mutex) HoldCount(ctx context.Context) (int, error) {
	if err := m.check(); err != nil {
		return 0, err
	}
	owner, _, err := m.holder(ctx)
	if err != nil || owner == "" {
		return 0, err
	}
	n, err := m.core.RDB.Do(ctx, m.core.RDB.B().Hget().Key(m.name).Field(m.Field(owner)).Build()).AsInt64()
	if rueidis.IsRedisNil(err) {
		return 0, nil
	}
	if err != nil {
		return 0, m.core.closedOr(redisError("hold count", m.name, err))
	}
	return int(n), nil
}

// IsHeldByOwner reports whether the owner in ctx (or the Client's
// anonymous hold) holds the lock.
func (m *Mutex) IsHeldByOwner(ctx context.Context) (bool, error) {
	n, err := m.HoldCount(ctx)
	return n > 0, err
}

// RemainingLease is the lock's remaining lease: 0 when it is not locked, a
// negative duration when the key has no expiry (not written by relock).
func (m *Mutex) RemainingLease(ctx context.Context) (time.Duration, error) {
	if err := m.check(); err != nil {
		return 0, err
	}
	ms, err := m.core.RDB.Do(ctx, m.core.RDB.B().Pttl().Key(m.name).Build()).AsInt64()
	if err != nil {
		return 0, m.core.closedOr(redisError("pttl", m.name, err))
	}
	switch {
	case ms == -2:
		return 0, nil
	case ms < 0:
		return -1, nil
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// Token is the fencing token of the current hold of the owner in ctx (or
// of the Client's anonymous hold).
func (m *Mutex) Token(ctx context.Context) (int64, error) {
	if err := m.check(); err != nil {
		return 0, err
	}
	owner, _, err := m.holder(ctx)
	if err != nil {
		return 0, err
	}
	if owner != "" {
		keys, args := []string{m.name, layout.Token(m.name)}, []string{m.Field(owner)}
		var token int64
		if !m.core.noReadOnly.Load() {
			token, err = lua.FencedToken.Exec(ctx, m.core.RDB, keys, args).AsInt64()
			if isUnknownCommand(err) {
				// A server before Redis 7 has no EVALSHA_RO: from now on,
				// the script goes as EVALSHA.
				m.core.noReadOnly.Store(true)
			}
		}
		if m.core.noReadOnly.Load() {
			token, err = lua.FencedTokenPrimary.Exec(ctx, m.core.RDB, keys, args).AsInt64()
		}
		if err == nil {
			return token, nil
		}
		if !rueidis.IsRedisNil(err) {
			return 0, m.core.closedOr(redisError("token", m.name, err))
		}
	}
	return 0, fmt.Errorf("%w: %q: no hold, so no token", relock.ErrNotHeld, m.name)
}

// isUnknownCommand reports whether err is the reply of a server that does
// not know the command sent.
func isUnknownCommand(err error) bool {
	re, ok := replyOf(err)
	return ok && strings.Contains(re.Error(), "unknown command")
}
