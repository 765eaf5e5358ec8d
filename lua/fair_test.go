package lua_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/lua"
)

// The thread wait time and heartbeat timeout the fair scripts get here.
const (
	waitMs      = 300000
	heartbeatMs = 750
)

// fairLock sends the fair-lock scripts for one lock and reads its keys.
type fairLock struct {
	t                                     *testing.T
	rdb                                   rueidis.Client
	name, queue, timeouts, alive, channel string
}

func newFairLock(t *testing.T, rdb rueidis.Client, name string) *fairLock {
	f := &fairLock{t: t, rdb: rdb, name: name,
		queue:    "redisson_lock_queue:{" + name + "}",
		timeouts: "redisson_lock_timeout:{" + name + "}",
		alive:    "relock_lock_alive:{" + name + "}",
		channel:  "redisson_lock__channel:{" + name + "}"}
	t.Cleanup(func() {
		rdb.Do(context.Background(), rdb.B().Del().Key(f.keys()[:4]...).Build())
	})
	return f
}

func (f *fairLock) keys() []string { return []string{f.name, f.queue, f.timeouts, f.alive, f.channel} }

func (f *fairLock) do(cmd rueidis.Completed) rueidis.RedisResult {
	return f.rdb.Do(f.t.Context(), cmd)
}

// acquire sends fair_acquire.lua for field ('1': join the queue). It
// returns true when the field holds the lock, else the PTTL replied.
func (f *fairLock) acquire(field, join string) (bool, int64) {
	f.t.Helper()
	res := lua.FairAcquire.Exec(f.t.Context(), f.rdb, append(f.keys(), layout.OtherKey(f.name)),
		[]string{"10000", field, "750", join, "300000", "publish", "0"})
	if rueidis.IsRedisNil(res.Error()) {
		return true, 0
	}
	n, err := res.AsInt64()
	require.NoError(f.t, err, "fair acquire of %s", field)
	return false, n
}

func (f *fairLock) unlock(field string, target string) int64 {
	f.t.Helper()
	n, err := lua.FairUnlock.Exec(f.t.Context(), f.rdb, f.keys(),
		[]string{"0", "10000", field, "publish", target}).AsInt64()
	require.NoError(f.t, err)
	return n
}

func (f *fairLock) abandon(field string) int64 {
	f.t.Helper()
	n, err := lua.FairAbandon.Exec(f.t.Context(), f.rdb, f.keys(),
		[]string{field, "publish", "0", "300000"}).AsInt64()
	require.NoError(f.t, err)
	return n
}

// hold makes field hold the lock (as another client would).
func (f *fairLock) hold(field string) {
	f.t.Helper()
	require.NoError(f.t, f.do(f.rdb.B().Hset().Key(f.name).FieldValue().FieldValue(field, "1").Build()).Error())
	require.NoError(f.t, f.do(f.rdb.B().Pexpire().Key(f.name).Milliseconds(10000).Build()).Error())
}

func (f *fairLock) queued() []string {
	f.t.Helper()
	q, err := f.do(f.rdb.B().Lrange().Key(f.queue).Start(0).Stop(-1).Build()).AsStrSlice()
	require.NoError(f.t, err)
	return q
}

// score is field's score in key, -1 when it has none.
func (f *fairLock) score(key, field string) int64 {
	f.t.Helper()
	s, err := f.do(f.rdb.B().Zscore().Key(key).Member(field).Build()).AsFloat64()
	if rueidis.IsRedisNil(err) {
		return -1
	}
	require.NoError(f.t, err)
	return int64(s)
}

// enqueue puts field at the tail of the queue with a deadline and, when
// beat >= 0, a heartbeat (both in server ms), as a waiter that went away
// would leave them.
func (f *fairLock) enqueue(field string, deadline, beat int64) {
	f.t.Helper()
	require.NoError(f.t, f.do(f.rdb.B().Rpush().Key(f.queue).Element(field).Build()).Error())
	require.NoError(f.t, f.do(f.rdb.B().Zadd().Key(f.timeouts).ScoreMember().ScoreMember(float64(deadline), field).Build()).Error())
	if beat >= 0 {
		require.NoError(f.t, f.do(f.rdb.B().Zadd().Key(f.alive).ScoreMember().ScoreMember(float64(beat), field).Build()).Error())
	}
}

// serverNow is the server's clock in ms.
func serverNow(t *testing.T, rdb rueidis.Client) int64 {
	t.Helper()
	v, err := rdb.Do(t.Context(), rdb.B().Time().Build()).AsStrSlice()
	require.NoError(t, err)
	require.Len(t, v, 2)
	sec, err := strconv.ParseInt(v[0], 10, 64)
	require.NoError(t, err)
	usec, err := strconv.ParseInt(v[1], 10, 64)
	require.NoError(t, err)
	return sec*1000 + usec/1000
}

// TestFairDeadlinesFollowRedisson: a waiter joins with the deadline of the
// waiter before it (the first: now plus the holder's lease) plus the
// thread wait time; a join sent twice keeps one place and one deadline;
// an acquisition takes the thread wait time off every queued deadline;
// heartbeats are kept beside, and leave with their waiter.
func TestFairDeadlinesFollowRedisson(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	f := newFairLock(t, rdb, "lua-test:fair-deadlines")
	f.hold("h:1")
	before := serverNow(t, rdb)
	for range 2 {
		taken, pttl := f.acquire("c:a", "1")
		require.False(t, taken)
		assert.Greater(t, pttl, int64(9000), "PTTL of the holder")
	}
	after := serverNow(t, rdb)
	a := f.score(f.timeouts, "c:a")
	assert.GreaterOrEqual(t, a, before+9000+waitMs, "first deadline: now + the holder's lease + the wait time")
	assert.LessOrEqual(t, a, after+10000+waitMs)
	for range 2 {
		taken, _ := f.acquire("c:b", "1")
		require.False(t, taken)
	}
	assert.Equal(t, a+waitMs, f.score(f.timeouts, "c:b"), "second deadline: the first's + the wait time")
	assert.Equal(t, []string{"c:a", "c:b"}, f.queued(), "a join sent twice keeps one place")
	beat := f.score(f.alive, "c:b")
	assert.GreaterOrEqual(t, beat, before+heartbeatMs, "heartbeat")
	assert.LessOrEqual(t, beat, serverNow(t, rdb)+heartbeatMs)
	ttl, err := rdb.Do(t.Context(), rdb.B().Pttl().Key(f.alive).Build()).AsInt64()
	require.NoError(t, err)
	assert.Greater(t, ttl, int64(2*waitMs-5000), "the heartbeats live as long as the latest deadline")
	for _, k := range []string{f.queue, f.timeouts} {
		ttl, err := rdb.Do(t.Context(), rdb.B().Pttl().Key(k).Build()).AsInt64()
		require.NoError(t, err)
		assert.Equal(t, int64(-1), ttl, "%s: the shared queue keys get no expiry", k)
	}

	assert.Equal(t, int64(0), f.unlock("h:1", "0"), "the holder's release")
	taken, _ := f.acquire("c:b", "1")
	assert.False(t, taken, "the second waiter does not jump the queue")
	for range 2 {
		taken, _ = f.acquire("c:a", "1")
		assert.True(t, taken, "the head takes the free lock (sent twice)")
	}
	assert.Equal(t, []string{"c:b"}, f.queued())
	assert.Equal(t, a, f.score(f.timeouts, "c:b"), "an acquisition takes the wait time off every queued deadline, once")
	assert.Equal(t, int64(-1), f.score(f.alive, "c:a"), "the heartbeat leaves with its waiter")
	assert.Equal(t, "1", hget(t, rdb, f.name, "c:a"))
}

func hget(t *testing.T, rdb rueidis.Client, key, field string) string {
	t.Helper()
	v, err := rdb.Do(t.Context(), rdb.B().Hget().Key(key).Field(field).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return ""
	}
	require.NoError(t, err)
	return v
}

// TestFairPruneRules: a head is dropped when it is a relock waiter whose
// heartbeat passed (whatever its deadline), or a waiter without a
// heartbeat (Redisson's) whose deadline passed; a Redisson waiter before
// its deadline and a relock waiter with a live heartbeat stay. Pruning
// changes no other deadline.
func TestFairPruneRules(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	cases := []struct {
		desc           string
		deadline, beat int64 // relative to now; beat -1: none
		dropped        bool
	}{
		{"relock waiter, heartbeat passed, deadline minutes away", waitMs, -10, true},
		{"relock waiter, heartbeat live, deadline passed", -10, heartbeatMs, false},
		{"redisson waiter, deadline minutes away", waitMs, -1, false},
		{"redisson waiter, deadline passed", -10, -1, true},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			f := newFairLock(t, rdb, "lua-test:fair-prune")
			now := serverNow(t, rdb)
			beat := int64(-1)
			if tc.beat != -1 {
				beat = now + tc.beat
			}
			f.enqueue("x:head", now+tc.deadline, beat)
			f.enqueue("x:next", now+tc.deadline+waitMs, -1)
			taken, _ := f.acquire("c:newcomer", "0")
			assert.False(t, taken, "a newcomer's single attempt")
			if tc.dropped {
				assert.Equal(t, []string{"x:next"}, f.queued())
				assert.Equal(t, int64(-1), f.score(f.alive, "x:head"))
			} else {
				assert.Equal(t, []string{"x:head", "x:next"}, f.queued())
			}
			assert.Equal(t, now+tc.deadline+waitMs, f.score(f.timeouts, "x:next"), "the next deadline is left as it was")
		})
	}
}

// TestFairWakesHeadOfFreeLock: every script that finds the lock free with
// another waiter at the head publishes the unlock message on the head's
// channel.
func TestFairWakesHeadOfFreeLock(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	f := newFairLock(t, rdb, "lua-test:fair-wake")
	head := f.channel + ":x:head"
	l := listen(t, rdb, head)
	f.enqueue("x:head", serverNow(t, rdb)+waitMs, -1)
	f.enqueue("c:b", serverNow(t, rdb)+2*waitMs, -1)
	// Each step's messages are those published before a marker sent
	// after it: a step that publishes nothing fails at once.
	heard := func(what string) {
		t.Helper()
		assert.Equal(t, []string{head + " 0"}, l.take(t), "%s: the messages on the head's channel", what)
	}
	for _, join := range []string{"0", "1"} {
		taken, pttl := f.acquire("c:a", join)
		assert.False(t, taken)
		assert.Equal(t, int64(-2), pttl, "free, another waiter at the head")
		heard("an acquire with join " + join)
	}
	assert.Equal(t, int64(-1), f.unlock("c:none", "0"))
	heard("an unlock by a field that holds nothing")
	assert.Equal(t, int64(1), f.abandon("c:a"))
	heard("an abandon")
	n, err := lua.FairForceUnlock.Exec(t.Context(), rdb, f.keys(), []string{"0", "publish"}).AsInt64()
	require.NoError(t, err)
	assert.Equal(t, int64(0), n, "force unlock of a free lock")
	heard("a force unlock")
}

// TestFairAbandonSentTwice: a waiter that gives up leaves the queue, and
// the waiters behind it get the wait time off their deadlines once, as in
// Redisson; sent again it changes nothing.
func TestFairAbandonSentTwice(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	f := newFairLock(t, rdb, "lua-test:fair-abandon")
	f.hold("h:1")
	now := serverNow(t, rdb)
	f.enqueue("c:a", now+waitMs, now+heartbeatMs)
	f.enqueue("c:b", now+2*waitMs, now+heartbeatMs)
	f.enqueue("c:c", now+3*waitMs, -1)
	assert.Equal(t, int64(1), f.abandon("c:b"))
	assert.Equal(t, int64(0), f.abandon("c:b"), "sent again")
	assert.Equal(t, []string{"c:a", "c:c"}, f.queued())
	assert.Equal(t, now+waitMs, f.score(f.timeouts, "c:a"), "the waiter ahead keeps its deadline")
	assert.Equal(t, now+2*waitMs, f.score(f.timeouts, "c:c"), "the waiter behind gets the wait time off, once")
	assert.Equal(t, int64(-1), f.score(f.alive, "c:b"), "the heartbeat leaves")
	assert.Equal(t, int64(-1), f.score(f.timeouts, "c:b"))
}

// TestFairAbandonOutOfMemory: a waiter that gives up while Redis is out
// of memory (maxmemory reached, noeviction) still leaves the queue, and
// the head is woken when the lock is free. Redis refuses a script's first
// write when it adds memory (ZINCRBY), not one after a write (the waiter's
// ZREM): a script that changed the deadlines first was refused whole, and
// a waiter left queued keeps its place, ahead of those who joined after
// it, if it asks again before its heartbeat runs out.
func TestFairAbandonOutOfMemory(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	f := newFairLock(t, rdb, "lua-test:fair-abandon-oom")
	now := serverNow(t, rdb)
	f.enqueue("c:a", now+waitMs, now+heartbeatMs)
	f.enqueue("c:b", now+2*waitMs, now+heartbeatMs)
	f.enqueue("c:c", now+3*waitMs, now+heartbeatMs)
	woken := make(chan string, 4)
	go func() {
		_ = rdb.Receive(t.Context(), rdb.B().Subscribe().Channel(f.channel+":c:b").Build(), func(m rueidis.PubSubMessage) {
			woken <- m.Channel
		})
	}()
	// The subscription is made: a publish reaches one subscriber.
	require.Eventually(t, func() bool {
		n, err := rdb.Do(t.Context(), rdb.B().Publish().Channel(f.channel+":c:b").Message("x").Build()).AsInt64()
		return err == nil && n == 1
	}, 5*time.Second, 10*time.Millisecond)
	<-woken

	_, err := srv.Do(t.Context(), "CONFIG", "SET", "maxmemory-policy", "noeviction")
	require.NoError(t, err)
	_, err = srv.Do(t.Context(), "CONFIG", "SET", "maxmemory", "1")
	require.NoError(t, err)
	defer srv.Do(context.Background(), "CONFIG", "SET", "maxmemory", "0")
	err = rdb.Do(t.Context(), rdb.B().Zincrby().Key(f.timeouts).Increment(-1).Member("c:c").Build()).Error()
	require.ErrorContains(t, err, "OOM", "the server refuses ZINCRBY")

	assert.Equal(t, int64(1), f.abandon("c:a"), "the head leaves")
	assert.Equal(t, []string{"c:b", "c:c"}, f.queued())
	assert.Equal(t, int64(-1), f.score(f.alive, "c:a"))
	assert.Equal(t, int64(-1), f.score(f.timeouts, "c:a"))
	assert.Equal(t, now+waitMs, f.score(f.timeouts, "c:b"), "the waiters behind it get the wait time off")
	assert.Equal(t, now+2*waitMs, f.score(f.timeouts, "c:c"), "the waiters behind it get the wait time off")
	select {
	case ch := <-woken:
		assert.Equal(t, f.channel+":c:b", ch, "the new head is woken")
	case <-time.After(5 * time.Second):
		t.Fatal("the new head was not woken")
	}
}

// TestFairAbandonQueuedTwiceOrNot: a waiter found twice in the queue
// leaves both places, and each waiter behind its first place gets the wait
// time off once (Redisson counts from the first place too); a waiter not
// queued changes no deadline; a key of another type is an error reply,
// not a leave that half happened.
func TestFairAbandonQueuedTwiceOrNot(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	f := newFairLock(t, rdb, "lua-test:fair-abandon-twice")
	f.hold("h:1")
	now := serverNow(t, rdb)
	f.enqueue("c:a", now+waitMs, now+heartbeatMs)
	f.enqueue("c:b", now+2*waitMs, now+heartbeatMs)
	f.enqueue("c:c", now+3*waitMs, now+heartbeatMs)
	require.NoError(t, f.do(rdb.B().Rpush().Key(f.queue).Element("c:b").Build()).Error())
	f.enqueue("c:d", now+4*waitMs, now+heartbeatMs)

	assert.Equal(t, int64(0), f.abandon("c:z"), "not queued")
	assert.Equal(t, []string{"c:a", "c:b", "c:c", "c:b", "c:d"}, f.queued())
	assert.Equal(t, now+3*waitMs, f.score(f.timeouts, "c:c"), "no deadline changes")

	assert.Equal(t, int64(1), f.abandon("c:b"))
	assert.Equal(t, []string{"c:a", "c:c", "c:d"}, f.queued())
	assert.Equal(t, now+waitMs, f.score(f.timeouts, "c:a"))
	assert.Equal(t, now+2*waitMs, f.score(f.timeouts, "c:c"), "behind its first place: once")
	assert.Equal(t, now+3*waitMs, f.score(f.timeouts, "c:d"), "behind both places: once")
	assert.Equal(t, int64(-1), f.score(f.timeouts, "c:b"))
	assert.Equal(t, int64(-1), f.score(f.alive, "c:b"))

	require.NoError(t, f.do(rdb.B().Del().Key(f.timeouts).Build()).Error())
	require.NoError(t, f.do(rdb.B().Set().Key(f.timeouts).Value("x").Build()).Error())
	err := lua.FairAbandon.Exec(t.Context(), rdb, f.keys(), []string{"c:c", "publish", "0", "300000"}).Error()
	require.ErrorContains(t, err, "WRONGTYPE", "a deadlines key of another type")
	assert.Equal(t, []string{"c:a", "c:c", "c:d"}, f.queued(), "nothing written")
}

// unlockGranting sends fair_unlock.lua for field with a grant to grantee
// (window: the granted hold's lease in ms). It returns the reply: the
// count left, or {0, 0} for a grant.
func (f *fairLock) unlockGranting(field, target, grantee string, window int64) rueidis.RedisMessage {
	f.t.Helper()
	msg, err := lua.FairUnlock.Exec(f.t.Context(), f.rdb, f.keys(),
		[]string{"0", "10000", field, "publish", target, grantee, strconv.FormatInt(window, 10), strconv.Itoa(waitMs), "3"}).ToMessage()
	require.NoError(f.t, err)
	return msg
}

// TestFairUnlockGrantsHead: a release that frees the lock grants it to
// the waiter it names when that waiter heads the queue (after pruning):
// the waiter holds it with a count of 1 on the window's lease, out of the
// queue, its deadline and heartbeat gone, the thread wait time off the
// deadlines behind, and nobody is woken (the lock's channel gets the mark
// 3, for relock top). It grants nothing (and wakes the
// head) when the waiter named is not the head, when levels remain, and
// when the releasing field held nothing (the lock held by another, or
// free: a hold that was lost).
func TestFairUnlockGrantsHead(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	f := newFairLock(t, rdb, "lua-test:fair-grant")
	l := listen(t, rdb, f.channel, f.channel+":c:a", f.channel+":c:b")
	intReply := func(msg rueidis.RedisMessage) int64 {
		t.Helper()
		n, err := msg.AsInt64()
		require.NoError(t, err, "reply %v", msg)
		return n
	}

	// c:a heads the queue, c:b behind it; h:1 holds twice.
	f.hold("h:1")
	require.NoError(t, f.do(f.rdb.B().Hset().Key(f.name).FieldValue().FieldValue("h:1", "2").Build()).Error())
	for _, w := range []string{"c:a", "c:b"} {
		taken, _ := f.acquire(w, "1")
		require.False(t, taken)
	}
	b := f.score(f.timeouts, "c:b")

	assert.Equal(t, int64(1), intReply(f.unlockGranting("h:1", "1", "c:a", 3000)), "a level remains: no grant")
	assert.Equal(t, []string{"c:a", "c:b"}, f.queued())
	assert.Equal(t, int64(-1), intReply(f.unlockGranting("h:other", "0", "c:a", 3000)),
		"a field that holds nothing grants nothing")
	assert.Equal(t, []string{"c:a", "c:b"}, f.queued())

	// The last level, naming c:b, which does not head the queue: c:a is woken.
	require.NoError(t, f.do(f.rdb.B().Hset().Key(f.name).FieldValue().FieldValue("h:1", "1").Build()).Error())
	assert.Equal(t, int64(0), intReply(f.unlockGranting("h:1", "0", "c:b", 3000)), "not the head: released, no grant")
	assert.Equal(t, []string{f.channel + ":c:a 0"}, l.take(t), "the head is woken")
	assert.Equal(t, "", hget(t, rdb, f.name, "c:b"))

	// c:a takes it as it woke; its release names c:b, now the head.
	taken, _ := f.acquire("c:a", "1")
	require.True(t, taken)
	assert.Equal(t, b-waitMs, f.score(f.timeouts, "c:b"))
	f.enqueue("c:late", serverNow(t, rdb)+waitMs, -1)
	late := f.score(f.timeouts, "c:late")
	msg := f.unlockGranting("c:a", "0", "c:b", 3000)
	vals, err := msg.AsIntSlice()
	require.NoError(t, err, "reply %v", msg)
	assert.Equal(t, []int64{0, 0}, vals, "the head is granted the lock")
	assert.Equal(t, "1", hget(t, rdb, f.name, "c:b"))
	assert.Equal(t, "", hget(t, rdb, f.name, "c:a"))
	pttl, err := rdb.Do(t.Context(), rdb.B().Pttl().Key(f.name).Build()).AsInt64()
	require.NoError(t, err)
	assert.InDelta(t, 3000, pttl, 200, "the granted hold's lease is the window")
	assert.Equal(t, []string{"c:late"}, f.queued(), "the grantee left the queue")
	assert.Equal(t, int64(-1), f.score(f.timeouts, "c:b"))
	assert.Equal(t, int64(-1), f.score(f.alive, "c:b"))
	assert.Equal(t, late-waitMs, f.score(f.timeouts, "c:late"), "the grant takes the thread wait time off the deadlines behind")
	assert.Equal(t, []string{f.channel + " 3"}, l.take(t), "a grant wakes nobody, and marks the hand-off on the lock's channel")

	// A head that is gone (its heartbeat passed) is pruned before the
	// grant: the waiter named behind it is granted.
	require.NoError(t, f.do(f.rdb.B().Del().Key(f.queue, f.timeouts).Build()).Error())
	f.enqueue("c:a", serverNow(t, rdb)+waitMs, serverNow(t, rdb)-1)
	f.enqueue("c:late", late, -1)
	msg = f.unlockGranting("c:b", "0", "c:late", 3000)
	vals, err = msg.AsIntSlice()
	require.NoError(t, err)
	assert.Equal(t, []int64{0, 0}, vals, "the waiter behind a pruned head is granted")
	assert.Equal(t, "1", hget(t, rdb, f.name, "c:late"))
	assert.Empty(t, f.queued())

	// A release by a field that holds nothing of a free lock (a hold
	// lost) grants nothing: it answers -1 and wakes the head.
	require.NoError(t, f.do(f.rdb.B().Del().Key(f.name).Build()).Error())
	f.enqueue("c:a", serverNow(t, rdb)+waitMs, serverNow(t, rdb)+heartbeatMs)
	l.take(t)
	assert.Equal(t, int64(-1), intReply(f.unlockGranting("c:lost", "0", "c:a", 3000)), "a lost hold's release")
	assert.Equal(t, "", hget(t, rdb, f.name, "c:a"), "nothing granted")
	assert.Equal(t, []string{"c:a"}, f.queued())
	assert.Equal(t, []string{f.channel + ":c:a 0"}, l.take(t), "the head is woken")
}
