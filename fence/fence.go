// Package fence protects a resource with fencing tokens, the storage side
// of a FencedLock.
//
// A lock's lease can run out while its holder is paused (a long GC, a
// stopped VM, a partition) and the holder then writes as if it still held
// the lock, after a newer holder has written. The resource must therefore
// check, at the moment of each write, that the writer's token is not older
// than the last one it accepted. A FencedLock hands out the tokens (each
// new acquisition gets a larger one); the resource enforces them.
//
// Register does this for a value kept in Redis: the check and the write
// are one Lua script. For other stores use the same rule. In SQL, keep the
// last token beside the row and make it part of the write:
//
//	UPDATE accounts
//	   SET balance = $1, last_token = $2
//	 WHERE id = $3 AND last_token <= $2;
//	-- 0 rows updated: a newer holder has written; give up.
//
// (Use < instead of <= to accept only one write per hold.)
//
// Where tokens are monotonic: the counter is one Redis key,
// redisson_lock_token:{name}, incremented inside the acquire script. Tokens
// only grow while that key survives: across lock expiry, ForceUnlock and
// client restarts, and across a Redis restart when the server persists
// every write (appendonly yes, appendfsync always). A restart without
// persistence, or a failover to a replica that had not received the latest
// increment, can hand out a token again. A RedLock has no single counter,
// so it has no fencing token at all.
package fence

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/lua"
)

// ErrStaleToken is returned by Register.Write when a newer token was
// applied before: the writer's lock hold is over.
var ErrStaleToken = errors.New("relock: stale fencing token")

// Register is a value in Redis that only accepts writes whose fencing token
// is not older than the last token applied. It is stored as the hash key
// with fields "token" and "value". A Register is cheap and safe for
// concurrent use.
type Register struct {
	rdb rueidis.Client
	key string
}

// NewRegister returns the register stored at key.
func NewRegister(rdb rueidis.Client, key string) *Register {
	return &Register{rdb: rdb, key: key}
}

// Key is the register's Redis key.
func (r *Register) Key() string { return r.key }

// Write stores value if token is not older than the last token applied.
// When a newer token was applied, it changes nothing and returns an error
// matching ErrStaleToken. A Redis error is returned wrapped; the write is
// then not known to have happened.
func (r *Register) Write(ctx context.Context, token int64, value string) error {
	if r.key == "" {
		return errors.New("relock: fence register with an empty key")
	}
	res, err := lua.FenceWrite.Exec(ctx, r.rdb, []string{r.key},
		[]string{strconv.FormatInt(token, 10), value}).AsIntSlice()
	if err != nil {
		return fmt.Errorf("relock: fenced write to %q: %w", r.key, err)
	}
	if len(res) != 2 {
		return fmt.Errorf("relock: fenced write to %q: unexpected reply %v", r.key, res)
	}
	if res[0] != 1 {
		return fmt.Errorf("%w: token %d is older than %d, already applied to %q", ErrStaleToken, token, res[1], r.key)
	}
	return nil
}

// Read returns the register's value and the token of the write that set
// it; ("", 0, nil) when it was never written.
func (r *Register) Read(ctx context.Context) (value string, token int64, err error) {
	m, err := r.rdb.Do(ctx, r.rdb.B().Hmget().Key(r.key).Field("value", "token").Build()).ToArray()
	if err != nil {
		return "", 0, fmt.Errorf("relock: read %q: %w", r.key, err)
	}
	if len(m) != 2 || m[1].IsNil() {
		return "", 0, nil
	}
	value, _ = m[0].ToString()
	token, err = m[1].AsInt64()
	if err != nil {
		return "", 0, fmt.Errorf("relock: read %q: %w", r.key, err)
	}
	return value, token, nil
}
