package redissontest

import (
	"context"

	"github.com/redis/rueidis"
)

// ReadWriteLock stands for Redisson's RReadWriteLock
// (RedissonReadWriteLock): a read side and a write side on one hash
// <name> with the field "mode" ("read" or "write"), reader fields
// <id>:<tid> and writer fields <id>:<tid>:write, each a hold count; every
// read level has a lease key {name}:<id>:<tid>:rwlock_timeout:<level>.
// Both sides wait on redisson_rwlock:{name}: a read release publishes 0
// (one waiter per Client goes on), a write release 1 (every waiter).
type ReadWriteLock struct {
	c    *Client
	name string
}

// ReadWriteLock returns the RReadWriteLock of name (getReadWriteLock).
func (c *Client) ReadWriteLock(name string) *ReadWriteLock { return &ReadWriteLock{c: c, name: name} }

// ReadLock is the shared side (readLock).
func (rw *ReadWriteLock) ReadLock() *ReadLock {
	return &ReadLock{newLockBase(rw.c, rw.name, readLock{})}
}

// WriteLock is the exclusive side (writeLock).
func (rw *ReadWriteLock) WriteLock() *WriteLock {
	return &WriteLock{newLockBase(rw.c, rw.name, writeLock{})}
}

// ReadLock stands for RedissonReadLock.
type ReadLock struct{ *lockBase }

// WriteLock stands for RedissonWriteLock.
type WriteLock struct{ *lockBase }

// LeaseKeyPrefix is the prefix of thread tid's read lease keys:
// {name}:<id>:<tid>:rwlock_timeout (getReadWriteTimeoutNamePrefix).
func (l *ReadLock) LeaseKeyPrefix(tid int64) string {
	return suffixName(l.name, l.c.Field(tid)) + ":rwlock_timeout"
}

// IsLocked is RedissonReadLock.isLocked: the lock is in read mode, or in
// write mode with read holds beside the writer.
func (l *ReadLock) IsLocked(ctx context.Context) (bool, error) {
	n, err := l.c.eval(ctx, readLocked, []string{l.name}).AsInt64()
	return n == 1, err
}

// IsLocked is RedissonWriteLock.isLocked: the lock is in write mode.
func (l *WriteLock) IsLocked(ctx context.Context) (bool, error) {
	mode, err := l.c.rdb.Do(ctx, l.c.rdb.B().Hget().Key(l.name).Field("mode").Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return false, nil
	}
	return mode == "write", err
}

func rwChannel(l *lockBase) string { return prefixName("redisson_rwlock", l.name) }

// readLocked stands for the script of RedissonReadLock.isLocked.
var readLocked = rueidis.NewLuaScript(`
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == 'read' then return 1 end
if mode == 'write' and redis.call('hlen', KEYS[1]) > 2 then return 1 end
return 0`)

// readAcquire stands for RedissonReadLock.tryLockInnerAsync. KEYS[1] the
// hash, KEYS[2] the thread's lease-key prefix; ARGV[1] lease ms, ARGV[2]
// the reader field, ARGV[3] the thread's writer field. A free lock goes to
// read mode with the field at 1; in read mode, or in write mode held by
// the thread's own writer, the field gets a level more; either way the new
// level's lease key gets the lease, and the hash at least as long: nil.
// Else the hash's PTTL.
var readAcquire = rueidis.NewLuaScript(`
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  redis.call('hset', KEYS[1], 'mode', 'read', ARGV[2], 1)
  redis.call('set', KEYS[2] .. ':1', 1, 'px', ARGV[1])
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
local ownWriter = mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1
if mode ~= 'read' and not ownWriter then
  return redis.call('pttl', KEYS[1])
end
local level = redis.call('hincrby', KEYS[1], ARGV[2], 1)
redis.call('set', KEYS[2] .. ':' .. level, 1, 'px', ARGV[1])
local left = redis.call('pttl', KEYS[1])
redis.call('pexpire', KEYS[1], math.max(left, tonumber(ARGV[1])))
return nil`)

// readRelease stands for RedissonReadLock.unlockInnerAsync. KEYS[1] the
// hash, KEYS[2] the channel, KEYS[3] the thread's lease-key prefix,
// KEYS[4] the key prefix {name}, KEYS[5] the request's unlock latch;
// ARGV[1] the message (0), ARGV[2] the reader field, ARGV[3] the publish
// command, ARGV[4] the latch's life in ms. A request already answered
// answers the same again. No lock: the message, nil. Not held by the
// field: nil. Else the field loses its top level (and its lease key);
// while other fields are left, the hash lives as long as the longest
// lease key of any field's levels (0), or on in write mode (0); else it
// goes and the message is published (1).
var readRelease = rueidis.NewLuaScript(`
local before = redis.call('get', KEYS[5])
if before ~= false then
  return tonumber(before)
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  redis.call(ARGV[3], KEYS[2], ARGV[1])
  redis.call('set', KEYS[5], 1, 'px', ARGV[4])
  return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return nil
end
local left = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if left == 0 then
  redis.call('hdel', KEYS[1], ARGV[2])
end
redis.call('del', KEYS[3] .. ':' .. (left + 1))
if redis.call('hlen', KEYS[1]) > 1 then
  local longest = -3
  for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
    local levels = tonumber(redis.call('hget', KEYS[1], field))
    if levels ~= nil then
      for level = levels, 1, -1 do
        local ttl = redis.call('pttl', KEYS[4] .. ':' .. field .. ':rwlock_timeout:' .. level)
        if ttl > longest then longest = ttl end
      end
    end
  end
  if longest > 0 or mode == 'write' then
    if longest > 0 then
      redis.call('pexpire', KEYS[1], longest)
    end
    redis.call('set', KEYS[5], 0, 'px', ARGV[4])
    return 0
  end
end
redis.call('del', KEYS[1])
redis.call(ARGV[3], KEYS[2], ARGV[1])
redis.call('set', KEYS[5], 1, 'px', ARGV[4])
return 1`)

// readForceRelease stands for RedissonReadLock.forceUnlockAsync: in read
// mode the hash goes and ARGV[1] (0) is published with ARGV[2]: 1; else 0.
var readForceRelease = rueidis.NewLuaScript(`
if redis.call('hget', KEYS[1], 'mode') ~= 'read' then
  return 0
end
redis.call('del', KEYS[1])
redis.call(ARGV[2], KEYS[2], ARGV[1])
return 1`)

// writeAcquire stands for RedissonWriteLock.tryLockInnerAsync. KEYS[1]
// the hash; ARGV[1] lease ms, ARGV[2] the writer field. A free lock goes
// to write mode held by the field, with the lease; a field that holds it
// gets a level more and the lease added to the time left: nil. Else the
// hash's PTTL.
var writeAcquire = rueidis.NewLuaScript(`
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  redis.call('hset', KEYS[1], 'mode', 'write', ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], redis.call('pttl', KEYS[1]) + tonumber(ARGV[1]))
  return nil
end
return redis.call('pttl', KEYS[1])`)

// writeRelease stands for RedissonWriteLock.unlockInnerAsync. KEYS[1] the
// hash, KEYS[2] the channel, KEYS[3] the request's unlock latch; ARGV[1]
// the message (1), ARGV[2] lease ms, ARGV[3] the writer field, ARGV[4] the
// publish command, ARGV[5] the latch's life in ms. A request already
// answered answers the same again. No lock: the message, nil. Not in
// write mode, or not held by the field: nil. A level left: the lease is
// reset, 0. The last level: when the writer's own read holds are left the
// lock goes to read mode without a message, else the hash goes and the
// message is published; 1.
var writeRelease = rueidis.NewLuaScript(`
local before = redis.call('get', KEYS[3])
if before ~= false then
  return tonumber(before)
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  redis.call(ARGV[4], KEYS[2], ARGV[1])
  redis.call('set', KEYS[3], 1, 'px', ARGV[5])
  return nil
end
if mode ~= 'write' or redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
  return nil
end
if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  redis.call('set', KEYS[3], 0, 'px', ARGV[5])
  return 0
end
redis.call('hdel', KEYS[1], ARGV[3])
if redis.call('hlen', KEYS[1]) > 1 then
  redis.call('hset', KEYS[1], 'mode', 'read')
else
  redis.call('del', KEYS[1])
  redis.call(ARGV[4], KEYS[2], ARGV[1])
end
redis.call('set', KEYS[3], 1, 'px', ARGV[5])
return 1`)

// writeForceRelease stands for RedissonWriteLock.forceUnlockAsync: in
// write mode the hash goes and ARGV[1] (1) is published with ARGV[2]: 1;
// else 0.
var writeForceRelease = rueidis.NewLuaScript(`
if redis.call('hget', KEYS[1], 'mode') ~= 'write' then
  return 0
end
redis.call('del', KEYS[1])
redis.call(ARGV[2], KEYS[2], ARGV[1])
return 1`)

// readLock is RedissonReadLock's scripts.
type readLock struct{}

func (readLock) field(l *lockBase, tid int64) string                          { return l.c.Field(tid) }
func (readLock) channel(l *lockBase, _ int64) string                          { return rwChannel(l) }
func (readLock) readRenewal() bool                                            { return true }
func (readLock) acquireFailed(context.Context, *lockBase, int64, int64) error { return nil }

func (readLock) tryLockInner(ctx context.Context, l *lockBase, tid, _, leaseMs int64, _ bool) (attempt, error) {
	prefix := (&ReadLock{l}).LeaseKeyPrefix(tid)
	return ttlReply(l.c.eval(ctx, readAcquire, []string{l.name, prefix},
		itoa(leaseMs), l.c.Field(tid), l.c.Field(tid)+":write"))
}

func (readLock) unlockInner(ctx context.Context, l *lockBase, tid int64, latch string, _ int64) (int64, bool, error) {
	prefix := (&ReadLock{l}).LeaseKeyPrefix(tid)
	return optInt64(l.c.eval(ctx, readRelease, []string{l.name, rwChannel(l), prefix, l.keyPrefix(), latch},
		"0", l.c.Field(tid), l.c.publish, ms(UnlockLatchTimeout)))
}

func (readLock) forceUnlock(ctx context.Context, l *lockBase) (bool, error) {
	n, err := l.c.eval(ctx, readForceRelease, []string{l.name, rwChannel(l)}, "0", l.c.publish).AsInt64()
	return n == 1, err
}

// writeLock is RedissonWriteLock's scripts.
type writeLock struct{}

func (writeLock) field(l *lockBase, tid int64) string                          { return l.c.Field(tid) + ":write" }
func (writeLock) channel(l *lockBase, _ int64) string                          { return rwChannel(l) }
func (writeLock) readRenewal() bool                                            { return false }
func (writeLock) acquireFailed(context.Context, *lockBase, int64, int64) error { return nil }

func (w writeLock) tryLockInner(ctx context.Context, l *lockBase, tid, _, leaseMs int64, _ bool) (attempt, error) {
	return ttlReply(l.c.eval(ctx, writeAcquire, []string{l.name}, itoa(leaseMs), w.field(l, tid)))
}

func (w writeLock) unlockInner(ctx context.Context, l *lockBase, tid int64, latch string, leaseMs int64) (int64, bool, error) {
	return optInt64(l.c.eval(ctx, writeRelease, []string{l.name, rwChannel(l), latch},
		"1", itoa(leaseMs), w.field(l, tid), l.c.publish, ms(UnlockLatchTimeout)))
}

func (writeLock) forceUnlock(ctx context.Context, l *lockBase) (bool, error) {
	n, err := l.c.eval(ctx, writeForceRelease, []string{l.name, rwChannel(l)}, "1", l.c.publish).AsInt64()
	return n == 1, err
}
