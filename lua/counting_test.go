package lua_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/lua"
)

// TestCountingGrants: a counting semaphore's acquisition takes all the
// permits it asks for or none, and sent twice with one grant takes them
// once; a give-back of the grant returns them once and publishes the new
// count; a release publishes the new count; a drain leaves a count below
// 0 alone.
func TestCountingGrants(t *testing.T) {
	r := newRules(t)
	name := r.name("csem")
	k := layout.CountingSemaphore(name)
	l := listen(t, r.rdb, k.Channel)
	acquire := func(n, grant string) []int64 {
		t.Helper()
		got, err := r.exec(lua.CountingAcquire, []string{k.Count, k.Grants, layout.OtherKey(name)}, n, grant, "10000").AsIntSlice()
		require.NoError(t, err)
		return got
	}
	assert.Equal(t, []int64{0, 0}, acquire("1", "a:1"), "a count never set")
	assert.Equal(t, "", r.get(k.Count), "a refused acquisition writes no count")
	require.NoError(t, r.do(r.rdb.B().Set().Key(k.Count).Value("3").Build()).Error())
	assert.Equal(t, []int64{0, 3}, acquire("4", "a:4"), "4 of 3")
	assert.Equal(t, "3", r.get(k.Count))
	assert.Equal(t, []int64{1, 1}, acquire("2", "b:2"))
	assert.Equal(t, []int64{1, 1}, acquire("2", "b:2"), "the same grant sent again")
	assert.Equal(t, "1", r.get(k.Count), "a grant sent twice takes once")
	assert.Equal(t, []string{}, l.take(t), "an acquisition publishes nothing")

	undo := func(grant, n string) int64 {
		t.Helper()
		got, err := r.exec(lua.CountingUndo, []string{k.Count, k.Grants, k.Channel}, "publish", grant, n).AsInt64()
		require.NoError(t, err)
		return got
	}
	assert.Equal(t, int64(1), undo("b:2", "2"))
	assert.Equal(t, int64(0), undo("b:2", "2"), "a give-back sent twice")
	assert.Equal(t, int64(0), undo("c:5", "5"), "a grant never made")
	assert.Equal(t, "3", r.get(k.Count))
	assert.Equal(t, []string{k.Channel + " 3"}, l.take(t), "a give-back publishes the new count")

	add := func(n string) int64 {
		t.Helper()
		got, err := r.exec(lua.CountingAdd, []string{k.Count, k.Channel, layout.OtherKey(name)}, "publish", n).AsInt64()
		require.NoError(t, err)
		return got
	}
	assert.Equal(t, int64(-1), add("-4"))
	assert.Equal(t, int64(0), add("1"))
	assert.Equal(t, []string{}, l.take(t), "permits taken away, or a count still at 0")
	assert.Equal(t, int64(2), add("2"))
	assert.Equal(t, []string{k.Channel + " 2"}, l.take(t), "a release publishes the new count")

	drain := func() int64 {
		t.Helper()
		got, err := r.exec(lua.CountingDrain, []string{k.Count, layout.OtherKey(name)}).AsInt64()
		require.NoError(t, err)
		return got
	}
	assert.Equal(t, int64(2), drain())
	assert.Equal(t, "0", r.get(k.Count))
	add("-2")
	assert.Equal(t, int64(0), drain(), "a drain of a count below 0")
	assert.Equal(t, "-2", r.get(k.Count))
}
