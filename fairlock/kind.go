package fairlock

import (
	"context"
	"github.com/relock-go/relock/internal/layout"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/observe"
)

// WaiterTimeout is how long a queued relock waiter keeps its place
// without refreshing its heartbeat. A waiter whose process died is dropped
// once it reaches the head of the queue and this has passed since its last
// refresh.
const WaiterTimeout = 750 * time.Millisecond

// waiterTimeoutArg is WaiterTimeout as fair_acquire.lua takes it.
var waiterTimeoutArg = strconv.FormatInt(WaiterTimeout.Milliseconds(), 10)

// RefreshInterval is how often a live waiter refreshes its heartbeat (and
// looks at the lock when no notification came).
const RefreshInterval = WaiterTimeout / 3

// kind holds the fair lock's scripts.
type kind struct{}

var _ lockcore.Kind = kind{}

// keys are the keys every fair-lock script takes (see fair_prune.lua):
// the lock hash, the queue, the deadlines, the heartbeats, and the unlock
// channel, which the head's channel extends (with room for the sixth key
// of fair_acquire.lua, the name's other form).
func keys(name string) []string {
	return append(make([]string, 0, 6), name,
		layout.Queue(name),
		layout.Timeouts(name),
		layout.Alive(name),
		layout.Channel(name))
}

// waitTimeArg is the thread wait time of c's waiters, as the scripts take
// it.
func waitTimeArg(c *lockcore.Core) string {
	return strconv.FormatInt(lockcore.Millis(c.FairLockWaitTimeout), 10)
}

// Acquire runs fair_acquire.lua: take, re-enter, or keep a place in the
// queue (when r.Waiting), sleeping at most until the next refresh.
func (kind) Acquire(ctx context.Context, r lockcore.Request) (lockcore.Attempt, error) {
	join := "0"
	if r.Waiting {
		join = "1"
	}
	res, unsynced := r.Core.RunAcquire(ctx, lua.FairAcquire, append(keys(r.Name), layout.OtherKey(r.Name)),
		[]string{r.LeaseArg, r.Field, waiterTimeoutArg, join, waitTimeArg(r.Core), r.Core.PublishCommand(),
			layout.UnlockMessage})
	pttl, err := res.AsInt64()
	if rueidis.IsRedisNil(err) {
		return lockcore.Attempt{Acquired: true, Unsynced: unsynced}, nil
	}
	if err != nil {
		return lockcore.Attempt{}, err
	}
	// Sleep until the holder's lease ends or the next refresh, whichever
	// comes first.
	retry := RefreshInterval
	if pttl >= 0 {
		retry = min(retry, time.Duration(pttl)*time.Millisecond+time.Millisecond)
	}
	return lockcore.Attempt{Retry: retry}, nil
}

// Reenter runs lock_reenter.lua: a fair lock keeps its holds in the lock
// hash like a reentrant lock.
func (kind) Reenter(ctx context.Context, r lockcore.Request) (lockcore.Attempt, error) {
	return r.Core.Reenter(ctx, r)
}

// Release runs fair_unlock.lua.
func (kind) Release(ctx context.Context, r lockcore.Request) (int64, error) {
	return r.Core.RunRelease(ctx, lua.FairUnlock, keys(r.Name),
		[]string{layout.UnlockMessage, r.LeaseArg, r.Field, r.Core.PublishCommand(),
			strconv.Itoa(r.Target)}).AsInt64()
}

// ReleaseGrant runs fair_unlock.lua with a grant: a release that frees
// the lock writes the hold of r.GrantField, a waiter of the same Client,
// when that waiter heads the queue, with r.GrantLeaseArg as its lease
// (see lockcore's grant on release); else it wakes the head as Release
// does.
func (kind) ReleaseGrant(ctx context.Context, r lockcore.Request) (int64, bool, int64, error, error) {
	return r.Core.RunReleaseGrant(ctx, lua.FairUnlock, keys(r.Name),
		[]string{layout.UnlockMessage, r.LeaseArg, r.Field, r.Core.PublishCommand(),
			strconv.Itoa(r.Target), r.GrantField, r.GrantLeaseArg, waitTimeArg(r.Core), layout.GrantedMessage})
}

// GrantsInQueueOrder marks the fair lock as a lockcore.QueueKind: its
// release grants only to the head of the queue.
func (kind) GrantsInQueueOrder() {}

// ForceRelease runs fair_force_unlock.lua.
func (kind) ForceRelease(ctx context.Context, c *lockcore.Core, name string) (bool, error) {
	n, err := lua.FairForceUnlock.Exec(ctx, c.RDB, keys(name),
		[]string{layout.UnlockMessage, c.PublishCommand()}).AsInt64()
	return n == 1, err
}

// Abandon runs fair_abandon.lua: the waiter leaves the queue (those behind
// it get its thread wait time off their deadlines, as in Redisson), and
// the head is woken if the lock is free.
func (kind) Abandon(ctx context.Context, r lockcore.Request) error {
	return lua.FairAbandon.Exec(ctx, r.Core.RDB, keys(r.Name),
		[]string{r.Field, r.Core.PublishCommand(), layout.UnlockMessage, waitTimeArg(r.Core)}).Error()
}

// WaitChannel is the waiter's own channel: an unlock wakes only the head
// of the queue.
func (kind) WaitChannel(r lockcore.Request) string {
	return layout.Channel(r.Name) + ":" + r.Field
}

// Label names the fair lock to observers.
func (kind) Label() string { return observe.KindFair }

// ReleaseChannel is "": a release wakes the head of the queue on its own
// channel, which a watch of the lock does not hear (it hears keyspace
// notifications only).
func (kind) ReleaseChannel(string) string { return "" }
