package redissontest

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// CountingSemaphore stands for Redisson's RSemaphore (RedissonSemaphore,
// SemaphorePubSub): the count in <name>, no permit IDs, and the channel
// redisson_sc:{name}, on which a release publishes the new count. A
// waiter sleeps on the channel's entry without a time limit (no permit
// has a lease that could end), and a message n lets min(n, local
// subscribers) of them try again.
type CountingSemaphore struct {
	c    *Client
	name string
}

// CountingSemaphore returns the RSemaphore of name (getSemaphore).
func (c *Client) CountingSemaphore(name string) *CountingSemaphore {
	return &CountingSemaphore{c: c, name: name}
}

// Channel is the semaphore's channel.
func (s *CountingSemaphore) Channel() string { return prefixName("redisson_sc", s.name) }

// csTake stands for the script of tryAcquireAsync(permits). KEYS[1] the
// count; ARGV[1] the permits. When the count is set and at least ARGV[1],
// it goes down by ARGV[1]: 1; else 0, nothing changed.
var csTake = rueidis.NewLuaScript(`
local count = redis.call('get', KEYS[1])
if count == false or tonumber(count) < tonumber(ARGV[1]) then
  return 0
end
redis.call('decrby', KEYS[1], ARGV[1])
return 1`)

// csGive stands for the script of releaseAsync(permits). KEYS[1] the
// count, KEYS[2] the channel; ARGV[1] the permits, ARGV[2] the publish
// command. The count goes up by ARGV[1] and the new count is published,
// whatever it is.
var csGive = rueidis.NewLuaScript(`
local count = redis.call('incrby', KEYS[1], ARGV[1])
redis.call(ARGV[2], KEYS[2], count)`)

// csAdd stands for the script of addPermitsAsync(permits). KEYS as
// csGive; ARGV[1] the permits (may be negative), ARGV[2] the publish
// command. The count (0 when unset) is set to itself plus ARGV[1], and
// the new count is published, whatever it is.
var csAdd = rueidis.NewLuaScript(`
local count = tonumber(redis.call('get', KEYS[1]) or '0') + tonumber(ARGV[1])
redis.call('set', KEYS[1], count)
redis.call(ARGV[2], KEYS[2], count)`)

// csDrain stands for the script of drainPermitsAsync. KEYS[1] the count.
// An unset count: 0. Else the count is set to 0 and its value before is
// the answer (a count below 0 is set to 0 too, as Java's Semaphore
// releases negative permits on drainPermits).
var csDrain = rueidis.NewLuaScript(`
local count = redis.call('get', KEYS[1])
if count == false then
  return 0
end
redis.call('set', KEYS[1], 0)
return tonumber(count)`)

// TrySetPermits is trySetPermits(n): the count set, and published, only
// when there was none.
func (s *CountingSemaphore) TrySetPermits(ctx context.Context, n int) (bool, error) {
	v, err := s.c.eval(ctx, semSet, []string{s.name, s.Channel()}, strconv.Itoa(n), s.c.publish).AsInt64()
	return v == 1, err
}

// AddPermits is addPermits(n).
func (s *CountingSemaphore) AddPermits(ctx context.Context, n int) error {
	return noReply(s.c.eval(ctx, csAdd, []string{s.name, s.Channel()}, strconv.Itoa(n), s.c.publish).Error())
}

// Release is release(n).
func (s *CountingSemaphore) Release(ctx context.Context, n int) error {
	return noReply(s.c.eval(ctx, csGive, []string{s.name, s.Channel()}, strconv.Itoa(n), s.c.publish).Error())
}

// AvailablePermits is availablePermits(): GET, 0 when unset.
func (s *CountingSemaphore) AvailablePermits(ctx context.Context) (int, error) {
	n, isNil, err := optInt64(s.c.rdb.Do(ctx, s.c.rdb.B().Get().Key(s.name).Build()))
	if isNil {
		return 0, nil
	}
	return int(n), err
}

// DrainPermits is drainPermits().
func (s *CountingSemaphore) DrainPermits(ctx context.Context) (int, error) {
	n, err := s.c.eval(ctx, csDrain, []string{s.name}).AsInt64()
	return int(n), err
}

// TryAcquireOnce is tryAcquire(n): one attempt.
func (s *CountingSemaphore) TryAcquireOnce(ctx context.Context, n int) (bool, error) {
	v, err := s.c.eval(ctx, csTake, []string{s.name}, strconv.Itoa(n)).AsInt64()
	return v == 1, err
}

// Acquire is acquire(n): try; subscribe; then, until taken, try and sleep
// on the entry's semaphore until a message lets it go (or ctx ends).
func (s *CountingSemaphore) Acquire(ctx context.Context, n int) error {
	ctx, cancel := s.c.bind(ctx)
	defer cancel()
	if ok, err := s.TryAcquireOnce(ctx, n); err != nil || ok {
		return err
	}
	e, err := s.c.ps.subscribe(ctx, semaphoreEntry, s.Channel())
	if err != nil {
		return err
	}
	defer s.c.ps.unsubscribe(e)
	for {
		if ok, err := s.TryAcquireOnce(ctx, n); err != nil || ok {
			return err
		}
		e.sem.tryAcquire(ctx, -1)
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// TryAcquire is tryAcquire(n, waitTime): as Acquire, sleeping at most the
// time left; false when it ran out.
func (s *CountingSemaphore) TryAcquire(ctx context.Context, n int, wait time.Duration) (bool, error) {
	ctx, cancel := s.c.bind(ctx)
	defer cancel()
	deadline := time.Now().Add(wait)
	if ok, err := s.TryAcquireOnce(ctx, n); err != nil || ok {
		return ok, err
	}
	if time.Until(deadline) <= 0 {
		return false, nil
	}
	sctx, scancel := context.WithDeadline(ctx, deadline)
	e, err := s.c.ps.subscribe(sctx, semaphoreEntry, s.Channel())
	scancel()
	if err != nil {
		return false, ctx.Err()
	}
	defer s.c.ps.unsubscribe(e)
	for {
		if time.Until(deadline) <= 0 {
			return false, nil
		}
		if ok, err := s.TryAcquireOnce(ctx, n); err != nil || ok {
			return ok, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false, nil
		}
		e.sem.tryAcquire(ctx, left)
		if err := ctx.Err(); err != nil {
			return false, err
		}
	}
}
