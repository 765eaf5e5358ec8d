package lua_test

// The refusals of refuse.lua: a name whose other form is in use, and a
// name that holds another kind, are refused by every script that creates
// or takes state under a name, before it writes anything.

import (
	"context"
	"sort"
	"strings"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/lua"
)

// snapshot is every key whose name contains base, with its type, value
// (DUMP) and whether it expires: what a refused script must leave as it
// was.
func (r *rules) snapshot(base string) map[string]string {
	r.t.Helper()
	keys, err := r.do(r.rdb.B().Keys().Pattern("*" + base + "*").Build()).AsStrSlice()
	require.NoError(r.t, err)
	sort.Strings(keys)
	out := map[string]string{}
	for _, k := range keys {
		dump, err := r.do(r.rdb.B().Dump().Key(k).Build()).ToString()
		require.NoError(r.t, err)
		expires := r.pttl(k) > 0
		out[k] = dump + "|" + map[bool]string{true: "expires", false: "persists"}[expires]
	}
	return out
}

// pair is a name without braces, whose keys (and those of its other form,
// "{base}") are deleted when the test ends.
func (r *rules) pair(step string) (plain, braced string) {
	plain = "refuse:" + r.t.Name() + ":" + step
	braced = "{" + plain + "}"
	r.t.Cleanup(func() {
		keys, _ := r.rdb.Do(context.Background(), r.rdb.B().Keys().Pattern("*"+plain+"*").Build()).AsStrSlice()
		if len(keys) > 0 {
			r.rdb.Do(context.Background(), r.rdb.B().Del().Key(keys...).Build())
		}
	})
	return plain, braced
}

// refusedWith checks that res is the error reply code (lua.NameConflict
// or lua.WrongKind) with detail.
func refusedWith(t *testing.T, what, code, detail string, res rueidis.RedisResult) {
	t.Helper()
	err := res.Error()
	require.Error(t, err, "%s: not refused", what)
	re, ok := rueidis.IsRedisErr(err)
	require.True(t, ok, "%s: %v is not an error reply", what, err)
	assert.Equal(t, code+" "+detail, re.Error(), what)
}

// nameScripts are the scripts that create or take state under a name,
// each sent for name with what it needs to take it (a permit ID, a
// count...).
func nameScripts(r *rules) map[string]func(name string) rueidis.RedisResult {
	sem := func(s *lua.Script, args ...string) func(string) rueidis.RedisResult {
		return func(name string) rueidis.RedisResult {
			k := layout.Semaphore(name)
			return r.exec(s, []string{k.Available, k.Leases, k.Channel, layout.OtherKey(name)}, append([]string{"publish"}, args...)...)
		}
	}
	return map[string]func(string) rueidis.RedisResult{
		"lock acquire": func(name string) rueidis.RedisResult {
			return r.exec(lua.LockAcquire, lockKeys(name), ruleLease, "c:me")
		},
		"fenced acquire": func(name string) rueidis.RedisResult {
			return r.exec(lua.FencedAcquire, fencedKeys(name), ruleLease, "c:me")
		},
		"fair acquire": func(name string) rueidis.RedisResult {
			return r.exec(lua.FairAcquire, fairAcquireKeys(name), ruleLease, "c:me", "750", "1", "300000", "publish", "0")
		},
		"read acquire": func(name string) rueidis.RedisResult {
			return r.exec(lua.RWReadAcquire, rwKeys(name), ruleLease, "c:me", layout.Tagged(name))
		},
		"write acquire": func(name string) rueidis.RedisResult {
			return r.exec(lua.RWWriteAcquire, rwKeys(name), ruleLease, "c:me:write", layout.Tagged(name))
		},
		"semaphore set": func(name string) rueidis.RedisResult {
			k := layout.Semaphore(name)
			return r.exec(lua.SemSet, []string{k.Available, k.Channel, layout.OtherKey(name)}, "publish", "2")
		},
		"semaphore add": func(name string) rueidis.RedisResult {
			k := layout.Semaphore(name)
			return r.exec(lua.SemAdd, []string{k.Available, k.Channel, layout.OtherKey(name)}, "publish", "2")
		},
		"semaphore acquire": func(name string) rueidis.RedisResult {
			k := layout.Semaphore(name)
			return r.exec(lua.SemAcquire, []string{k.Available, k.Leases, k.Channel, k.Queue, k.QueueDeadlines, k.Holders, layout.OtherKey(name)},
				"publish", "permit-of-me", ruleLease, "1", "30000", "c:me")
		},
		"semaphore acquire many": func(name string) rueidis.RedisResult {
			k := layout.Semaphore(name)
			return r.exec(lua.SemAcquireMany, []string{k.Available, k.Leases, k.Channel, k.Queue, k.QueueDeadlines, k.Holders, layout.OtherKey(name)},
				"publish", ruleLease, "1", "30000", "c:me", "permit-of-me-1", "permit-of-me-2")
		},
		"semaphore update lease": func(name string) rueidis.RedisResult {
			k := layout.Semaphore(name)
			return r.exec(lua.SemUpdateLease, []string{k.Available, k.Leases, k.Channel, k.Holders, layout.OtherKey(name)}, "publish", "permit-of-other", "1")
		},
		"semaphore lease left": sem(lua.SemLeaseLeft, "permit-of-other"),
		"semaphore available":  sem(lua.SemAvailable),
		"semaphore release": func(name string) rueidis.RedisResult {
			k := layout.Semaphore(name)
			return r.exec(lua.SemRelease, []string{k.Available, k.Leases, k.Channel, k.Holders, layout.OtherKey(name)}, "publish", "permit-of-other")
		},
		"semaphore renew": func(name string) rueidis.RedisResult {
			k := layout.Semaphore(name)
			return r.exec(lua.SemRenew, []string{k.Available, k.Leases, k.Channel, k.Holders, layout.OtherKey(name)}, "publish", "permit-of-other", ruleLease)
		},
		"semaphore delete": func(name string) rueidis.RedisResult {
			k := layout.Semaphore(name)
			return r.exec(lua.SemDelete, []string{k.Available, k.Leases, k.Queue, k.QueueDeadlines, k.Holders, layout.OtherKey(name)})
		},
		"latch set": func(name string) rueidis.RedisResult {
			return r.exec(lua.LatchSet, []string{name, layout.OtherKey(name), layout.LatchOpened(name)},
				"2", layout.LatchChannel(name), "publish", "10000")
		},
		"counting set": func(name string) rueidis.RedisResult {
			k := layout.CountingSemaphore(name)
			return r.exec(lua.SemSet, []string{k.Count, k.Channel, layout.OtherKey(name)}, "publish", "2")
		},
		"counting acquire": func(name string) rueidis.RedisResult {
			k := layout.CountingSemaphore(name)
			return r.exec(lua.CountingAcquire, []string{k.Count, k.Grants, layout.OtherKey(name)}, "1", "grant-of-me:1", "10000")
		},
		"counting add": func(name string) rueidis.RedisResult {
			k := layout.CountingSemaphore(name)
			return r.exec(lua.CountingAdd, []string{k.Count, k.Channel, layout.OtherKey(name)}, "publish", "2")
		},
		"counting drain": func(name string) rueidis.RedisResult {
			return r.exec(lua.CountingDrain, []string{name, layout.OtherKey(name)})
		},
		"rate set": func(name string) rueidis.RedisResult { return rateSet(r, name, "0") },
		"rate try set": func(name string) rueidis.RedisResult {
			return rateSet(r, name, "1")
		},
		"rate acquire": func(name string) rueidis.RedisResult {
			return r.exec(lua.RateAcquire, rateKeys(name), "1", "grant-of-me-0123")
		},
		"rate undo": func(name string) rueidis.RedisResult {
			return r.exec(lua.RateUndo, rateKeys(name), "publish", "grant-of-other-1", "1")
		},
		"rate available": func(name string) rueidis.RedisResult {
			return r.exec(lua.RateAvailable, rateKeys(name))
		},
	}
}

// rateClient is the client ID of the rate limiter's scripts in these
// tests (its own window, for a rate of type PER_CLIENT).
const rateClient = "0f8fad5b-d9cb-469f-a165-70867728950e"

// rateKeys are the keys of the rate limiter's window scripts for name.
func rateKeys(name string) []string {
	k := layout.RateLimiter(name)
	return []string{k.Config, k.Value, k.ClientValue(rateClient), k.Permits, k.ClientPermits(rateClient), k.Channel, layout.OtherKey(name)}
}

// rateSet sends rate_set.lua for name: 5 permits per 10s, once '1'
// (TrySetRate) or '0' (SetRate).
func rateSet(r *rules, name, once string) rueidis.RedisResult {
	k := layout.RateLimiter(name)
	return r.exec(lua.RateSet, []string{k.Config, k.Value, k.Permits, k.Channel, layout.OtherKey(name)}, "publish", "5", "10000", once)
}

// rateLimiterSet gives name a rate limiter's configuration, with a grant
// in its window, as Redisson's trySetRate and tryAcquire leave them.
func (r *rules) rateLimiterSet(name string) {
	r.t.Helper()
	k := layout.RateLimiter(name)
	require.NoError(r.t, r.do(r.rdb.B().Hset().Key(k.Config).FieldValue().FieldValue("rate", "5").
		FieldValue("interval", "10000").FieldValue("type", "0").FieldValue("keepAliveTime", "0").Build()).Error())
	require.NoError(r.t, r.do(r.rdb.B().Zadd().Key(k.Permits).ScoreMember().
		ScoreMember(float64(serverNow(r.t, r.rdb)), "\x10grant-of-other-1\x01\x00\x00\x00").Build()).Error())
	require.NoError(r.t, r.do(r.rdb.B().Set().Key(k.Value).Value("4").Build()).Error())
}

// TestOtherFormInUseRefused: while one form of a name ("a" or "{a}") has
// its key, every script that creates or takes state under the other form
// refuses, naming the form in use, and changes nothing: not the shared
// keys (a semaphore's permits whose lease ended stay where they are, a
// fenced lock's counter is not moved) and not the name's own. The form in
// use is each kind's: a lock's hash, a semaphore's count with a permit
// held and one whose lease ended, a queued fair waiter, a counting
// semaphore's count with a grant, a rate limiter's configuration with a
// grant in its window.
func TestOtherFormInUseRefused(t *testing.T) {
	r := newRules(t)
	scripts := nameScripts(r)
	uses := map[string]func(name string){
		"lock held": func(name string) {
			r.holdHash(name, "c:other", "1")
		},
		"semaphore in use": func(name string) {
			k := layout.Semaphore(name)
			now := float64(serverNow(t, r.rdb))
			require.NoError(t, r.do(r.rdb.B().Set().Key(k.Available).Value("0").Build()).Error())
			require.NoError(t, r.do(r.rdb.B().Zadd().Key(k.Leases).ScoreMember().
				ScoreMember(now+30000, "permit-of-other").ScoreMember(now-1, "permit-ended").Build()).Error())
		},
		"fair lock with a queue": func(name string) {
			r.holdHash(name, "c:other", "1")
			require.NoError(t, r.do(r.rdb.B().Rpush().Key(layout.Queue(name)).Element("c:waiter").Build()).Error())
		},
		"counting semaphore in use": func(name string) {
			k := layout.CountingSemaphore(name)
			require.NoError(t, r.do(r.rdb.B().Set().Key(k.Count).Value("1").Build()).Error())
			require.NoError(t, r.do(r.rdb.B().Zadd().Key(k.Grants).ScoreMember().
				ScoreMember(float64(serverNow(t, r.rdb)+10000), "grant-of-other:1").Build()).Error())
		},
		"rate limiter in use": r.rateLimiterSet,
	}
	for useName, use := range uses {
		for scriptName, run := range scripts {
			for _, braced := range []bool{false, true} {
				step := strings.ReplaceAll(useName+" "+scriptName, " ", "-")
				if braced {
					step += "-braced"
				}
				t.Run(step, func(t *testing.T) {
					plain, brace := r.pair(step)
					inUse, asked := plain, brace
					if braced {
						inUse, asked = brace, plain
					}
					use(inUse)
					before := r.snapshot(plain)
					refusedWith(t, scriptName, lua.NameConflict, inUse, run(asked))
					assert.Equal(t, before, r.snapshot(plain), "%s of %q while %q is in use changed Redis", scriptName, asked, inUse)
				})
			}
		}
	}
}

// TestOtherFormFree: a name whose other form has no key of its own is
// taken as any other (the shared keys alone, a fenced lock's counter or
// an expired permit's lease, do not refuse it).
func TestOtherFormFree(t *testing.T) {
	r := newRules(t)
	plain, braced := r.pair("free")
	require.NoError(t, r.do(r.rdb.B().Set().Key(layout.Token(plain)).Value("7").Build()).Error())
	got, err := r.exec(lua.FencedAcquire, fencedKeys(braced), ruleLease, "c:me").AsIntSlice()
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 8}, got, "the braced form takes the counter's next token")
	for _, name := range []string{plain, braced} {
		assert.Equal(t, name, layout.OtherKey(layout.OtherKey(name)), "OtherKey is its own inverse")
	}
}

// TestWrongKindRefused: a script that finds a hash of another kind
// refuses, naming the kind found, and changes nothing: a plain, fenced
// or fair acquisition (or a re-entry of one) finds a read-write lock's
// hash ('mode'), a plain or fenced one a fair lock's queue, a read-write
// acquisition or re-entry a lock's hash without 'mode'; any lock's
// acquisition a rate limiter's hash ('rate'), and every script of the
// rate limiter a lock's hash.
func TestWrongKindRefused(t *testing.T) {
	r := newRules(t)
	const me = "c:me"
	readHeld := func(name string) {
		r.holdHash(name, "mode", "read", me, "1")
		r.readLevel(name, me, 1)
	}
	writeHeld := func(name string) { r.holdHash(name, "mode", "write", "c:other:write", "1") }
	lockHeld := func(name string) { r.holdHash(name, me, "1") }
	fairQueue := func(name string) {
		require.NoError(t, r.do(r.rdb.B().Rpush().Key(layout.Queue(name)).Element("c:waiter").Build()).Error())
		require.NoError(t, r.do(r.rdb.B().Zadd().Key(layout.Timeouts(name)).ScoreMember().
			ScoreMember(float64(serverNow(t, r.rdb)+300000), "c:waiter").Build()).Error())
	}
	reenter := func(name string) rueidis.RedisResult {
		return r.exec(lua.LockReenter, []string{name, layout.Token(name), layout.Channel(name)}, ruleLease, me, "2", "publish")
	}
	readReenter := func(name string) rueidis.RedisResult {
		return r.exec(lua.RWReadReenter, []string{name, layout.RWChannel(name)}, ruleLease, me, layout.Tagged(name), "2", "publish")
	}
	writeReenter := func(name string) rueidis.RedisResult {
		return r.exec(lua.RWWriteReenter, []string{name, layout.RWChannel(name)}, ruleLease, me+":write", layout.Tagged(name), "2", "publish")
	}
	scripts := nameScripts(r)
	cases := []struct {
		step  string
		state func(string)
		run   func(string) rueidis.RedisResult
		found layout.Kind
	}{
		{"lock acquire of a read hold", readHeld, scripts["lock acquire"], layout.KindRWLock},
		{"lock acquire of a write hold", writeHeld, scripts["lock acquire"], layout.KindRWLock},
		{"lock re-entry of the owner's read hold", readHeld, reenter, layout.KindRWLock},
		{"fenced acquire of a read hold", readHeld, scripts["fenced acquire"], layout.KindRWLock},
		{"fair acquire of a read hold", readHeld, scripts["fair acquire"], layout.KindRWLock},
		{"lock acquire beside a fair queue", fairQueue, scripts["lock acquire"], layout.KindFair},
		{"fenced acquire beside a fair queue", fairQueue, scripts["fenced acquire"], layout.KindFair},
		{"read acquire of a lock", lockHeld, scripts["read acquire"], layout.KindLock},
		{"write acquire of a lock", lockHeld, scripts["write acquire"], layout.KindLock},
		{"read re-entry of the owner's lock", lockHeld, readReenter, layout.KindLock},
		{"write re-entry of a lock", func(name string) { r.holdHash(name, me+":write", "1") }, writeReenter, layout.KindLock},
		{"lock acquire of a rate limiter", r.rateLimiterSet, scripts["lock acquire"], layout.KindRateLimiter},
		{"fenced acquire of a rate limiter", r.rateLimiterSet, scripts["fenced acquire"], layout.KindRateLimiter},
		{"fair acquire of a rate limiter", r.rateLimiterSet, scripts["fair acquire"], layout.KindRateLimiter},
		{"read acquire of a rate limiter", r.rateLimiterSet, scripts["read acquire"], layout.KindRateLimiter},
		{"write acquire of a rate limiter", r.rateLimiterSet, scripts["write acquire"], layout.KindRateLimiter},
		{"rate set of a lock", lockHeld, scripts["rate set"], layout.KindLock},
		{"rate try set of a lock", lockHeld, scripts["rate try set"], layout.KindLock},
		{"rate acquire of a lock", lockHeld, scripts["rate acquire"], layout.KindLock},
		{"rate undo of a lock", lockHeld, scripts["rate undo"], layout.KindLock},
		{"rate available of a lock", lockHeld, scripts["rate available"], layout.KindLock},
		{"rate set of a read hold", readHeld, scripts["rate set"], layout.KindRWLock},
		{"rate acquire of a write hold", writeHeld, scripts["rate acquire"], layout.KindRWLock},
	}
	for _, c := range cases {
		t.Run(strings.ReplaceAll(c.step, " ", "-"), func(t *testing.T) {
			name, _ := r.pair(strings.ReplaceAll(c.step, " ", "-"))
			c.state(name)
			before := r.snapshot(name)
			refusedWith(t, c.step, lua.WrongKind, string(c.found), c.run(name))
			assert.Equal(t, before, r.snapshot(name), "%s changed Redis", c.step)
		})
	}
}

// TestReenterOfLostHoldInAnotherKind: a re-entry whose hold is gone
// replies nil (lost), as before, even when the name now holds another
// kind: the loss is reported at once, and the acquisition anew that
// follows is the one refused.
func TestReenterOfLostHoldInAnotherKind(t *testing.T) {
	r := newRules(t)
	const me = "c:me"
	name, _ := r.pair("lock")
	r.holdHash(name, "mode", "read", "c:other", "1")
	res := r.exec(lua.LockReenter, []string{name, layout.Token(name), layout.Channel(name)}, ruleLease, me, "2", "publish")
	assert.True(t, rueidis.IsRedisNil(res.Error()), "re-entry of a lost plain hold in a read-write lock's hash replied %v, want nil (lost)", res.Error())
	name, _ = r.pair("read")
	r.holdHash(name, "c:other", "1")
	res = r.exec(lua.RWReadReenter, []string{name, layout.RWChannel(name)}, ruleLease, me, layout.Tagged(name), "2", "publish")
	assert.True(t, rueidis.IsRedisNil(res.Error()), "re-entry of a lost read hold in a lock's hash replied %v, want nil (lost)", res.Error())
	res = r.exec(lua.RWWriteReenter, []string{name, layout.RWChannel(name)}, ruleLease, me+":write", layout.Tagged(name), "2", "publish")
	assert.True(t, rueidis.IsRedisNil(res.Error()), "re-entry of a lost write hold in a lock's hash replied %v, want nil (lost)", res.Error())
}
