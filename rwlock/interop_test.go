package rwlock_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
	"github.com/relock-go/relock/rwlock"
)

// These tests put relock's read-write lock beside a stand-in for a
// Redisson client: scripts written here that do what Redisson's read and
// write lock scripts do, as the research note on its layout describes
// them (fields <uuid>:<threadId>, "mode", the per-level lease keys, the
// channel redisson_rwlock:{name} with "0" after a read release and "1"
// after a write release, and the unlock latch keys), run with EVAL.

// javaReadLock takes or re-enters a read hold.
// KEYS[1] hash, KEYS[2] the thread's lease-key prefix
// <keyPrefix>:<uuid>:<tid>:rwlock_timeout; ARGV[1] lease ms, ARGV[2]
// reader field, ARGV[3] the thread's writer field. nil when held, else
// the hash's PTTL.
const javaReadLock = `
local mode = redis.call('hget', KEYS[1], 'mode')
local mine = mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1
if mode ~= false and mode ~= 'read' and not mine then
  return redis.call('pttl', KEYS[1])
end
if mode == false then
  redis.call('hset', KEYS[1], 'mode', 'read')
end
local level = redis.call('hincrby', KEYS[1], ARGV[2], 1)
redis.call('set', KEYS[2] .. ':' .. level, 1, 'px', ARGV[1])
local left = redis.call('pttl', KEYS[1])
if left < tonumber(ARGV[1]) then
  redis.call('pexpire', KEYS[1], ARGV[1])
end
return nil`

// javaWriteLock takes or re-enters a write hold (a re-entry adds the
// lease to the time left). KEYS[1] hash; ARGV[1] lease ms, ARGV[2]
// writer field. nil when held, else the hash's PTTL.
const javaWriteLock = `
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
return redis.call('pttl', KEYS[1])`

// javaReadUnlock releases one read level. KEYS[1] hash, KEYS[2] channel,
// KEYS[3] the thread's lease-key prefix, KEYS[4] key prefix, KEYS[5]
// unlock latch; ARGV[1] '0', ARGV[2] reader field, ARGV[3] publish
// command, ARGV[4] latch ms. nil: not held; 0: released a level, the lock
// is still held; 1: the lock is free and the waiters were told.
const javaReadUnlock = `
local replay = redis.call('get', KEYS[5])
if replay then
  return tonumber(replay)
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
    local count = tonumber(redis.call('hget', KEYS[1], field))
    if count then
      for level = count, 1, -1 do
        longest = math.max(longest, redis.call('pttl', KEYS[4] .. ':' .. field .. ':rwlock_timeout:' .. level))
      end
    end
  end
  if longest > 0 then
    redis.call('pexpire', KEYS[1], longest)
    redis.call('set', KEYS[5], 0, 'px', ARGV[4])
    return 0
  end
  if mode == 'write' then
    redis.call('set', KEYS[5], 0, 'px', ARGV[4])
    return 0
  end
end
redis.call('del', KEYS[1])
redis.call(ARGV[3], KEYS[2], ARGV[1])
redis.call('set', KEYS[5], 1, 'px', ARGV[4])
return 1`

// javaWriteUnlock releases one write level; a writer that still reads
// turns the lock to read mode without a message. KEYS[1] hash, KEYS[2]
// channel, KEYS[3] unlock latch; ARGV[1] '1', ARGV[2] lease ms, ARGV[3]
// writer field, ARGV[4] publish command, ARGV[5] latch ms.
const javaWriteUnlock = `
local replay = redis.call('get', KEYS[3])
if replay then
  return tonumber(replay)
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
if redis.call('hlen', KEYS[1]) == 1 then
  redis.call('del', KEYS[1])
  redis.call(ARGV[4], KEYS[2], ARGV[1])
else
  redis.call('hset', KEYS[1], 'mode', 'read')
end
redis.call('set', KEYS[3], 1, 'px', ARGV[5])
return 1`

const javaLease = "30000"

// java is one Redisson instance, as far as one lock name goes.
type java struct {
	t    *testing.T
	raw  rueidis.Client
	id   string
	name string
}

func newJava(t *testing.T, name string) *java {
	return &java{t: t, raw: relocktest.Raw(t), id: uuid.NewString(), name: name}
}

func (j *java) field(tid int) string { return fmt.Sprintf("%s:%d", j.id, tid) }

// keyPrefix is {name}, or name when it has a hash tag.
func (j *java) keyPrefix() string {
	if strings.Contains(j.name, "{") {
		return j.name
	}
	return "{" + j.name + "}"
}

func (j *java) eval(script string, keys []string, args ...string) rueidis.RedisResult {
	j.t.Helper()
	return j.raw.Do(j.t.Context(), j.raw.B().Eval().Script(script).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
}

// acquired reads an acquire script's reply: true when held.
func (j *java) acquired(res rueidis.RedisResult) bool {
	j.t.Helper()
	if err := res.Error(); rueidis.IsRedisNil(err) {
		return true
	} else if err != nil {
		j.t.Fatal(err)
	}
	return false
}

func (j *java) readLock(tid int) bool {
	j.t.Helper()
	return j.acquired(j.eval(javaReadLock, []string{j.name, j.keyPrefix() + ":" + j.field(tid) + ":rwlock_timeout"},
		javaLease, j.field(tid), j.field(tid)+":write"))
}

func (j *java) writeLock(tid int) bool {
	j.t.Helper()
	return j.acquired(j.eval(javaWriteLock, []string{j.name}, javaLease, j.field(tid)+":write"))
}

// latch is a fresh unlock latch key; unlock deletes it after the reply.
func (j *java) latch() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return lockcore.Derived(lockcore.LatchPrefix, j.name) + ":" + hex.EncodeToString(b[:])
}

// unlocked reads an unlock script's reply: -1 for nil.
func (j *java) unlocked(res rueidis.RedisResult, latch string) int64 {
	j.t.Helper()
	n, err := res.AsInt64()
	if rueidis.IsRedisNil(err) {
		n = -1
	} else if err != nil {
		j.t.Fatal(err)
	}
	_ = j.raw.Do(j.t.Context(), j.raw.B().Del().Key(latch).Build()).Error()
	return n
}

func (j *java) readUnlock(tid int) int64 {
	j.t.Helper()
	latch := j.latch()
	return j.unlocked(j.eval(javaReadUnlock, []string{j.name, rwlock.Channel(j.name),
		j.keyPrefix() + ":" + j.field(tid) + ":rwlock_timeout", j.keyPrefix(), latch},
		"0", j.field(tid), "publish", "15000"), latch)
}

func (j *java) writeUnlock(tid int) int64 {
	j.t.Helper()
	latch := j.latch()
	return j.unlocked(j.eval(javaWriteUnlock, []string{j.name, rwlock.Channel(j.name), latch},
		"1", javaLease, j.field(tid)+":write", "publish", "15000"), latch)
}

// listen subscribes to the lock's channel as Redisson does (classic
// SUBSCRIBE) and returns its messages.
func (j *java) listen() <-chan string {
	j.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	msgs := make(chan string, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = j.raw.Receive(ctx, j.raw.B().Subscribe().Channel(rwlock.Channel(j.name)).Build(), func(m rueidis.PubSubMessage) {
			msgs <- m.Message
		})
	}()
	j.t.Cleanup(func() { cancel(); <-done })
	return msgs
}

func message(t *testing.T, msgs <-chan string, want string) {
	t.Helper()
	select {
	case got := <-msgs:
		if got != want {
			t.Fatalf("message %q, want %q", got, want)
		}
	case <-time.After(handoff):
		t.Fatalf("no message %q", want)
	}
}

// TestInteropJavaWriterWakesGoReaders: a Redisson writer keeps relock's
// readers and writers out; its release ("1") lets the waiting readers of
// two Clients in at once.
func TestInteropJavaWriterWakesGoReaders(t *testing.T) {
	c1, c2 := relocktest.Client(t), relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	j := newJava(t, name)
	if !j.writeLock(1) {
		t.Fatal("java write lock on a free lock failed")
	}
	if !j.writeLock(1) {
		t.Fatal("java write re-entry failed")
	}
	ctx := t.Context()
	if ok, err := c1.GetReadWriteLock(name).ReadLock().TryLock(rlock.WithOwner(ctx, "x"), 0, 0); ok || err != nil {
		t.Fatalf("read TryLock beside a java writer = %v, %v", ok, err)
	}
	if ok, err := c1.GetReadWriteLock(name).WriteLock().TryLock(rlock.WithOwner(ctx, "x"), 0, 0); ok || err != nil {
		t.Fatalf("write TryLock beside a java writer = %v, %v", ok, err)
	}
	var readers []<-chan error
	for i, c := range []*rlock.Client{c1, c1, c2} {
		readers = append(readers, lockAsync(rlock.WithOwner(ctx, fmt.Sprint("r", i)), c.GetReadWriteLock(name).ReadLock()))
	}
	subscribed(t, raw, name, 2)
	if n := j.writeUnlock(1); n != 0 {
		t.Fatalf("java write unlock of one of two levels = %d, want 0", n)
	}
	for i, got := range readers {
		notYet(t, got, fmt.Sprint("reader ", i))
	}
	if n := j.writeUnlock(1); n != 1 {
		t.Fatalf("java write unlock = %d, want 1", n)
	}
	for i, got := range readers {
		within(t, got, handoff, fmt.Sprint("reader ", i, " after the java writer left"))
	}
	// Java reads beside them, and cannot write.
	if !j.readLock(2) {
		t.Error("java read beside relock readers failed")
	}
	if j.writeLock(3) {
		t.Error("java write beside readers succeeded")
	}
}

// TestInteropGoWriterWakesJavaReader: relock's write hold keeps a
// Redisson reader out; its release publishes "1", on which the reader
// comes in; then a relock writer waits for the Redisson reader, whose
// release ("0") wakes it.
func TestInteropGoWriterWakesJavaReader(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	j := newJava(t, name)
	w := rlock.WithOwner(t.Context(), "w")
	writer := c.GetReadWriteLock(name).WriteLock()
	if err := writer.Lock(w); err != nil {
		t.Fatal(err)
	}
	if j.readLock(1) || j.writeLock(2) {
		t.Fatal("java took a lock relock writes")
	}
	msgs := j.listen()
	subscribed(t, raw, name, 1)
	if err := writer.Unlock(w); err != nil {
		t.Fatal(err)
	}
	message(t, msgs, "1")
	if !j.readLock(1) {
		t.Fatal("java read after relock's write release failed")
	}
	got := lockAsync(w, writer)
	subscribed(t, raw, name, 2)
	notYet(t, got, "relock's writer beside a java reader")
	if n := j.readUnlock(1); n != 1 {
		t.Fatalf("java read unlock = %d, want 1 (free)", n)
	}
	message(t, msgs, "0")
	within(t, got, handoff, "relock's writer after the java reader left")
	if err := writer.Unlock(w); err != nil {
		t.Fatal(err)
	}
	message(t, msgs, "1")
}

// TestInteropSharedReaders: relock's and Redisson's readers weigh each
// other's lease keys: whichever leaves first keeps the hash alive for the
// other, and the last one frees it.
func TestInteropSharedReaders(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	j := newJava(t, name)
	a := rlock.WithOwner(t.Context(), "a")
	r := c.GetReadWriteLock(name).ReadLock()
	if !j.readLock(1) {
		t.Fatal("java read failed")
	}
	if err := r.LockLease(a, time.Minute); err != nil {
		t.Fatal(err)
	}
	// Java leaves first: relock's lease key (a minute) sets the hash's.
	if n := j.readUnlock(1); n != 0 {
		t.Fatalf("java read unlock beside a relock reader = %d, want 0 (still held)", n)
	}
	if ms := pttl(t, raw, name); ms < 50_000 {
		t.Errorf("hash PTTL %d after java left, want relock's minute", ms)
	}
	if n, err := r.HoldCount(a); n != 1 || err != nil {
		t.Fatalf("relock's reader after java left: HoldCount = %d, %v", n, err)
	}
	// Now relock leaves first.
	for range 2 { // two levels
		if !j.readLock(1) {
			t.Fatal("java read failed")
		}
	}
	if err := r.Unlock(a); err != nil {
		t.Fatal(err)
	}
	wantHash(t, raw, name, map[string]string{"mode": "read", j.field(1): "2"})
	if ms := pttl(t, raw, name); ms <= 0 || ms > 30_000 {
		t.Errorf("hash PTTL %d after relock left, want java's 30s lease", ms)
	}
	if j.readUnlock(1) != 0 || j.readUnlock(1) != 1 {
		t.Fatal("java's read unlocks did not free the lock")
	}
	if exists(t, raw, name) {
		t.Error("hash left")
	}
}

// TestInteropJavaDowngrade: a Redisson writer that reads, then releases
// its write hold, leaves the lock in read mode: relock reads beside it.
// relock's own writer does the same, and Redisson reads beside it.
func TestInteropJavaDowngrade(t *testing.T) {
	c := relocktest.Client(t)
	name := relocktest.Name(t)
	j := newJava(t, name)
	o := rlock.WithOwner(t.Context(), "o")
	rw := c.GetReadWriteLock(name)
	if !j.writeLock(1) || !j.readLock(1) {
		t.Fatal("java write and read failed")
	}
	if ok, _ := rw.ReadLock().TryLock(o, 0, 0); ok {
		t.Fatal("relock read beside a java writer")
	}
	if n := j.writeUnlock(1); n != 1 {
		t.Fatalf("java write unlock = %d", n)
	}
	if ok, err := rw.ReadLock().TryLock(o, 0, 0); !ok || err != nil {
		t.Fatalf("relock read after java's downgrade = %v, %v", ok, err)
	}
	if j.readUnlock(1) != 0 {
		t.Fatal("java read unlock beside relock's reader")
	}
	if err := rw.ReadLock().Unlock(o); err != nil {
		t.Fatal(err)
	}
	if err := rw.WriteLock().Lock(o); err != nil {
		t.Fatal(err)
	}
	if err := rw.ReadLock().Lock(o); err != nil {
		t.Fatal(err)
	}
	if j.readLock(2) {
		t.Fatal("java read beside relock's writer")
	}
	if err := rw.WriteLock().Unlock(o); err != nil {
		t.Fatal(err)
	}
	if !j.readLock(2) {
		t.Fatal("java read after relock's downgrade failed")
	}
	if j.writeLock(3) {
		t.Fatal("java write beside readers")
	}
	_ = rw.ReadLock().Unlock(o)
	if j.readUnlock(2) != 1 {
		t.Error("the last java read unlock did not free the lock")
	}
}
