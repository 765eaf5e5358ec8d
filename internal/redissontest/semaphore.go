package redissontest

import (
	"context"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// Semaphore stands for Redisson's RPermitExpirableSemaphore
// (RedissonPermitExpirableSemaphore): the available count in <name>, the
// permits held in the sorted set {name}:timeout (the permit's 16 raw bytes
// -> the end of its lease in the Client's wall-clock ms, or NonExpirable),
// and the channel redisson_sc:{name}, which carries counts. Permit IDs
// are the 16 bytes in hex, as Redisson hands them out.
//
// A permit has no watchdog in Redisson: without a lease it never expires.
type Semaphore struct {
	c    *Client
	name string
}

// Semaphore returns the RPermitExpirableSemaphore of name
// (getPermitExpirableSemaphore).
func (c *Client) Semaphore(name string) *Semaphore { return &Semaphore{c: c, name: name} }

func (s *Semaphore) timeouts() string { return suffixName(s.name, "timeout") }

// Channel is the semaphore's channel.
func (s *Semaphore) Channel() string { return prefixName("redisson_sc", s.name) }

// semTake stands for the script of RedissonPermitExpirableSemaphore's
// tryAcquireAsync(ids, timeoutDate). KEYS[1] the available count, KEYS[2]
// the permits' leases, KEYS[3] the channel; ARGV[1] how many permits,
// ARGV[2] the lease end of the new permits, ARGV[3] the Client's clock ms,
// ARGV[4] the no-lease score, ARGV[5] the publish command, ARGV[6...] the
// permits' raw IDs. First up to ARGV[1] permits whose lease ended go back
// to the count (and the new count is published when above 0). Then, when
// enough are available, they are taken: 'OK'. Else ':' and the earliest
// lease end when that permit has a lease, or nil.
var semTake = rueidis.NewLuaScript(`
local ended = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, ARGV[1])
if #ended > 0 then
  redis.call('zrem', KEYS[2], unpack(ended))
  local back = redis.call('incrby', KEYS[1], #ended)
  if back > 0 then
    redis.call(ARGV[5], KEYS[3], back)
  end
end
local available = tonumber(redis.call('get', KEYS[1]) or '-1')
local wanted = tonumber(ARGV[1])
if available >= 0 and available >= wanted then
  redis.call('decrby', KEYS[1], wanted)
  for i = 6, #ARGV do
    redis.call('zadd', KEYS[2], ARGV[2], ARGV[i])
  end
  local ttl = redis.call('pttl', KEYS[1])
  if ttl > 0 then
    redis.call('pexpire', KEYS[2], ttl)
  end
  return 'OK'
end
local first = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES')
if first[1] == nil or first[2] == ARGV[4] then
  return nil
end
return ':' .. first[2]`)

// semGive stands for the script of tryReleaseAsync(permitId). KEYS[1]
// the available count, KEYS[2] the channel, KEYS[3] the leases; ARGV[1]
// the permit's raw ID, ARGV[2] 1, ARGV[3] the Client's clock ms, ARGV[4]
// the publish command. A permit not held: 0. Else it goes, the count
// goes up and the new count is published; 1, or 0 when its lease had
// ended.
var semGive = rueidis.NewLuaScript(`
local ends = redis.call('zscore', KEYS[3], ARGV[1])
if redis.call('zrem', KEYS[3], ARGV[1]) ~= 1 then
  return 0
end
local available = redis.call('incrby', KEYS[1], ARGV[2])
redis.call(ARGV[4], KEYS[2], available)
if tonumber(ends) <= tonumber(ARGV[3]) then
  return 0
end
return 1`)

// semGiveMany stands for the script of tryReleaseAsync(permitsIds).
// KEYS as semGive; ARGV[1] how many, ARGV[2] the Client's clock ms,
// ARGV[3] the publish command, ARGV[4...] the raw IDs. When any of them is
// not held (or its lease ended): 0, nothing changed. Else the permits
// whose lease ended go back first (the new count published when above
// 0), then these go, the count goes up by their number, and that number
// is published; it is the answer.
var semGiveMany = rueidis.NewLuaScript(`
local ids = {}
for i = 4, #ARGV do
  local ends = redis.call('zscore', KEYS[3], ARGV[i])
  if ends == false or tonumber(ends) <= tonumber(ARGV[2]) then
    return 0
  end
  ids[#ids + 1] = ARGV[i]
end
local ended = redis.call('zrangebyscore', KEYS[3], 0, ARGV[2], 'limit', 0, -1)
if #ended > 0 then
  redis.call('zrem', KEYS[3], unpack(ended))
  local back = redis.call('incrby', KEYS[1], #ended)
  if back > 0 then
    redis.call(ARGV[3], KEYS[2], back)
  end
end
local gone = redis.call('zrem', KEYS[3], unpack(ids))
redis.call('incrby', KEYS[1], gone)
redis.call(ARGV[3], KEYS[2], gone)
return gone`)

// semSet stands for the script of trySetPermitsAsync. KEYS[1] the count,
// KEYS[2] the channel; ARGV[1] the permits, ARGV[2] the publish command.
// Set and published only when there was no count: 1; else 0.
var semSet = rueidis.NewLuaScript(`
if redis.call('get', KEYS[1]) ~= false then
  return 0
end
redis.call('set', KEYS[1], ARGV[1])
redis.call(ARGV[2], KEYS[2], ARGV[1])
return 1`)

// semAdd stands for the script of addPermitsAsync. KEYS as semSet;
// ARGV[1] the permits to add (may be negative), ARGV[2] the publish
// command. A positive number added is published.
var semAdd = rueidis.NewLuaScript(`
local count = tonumber(redis.call('get', KEYS[1]) or '0')
redis.call('set', KEYS[1], count + tonumber(ARGV[1]))
if tonumber(ARGV[1]) > 0 then
  redis.call(ARGV[2], KEYS[2], ARGV[1])
end`)

// semAvailable stands for the script of availablePermitsAsync. KEYS[1]
// the count, KEYS[2] the leases, KEYS[3] the channel; ARGV[1] the
// Client's clock ms, ARGV[2] the publish command. Every permit whose lease
// ended goes back (the new count published when above 0); the answer is
// the count (0 when unset).
var semAvailable = rueidis.NewLuaScript(`
local ended = redis.call('zrangebyscore', KEYS[2], 0, ARGV[1], 'limit', 0, -1)
if #ended > 0 then
  redis.call('zrem', KEYS[2], unpack(ended))
  local back = redis.call('incrby', KEYS[1], #ended)
  if back > 0 then
    redis.call(ARGV[2], KEYS[3], back)
  end
  return back
end
return tonumber(redis.call('get', KEYS[1]) or '0')`)

// TrySetPermits is trySetPermits(n).
func (s *Semaphore) TrySetPermits(ctx context.Context, n int) (bool, error) {
	v, err := s.c.eval(ctx, semSet, []string{s.name, s.Channel()}, strconv.Itoa(n), s.c.publish).AsInt64()
	return v == 1, err
}

// AddPermits is addPermits(n).
func (s *Semaphore) AddPermits(ctx context.Context, n int) error {
	return noReply(s.c.eval(ctx, semAdd, []string{s.name, s.Channel()}, strconv.Itoa(n), s.c.publish).Error())
}

// AvailablePermits is availablePermits().
func (s *Semaphore) AvailablePermits(ctx context.Context) (int, error) {
	n, err := s.c.eval(ctx, semAvailable, []string{s.name, s.timeouts(), s.Channel()},
		itoa(s.c.nowMillis()), s.c.publish).AsInt64()
	return int(n), err
}

// leaseEnd is calcTimeout: now plus the lease, or the no-lease score for
// lease <= 0 (Redisson's -1).
func (s *Semaphore) leaseEnd(lease time.Duration) string {
	if lease <= 0 {
		return NonExpirable
	}
	return itoa(s.c.nowMillis() + lease.Milliseconds())
}

// take runs semTake once for n new permits: their IDs when taken; else
// how long until the earliest lease ends by the Client's clock (ok false;
// until < 0 when there is none to wait for).
func (s *Semaphore) take(ctx context.Context, n int, lease time.Duration) (ids []string, until time.Duration, err error) {
	args := []string{strconv.Itoa(n), s.leaseEnd(lease), itoa(s.c.nowMillis()), NonExpirable, s.c.publish}
	for range n {
		id := generateID()
		ids = append(ids, id)
		raw, _ := hex.DecodeString(id)
		args = append(args, string(raw))
	}
	reply, err := s.c.eval(ctx, semTake, []string{s.name, s.timeouts(), s.Channel()}, args...).ToString()
	switch {
	case rueidis.IsRedisNil(err):
		return nil, -1, nil
	case err != nil:
		return nil, 0, err
	case reply == "OK":
		return ids, 0, nil
	}
	end, err := strconv.ParseInt(strings.TrimPrefix(reply, ":"), 10, 64)
	if err != nil {
		return nil, 0, err
	}
	// Redisson: Long.parseLong(score) - System.currentTimeMillis().
	return nil, time.Duration(end-s.c.nowMillis()) * time.Millisecond, nil
}

// TryAcquireOnce is tryAcquire(): one permit without a lease, one attempt.
func (s *Semaphore) TryAcquireOnce(ctx context.Context) (string, bool, error) {
	ids, _, err := s.take(ctx, 1, 0)
	if err != nil || ids == nil {
		return "", false, err
	}
	return ids[0], true, nil
}

// Acquire is acquire(leaseTime) (lease 0: none): it waits as Redisson's
// acquire waits until it holds a permit, or ctx ends.
func (s *Semaphore) Acquire(ctx context.Context, lease time.Duration) (string, error) {
	ids, err := s.AcquireN(ctx, 1, lease)
	if err != nil {
		return "", err
	}
	return ids[0], nil
}

// AcquireN is acquire(permits, leaseTime): try; subscribe; then, until
// taken, try and sleep on the entry's semaphore until the earliest lease
// ends (without a limit when no permit has a lease).
func (s *Semaphore) AcquireN(ctx context.Context, n int, lease time.Duration) ([]string, error) {
	ctx, cancel := s.c.bind(ctx)
	defer cancel()
	ids, _, err := s.take(ctx, n, lease)
	if err != nil || ids != nil {
		return ids, err
	}
	e, err := s.c.ps.subscribe(ctx, semaphoreEntry, s.Channel())
	if err != nil {
		return nil, err
	}
	defer s.c.ps.unsubscribe(e)
	for {
		ids, until, err := s.take(ctx, n, lease)
		if err != nil || ids != nil {
			return ids, err
		}
		if until < 0 {
			until = -1
		}
		e.sem.tryAcquire(ctx, until)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

// TryAcquire is tryAcquire(waitTime, leaseTime) (lease 0: none): as
// Acquire, sleeping at most the time left; ok false when it ran out.
func (s *Semaphore) TryAcquire(ctx context.Context, wait, lease time.Duration) (string, bool, error) {
	ctx, cancel := s.c.bind(ctx)
	defer cancel()
	left := wait
	start := time.Now()
	ids, _, err := s.take(ctx, 1, lease)
	if err != nil || ids != nil {
		return first(ids), ids != nil, err
	}
	left -= time.Since(start)
	if left <= 0 {
		return "", false, nil
	}
	start = time.Now()
	sctx, scancel := context.WithTimeout(ctx, left)
	e, err := s.c.ps.subscribe(sctx, semaphoreEntry, s.Channel())
	scancel()
	if err != nil {
		return "", false, ctx.Err()
	}
	defer s.c.ps.unsubscribe(e)
	left -= time.Since(start)
	if left <= 0 {
		return "", false, nil
	}
	for {
		start = time.Now()
		ids, until, err := s.take(ctx, 1, lease)
		if err != nil || ids != nil {
			return first(ids), ids != nil, err
		}
		left -= time.Since(start)
		if left <= 0 {
			return "", false, nil
		}
		start = time.Now()
		sleep := left
		if until >= 0 && until < left {
			sleep = until
		}
		e.sem.tryAcquire(ctx, sleep)
		left -= time.Since(start)
		if err := ctx.Err(); err != nil {
			return "", false, err
		}
		if left <= 0 {
			return "", false, nil
		}
	}
}

func first(ids []string) string {
	if len(ids) == 0 {
		return ""
	}
	return ids[0]
}

func rawID(id string) (string, error) {
	raw, err := hex.DecodeString(id)
	return string(raw), err
}

// TryRelease is tryRelease(permitId): true when the permit was held and
// its lease had not ended.
func (s *Semaphore) TryRelease(ctx context.Context, id string) (bool, error) {
	raw, err := rawID(id)
	if err != nil {
		return false, err
	}
	n, err := s.c.eval(ctx, semGive, []string{s.name, s.Channel(), s.timeouts()},
		raw, "1", itoa(s.c.nowMillis()), s.c.publish).AsInt64()
	return n == 1, err
}

// Release is release(permitId): ErrPermitNotHeld when TryRelease is false.
func (s *Semaphore) Release(ctx context.Context, id string) error {
	ok, err := s.TryRelease(ctx, id)
	if err == nil && !ok {
		err = ErrPermitNotHeld
	}
	return err
}

// TryReleaseAll is tryRelease(permitsIds): the number released (0 when
// any of them was not held).
func (s *Semaphore) TryReleaseAll(ctx context.Context, ids []string) (int, error) {
	args := []string{strconv.Itoa(len(ids)), itoa(s.c.nowMillis()), s.c.publish}
	for _, id := range ids {
		raw, err := rawID(id)
		if err != nil {
			return 0, err
		}
		args = append(args, raw)
	}
	n, err := s.c.eval(ctx, semGiveMany, []string{s.name, s.Channel(), s.timeouts()}, args...).AsInt64()
	return int(n), err
}

// semUpdateLease stands for the script of updateLeaseTimeAsync(permitId,
// leaseTime). KEYS[1] the count, KEYS[2] the leases, KEYS[3] the channel;
// ARGV[1] the permit's raw ID, ARGV[2] its new lease end (the Client's
// clock plus the lease, or the no-lease score), ARGV[3] the Client's
// clock ms, ARGV[4] the publish command. Every permit whose lease ended
// goes back (the new count published when above 0). A permit held gets
// the new end: 1; else 0. Nothing else is published.
var semUpdateLease = rueidis.NewLuaScript(`
local ended = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, -1)
if #ended > 0 then
  redis.call('zrem', KEYS[2], unpack(ended))
  local back = redis.call('incrby', KEYS[1], #ended)
  if back > 0 then
    redis.call(ARGV[4], KEYS[3], back)
  end
end
if redis.call('zscore', KEYS[2], ARGV[1]) == false then
  return 0
end
redis.call('zadd', KEYS[2], ARGV[2], ARGV[1])
return 1`)

// semLeaseTime stands for the script of getLeaseTimeAsync(permitId).
// KEYS as semUpdateLease; ARGV[1] the permit's raw ID, ARGV[2] the
// no-lease score, ARGV[3] the Client's clock ms, ARGV[4] the publish
// command. Every permit whose lease ended goes back first (as above).
// Then: 0 for a permit not held, -1 for one without a lease, else its
// lease end minus the Client's clock.
var semLeaseTime = rueidis.NewLuaScript(`
local ended = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, -1)
if #ended > 0 then
  redis.call('zrem', KEYS[2], unpack(ended))
  local back = redis.call('incrby', KEYS[1], #ended)
  if back > 0 then
    redis.call(ARGV[4], KEYS[3], back)
  end
end
local ends = redis.call('zscore', KEYS[2], ARGV[1])
if ends == false then
  return 0
end
if tonumber(ends) == tonumber(ARGV[2]) then
  return -1
end
return tonumber(ends) - tonumber(ARGV[3])`)

// UpdateLeaseTime is updateLeaseTime(permitId, leaseTime) (lease 0:
// Redisson's -1, no lease): whether the permit was held.
func (s *Semaphore) UpdateLeaseTime(ctx context.Context, id string, lease time.Duration) (bool, error) {
	raw, err := rawID(id)
	if err != nil {
		return false, err
	}
	n, err := s.c.eval(ctx, semUpdateLease, []string{s.name, s.timeouts(), s.Channel()},
		raw, s.leaseEnd(lease), itoa(s.c.nowMillis()), s.c.publish).AsInt64()
	return n == 1, err
}

// GetLeaseTime is getLeaseTime(permitId): the lease left by the Client's
// clock, -1 (as a Duration of -1ms) for a permit without a lease, and
// ErrPermitNotHeld for a permit not held.
func (s *Semaphore) GetLeaseTime(ctx context.Context, id string) (time.Duration, error) {
	raw, err := rawID(id)
	if err != nil {
		return 0, err
	}
	ms, err := s.c.eval(ctx, semLeaseTime, []string{s.name, s.timeouts(), s.Channel()},
		raw, NonExpirable, itoa(s.c.nowMillis()), s.c.publish).AsInt64()
	switch {
	case err != nil:
		return 0, err
	case ms == 0:
		return 0, ErrPermitNotHeld
	}
	return time.Duration(ms) * time.Millisecond, nil
}
