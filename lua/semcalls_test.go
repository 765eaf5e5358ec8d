package lua_test

// The expirable semaphore's calls for several permits and for a held
// permit's lease (issue 33): sem_acquire_many.lua, sem_abandon.lua with
// several IDs, sem_update_lease.lua, sem_lease_left.lua.

import (
	"strconv"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/lua"
)

// semCalls sends the semaphore's scripts for one name.
type semCalls struct {
	r    *rules
	name string
	k    layout.SemaphoreKeys
}

func newSemCalls(r *rules, step string) *semCalls {
	name := r.name(step)
	return &semCalls{r: r, name: name, k: layout.Semaphore(name)}
}

func (s *semCalls) acquireKeys() []string {
	return []string{s.k.Available, s.k.Leases, s.k.Channel, s.k.Queue, s.k.QueueDeadlines, s.k.Holders, layout.OtherKey(s.name)}
}

// updateKeys are sem_update_lease.lua's keys.
func (s *semCalls) updateKeys() []string {
	return []string{s.k.Available, s.k.Leases, s.k.Channel, s.k.Holders, layout.OtherKey(s.name)}
}

func (s *semCalls) leaseKeys() []string {
	return []string{s.k.Available, s.k.Leases, s.k.Channel, layout.OtherKey(s.name)}
}

// many runs sem_acquire_many.lua for ids (join "1" or "0").
func (s *semCalls) many(join string, ids ...string) rueidis.RedisResult {
	s.r.t.Helper()
	return s.r.exec(lua.SemAcquireMany, s.acquireKeys(), append([]string{"publish", ruleLease, join, "30000", "c:me"}, ids...)...)
}

func (s *semCalls) manyOK(join string, ids ...string) []int64 {
	s.r.t.Helper()
	got, err := s.many(join, ids...).AsIntSlice()
	require.NoError(s.r.t, err)
	require.Len(s.r.t, got, 3)
	return got
}

func (s *semCalls) one(id, join string) []int64 {
	s.r.t.Helper()
	got, err := s.r.exec(lua.SemAcquire, s.acquireKeys(), "publish", id, ruleLease, join, "30000", "c:"+id).AsIntSlice()
	require.NoError(s.r.t, err)
	require.Len(s.r.t, got, 3)
	return got
}

func (s *semCalls) set(available int) {
	s.r.t.Helper()
	require.NoError(s.r.t, s.r.do(s.r.rdb.B().Set().Key(s.k.Available).Value(strconv.Itoa(available)).Build()).Error())
}

func (s *semCalls) leases() map[string]float64 {
	s.r.t.Helper()
	zs, err := s.r.do(s.r.rdb.B().Zrange().Key(s.k.Leases).Min("0").Max("-1").Withscores().Build()).AsZScores()
	require.NoError(s.r.t, err)
	out := map[string]float64{}
	for _, z := range zs {
		out[z.Member] = z.Score
	}
	return out
}

func (s *semCalls) queue() []string {
	s.r.t.Helper()
	q, err := s.r.do(s.r.rdb.B().Zrange().Key(s.k.Queue).Min("0").Max("-1").Build()).AsStrSlice()
	require.NoError(s.r.t, err)
	return q
}

// TestSemAcquireManyAllOrNone: several permits are taken in one step
// when enough are available, each with its lease; else none is, and the
// reply says how many are available; a request for more permits than the
// semaphore has (available and held) is refused with TooManyPermits and
// changes nothing; an acquisition sent twice with the same IDs takes its
// permits once.
func TestSemAcquireManyAllOrNone(t *testing.T) {
	r := newRules(t)
	s := newSemCalls(r, "sem")
	s.set(3)
	now := serverNow(t, r.rdb)
	assert.Equal(t, []int64{1, 0, 1}, s.manyOK("0", "a1", "a2"), "two of three")
	assert.Equal(t, "1", r.get(s.k.Available))
	leases := s.leases()
	require.Len(t, leases, 2)
	for _, id := range []string{"a1", "a2"} {
		assert.InDelta(t, float64(now)+30000, leases[id], 1000, "the lease of %s", id)
	}
	assert.Equal(t, []int64{1, 0, 1}, s.manyOK("0", "a1", "a2"), "the same call resent")
	assert.Equal(t, "1", r.get(s.k.Available), "a resent call takes nothing more")

	got := s.manyOK("0", "b1", "b2")
	assert.Equal(t, []int64{0, 1}, []int64{got[0], got[2]}, "two while one is available")
	assert.Greater(t, got[1], int64(25000), "the wait until the earliest lease ends")
	assert.Equal(t, "1", r.get(s.k.Available), "a refused call takes none")
	assert.Len(t, s.leases(), 2)
	assert.Empty(t, s.queue(), "a call that does not join leaves no trace")

	before := r.snapshot(s.name)
	err := s.many("1", "c1", "c2", "c3", "c4").Error()
	re, ok := rueidis.IsRedisErr(err)
	require.True(t, ok, "four of three: %v", err)
	assert.Equal(t, lua.TooManyPermits+" 3", re.Error())
	assert.Equal(t, before, r.snapshot(s.name), "a refused request for too many permits changed Redis")

	// A semaphore never set has no size yet: the call waits for it.
	u := newSemCalls(r, "unset")
	got = u.manyOK("0", "d1", "d2", "d3", "d4")
	assert.Equal(t, int64(0), got[0], "four of a semaphore not set")
}

// TestSemAcquireManyQueueOrder: a queued waiter for n permits holds n
// permits back (one queue member per permit): a newcomer, for one or
// several, is refused while no more are available than members are
// queued; the waiter takes its permits once n are available beyond the
// members queued ahead of it; one that gives up while permits are held
// back for it publishes, so that the next waiter takes them.
func TestSemAcquireManyQueueOrder(t *testing.T) {
	r := newRules(t)
	s := newSemCalls(r, "sem")
	s.set(3)
	for _, h := range []string{"h1", "h2", "h3"} {
		require.Equal(t, int64(1), s.one(h, "0")[0], "holder %s", h)
	}
	s.one("first", "1")
	assert.Equal(t, int64(0), s.manyOK("1", "w1", "w2")[0], "none available")
	assert.Len(t, s.queue(), 3, "the queue: one member for the single waiter, two for the waiter for two")

	s.set(2)
	got := s.one("newcomer", "0")
	assert.Equal(t, []int64{0, 2}, []int64{got[0], got[2]}, "a newcomer while the queue holds back three")
	got = s.manyOK("1", "w1", "w2")
	assert.Equal(t, []int64{0, 2}, []int64{got[0], got[2]}, "the waiter for two with one held back for the waiter ahead")
	assert.Equal(t, int64(1), s.one("first", "1")[0], "the first waiter takes its permit")
	s.set(1)
	assert.Equal(t, int64(0), s.manyOK("1", "w1", "w2")[0], "the waiter for two with one available")
	assert.Equal(t, int64(0), s.one("newcomer", "0")[0], "a newcomer while the permit is held back for the waiter for two")
	s.set(2)
	assert.Equal(t, []int64{1, 0, 0}, s.manyOK("1", "w1", "w2"), "the waiter for two with two available")
	assert.Empty(t, s.queue(), "the winner left the queue")

	// A waiter for two that gives up while permits are held back for it.
	s.set(0)
	assert.Equal(t, int64(0), s.manyOK("1", "x1", "x2")[0])
	// (Members that join in the same ms are in byte order: the waiter
	// behind sorts after x1 and x2 also then.)
	s.one("z-behind", "1")
	s.set(1)
	l := listen(t, r.rdb, s.k.Channel)
	n, err := r.exec(lua.SemAbandon, []string{s.k.Available, s.k.Channel, s.k.Queue, s.k.QueueDeadlines, s.k.Leases, s.k.Holders}, "publish", "x1", "x2").AsInt64()
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)
	assert.Equal(t, []string{s.k.Channel + " 1"}, l.take(t), "the waiter that gives up the permit held back for it")
	assert.Equal(t, []string{"z-behind"}, s.queue(), "all its members left the queue")
	assert.Equal(t, int64(1), s.one("z-behind", "1")[0], "the next waiter takes the permit")
}

// TestSemUpdateLease: a held permit's lease is set anew, longer or
// shorter; a shorter one publishes, so that a waiter sleeping until the
// old end looks again; a permit not held (or whose lease ended) is not
// brought back.
func TestSemUpdateLease(t *testing.T) {
	r := newRules(t)
	s := newSemCalls(r, "sem")
	s.set(1)
	require.Equal(t, int64(1), s.one("p", "0")[0])
	l := listen(t, r.rdb, s.k.Channel)
	update := func(id, ms string) int64 {
		t.Helper()
		n, err := r.exec(lua.SemUpdateLease, s.updateKeys(), "publish", id, ms).AsInt64()
		require.NoError(t, err)
		return n
	}
	now := serverNow(t, r.rdb)
	assert.Equal(t, int64(1), update("p", "60000"))
	assert.InDelta(t, float64(now)+60000, s.leases()["p"], 1000, "a longer lease")
	assert.Empty(t, l.take(t), "a longer lease publishes nothing")
	assert.Equal(t, int64(1), update("p", "5000"))
	assert.InDelta(t, float64(now)+5000, s.leases()["p"], 1000, "a shorter lease")
	assert.Equal(t, []string{s.k.Channel + " 1"}, l.take(t), "a shorter lease")

	before := r.snapshot(s.name)
	assert.Equal(t, int64(0), update("unknown", "60000"))
	assert.Equal(t, before, r.snapshot(s.name), "an update of a permit not held changed Redis")

	require.NoError(t, r.do(r.rdb.B().Zadd().Key(s.k.Leases).ScoreMember().ScoreMember(float64(serverNow(t, r.rdb)-1), "p").Build()).Error())
	assert.Equal(t, int64(0), update("p", "60000"), "a permit whose lease ended")
	assert.Empty(t, s.leases(), "a permit whose lease ended is not brought back")
	assert.Equal(t, "1", r.get(s.k.Available), "it came back to the count")
}

// TestSemLeaseLeft: the time a permit's lease has to run; -1 for a
// permit without a lease; 0 for a permit not held.
func TestSemLeaseLeft(t *testing.T) {
	r := newRules(t)
	s := newSemCalls(r, "sem")
	s.set(1)
	require.Equal(t, int64(1), s.one("p", "0")[0])
	left := func(id string) int64 {
		t.Helper()
		n, err := r.exec(lua.SemLeaseLeft, s.leaseKeys(), "publish", id).AsInt64()
		require.NoError(t, err)
		return n
	}
	assert.InDelta(t, 30000, left("p"), 1000, "a permit on a 30s lease")
	require.NoError(t, r.do(r.rdb.B().Zadd().Key(s.k.Leases).ScoreMember().ScoreMember(layout.NoLeaseScore, "forever").Build()).Error())
	assert.Equal(t, int64(-1), left("forever"), "a permit without a lease")
	assert.Equal(t, int64(0), left("unknown"), "a permit not held")
	require.NoError(t, r.do(r.rdb.B().Zadd().Key(s.k.Leases).ScoreMember().ScoreMember(float64(serverNow(t, r.rdb)-1), "p").Build()).Error())
	assert.Equal(t, int64(0), left("p"), "a permit whose lease ended")
}

// TestSemPermitHoldersMany: a call for several permits records who took
// each (a resent one again, a refused one none); a new lease longer than
// the holders hash has to live extends it, as a renewal does, and a
// shorter one does not shorten it; the release of one permit of several
// drops its entry alone; a waiter that gives up drops the entries of its
// IDs that are not held; reading a lease changes nothing.
func TestSemPermitHoldersMany(t *testing.T) {
	r := newRules(t)
	s := newSemCalls(r, "sem")
	holders := func() map[string]string {
		t.Helper()
		m, err := r.do(r.rdb.B().Hgetall().Key(s.k.Holders).Build()).AsStrMap()
		require.NoError(t, err)
		return m
	}
	pttl := func() int64 {
		t.Helper()
		ms, err := r.do(r.rdb.B().Pttl().Key(s.k.Holders).Build()).AsInt64()
		require.NoError(t, err)
		return ms
	}
	s.set(3)
	assert.Equal(t, int64(1), s.manyOK("0", "a1", "a2")[0])
	assert.Equal(t, map[string]string{"a1": "c:me", "a2": "c:me"}, holders(), "the holders of two permits taken at once")
	assert.True(t, pttl() > 0 && pttl() <= 30000, "the holders' TTL %dms, want up to the 30s lease", pttl())
	assert.Equal(t, int64(1), s.manyOK("0", "a1", "a2")[0], "the same call resent")
	assert.Equal(t, map[string]string{"a1": "c:me", "a2": "c:me"}, holders(), "the holders after a resent call")
	assert.Equal(t, int64(0), s.manyOK("0", "b1", "b2")[0], "two while one is available")
	assert.Len(t, holders(), 2, "a refused call records no holder")

	update := func(id, ms string) {
		t.Helper()
		n, err := r.exec(lua.SemUpdateLease, s.updateKeys(), "publish", id, ms).AsInt64()
		require.NoError(t, err)
		require.Equal(t, int64(1), n, "update of %s", id)
	}
	update("a1", "120000")
	assert.Greater(t, pttl(), int64(60000), "the holders' TTL after a lease made longer")
	update("a1", "1000")
	assert.Greater(t, pttl(), int64(60000), "the holders' TTL after a lease made shorter")
	before := holders()
	left, err := r.exec(lua.SemLeaseLeft, s.leaseKeys(), "publish", "a2").AsInt64()
	require.NoError(t, err)
	assert.Positive(t, left)
	assert.Equal(t, before, holders(), "reading a lease")

	n, err := r.exec(lua.SemRelease, []string{s.k.Available, s.k.Leases, s.k.Channel, s.k.Holders, layout.OtherKey(s.name)}, "publish", "a1").AsInt64()
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	assert.Equal(t, map[string]string{"a2": "c:me"}, holders(), "the holders after one permit of two is released")

	// A waiter for two gives up; an entry of one of its IDs (left by an
	// attempt whose permit came back) goes, a held permit's stays.
	s.set(1)
	assert.Equal(t, int64(0), s.manyOK("1", "w1", "w2")[0])
	require.NoError(t, r.do(r.rdb.B().Hset().Key(s.k.Holders).FieldValue().FieldValue("w1", "c:gone").Build()).Error())
	n, err = r.exec(lua.SemAbandon, []string{s.k.Available, s.k.Channel, s.k.Queue, s.k.QueueDeadlines, s.k.Leases, s.k.Holders},
		"publish", "w1", "w2", "a2").AsInt64()
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)
	assert.Equal(t, map[string]string{"a2": "c:me"}, holders(), "the holders after a waiter gave up")
}
