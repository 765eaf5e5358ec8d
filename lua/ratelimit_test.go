package lua_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/lua"
)

// TestRateGrants: a rate limiter's grant is packed as Redisson packs it
// (a length byte, the ID, the permits as 4 little-endian bytes) and
// scored on the server's clock; sent twice with one ID it is granted
// once; grants of Redisson's scored in the window count, those older than
// the interval leave it; a refusal says how long until enough grants
// leave; a grant given back leaves at once and is published.
func TestRateGrants(t *testing.T) {
	r := newRules(t)
	name := r.name("rate")
	k := layout.RateLimiter(name)
	const client = "0f8fad5b-d9cb-469f-a165-70867728950e"
	keys := []string{k.Config, k.Value, k.ClientValue(client), k.Permits, k.ClientPermits(client), k.Channel, layout.OtherKey(name)}
	l := listen(t, r.rdb, k.Channel)
	window := func(s *lua.Script, args ...string) []int64 {
		t.Helper()
		got, err := r.exec(s, keys, args...).AsIntSlice()
		require.NoError(t, err)
		return got
	}
	assert.Equal(t, []int64{-1, 0, 0}, window(lua.RateAcquire, "1", "0123456789abcdef"), "no rate")
	n, err := r.exec(lua.RateSet, []string{k.Config, k.Value, k.Permits, k.Channel, layout.OtherKey(name)}, "publish", "5", "10000", "1").AsInt64()
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	assert.Equal(t, []int64{-2, 5, 0}, window(lua.RateAcquire, "6", "0123456789abcdef"), "more than the rate")

	assert.Equal(t, []int64{1, 3, 0}, window(lua.RateAcquire, "2", "0123456789abcdef"))
	assert.Equal(t, []int64{1, 3, 0}, window(lua.RateAcquire, "2", "0123456789abcdef"), "the same grant sent again")
	now := serverNow(t, r.rdb)
	zs, err := r.do(r.rdb.B().Zrange().Key(k.Permits).Min("0").Max("-1").Withscores().Build()).AsZScores()
	require.NoError(t, err)
	require.Len(t, zs, 1, "grants")
	assert.Equal(t, "\x100123456789abcdef\x02\x00\x00\x00", zs[0].Member, "a grant packed as Redisson packs it")
	assert.InDelta(t, now, zs[0].Score, 1000, "a grant scored on the server's clock")
	assert.Equal(t, "3", r.get(k.Value), "Redisson's value: the permits left")

	// Redisson's grants: one in the window, one that left it.
	redisson := func(id string, permits uint32, at int64) {
		t.Helper()
		m := "\x10" + id + string([]byte{byte(permits), byte(permits >> 8), byte(permits >> 16), byte(permits >> 24)})
		require.NoError(t, r.do(r.rdb.B().Zadd().Key(k.Permits).ScoreMember().ScoreMember(float64(at), m).Build()).Error())
	}
	redisson("aaaaaaaaaaaaaaaa", 1, now-20000)
	redisson("bbbbbbbbbbbbbbbb", 2, now-9000)
	require.NoError(t, r.do(r.rdb.B().Set().Key(k.Value).Value("1").Build()).Error())
	assert.Equal(t, []int64{1, 2, 0}, window(lua.RateAvailable), "the old grant left, its permit back")
	got := window(lua.RateAcquire, "3", "cccccccccccccccc")
	require.Len(t, got, 3)
	assert.Equal(t, int64(0), got[0], "3 of the 2 left")
	assert.InDelta(t, 1000, got[1], 200, "until Redisson's grant 9s old leaves a 10s window")
	assert.Equal(t, int64(2), got[2], "left in the window")

	assert.Equal(t, []int64{1, 4, 0}, window(lua.RateUndo, "publish", "0123456789abcdef", "2"))
	assert.Equal(t, []int64{0, 4, 0}, window(lua.RateUndo, "publish", "0123456789abcdef", "2"), "given back twice")
	assert.Equal(t, []string{k.Channel + " 4"}, l.take(t), "a grant given back")
	require.NoError(t, r.exec(lua.RateSet, []string{k.Config, k.Value, k.Permits, k.Channel, layout.OtherKey(name)}, "publish", "7", "10000", "0").Error())
	assert.Equal(t, []string{k.Channel + " 7"}, l.take(t), "a rate set anew")
	assert.Equal(t, []int64{1, 7, 0}, window(lua.RateAvailable), "a rate set anew starts an empty window")
	assert.Equal(t, int64(-1), r.pttl(k.Value), "no keep-alive: the value does not expire")
}
