package rwlock

import (
	"context"
	"fmt"
	"github.com/relock-go/relock/internal/layout"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/observe"
)

// Messages published on the channel.
const (
	readReleased  = layout.UnlockMessage  // "0": wakes one waiter per Client
	writeReleased = layout.WakeAllMessage // "1": wakes every waiter
)

// keyPrefix is what the read holds' lease keys start with: "{name}", or
// the name itself when it has a hash tag (Redisson's rule), so that they
// share the hash's slot.
func keyPrefix(name string) string { return layout.Tagged(name) }

// LeaseKey is the key of level n (1 for the first) of the read hold of
// the hash field field ("<clientID>:<owner>") on the lock name.
func LeaseKey(name, field string, n int) string { return layout.ReadLeaseKey(name, field, n) }

// Channel is the lock's channel, shared by its read and write sides.
func Channel(name string) string { return layout.RWChannel(name) }

// retryAfter turns the hash's PTTL into the longest sleep before the next
// attempt: just past the lease's end; 0 (a notification only) when the
// key has no expiry.
func retryAfter(pttl int64) time.Duration {
	if pttl < 0 {
		return 0
	}
	return time.Duration(pttl)*time.Millisecond + time.Millisecond
}

// acquired reads the reply of an acquire script: nil when taken, else the
// hash's PTTL.
func acquired(res rueidis.RedisResult, unsynced error) (lockcore.Attempt, error) {
	pttl, err := res.AsInt64()
	if rueidis.IsRedisNil(err) {
		return lockcore.Attempt{Acquired: true, Unsynced: unsynced}, nil
	}
	if err != nil {
		return lockcore.Attempt{}, err
	}
	return lockcore.Attempt{Retry: retryAfter(pttl)}, nil
}

// reentered reads the reply of a re-enter script: 0 when done, nil when
// the hold was gone.
func reentered(res rueidis.RedisResult, unsynced error) (lockcore.Attempt, error) {
	err := res.Error()
	switch {
	case rueidis.IsRedisNil(err):
		return lockcore.Attempt{}, nil
	case err != nil:
		return lockcore.Attempt{}, err
	}
	return lockcore.Attempt{Acquired: true, Unsynced: unsynced}, nil
}

func ms(n int64) string { return strconv.FormatInt(n, 10) }

// readKind is the read side: shared, one lease key per hold level.
type readKind struct{}

var (
	_ lockcore.Kind        = readKind{}
	_ lockcore.KindRenewer = readKind{}
)

func (readKind) Acquire(ctx context.Context, r lockcore.Request) (lockcore.Attempt, error) {
	return acquired(r.Core.RunAcquire(ctx, lua.RWReadAcquire, []string{r.Name, layout.OtherKey(r.Name)},
		[]string{ms(r.LeaseMs), r.Field, keyPrefix(r.Name)}))
}

func (readKind) Reenter(ctx context.Context, r lockcore.Request) (lockcore.Attempt, error) {
	return reentered(r.Core.RunAcquire(ctx, lua.RWReadReenter, []string{r.Name, Channel(r.Name)},
		[]string{ms(r.LeaseMs), r.Field, keyPrefix(r.Name), strconv.Itoa(r.Target), r.Core.PublishCommand()}))
}

func (readKind) Release(ctx context.Context, r lockcore.Request) (int64, error) {
	return r.Core.RunRelease(ctx, lua.RWReadUnlock, []string{r.Name, Channel(r.Name)},
		[]string{readReleased, ms(r.LeaseMs), r.Field, r.Core.PublishCommand(), strconv.Itoa(r.Target),
			keyPrefix(r.Name)}).AsInt64()
}

func (readKind) ForceRelease(ctx context.Context, c *lockcore.Core, name string) (bool, error) {
	n, err := lua.RWForceUnlock.Exec(ctx, c.RDB, []string{name, Channel(name)},
		[]string{"read", readReleased, c.PublishCommand()}).AsInt64()
	return n == 1, err
}

func (readKind) Abandon(context.Context, lockcore.Request) error { return nil }

func (readKind) WaitChannel(r lockcore.Request) string { return Channel(r.Name) }

// ReleaseChannel is the read-write lock's channel, where its releases are
// published.
func (readKind) ReleaseChannel(name string) string { return Channel(name) }

// CheckOwner refuses an owner whose read field would be another owner's
// write field ("x:write" reading is "x" writing).
func (readKind) CheckOwner(owner string) error { return checkOwner(owner) }

// IsLocked reports whether anyone holds a read level.
func (readKind) IsLocked(ctx context.Context, c *lockcore.Core, name string) (bool, error) {
	return locked(ctx, c, name, "read")
}

// Label names the kind to the observer.
func (readKind) Label() string { return observe.KindRead }

// RenewCall renews the hold's lease keys and keeps the hash at least as
// long.
func (readKind) RenewCall(r lockcore.Request) lockcore.Call {
	return lockcore.Call{Script: lua.RWReadRenew, Keys: []string{r.Name},
		Args: []string{ms(r.LeaseMs), r.Field, keyPrefix(r.Name)}}
}

// writeKind is the write side: exclusive, in the hash's lease.
type writeKind struct{}

var (
	_ lockcore.Kind        = writeKind{}
	_ lockcore.KindRenewer = writeKind{}
)

func (writeKind) Acquire(ctx context.Context, r lockcore.Request) (lockcore.Attempt, error) {
	return acquired(r.Core.RunAcquire(ctx, lua.RWWriteAcquire, []string{r.Name, layout.OtherKey(r.Name)},
		[]string{ms(r.LeaseMs), r.Field, keyPrefix(r.Name)}))
}

func (writeKind) Reenter(ctx context.Context, r lockcore.Request) (lockcore.Attempt, error) {
	return reentered(r.Core.RunAcquire(ctx, lua.RWWriteReenter, []string{r.Name, Channel(r.Name)},
		[]string{ms(r.LeaseMs), r.Field, keyPrefix(r.Name), strconv.Itoa(r.Target), r.Core.PublishCommand()}))
}

func (writeKind) Release(ctx context.Context, r lockcore.Request) (int64, error) {
	return r.Core.RunRelease(ctx, lua.RWWriteUnlock, []string{r.Name, Channel(r.Name)},
		[]string{writeReleased, ms(r.LeaseMs), r.Field, r.Core.PublishCommand(), strconv.Itoa(r.Target),
			keyPrefix(r.Name)}).AsInt64()
}

func (writeKind) ForceRelease(ctx context.Context, c *lockcore.Core, name string) (bool, error) {
	n, err := lua.RWForceUnlock.Exec(ctx, c.RDB, []string{name, Channel(name)},
		[]string{"write", writeReleased, c.PublishCommand()}).AsInt64()
	return n == 1, err
}

func (writeKind) Abandon(context.Context, lockcore.Request) error { return nil }

func (writeKind) WaitChannel(r lockcore.Request) string { return Channel(r.Name) }

// ReleaseChannel is the read-write lock's channel.
func (writeKind) ReleaseChannel(name string) string { return Channel(name) }

// CheckOwner refuses the owners the read side refuses: an owner's calls
// on either side are refused alike.
func (writeKind) CheckOwner(owner string) error { return checkOwner(owner) }

// IsLocked reports whether the lock is in write mode.
func (writeKind) IsLocked(ctx context.Context, c *lockcore.Core, name string) (bool, error) {
	return locked(ctx, c, name, "write")
}

// LossChannel is where a force-unlock of the lock is published, so that a
// watched write hold hears of it at once. (A read hold does not listen:
// every read release is published on the channel too, and with many
// readers each would bring every other reader's renewal forward; a read
// hold learns of a force-unlock at its next renewal.)
func (writeKind) LossChannel(name string) string { return Channel(name) }

// Label names the kind to the observer.
func (writeKind) Label() string { return observe.KindWrite }

// RenewCall resets the hash's lease, never below the owner's read holds'.
func (writeKind) RenewCall(r lockcore.Request) lockcore.Call {
	return lockcore.Call{Script: lua.RWWriteRenew, Keys: []string{r.Name},
		Args: []string{ms(r.LeaseMs), r.Field, keyPrefix(r.Name)}}
}

// checkOwner refuses an owner whose reader field would be another owner's
// writer field ("x:write" reading is "x" writing).
func checkOwner(owner string) error {
	if strings.HasSuffix(owner, writeSuffix) {
		return fmt.Errorf("%w: owner %q: an owner of a read-write lock may not end with %q (its read field would be the write field of %q)",
			ErrInvalidArgument, owner, writeSuffix, strings.TrimSuffix(owner, writeSuffix))
	}
	return nil
}

// locked runs rw_locked.lua for side ("read" or "write").
func locked(ctx context.Context, c *lockcore.Core, name, side string) (bool, error) {
	n, err := lua.RWLocked.Exec(ctx, c.RDB, []string{name}, []string{side}).AsInt64()
	return n == 1, err
}
