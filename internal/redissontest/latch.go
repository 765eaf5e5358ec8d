package redissontest

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// CountDownLatch stands for Redisson's RCountDownLatch
// (RedissonCountDownLatch): the count in <name> (no key: 0) and the
// channel redisson_countdownlatch__channel__{<name>} (the name always in
// braces), which carries 0 when the count reached 0 and 1 when a count
// was set (or the latch deleted).
type CountDownLatch struct {
	c    *Client
	name string
}

// CountDownLatch returns the RCountDownLatch of name
// (getCountDownLatch).
func (c *Client) CountDownLatch(name string) *CountDownLatch {
	return &CountDownLatch{c: c, name: name}
}

// Channel is the latch's channel.
func (l *CountDownLatch) Channel() string {
	return "redisson_countdownlatch__channel__{" + l.name + "}"
}

// latchDown stands for the script of countDownAsync. KEYS[1] the count,
// KEYS[2] the channel; ARGV[1] the message (0), ARGV[2] the publish
// command. The count goes down by one; at or under 0 the key goes, and
// exactly at 0 the message is published.
var latchDown = rueidis.NewLuaScript(`
local left = redis.call('decr', KEYS[1])
if left > 0 then
  return
end
redis.call('del', KEYS[1])
if left == 0 then
  redis.call(ARGV[2], KEYS[2], ARGV[1])
end`)

// latchSet stands for the script of trySetCountAsync. KEYS as latchDown;
// ARGV[1] the message (1), ARGV[2] the count, ARGV[3] the publish
// command. Set and announced only when there was no count: 1; else 0.
var latchSet = rueidis.NewLuaScript(`
if redis.call('exists', KEYS[1]) == 1 then
  return 0
end
redis.call('set', KEYS[1], ARGV[2])
redis.call(ARGV[3], KEYS[2], ARGV[1])
return 1`)

// latchDelete stands for the script of deleteAsync. KEYS as latchDown;
// ARGV[1] the message (1), ARGV[2] the publish command. When there was a
// count it goes and the message is published: 1; else 0.
var latchDelete = rueidis.NewLuaScript(`
if redis.call('del', KEYS[1]) == 0 then
  return 0
end
redis.call(ARGV[2], KEYS[2], ARGV[1])
return 1`)

// TrySetCount is trySetCount(n).
func (l *CountDownLatch) TrySetCount(ctx context.Context, n int64) (bool, error) {
	v, err := l.c.eval(ctx, latchSet, []string{l.name, l.Channel()}, "1", strconv.FormatInt(n, 10), l.c.publish).AsInt64()
	return v == 1, err
}

// CountDown is countDown().
func (l *CountDownLatch) CountDown(ctx context.Context) error {
	return noReply(l.c.eval(ctx, latchDown, []string{l.name, l.Channel()}, "0", l.c.publish).Error())
}

// Delete is delete().
func (l *CountDownLatch) Delete(ctx context.Context) (bool, error) {
	v, err := l.c.eval(ctx, latchDelete, []string{l.name, l.Channel()}, "1", l.c.publish).AsInt64()
	return v == 1, err
}

// Count is getCount(): GET of the count, 0 when there is none.
func (l *CountDownLatch) Count(ctx context.Context) (int64, error) {
	n, err := l.c.rdb.Do(ctx, l.c.rdb.B().Get().Key(l.name).Build()).AsInt64()
	if rueidis.IsRedisNil(err) {
		return 0, nil
	}
	return n, err
}

// Await is await(): when the count is not 0, subscribe, then, while the
// count is above 0, wait for the entry's gate to be open. It returns when
// the count was read as 0, or ctx's error.
func (l *CountDownLatch) Await(ctx context.Context) error {
	_, err := l.await(ctx, -1)
	return err
}

// AwaitTimeout is await(time): as Await, for at most d; false when d ran
// out first.
func (l *CountDownLatch) AwaitTimeout(ctx context.Context, d time.Duration) (bool, error) {
	return l.await(ctx, d)
}

func (l *CountDownLatch) await(ctx context.Context, d time.Duration) (bool, error) {
	ctx, cancel := l.c.bind(ctx)
	defer cancel()
	start := time.Now()
	left := d
	if n, err := l.Count(ctx); err != nil || n == 0 {
		return err == nil, err
	}
	sctx := ctx
	if d >= 0 {
		var scancel context.CancelFunc
		sctx, scancel = context.WithTimeout(ctx, d)
		defer scancel()
	}
	e, err := l.c.ps.subscribe(sctx, latchEntry, l.Channel())
	if err != nil {
		if ctx.Err() == nil && d >= 0 {
			return false, nil
		}
		return false, err
	}
	defer l.c.ps.unsubscribe(e)
	if d >= 0 {
		left -= time.Since(start)
		if left <= 0 {
			return false, nil
		}
	}
	for {
		n, err := l.Count(ctx)
		if err != nil {
			return false, err
		}
		if n <= 0 {
			return true, nil
		}
		if d >= 0 && left <= 0 {
			return false, nil
		}
		start = time.Now()
		e.gate.await(ctx, left)
		if err := ctx.Err(); err != nil {
			return false, err
		}
		if d >= 0 {
			left -= time.Since(start)
		}
	}
}
