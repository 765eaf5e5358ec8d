package redissontest

import (
	"context"
	"crypto/rand"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// RateLimiter stands for Redisson's RRateLimiter (RedissonRateLimiter):
// the configuration hash <name> (rate, interval ms, type, keepAliveTime),
// the permits left in {name}:value and the grants in {name}:permits (a
// sorted set: the grant packed as Lua's struct "Bc0I" packs a length
// byte, 16 random bytes and the permits -> the Client's wall-clock ms);
// for type PER_CLIENT, {name}:value:<id> and {name}:permits:<id>. It has
// no channel: a waiter sleeps the time the script returns, until the
// oldest grant leaves the window, and tries again.
type RateLimiter struct {
	c    *Client
	name string
}

// RateLimiter returns the RRateLimiter of name (getRateLimiter).
func (c *Client) RateLimiter(name string) *RateLimiter { return &RateLimiter{c: c, name: name} }

// Rate types (RateType's ordinals).
const (
	Overall   = 0
	PerClient = 1
)

func (l *RateLimiter) keys() []string {
	value, permits := suffixName(l.name, "value"), suffixName(l.name, "permits")
	return []string{l.name, value, suffixName(value, l.c.id), permits, suffixName(permits, l.c.id)}
}

// rlSet stands for the script of trySetRateAsync: each field set only
// when missing (the type last); 1 when the type was set. KEYS[1] the
// hash; ARGV[1] rate, ARGV[2] interval ms, ARGV[3] type, ARGV[4]
// keepAliveTime ms.
var rlSet = rueidis.NewLuaScript(`
redis.call('hsetnx', KEYS[1], 'rate', ARGV[1])
redis.call('hsetnx', KEYS[1], 'interval', ARGV[2])
redis.call('hsetnx', KEYS[1], 'keepAliveTime', ARGV[4])
local set = redis.call('hsetnx', KEYS[1], 'type', ARGV[3])
if set == 1 and tonumber(ARGV[4]) > 0 then
  redis.call('pexpire', KEYS[1], ARGV[4])
end
return set`)

// rlReset stands for the script of setRateAsync(type, rate, interval,
// keepAliveTime): every field set, and the value and grants of the type
// deleted. KEYS as the limiter's five; ARGV as rlSet.
var rlReset = rueidis.NewLuaScript(`
local value, permits = KEYS[2], KEYS[4]
if ARGV[3] == '1' then
  value, permits = KEYS[3], KEYS[5]
end
redis.call('hset', KEYS[1], 'rate', ARGV[1], 'interval', ARGV[2], 'type', ARGV[3], 'keepAliveTime', ARGV[4])
if tonumber(ARGV[4]) > 0 then
  redis.call('pexpire', KEYS[1], ARGV[4])
end
redis.call('del', value, permits)`)

// rlTake stands for the script of tryAcquireAsync(command, permits).
// KEYS as the limiter's five; ARGV[1] the permits, ARGV[2] the Client's
// clock ms, ARGV[3] 16 random bytes. An error when the limiter is not set
// or the permits are more than the rate. When a value is there, the
// grants scored at or before ARGV[2] - interval leave the window and
// their permits come back to the value (counted anew from the grants left
// when that would pass the rate); then, when fewer permits than asked are
// left, the answer is how long until the oldest grant leaves, plus 3ms;
// else the grant is added, scored ARGV[2], the value goes down, and the
// answer is nil. Without a value, the value is the rate and the grant is
// made. Last, the keys get the keepAliveTime, or the hash's TTL.
var rlTake = rueidis.NewLuaScript(`
local rate = redis.call('hget', KEYS[1], 'rate')
local interval = redis.call('hget', KEYS[1], 'interval')
local kind = redis.call('hget', KEYS[1], 'type')
assert(rate ~= false and interval ~= false and kind ~= false, 'RateLimiter is not initialized')
rate, interval = tonumber(rate), tonumber(interval)
local value, permits = KEYS[2], KEYS[4]
if kind == '1' then
  value, permits = KEYS[3], KEYS[5]
end
local wanted, now = tonumber(ARGV[1]), tonumber(ARGV[2])
assert(rate >= wanted, 'Requested permits amount cannot exceed defined rate')
local function sum(members)
  local n = 0
  for _, m in ipairs(members) do
    local _, p = struct.unpack('Bc0I', m)
    n = n + p
  end
  return n
end
local grant = struct.pack('Bc0I', string.len(ARGV[3]), ARGV[3], wanted)
local left = redis.call('get', value)
local answer = nil
if left ~= false then
  left = tonumber(left)
  local gone = sum(redis.call('zrangebyscore', permits, 0, now - interval))
  if gone > 0 then
    redis.call('zremrangebyscore', permits, 0, now - interval)
    if left + gone > rate then
      left = rate - sum(redis.call('zrange', permits, 0, -1))
    else
      left = left + gone
    end
    redis.call('set', value, left)
  end
  if left < wanted then
    local first = redis.call('zrange', permits, 0, 0, 'withscores')
    answer = 3 + interval - (now - tonumber(first[2]))
  else
    redis.call('zadd', permits, now, grant)
    redis.call('decrby', value, wanted)
  end
else
  redis.call('set', value, rate)
  redis.call('zadd', permits, now, grant)
  redis.call('decrby', value, wanted)
end
local keep = redis.call('hget', KEYS[1], 'keepAliveTime')
if keep ~= false and tonumber(keep) > 0 then
  redis.call('pexpire', KEYS[1], keep)
  redis.call('pexpire', value, keep)
  redis.call('pexpire', permits, keep)
else
  local ttl = redis.call('pttl', KEYS[1])
  if ttl > 0 then
    redis.call('pexpire', value, ttl)
    redis.call('pexpire', permits, ttl)
  end
end
return answer`)

// rlAvailable stands for the script of availablePermitsAsync. KEYS as
// the limiter's five; ARGV[1] the Client's clock ms. No value: the value
// is set to the rate, the answer. Else the grants that left the window
// give their permits back to the value, which is the answer.
var rlAvailable = rueidis.NewLuaScript(`
local rate = redis.call('hget', KEYS[1], 'rate')
local interval = redis.call('hget', KEYS[1], 'interval')
local kind = redis.call('hget', KEYS[1], 'type')
assert(rate ~= false and interval ~= false and kind ~= false, 'RateLimiter is not initialized')
local value, permits = KEYS[2], KEYS[4]
if kind == '1' then
  value, permits = KEYS[3], KEYS[5]
end
local left = redis.call('get', value)
if left == false then
  redis.call('set', value, rate)
  return tonumber(rate)
end
local bound = tonumber(ARGV[1]) - tonumber(interval)
local gone = 0
for _, m in ipairs(redis.call('zrangebyscore', permits, 0, bound)) do
  local _, p = struct.unpack('Bc0I', m)
  gone = gone + p
end
if gone > 0 then
  redis.call('zremrangebyscore', permits, 0, bound)
  left = tonumber(left) + gone
  redis.call('set', value, left)
end
return tonumber(left)`)

// TrySetRate is trySetRate(type, rate, interval).
func (l *RateLimiter) TrySetRate(ctx context.Context, kind, rate int, interval time.Duration) (bool, error) {
	n, err := l.c.eval(ctx, rlSet, []string{l.name}, strconv.Itoa(rate), ms(interval), strconv.Itoa(kind), "0").AsInt64()
	return n == 1, err
}

// SetRate is setRate(type, rate, interval).
func (l *RateLimiter) SetRate(ctx context.Context, kind, rate int, interval time.Duration) error {
	return noReply(l.c.eval(ctx, rlReset, l.keys(), strconv.Itoa(rate), ms(interval), strconv.Itoa(kind), "0").Error())
}

// take runs rlTake once: granted, or how long the script says to sleep.
func (l *RateLimiter) take(ctx context.Context, n int) (ok bool, delay time.Duration, err error) {
	var id [16]byte
	_, _ = rand.Read(id[:])
	d, isNil, err := optInt64(l.c.eval(ctx, rlTake, l.keys(), strconv.Itoa(n), itoa(l.c.nowMillis()), string(id[:])))
	if err != nil {
		return false, 0, err
	}
	return isNil, time.Duration(d) * time.Millisecond, nil
}

// TryAcquireOnce is tryAcquire(n): one attempt.
func (l *RateLimiter) TryAcquireOnce(ctx context.Context, n int) (bool, error) {
	ok, _, err := l.take(ctx, n)
	return ok, err
}

// Acquire is acquire(n): until granted, try and sleep the delay the
// script returned (or until ctx ends).
func (l *RateLimiter) Acquire(ctx context.Context, n int) error {
	_, err := l.TryAcquire(ctx, n, -1)
	return err
}

// TryAcquire is tryAcquire(n, timeout) (wait < 0: acquire(n)): try; when
// refused, sleep the delay and try again while the time left exceeds it;
// when the time left is shorter, sleep it and answer false.
func (l *RateLimiter) TryAcquire(ctx context.Context, n int, wait time.Duration) (bool, error) {
	ctx, cancel := l.c.bind(ctx)
	defer cancel()
	start := time.Now()
	for {
		ok, delay, err := l.take(ctx, n)
		if err != nil || ok {
			return ok, err
		}
		sleep := delay
		if wait >= 0 {
			left := wait - time.Since(start)
			if left <= 0 {
				return false, nil
			}
			if left < delay {
				sleep = left
			}
		}
		t := time.NewTimer(sleep)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false, ctx.Err()
		}
		if wait >= 0 && time.Since(start) >= wait {
			return false, nil
		}
	}
}

// AvailablePermits is availablePermits().
func (l *RateLimiter) AvailablePermits(ctx context.Context) (int, error) {
	n, err := l.c.eval(ctx, rlAvailable, l.keys(), itoa(l.c.nowMillis())).AsInt64()
	return int(n), err
}
