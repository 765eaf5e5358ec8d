package lua_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSemAcquireManySameMsWaiters: two waiters for two permits that
// joined the queue in the same ms have their members interleaved (the
// queue orders one score's members by their bytes: 1x 2y 3x 4y). With
// two permits available the first of them takes both, and the other
// then waits for its turn, not the pair for each other for ever (each
// used to count the other's member before its own last one as ahead of
// it, and to wait for more permits than the semaphore has).
func TestSemAcquireManySameMsWaiters(t *testing.T) {
	r := newRules(t)
	s := newSemCalls(r, "sem")
	s.set(0)
	join := float64(serverNow(t, r.rdb))
	deadline := join + 60000
	for _, id := range []string{"1x", "2y", "3x", "4y"} {
		require.NoError(t, r.do(r.rdb.B().Zadd().Key(s.k.Queue).ScoreMember().ScoreMember(join, id).Build()).Error())
		require.NoError(t, r.do(r.rdb.B().Zadd().Key(s.k.QueueDeadlines).ScoreMember().ScoreMember(deadline, id).Build()).Error())
	}
	require.Equal(t, []string{"1x", "2y", "3x", "4y"}, s.queue())
	s.set(2)
	got := s.manyOK("1", "2y", "4y")
	assert.Equal(t, []int64{0, 2}, []int64{got[0], got[2]}, "the waiter behind, while two are held back for the one ahead")
	assert.Equal(t, []int64{1, 0, 0}, s.manyOK("1", "1x", "3x"), "the waiter ahead with two available")
	assert.Equal(t, []string{"2y", "4y"}, s.queue())
	s.set(2)
	assert.Equal(t, []int64{1, 0, 0}, s.manyOK("1", "2y", "4y"), "the next waiter with two available")
	assert.Empty(t, s.queue())
}
