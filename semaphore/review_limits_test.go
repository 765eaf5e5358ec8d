package semaphore_test

import (
	"errors"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/semaphore"
)

// setRawCount sets the count key of name to count as Redis holds it (as
// Redisson's addPermits or a user's SET may).
func setRawCount(t *testing.T, name string, count int64) {
	t.Helper()
	raw := relocktest.Raw(t)
	require.NoError(t, raw.Do(t.Context(), raw.B().Set().Key(name).Value(strconv.FormatInt(count, 10)).Build()).Error())
}

// TestCountingAcquireBeyondLuaPrecision: above 2^53, where a Lua number
// no longer holds every integer, a call for one permit more than the
// count is refused (the two round to one number), and one for the count
// takes it all, to exactly 0.
func TestCountingAcquireBeyondLuaPrecision(t *testing.T) {
	c := relocktest.Client(t)
	name := relocktest.Name(t)
	s := c.GetCountingSemaphore(name)
	count := int64(1)<<53 + 3 // a Lua number rounds it and count+1 to 2^53+4
	setRawCount(t, name, count)
	ok, err := s.TryAcquire(t.Context(), int(count+1), 0)
	require.NoError(t, err)
	assert.False(t, ok, "took %d permits of %d", count+1, count)
	assert.Equal(t, strconv.FormatInt(count, 10), rawCount(t, relocktest.Raw(t), name), "the count after a refusal")
	ok, err = s.TryAcquire(t.Context(), int(count), 0)
	require.NoError(t, err)
	assert.True(t, ok, "TryAcquire of the whole count")
	assert.Equal(t, "0", rawCount(t, relocktest.Raw(t), name))
}

// TestCountingDrainBeyondLuaPrecision: DrainPermits takes a count above
// 2^53 exactly, up to the largest Redis holds, and leaves 0.
func TestCountingDrainBeyondLuaPrecision(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	s := c.GetCountingSemaphore(name)
	for _, count := range []int64{1<<53 + 3, 1e17 + 1, math.MaxInt64} {
		setRawCount(t, name, count)
		n, err := s.DrainPermits(t.Context())
		require.NoError(t, err, "count %d", count)
		assert.Equal(t, count, int64(n), "permits drained")
		assert.Equal(t, "0", rawCount(t, raw, name), "count %d drained", count)
	}
}

// TestAcquirePermitsTooManyForOneCall: a call for more permits than one
// call may take (up to the int limit) is ErrInvalidArgument at once,
// without a panic or an allocation per permit, and changes nothing; one
// for exactly MaxPermitsPerCall reaches the semaphore, which refuses more
// than it has.
func TestAcquirePermitsTooManyForOneCall(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	s := c.GetSemaphore(name)
	ok, err := s.TrySetPermits(t.Context(), 2)
	require.NoError(t, err)
	require.True(t, ok)
	for _, n := range []int{math.MaxInt, 1 << 40, semaphore.MaxPermitsPerCall + 1} {
		ps, err := s.TryAcquirePermits(t.Context(), n, time.Second, time.Minute)
		assert.Nil(t, ps)
		assert.True(t, errors.Is(err, semaphore.ErrInvalidArgument), "TryAcquirePermits(%d): %v", n, err)
		ps, err = s.AcquirePermits(t.Context(), n, 0)
		assert.Nil(t, ps)
		assert.True(t, errors.Is(err, semaphore.ErrInvalidArgument), "AcquirePermits(%d): %v", n, err)
	}
	ps, err := s.TryAcquirePermits(t.Context(), semaphore.MaxPermitsPerCall, 0, time.Minute)
	assert.Nil(t, ps)
	assert.True(t, errors.Is(err, semaphore.ErrInvalidArgument), "TryAcquirePermits(MaxPermitsPerCall) of 2: %v", err)
	k := semaphore.KeysOf(name)
	n, err := raw.Do(t.Context(), raw.B().Exists().Key(k.Leases, k.Queue, k.QueueDeadlines).Build()).AsInt64()
	require.NoError(t, err)
	assert.Zero(t, n, "leases or queue keys after the refusals")
	assert.Equal(t, "2", rawCount(t, raw, name))
}
