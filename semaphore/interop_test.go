package semaphore_test

import (
	"crypto/rand"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/semaphore"
)

// These tests put relock's semaphore beside a stand-in for a Redisson
// client: scripts written here that do what Redisson's
// RPermitExpirableSemaphore scripts do, as the research note on its layout
// describes them (the available count, the lease sorted set whose members
// are the permits' 16 raw bytes, the channel redisson_sc:{name} carrying
// counts), run with EVAL.

// javaTryAcquire takes one permit. KEYS: available, leases, channel;
// ARGV: [1] permits wanted (1), [2] the lease's end (ms), [3] now (ms),
// [4] the no-lease score, [5] publish command, [6] the permit's 16 raw
// bytes. 'OK' when taken; else ':' .. the earliest lease end, or nil.
const javaTryAcquire = `
local expired = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, ARGV[1])
if #expired > 0 then
  redis.call('zrem', KEYS[2], unpack(expired))
  local value = redis.call('incrby', KEYS[1], #expired)
  if value > 0 then
    redis.call(ARGV[5], KEYS[3], value)
  end
end
local value = redis.call('get', KEYS[1])
if value ~= false and tonumber(value) >= tonumber(ARGV[1]) then
  redis.call('decrby', KEYS[1], ARGV[1])
  redis.call('zadd', KEYS[2], ARGV[2], ARGV[6])
  local ttl = redis.call('pttl', KEYS[1])
  if ttl > 0 then
    redis.call('pexpire', KEYS[2], ttl)
  end
  return 'OK'
end
local first = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
if first[1] ~= nil and first[2] ~= ARGV[4] then
  return ':' .. first[2]
end
return nil`

// javaRelease gives a permit back. KEYS: available, channel, leases;
// ARGV: [1] the permit's raw bytes, [2] 1, [3] now, [4] publish command.
// 0 when it was not held (or had expired), 1 when released.
const javaRelease = `
local expires = redis.call('zscore', KEYS[3], ARGV[1])
if redis.call('zrem', KEYS[3], ARGV[1]) == 0 then
  return 0
end
local value = redis.call('incrby', KEYS[1], ARGV[2])
redis.call(ARGV[4], KEYS[2], value)
if tonumber(expires) <= tonumber(ARGV[3]) then
  return 0
end
return 1`

func javaNow(t *testing.T, raw rueidis.Client) int64 { return int64(serverMillis(t, raw)) }

func javaAcquire(t *testing.T, raw rueidis.Client, name, id string) bool {
	t.Helper()
	k := semaphore.KeysOf(name)
	now := javaNow(t, raw)
	res := raw.Do(t.Context(), raw.B().Eval().Script(javaTryAcquire).Numkeys(3).Key(k.Available, k.Leases, k.Channel).
		Arg("1", strconv.FormatInt(now+30_000, 10), strconv.FormatInt(now, 10), semaphore.NoLease, "publish", id).Build())
	s, err := res.ToString()
	if rueidis.IsRedisNil(err) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return s == "OK"
}

func javaReleasePermit(t *testing.T, raw rueidis.Client, name, id string) int64 {
	t.Helper()
	k := semaphore.KeysOf(name)
	n, err := raw.Do(t.Context(), raw.B().Eval().Script(javaRelease).Numkeys(3).Key(k.Available, k.Channel, k.Leases).
		Arg(id, "1", strconv.FormatInt(javaNow(t, raw), 10), "publish").Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func rawID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return string(b[:])
}

// TestInteropJavaReleaseWakesGoWaiter: a Redisson client holds the last
// permit; relock's waiter is woken by its release (which publishes the
// new count).
func TestInteropJavaReleaseWakesGoWaiter(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	s := c.GetSemaphore(name)
	setPermits(t, s, 1)
	java := rawID()
	if !javaAcquire(t, raw, name, java) {
		t.Fatal("java acquire failed")
	}
	if javaAcquire(t, raw, name, rawID()) {
		t.Fatal("java acquired a second permit of one")
	}
	if _, ok, err := s.TryAcquire(t.Context(), 0, 0); ok || err != nil {
		t.Fatalf("TryAcquire beside java's permit = %v, %v", ok, err)
	}
	got := acquireAsync(t.Context(), s, 0)
	relocktest.Eventually(t, handoff, "relock's waiter to subscribe", func() bool {
		vals, err := raw.Do(t.Context(), raw.B().PubsubNumsub().Channel(semaphore.KeysOf(name).Channel).Build()).ToArray()
		if err != nil || len(vals) != 2 {
			return false
		}
		n, _ := vals[1].AsInt64()
		return n == 1
	})
	start := time.Now()
	if n := javaReleasePermit(t, raw, name, java); n != 1 {
		t.Fatalf("java release = %d", n)
	}
	id := within(t, got, handoff, "relock's waiter after java's release")
	if d := time.Since(start); d > time.Second {
		t.Errorf("hand-off took %v", d)
	}
	// relock's permit is in Redisson's form: Redisson can see and release it.
	if javaAcquire(t, raw, name, rawID()) {
		t.Fatal("java acquired beside relock's permit")
	}
	if n := javaReleasePermit(t, raw, name, unhex(t, id)); n != 1 {
		t.Fatalf("java release of relock's permit = %d, want 1", n)
	}
	if err := s.Release(t.Context(), id); err == nil {
		t.Error("relock released a permit java had released")
	}
	if n := available(t, s); n != 1 {
		t.Errorf("AvailablePermits = %d, want 1", n)
	}
}
