package lua_test

// The safety rules the scripts' headers state, one test each across the
// scripts that share a rule: who may take a lock, what a release, a
// renewal or a re-entry of an owner that holds nothing may change, who is
// told when a lock comes free. scripts/mutants/mutants.txt puts back a bug
// that breaks each rule, and these tests must catch it.

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/lua"
)

// ruleLease is the lease, in ms, the scripts get in these tests; a lock
// held by "another owner" has otherLease, shorter, so that a script that
// wrongly resets it is seen.
const (
	ruleLease  = "30000"
	otherLease = 5000
)

// rules sends scripts and reads keys on the package's shared server.
type rules struct {
	t   *testing.T
	rdb rueidis.Client
}

func newRules(t *testing.T) *rules {
	return &rules{t: t, rdb: redistest.Shared(t).Client(t)}
}

// name is a lock name unique to the test and step, whose keys are
// deleted when the test ends.
func (r *rules) name(step string) string {
	name := "rules:" + r.t.Name() + ":" + step
	r.t.Cleanup(func() {
		keys := []string{name}
		for _, k := range layout.KeysOf(name) {
			keys = append(keys, k.Name)
		}
		r.rdb.Do(context.Background(), r.rdb.B().Del().Key(keys...).Build())
	})
	return name
}

func (r *rules) exec(s *lua.Script, keys []string, args ...string) rueidis.RedisResult {
	r.t.Helper()
	return s.Exec(r.t.Context(), r.rdb, keys, args)
}

func (r *rules) do(cmd rueidis.Completed) rueidis.RedisResult {
	r.t.Helper()
	return r.rdb.Do(r.t.Context(), cmd)
}

// hash is the content of the hash key ({} when it does not exist).
func (r *rules) hash(key string) map[string]string {
	r.t.Helper()
	m, err := r.do(r.rdb.B().Hgetall().Key(key).Build()).AsStrMap()
	require.NoError(r.t, err)
	return m
}

func (r *rules) pttl(key string) int64 {
	r.t.Helper()
	n, err := r.do(r.rdb.B().Pttl().Key(key).Build()).AsInt64()
	require.NoError(r.t, err)
	return n
}

// holdHash makes the hash key hold fields (field, count pairs) with the
// lease otherLease, as another client's scripts would have left it.
func (r *rules) holdHash(key string, fieldCounts ...string) {
	r.t.Helper()
	fv := r.rdb.B().Hset().Key(key).FieldValue()
	for i := 0; i+1 < len(fieldCounts); i += 2 {
		fv = fv.FieldValue(fieldCounts[i], fieldCounts[i+1])
	}
	require.NoError(r.t, r.do(fv.Build()).Error())
	require.NoError(r.t, r.do(r.rdb.B().Pexpire().Key(key).Milliseconds(otherLease).Build()).Error())
}

// readLevel gives the read hold field of name a live lease key for level
// n, with the lease otherLease.
func (r *rules) readLevel(name, field string, n int) {
	r.t.Helper()
	require.NoError(r.t, r.do(r.rdb.B().Set().Key(layout.ReadLeaseKey(name, field, n)).Value("1").
		Px(otherLease*time.Millisecond).Build()).Error())
}

// unchanged checks that key still has the content before, and a lease no
// longer than otherLease (nothing reset it).
func (r *rules) unchanged(key string, before map[string]string, what string) {
	r.t.Helper()
	assert.Equal(r.t, before, r.hash(key), "%s: the hash changed", what)
	ttl := r.pttl(key)
	assert.Greater(r.t, ttl, int64(0), "%s: the lease is gone", what)
	assert.LessOrEqual(r.t, ttl, int64(otherLease), "%s: the other owner's lease was extended", what)
}

// fairKeys are the keys of the fair-lock scripts for name.
func fairKeys(name string) []string {
	return []string{name, layout.Queue(name), layout.Timeouts(name), layout.Alive(name), layout.Channel(name)}
}

// fairAcquireKeys are the keys of fair_acquire.lua for name: fairKeys and
// the name's other form.
func fairAcquireKeys(name string) []string { return append(fairKeys(name), layout.OtherKey(name)) }

// lockKeys are the keys of lock_acquire.lua for name, without a wake
// registry: the hash, the name's other form, the fair queue.
func lockKeys(name string) []string { return []string{name, layout.OtherKey(name), layout.Queue(name)} }

// fencedKeys are the keys of fenced_acquire.lua for name, without a wake
// registry.
func fencedKeys(name string) []string {
	return []string{name, layout.Token(name), layout.OtherKey(name), layout.Queue(name)}
}

// rwKeys are the keys of the read-write lock's acquire scripts for name.
func rwKeys(name string) []string { return []string{name, layout.OtherKey(name)} }

// listener collects the messages published on some channels, on a
// connection of its own.
type listener struct {
	rdb    rueidis.Client
	msgs   chan rueidis.PubSubMessage
	marker string
}

// listeners numbers the listeners, so that each has a marker of its own.
var listeners atomic.Int64

// listen subscribes to channels (and a marker channel of its own) and
// returns once the server confirmed the subscriptions.
func listen(t *testing.T, rdb rueidis.Client, channels ...string) *listener {
	t.Helper()
	l := &listener{rdb: rdb, msgs: make(chan rueidis.PubSubMessage, 256),
		marker: "rules-marker:" + t.Name() + ":" + strconv.FormatInt(listeners.Add(1), 10)}
	dc, cancel := rdb.Dedicate()
	t.Cleanup(cancel)
	dc.SetPubSubHooks(rueidis.PubSubHooks{OnMessage: func(m rueidis.PubSubMessage) {
		select {
		case l.msgs <- m:
		default:
		}
	}})
	require.NoError(t, dc.Do(t.Context(), dc.B().Subscribe().Channel(append(channels, l.marker)...).Build()).Error())
	return l
}

// take returns the messages ("channel message") published since the last
// take: a marker is published after them, and they are those that came
// before it.
func (l *listener) take(t *testing.T) []string {
	t.Helper()
	require.NoError(t, l.rdb.Do(t.Context(), l.rdb.B().Publish().Channel(l.marker).Message("m").Build()).Error())
	got := []string{}
	timeout := time.After(5 * time.Second)
	for {
		select {
		case m := <-l.msgs:
			if m.Channel == l.marker {
				return got
			}
			got = append(got, m.Channel+" "+m.Message)
		case <-timeout:
			t.Fatalf("no marker 5s after publishing it (messages so far %v)", got)
		}
	}
}

// TestAcquireExcludesOtherOwners: an acquisition of a lock another owner
// holds is refused with the lock's remaining lease, and changes neither
// the lock's hash nor its lease; a read lock is shared with readers only,
// and a write lock with nobody.
func TestAcquireExcludesOtherOwners(t *testing.T) {
	r := newRules(t)
	const other, me = "c:other", "c:me"
	refused := func(what string, res rueidis.RedisResult) {
		t.Helper()
		require.False(t, rueidis.IsRedisNil(res.Error()), "%s: taken, want refused", what)
		pttl, err := res.AsInt64()
		require.NoError(t, err, what)
		assert.Greater(t, pttl, int64(0), "%s: the reply is the holder's remaining lease", what)
		assert.LessOrEqual(t, pttl, int64(otherLease), what)
	}
	t.Run("lock", func(t *testing.T) {
		name := r.name("lock")
		r.holdHash(name, other, "1")
		before := r.hash(name)
		refused("acquire", r.exec(lua.LockAcquire, lockKeys(name), ruleLease, me))
		r.unchanged(name, before, "acquire")
	})
	t.Run("fenced", func(t *testing.T) {
		name := r.name("fenced")
		r.holdHash(name, other, "1")
		before := r.hash(name)
		got, err := r.exec(lua.FencedAcquire, fencedKeys(name), ruleLease, me).AsIntSlice()
		require.NoError(t, err)
		require.Len(t, got, 2)
		assert.Equal(t, int64(0), got[0], "fenced acquire: refused")
		assert.Equal(t, "", r.get(layout.Token(name)), "a refused acquisition takes no token")
		r.unchanged(name, before, "fenced acquire")
	})
	t.Run("fair", func(t *testing.T) {
		name := r.name("fair")
		r.holdHash(name, other, "1")
		before := r.hash(name)
		for _, join := range []string{"0", "1"} {
			refused("fair acquire with join "+join, r.exec(lua.FairAcquire, fairAcquireKeys(name),
				ruleLease, me, "750", join, "300000", "publish", "0"))
			r.unchanged(name, before, "fair acquire with join "+join)
		}
	})
	rw := func(step string, acquire *lua.Script, field, mode, holder string) {
		t.Run(step, func(t *testing.T) {
			name := r.name(step)
			r.holdHash(name, "mode", mode, holder, "1")
			if mode == "read" {
				r.readLevel(name, holder, 1)
			}
			before := r.hash(name)
			refused(step, r.exec(acquire, rwKeys(name), ruleLease, field, layout.Tagged(name)))
			r.unchanged(name, before, step)
		})
	}
	rw("write while another owner reads", lua.RWWriteAcquire, me+":write", "read", other)
	rw("write while the same owner reads", lua.RWWriteAcquire, me+":write", "read", me)
	rw("write while another owner writes", lua.RWWriteAcquire, me+":write", "write", other+":write")
	rw("read while another owner writes", lua.RWReadAcquire, me, "write", other+":write")
}

func (r *rules) get(key string) string {
	r.t.Helper()
	v, err := r.do(r.rdb.B().Get().Key(key).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return ""
	}
	require.NoError(r.t, err)
	return v
}

// TestAcquireSetsLease: a lock taken by an acquisition lives for the
// lease it was given, never without an expiry (a holder that dies would
// keep it for ever).
func TestAcquireSetsLease(t *testing.T) {
	r := newRules(t)
	const me = "c:me"
	taken := func(what, key string, res rueidis.RedisResult) {
		t.Helper()
		require.True(t, rueidis.IsRedisNil(res.Error()), "%s replied %v, want nil (taken)", what, res.Error())
		ttl := r.pttl(key)
		assert.Greater(t, ttl, int64(otherLease), "%s: lease %dms, want the %sms given", what, ttl, ruleLease)
		assert.LessOrEqual(t, ttl, int64(30000), what)
	}
	name := r.name("lock")
	taken("lock acquire", name, r.exec(lua.LockAcquire, lockKeys(name), ruleLease, me))
	name = r.name("fenced")
	got, err := r.exec(lua.FencedAcquire, fencedKeys(name), ruleLease, me).AsIntSlice()
	require.NoError(t, err)
	require.Equal(t, int64(1), got[0], "fenced acquire: taken")
	assert.Greater(t, r.pttl(name), int64(otherLease), "fenced acquire: the lease given")
	name = r.name("fair")
	taken("fair acquire", name, r.exec(lua.FairAcquire, fairAcquireKeys(name), ruleLease, me, "750", "1", "300000", "publish", "0"))
	name = r.name("read")
	taken("read acquire", name, r.exec(lua.RWReadAcquire, rwKeys(name), ruleLease, me, layout.Tagged(name)))
	assert.Greater(t, r.pttl(layout.ReadLeaseKey(name, me, 1)), int64(otherLease), "the read hold's lease key")
	name = r.name("write")
	taken("write acquire", name, r.exec(lua.RWWriteAcquire, rwKeys(name), ruleLease, me+":write", layout.Tagged(name)))
	// A read hold taken under the owner's own write lock, on a shorter
	// lease, never shortens the lock's.
	res := r.exec(lua.RWReadAcquire, rwKeys(name), "1000", me, layout.Tagged(name))
	require.True(t, rueidis.IsRedisNil(res.Error()), "the writer's read acquire replied %v, want nil (taken)", res.Error())
	assert.Greater(t, r.pttl(name), int64(otherLease), "the write lock's lease after its owner's read acquisition")
}

// TestPermitsSetOnceAddedAndBack: a semaphore's count is set only when it
// has none; permits added or whose lease ended come back to the count,
// and the count is published so that waiters take them.
func TestPermitsSetOnceAddedAndBack(t *testing.T) {
	r := newRules(t)
	name := r.name("sem")
	k := layout.Semaphore(name)
	l := listen(t, r.rdb, k.Channel)
	set := func(n string) int64 {
		t.Helper()
		got, err := r.exec(lua.SemSet, []string{k.Available, k.Channel, layout.OtherKey(name)}, "publish", n).AsInt64()
		require.NoError(t, err)
		return got
	}
	assert.Equal(t, int64(1), set("1"))
	assert.Equal(t, int64(0), set("5"), "a count set twice")
	assert.Equal(t, "1", r.get(k.Available), "a semaphore's count is set only when it has none")
	assert.Equal(t, []string{k.Channel + " 1"}, l.take(t), "a new count")

	n, err := r.exec(lua.SemAdd, []string{k.Available, k.Channel, layout.OtherKey(name)}, "publish", "2").AsInt64()
	require.NoError(t, err)
	assert.Equal(t, int64(3), n)
	assert.Equal(t, []string{k.Channel + " 2"}, l.take(t), "permits added")

	// A permit whose lease ended comes back at the next call.
	require.NoError(t, r.do(r.rdb.B().Zadd().Key(k.Leases).ScoreMember().
		ScoreMember(float64(serverNow(t, r.rdb)-1), "expired").Build()).Error())
	n, err = r.exec(lua.SemAvailable, []string{k.Available, k.Leases, k.Channel, layout.OtherKey(name)}, "publish").AsInt64()
	require.NoError(t, err)
	assert.Equal(t, int64(4), n, "the permits available after a lease ended")
	assert.Equal(t, []string{k.Channel + " 4"}, l.take(t), "a permit back")
}

// TestRenewAfterLockPassedOn: a renewal by an owner whose hold is gone
// (its lease ran out or the key was deleted, and another owner took the
// lock since) replies 0, so that the owner learns of its loss, and leaves
// the new owner's hold and lease as they were.
func TestRenewAfterLockPassedOn(t *testing.T) {
	r := newRules(t)
	const old, next = "c:old", "c:next"
	t.Run("lock", func(t *testing.T) {
		name := r.name("lock")
		r.holdHash(name, next, "1")
		before := r.hash(name)
		n, err := r.exec(lua.LockRenew, []string{name}, ruleLease, old).AsInt64()
		require.NoError(t, err)
		assert.Equal(t, int64(0), n, "renewal of a hold that passed to another owner")
		r.unchanged(name, before, "renewal")
	})
	t.Run("write", func(t *testing.T) {
		name := r.name("write")
		r.holdHash(name, "mode", "write", next+":write", "1")
		before := r.hash(name)
		n, err := r.exec(lua.RWWriteRenew, []string{name}, ruleLease, old+":write", layout.Tagged(name)).AsInt64()
		require.NoError(t, err)
		assert.Equal(t, int64(0), n, "write renewal of a hold that passed to another owner")
		r.unchanged(name, before, "write renewal")
	})
	t.Run("read", func(t *testing.T) {
		name := r.name("read")
		r.holdHash(name, "mode", "write", next+":write", "1")
		before := r.hash(name)
		n, err := r.exec(lua.RWReadRenew, []string{name}, ruleLease, old, layout.Tagged(name)).AsInt64()
		require.NoError(t, err)
		assert.Equal(t, int64(0), n, "read renewal of a hold that passed to another owner")
		r.unchanged(name, before, "read renewal")
	})
	t.Run("read level expired", func(t *testing.T) {
		// The reader's field is still in the hash (another reader keeps
		// it alive), but its level's lease key ran out: its hold is gone.
		name := r.name("read-expired")
		r.holdHash(name, "mode", "read", old, "1", next, "1")
		r.readLevel(name, next, 1)
		before := r.hash(name)
		n, err := r.exec(lua.RWReadRenew, []string{name}, ruleLease, old, layout.Tagged(name)).AsInt64()
		require.NoError(t, err)
		assert.Equal(t, int64(0), n, "read renewal of a hold whose lease key ran out")
		r.unchanged(name, before, "read renewal")
	})
	t.Run("permit", func(t *testing.T) {
		name := r.name("permit")
		k := layout.Semaphore(name)
		require.NoError(t, r.do(r.rdb.B().Set().Key(k.Available).Value("0").Build()).Error())
		require.NoError(t, r.do(r.rdb.B().Zadd().Key(k.Leases).ScoreMember().
			ScoreMember(float64(serverNow(t, r.rdb)+otherLease), "permit-of-next").Build()).Error())
		before, err := r.do(r.rdb.B().Zrange().Key(k.Leases).Min("0").Max("-1").Withscores().Build()).AsZScores()
		require.NoError(t, err)
		n, err := r.exec(lua.SemRenew, []string{k.Available, k.Leases, k.Channel, k.Holders, layout.OtherKey(name)}, "publish", "permit-of-old", ruleLease).AsInt64()
		require.NoError(t, err)
		assert.Equal(t, int64(0), n, "renewal of a permit that is not held")
		after, err := r.do(r.rdb.B().Zrange().Key(k.Leases).Min("0").Max("-1").Withscores().Build()).AsZScores()
		require.NoError(t, err)
		assert.Equal(t, before, after, "the permits held: a renewal never brings a permit back")
		assert.Equal(t, "0", r.get(k.Available), "the permits available")
	})
}

// TestReenterOfLostHold: a re-entry by an owner whose hold is gone
// replies nil (the hold was lost) and changes nothing: it never re-creates
// a hold beside another owner's.
func TestReenterOfLostHold(t *testing.T) {
	r := newRules(t)
	const old, next = "c:old", "c:next"
	lost := func(what, key string, before map[string]string, res rueidis.RedisResult) {
		t.Helper()
		assert.True(t, rueidis.IsRedisNil(res.Error()), "%s replied %v, want nil (lost)", what, res.Error())
		r.unchanged(key, before, what)
	}
	name := r.name("lock")
	r.holdHash(name, next, "1")
	before := r.hash(name)
	lost("re-entry", name, before, r.exec(lua.LockReenter, []string{name, layout.Token(name), layout.Channel(name)},
		ruleLease, old, "2", "publish"))

	name = r.name("read")
	r.holdHash(name, "mode", "read", next, "1")
	r.readLevel(name, next, 1)
	before = r.hash(name)
	lost("read re-entry", name, before, r.exec(lua.RWReadReenter, []string{name, layout.RWChannel(name)},
		ruleLease, old, layout.Tagged(name), "2", "publish"))

	name = r.name("write")
	r.holdHash(name, "mode", "read", next, "1")
	r.readLevel(name, next, 1)
	before = r.hash(name)
	lost("write re-entry", name, before, r.exec(lua.RWWriteReenter, []string{name, layout.RWChannel(name)},
		ruleLease, old+":write", layout.Tagged(name), "2", "publish"))
}

// TestReleaseOfNothingHeld: a release by an owner that holds nothing
// replies -1 and changes nothing, whatever count it asks to leave (a
// release that freed or changed another owner's lock would break its
// hold).
func TestReleaseOfNothingHeld(t *testing.T) {
	r := newRules(t)
	const me, other = "c:me", "c:other"
	for _, target := range []string{"0", "1"} {
		t.Run("target "+target, func(t *testing.T) {
			check := func(what, key string, before map[string]string, res rueidis.RedisResult) {
				t.Helper()
				n, err := res.AsInt64()
				require.NoError(t, err, what)
				assert.Equal(t, int64(-1), n, "%s by an owner that holds nothing", what)
				r.unchanged(key, before, what)
			}
			name := r.name("lock" + target)
			r.holdHash(name, other, "2")
			check("unlock", name, r.hash(name), r.exec(lua.LockUnlock, []string{name, layout.Channel(name)},
				"0", ruleLease, me, "publish", target))

			name = r.name("fair" + target)
			r.holdHash(name, other, "2")
			check("fair unlock", name, r.hash(name), r.exec(lua.FairUnlock, fairKeys(name),
				"0", ruleLease, me, "publish", target))

			name = r.name("read" + target)
			r.holdHash(name, "mode", "read", other, "2")
			r.readLevel(name, other, 1)
			r.readLevel(name, other, 2)
			check("read unlock", name, r.hash(name), r.exec(lua.RWReadUnlock, []string{name, layout.RWChannel(name)},
				"0", ruleLease, me, "publish", target, layout.Tagged(name)))

			name = r.name("write" + target)
			r.holdHash(name, "mode", "write", other+":write", "2")
			check("write unlock", name, r.hash(name), r.exec(lua.RWWriteUnlock, []string{name, layout.RWChannel(name)},
				"1", ruleLease, me+":write", "publish", target, layout.Tagged(name)))
		})
	}
}

// TestReleasePublishes: a release that frees a lock (the holder's last
// level, or a force-unlock) publishes the kind's message on its channel,
// so that waiters go on at once; a release that leaves the lock held, or
// frees nothing, publishes nothing.
func TestReleasePublishes(t *testing.T) {
	r := newRules(t)
	const me, other = "c:me", "c:other"
	t.Run("lock", func(t *testing.T) {
		name := r.name("lock")
		ch := layout.Channel(name)
		l := listen(t, r.rdb, ch)
		unlock := func(target string) int64 {
			n, err := r.exec(lua.LockUnlock, []string{name, ch}, "0", ruleLease, me, "publish", target).AsInt64()
			require.NoError(t, err)
			return n
		}
		r.holdHash(name, me, "2")
		require.NoError(t, r.do(r.rdb.B().Pexpire().Key(name).Milliseconds(30000).Build()).Error())
		assert.Equal(t, int64(1), unlock("1"))
		assert.Equal(t, []string{}, l.take(t), "a release that leaves a level")
		assert.Equal(t, int64(0), unlock("0"))
		assert.Equal(t, []string{ch + " 0"}, l.take(t), "the release that frees the lock")
		assert.Equal(t, int64(-1), unlock("0"))
		assert.Equal(t, []string{}, l.take(t), "a release of nothing")

		r.holdHash(name, me, "1")
		require.NoError(t, r.do(r.rdb.B().Pexpire().Key(name).Milliseconds(30000).Build()).Error())
		reenter := func(lease string) {
			t.Helper()
			require.NoError(t, r.exec(lua.LockReenter, []string{name, layout.Token(name), ch}, lease, me, "2", "publish").Error())
		}
		reenter(ruleLease)
		assert.Equal(t, []string{}, l.take(t), "a re-entry that keeps the lease")
		reenter("1000")
		assert.Equal(t, []string{ch + " 1"}, l.take(t), "a re-entry that shortens the lease wakes every waiter")
		assert.LessOrEqual(t, r.pttl(name), int64(1000))

		r.holdHash(name, other, "1")
		n, err := r.exec(lua.LockForceUnlock, []string{name, ch}, "0", "publish").AsInt64()
		require.NoError(t, err)
		assert.Equal(t, int64(1), n)
		assert.Equal(t, []string{ch + " 0"}, l.take(t), "a force-unlock")
	})
	t.Run("read", func(t *testing.T) {
		name := r.name("read")
		ch := layout.RWChannel(name)
		l := listen(t, r.rdb, ch)
		unlock := func(field, target string) int64 {
			n, err := r.exec(lua.RWReadUnlock, []string{name, ch}, "0", ruleLease, field, "publish", target,
				layout.Tagged(name)).AsInt64()
			require.NoError(t, err)
			return n
		}
		r.holdHash(name, "mode", "read", me, "1", other, "1")
		r.readLevel(name, me, 1)
		r.readLevel(name, other, 1)
		assert.Equal(t, int64(0), unlock(me, "0"))
		assert.Equal(t, []string{}, l.take(t), "a reader's release while another reads")
		assert.Equal(t, map[string]string{"mode": "read", other: "1"}, r.hash(name), "the other reader's hold")
		assert.Equal(t, int64(0), unlock(other, "0"))
		assert.Equal(t, []string{ch + " 0"}, l.take(t), "the last reader's release")
		assert.Equal(t, map[string]string{}, r.hash(name))

		// The writer's own read hold: its release leaves the write hold.
		r.holdHash(name, "mode", "write", me+":write", "1", me, "1")
		r.readLevel(name, me, 1)
		assert.Equal(t, int64(0), unlock(me, "0"))
		assert.Equal(t, []string{}, l.take(t), "the writer's release of its read hold")
		assert.Equal(t, map[string]string{"mode": "write", me + ":write": "1"}, r.hash(name), "the write hold after it")
		require.NoError(t, r.do(r.rdb.B().Del().Key(name).Build()).Error())

		r.holdHash(name, "mode", "read", other, "1")
		n, err := r.exec(lua.RWForceUnlock, []string{name, ch}, "write", "1", "publish").AsInt64()
		require.NoError(t, err)
		assert.Equal(t, int64(0), n, "a force-unlock of the write side of a read-locked lock")
		assert.Equal(t, []string{}, l.take(t), "a force-unlock of the side not held")
		assert.Equal(t, map[string]string{"mode": "read", other: "1"}, r.hash(name), "a force-unlock of the other side")
		n, err = r.exec(lua.RWForceUnlock, []string{name, ch}, "read", "0", "publish").AsInt64()
		require.NoError(t, err)
		assert.Equal(t, int64(1), n)
		assert.Equal(t, []string{ch + " 0"}, l.take(t), "a force-unlock of the read side")
	})
	t.Run("write", func(t *testing.T) {
		name := r.name("write")
		ch := layout.RWChannel(name)
		l := listen(t, r.rdb, ch)
		r.holdHash(name, "mode", "write", me+":write", "1")
		n, err := r.exec(lua.RWWriteUnlock, []string{name, ch}, "1", ruleLease, me+":write", "publish", "0",
			layout.Tagged(name)).AsInt64()
		require.NoError(t, err)
		assert.Equal(t, int64(0), n)
		assert.Equal(t, []string{ch + " 1"}, l.take(t), "the writer's release wakes every waiter")
		assert.Equal(t, map[string]string{}, r.hash(name))

		// A writer that also reads: its write release leaves the lock to
		// its read hold, in read mode, for that hold's lease.
		r.holdHash(name, "mode", "write", me+":write", "1", me, "1")
		require.NoError(t, r.do(r.rdb.B().Pexpire().Key(name).Milliseconds(30000).Build()).Error())
		r.readLevel(name, me, 1)
		n, err = r.exec(lua.RWWriteUnlock, []string{name, ch}, "1", ruleLease, me+":write", "publish", "0",
			layout.Tagged(name)).AsInt64()
		require.NoError(t, err)
		assert.Equal(t, int64(0), n)
		assert.Equal(t, []string{ch + " 1"}, l.take(t), "the writer's release while it reads")
		assert.Equal(t, map[string]string{"mode": "read", me: "1"}, r.hash(name), "the read hold left")
		assert.LessOrEqual(t, r.pttl(name), int64(otherLease), "the lock lives as long as the read hold")
	})
	t.Run("fair", func(t *testing.T) {
		name := r.name("fair")
		ch := layout.Channel(name)
		head := ch + ":x:head"
		l := listen(t, r.rdb, ch, head)
		f := newFairLock(t, r.rdb, name)
		f.enqueue("x:head", serverNow(t, r.rdb)+waitMs, -1)
		r.holdHash(name, me, "1")
		assert.Equal(t, int64(0), f.unlock(me, "0"))
		assert.Equal(t, []string{head + " 0"}, l.take(t), "the release that frees the lock wakes the head alone")
		r.holdHash(name, other, "1")
		n, err := r.exec(lua.FairForceUnlock, fairKeys(name), "0", "publish").AsInt64()
		require.NoError(t, err)
		assert.Equal(t, int64(1), n)
		assert.Equal(t, []string{head + " 0", ch + " 0"}, l.take(t),
			"a force-unlock wakes the head, and tells the holder on the lock's channel")
	})
	t.Run("semaphore", func(t *testing.T) {
		name := r.name("sem")
		k := layout.Semaphore(name)
		l := listen(t, r.rdb, k.Channel)
		require.NoError(t, r.do(r.rdb.B().Set().Key(k.Available).Value("0").Build()).Error())
		require.NoError(t, r.do(r.rdb.B().Zadd().Key(k.Leases).ScoreMember().
			ScoreMember(float64(serverNow(t, r.rdb)+30000), "p1").Build()).Error())
		release := func() int64 {
			n, err := r.exec(lua.SemRelease, []string{k.Available, k.Leases, k.Channel, k.Holders, layout.OtherKey(name)}, "publish", "p1").AsInt64()
			require.NoError(t, err)
			return n
		}
		assert.Equal(t, int64(1), release())
		assert.Equal(t, []string{k.Channel + " 1"}, l.take(t), "a release publishes the count available")
		assert.Equal(t, "1", r.get(k.Available))
		assert.Equal(t, int64(0), release(), "a release of a permit not held")
		assert.Equal(t, []string{}, l.take(t), "a release of a permit not held")
		assert.Equal(t, "1", r.get(k.Available), "a release of a permit not held adds no permit")
	})
	t.Run("latch", func(t *testing.T) {
		name := r.name("latch")
		ch, opened := layout.LatchChannel(name), layout.LatchOpened(name)
		const life = "10000"
		setKeys, downKeys := []string{name, layout.OtherKey(name), opened}, []string{name, opened}
		l := listen(t, r.rdb, ch)
		// The mark of the last opening: a new value each time, in
		// microseconds of the server's clock, with its life.
		marks := []int64{serverNow(t, r.rdb) * 1000}
		mark := func(what string) {
			t.Helper()
			v, err := strconv.ParseInt(r.get(opened), 10, 64)
			require.NoError(t, err, "the mark %s", what)
			assert.Greater(t, v, marks[len(marks)-1], "the mark %s", what)
			assert.InDelta(t, 10000, r.pttl(opened), 1000, "the mark's life %s", what)
			marks = append(marks, v)
		}
		unchanged := func(what string) {
			t.Helper()
			assert.Equal(t, strconv.FormatInt(marks[len(marks)-1], 10), r.get(opened), "the mark %s", what)
		}
		n, err := r.exec(lua.LatchSet, setKeys, "2", ch, "publish", life).AsInt64()
		require.NoError(t, err)
		assert.Equal(t, int64(1), n)
		assert.Equal(t, []string{ch + " 1"}, l.take(t), "a new count")
		mark("after a count set where there was none")
		n, err = r.exec(lua.LatchSet, setKeys, "5", ch, "publish", life).AsInt64()
		require.NoError(t, err)
		assert.Equal(t, int64(0), n, "a count set twice")
		assert.Equal(t, "2", r.get(name), "a latch's count is set only when it has none")
		unchanged("after a count set where there was one")
		for _, want := range []int64{1, 0} {
			n, err := r.exec(lua.LatchCountDown, downKeys, ch, "publish", life).AsInt64()
			require.NoError(t, err)
			assert.Equal(t, want, n)
			if want > 0 {
				unchanged("after a count down to 1")
			}
		}
		assert.Equal(t, []string{ch + " 0"}, l.take(t), "the count down to 0 opens the latch")
		assert.Equal(t, "", r.get(name), "an open latch has no key")
		mark("after the opening")
		n, err = r.exec(lua.LatchCountDown, downKeys, ch, "publish", life).AsInt64()
		require.NoError(t, err)
		assert.Equal(t, int64(0), n, "a count down of an open latch")
		assert.Equal(t, "", r.get(name), "an open latch counted down has no key")
		unchanged("after a count down of an open latch")
		// A mark ahead of the server's clock (another server's, after a
		// failover) is still passed.
		ahead := marks[len(marks)-1] + 3600*1000000
		require.NoError(t, r.do(r.rdb.B().Set().Key(opened).Value(strconv.FormatInt(ahead, 10)).Build()).Error())
		marks = append(marks, ahead)
		n, err = r.exec(lua.LatchSet, setKeys, "1", ch, "publish", life).AsInt64()
		require.NoError(t, err)
		assert.Equal(t, int64(1), n)
		mark("after a count set where there was none, with a mark ahead of the clock")
		assert.Equal(t, ahead+1, marks[len(marks)-1], "the mark after one ahead of the clock")
	})
}

// TestWakeOne: with wake-one on, the release that frees a lock wakes the
// live client registered longest ago on its own channel (a client that no
// longer listens is dropped, not woken), then publishes the mark and the
// unlock message on the lock's channel, whoever listens there (the
// waiters that are not registered: Redisson's), and the unlock message
// alone when nobody is registered; a client woken with no waiter left
// hands the wake-up on to the next registered client only (the release
// told the others), or on the lock's channel when none is left.
func TestWakeOne(t *testing.T) {
	r := newRules(t)
	const me = "c:me"
	name := r.name("wake-one")
	ch, wakers, prefix := layout.Channel(name), layout.Wakers(name), layout.WakeChannelPrefix(name)
	mark := ch + " " + layout.RegistrantWokenMessage
	register := func(ids ...string) {
		t.Helper()
		now := serverNow(t, r.rdb)
		for i, id := range ids {
			require.NoError(t, r.do(r.rdb.B().Zadd().Key(wakers).ScoreMember().
				ScoreMember(float64(now+30000+int64(i)), id).Build()).Error())
		}
	}
	registered := func() []string {
		t.Helper()
		ids, err := r.do(r.rdb.B().Zrange().Key(wakers).Min("0").Max("-1").Build()).AsStrSlice()
		require.NoError(t, err)
		return ids
	}
	// The clients "live" and "next" listen on their wake channels and on
	// the lock's channel, as a relock client with waiters does; "dead"
	// registered and went away.
	live := listen(t, r.rdb, prefix+"live", ch)
	next := listen(t, r.rdb, prefix+"next", ch)
	unlock := func(caller, waiting string) {
		t.Helper()
		r.holdHash(name, me, "1")
		n, err := r.exec(lua.LockUnlock, []string{name, ch, wakers}, "0", ruleLease, me, "publish", "0",
			prefix, "numsub", layout.RegistrantWokenMessage, caller, waiting).AsInt64()
		require.NoError(t, err)
		require.Equal(t, int64(0), n)
	}
	register("dead", "live", "next")
	unlock("c", "0")
	assert.Equal(t, []string{prefix + "live 0", mark, ch + " 0"}, live.take(t),
		"the live client registered first is woken, alone on its channel")
	assert.Equal(t, []string{mark, ch + " 0"}, next.take(t), "the client registered after it")
	assert.Equal(t, []string{"live", "next"}, registered(), "the client that no longer listens is dropped")

	// Someone else (a Redisson waiter) listens on the lock's channel: the
	// same messages, no count decides them.
	foreign := listen(t, r.rdb, ch)
	unlock("c", "0")
	assert.Equal(t, []string{prefix + "live 0", mark, ch + " 0"}, live.take(t), "with a foreign listener")
	assert.Equal(t, []string{mark, ch + " 0"}, foreign.take(t), "the foreign listener hears the unlock message")
	assert.Equal(t, []string{mark, ch + " 0"}, next.take(t), "every listener of the lock's channel hears it")

	// The caller is registered with no waiter left: it is not woken.
	unlock("live", "0")
	assert.Equal(t, []string{prefix + "next 0", mark, ch + " 0"}, next.take(t), "a release skips its caller without a waiter")
	assert.Equal(t, []string{mark, ch + " 0"}, live.take(t), "the caller without a waiter")
	assert.Equal(t, []string{mark, ch + " 0"}, foreign.take(t), "the foreign listener")

	// "live" has no waiter left: it hands its wake-up on.
	wake := func() int64 {
		t.Helper()
		n, err := r.exec(lua.LockWake, []string{name, ch, wakers}, "0", "publish", prefix, "numsub", "live").AsInt64()
		require.NoError(t, err)
		return n
	}
	r.holdHash(name, me, "1")
	assert.Equal(t, int64(0), wake(), "a hand-on while the lock is taken")
	assert.Equal(t, []string{}, next.take(t), "a hand-on while the lock is taken wakes nobody")
	require.NoError(t, r.do(r.rdb.B().Del().Key(name).Build()).Error())
	register("live")
	assert.Equal(t, int64(1), wake())
	assert.Equal(t, []string{prefix + "next 0"}, next.take(t), "the hand-on wakes the next client, alone")
	assert.Equal(t, []string{}, foreign.take(t), "the hand-on to a registered client: the release told the others")
	assert.Equal(t, []string{"next"}, registered(), "the client that handed on leaves the registry")
	register("live")
	n, err := r.exec(lua.LockWake, []string{name, ch, wakers}, "0", "publish", prefix, "numsub", "next").AsInt64()
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)
	assert.Equal(t, []string{prefix + "live 0"}, live.take(t), "the hand-on from the last but one")
	n, err = r.exec(lua.LockWake, []string{name, ch, wakers}, "0", "publish", prefix, "numsub", "live").AsInt64()
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)
	assert.Equal(t, []string{ch + " 0"}, foreign.take(t), "the hand-on with nobody left registered: on the lock's channel")
	assert.Equal(t, []string{}, registered(), "every client that handed on left the registry")

	// Nobody registered: the release publishes the unlock message alone.
	unlock("c", "0")
	assert.Equal(t, []string{ch + " 0"}, foreign.take(t), "a release with nobody registered")
}

// TestSemaphoreQueueOrder: a permit that comes free goes to the waiters
// queued first: a newcomer is refused while as many permits are available
// as waiters are queued ahead of it, and told how many are held back; a
// waiter that gives up while a permit is held back for it publishes, so
// that the next one takes it.
func TestSemaphoreQueueOrder(t *testing.T) {
	r := newRules(t)
	name := r.name("sem")
	k := layout.Semaphore(name)
	keys := []string{k.Available, k.Leases, k.Channel, k.Queue, k.QueueDeadlines, k.Holders, layout.OtherKey(name)}
	acquire := func(id, join string) []int64 {
		t.Helper()
		got, err := r.exec(lua.SemAcquire, keys, "publish", id, ruleLease, join, "30000", "c:"+id).AsIntSlice()
		require.NoError(t, err)
		require.Len(t, got, 3)
		return got
	}
	require.NoError(t, r.do(r.rdb.B().Set().Key(k.Available).Value("0").Build()).Error())
	assert.Equal(t, int64(0), acquire("first", "1")[0], "no permit available")
	assert.Equal(t, int64(0), acquire("second", "1")[0], "no permit available")
	require.NoError(t, r.do(r.rdb.B().Set().Key(k.Available).Value("1").Build()).Error())
	got := acquire("newcomer", "0")
	assert.Equal(t, []int64{0, 1}, []int64{got[0], got[2]}, "a newcomer while one permit is held back for the queue")
	got = acquire("second", "1")
	assert.Equal(t, []int64{0, 1}, []int64{got[0], got[2]}, "the second waiter while one permit is available")
	assert.Equal(t, "1", r.get(k.Available), "the permit held back")

	l := listen(t, r.rdb, k.Channel)
	n, err := r.exec(lua.SemAbandon, []string{k.Available, k.Channel, k.Queue, k.QueueDeadlines, k.Leases, k.Holders}, "publish", "first").AsInt64()
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)
	assert.Equal(t, []string{k.Channel + " 1"}, l.take(t), "the waiter that gives up its held-back permit")
	assert.Equal(t, int64(1), acquire("second", "1")[0], "the next waiter takes the permit")
	assert.Equal(t, "0", r.get(k.Available))

	// A queued waiter that stopped refreshing its place (its process
	// died) is dropped at its deadline: it holds no permit back after.
	now := serverNow(t, r.rdb)
	require.NoError(t, r.do(r.rdb.B().Zadd().Key(k.Queue).ScoreMember().ScoreMember(float64(now-100), "dead").Build()).Error())
	require.NoError(t, r.do(r.rdb.B().Zadd().Key(k.QueueDeadlines).ScoreMember().ScoreMember(float64(now-1), "dead").Build()).Error())
	require.NoError(t, r.do(r.rdb.B().Set().Key(k.Available).Value("1").Build()).Error())
	assert.Equal(t, int64(1), acquire("after-the-dead", "0")[0], "a newcomer once the dead waiter's deadline passed")
}

// TestFenceRefusesOlderTokens: a write with a token older than the last
// one applied is refused and changes nothing; the same or a newer token
// is applied.
func TestFenceRefusesOlderTokens(t *testing.T) {
	r := newRules(t)
	key := r.name("register")
	write := func(token, value string) []int64 {
		t.Helper()
		got, err := r.exec(lua.FenceWrite, []string{key}, token, value).AsIntSlice()
		require.NoError(t, err)
		return got
	}
	assert.Equal(t, []int64{1, 5}, write("5", "a"))
	assert.Equal(t, []int64{1, 5}, write("5", "b"), "the same token again")
	assert.Equal(t, []int64{0, 5}, write("4", "stale"), "an older token")
	assert.Equal(t, map[string]string{"token": "5", "value": "b"}, r.hash(key))
	assert.Equal(t, []int64{1, 6}, write("6", "c"))
	assert.Equal(t, strconv.Itoa(6), r.hash(key)["token"])
}
