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

// WaiterTimeout is how long a queued waiter keeps its place without
// refreshing it. A waiter whose process died is dropped once it reaches
// the head of the queue and this has passed since its last refresh.
const WaiterTimeout = 750 * time.Millisecond

// waiterTimeoutArg is WaiterTimeout as fair_acquire.lua takes it.
var waiterTimeoutArg = strconv.FormatInt(WaiterTimeout.Milliseconds(), 10)

// RefreshInterval is how often a live waiter refreshes its place (and
// looks at the lock when no notification came).
const RefreshInterval = WaiterTimeout / 3

// kind holds the fair lock's scripts.
type kind struct{}

var _ lockcore.Kind = kind{}

func keys(name string) (queue, timeouts, channel string) {
	return layout.Queue(name),
		layout.Timeouts(name),
		layout.Channel(name)
}

// Acquire runs fair_acquire.lua: take, re-enter, or keep a place in the
// queue (when r.Waiting), sleeping at most until the next refresh.
func (kind) Acquire(ctx context.Context, r lockcore.Request) (lockcore.Attempt, error) {
	queue, timeouts, _ := keys(r.Name)
	join := "0"
	if r.Waiting {
		join = "1"
	}
	res, unsynced := r.Core.RunAcquire(ctx, lua.FairAcquire, []string{r.Name, queue, timeouts},
		[]string{r.LeaseArg, r.Field, waiterTimeoutArg, join})
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
	queue, timeouts, channel := keys(r.Name)
	return lua.FairUnlock.Exec(ctx, r.Core.RDB, []string{r.Name, queue, timeouts, channel},
		[]string{layout.UnlockMessage, r.LeaseArg, r.Field, r.Core.PublishCommand(),
			strconv.Itoa(r.Target)}).AsInt64()
}

// ForceRelease runs fair_force_unlock.lua.
func (kind) ForceRelease(ctx context.Context, c *lockcore.Core, name string) (bool, error) {
	queue, timeouts, channel := keys(name)
	n, err := lua.FairForceUnlock.Exec(ctx, c.RDB, []string{name, queue, timeouts, channel},
		[]string{layout.UnlockMessage, c.PublishCommand()}).AsInt64()
	return n == 1, err
}

// Abandon runs fair_abandon.lua: the waiter leaves the queue, and the next
// one is woken if it was the head of a free lock.
func (kind) Abandon(ctx context.Context, r lockcore.Request) error {
	queue, timeouts, channel := keys(r.Name)
	return lua.FairAbandon.Exec(ctx, r.Core.RDB, []string{r.Name, queue, timeouts, channel},
		[]string{r.Field, r.Core.PublishCommand(), layout.UnlockMessage}).Error()
}

// WaitChannel is the waiter's own channel: an unlock wakes only the head
// of the queue.
func (kind) WaitChannel(r lockcore.Request) string {
	return layout.Channel(r.Name) + ":" + r.Field
}

// Label names the fair lock to observers.
func (kind) Label() string { return observe.KindFair }
