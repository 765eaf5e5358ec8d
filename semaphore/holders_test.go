package semaphore_test

import (
	"encoding/hex"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
	"github.com/relock-go/relock/semaphore"
)

// holders returns the semaphore's record of who took each permit: permit
// ID (hex) -> "<clientID>:<owner>".
func holders(t *testing.T, raw rueidis.Client, name string) map[string]string {
	t.Helper()
	m, err := raw.Do(t.Context(), raw.B().Hgetall().Key(semaphore.KeysOf(name).Holders).Build()).AsStrMap()
	require.NoError(t, err)
	out := make(map[string]string, len(m))
	for id, who := range m {
		out[hex.EncodeToString([]byte(id))] = who
	}
	return out
}

// TestPermitHolders: a permit taken records who took it (the owner in the
// context, or the Client's anonymous owner), beside Redisson's layout; the
// record goes with the release, with a permit whose lease ended once the
// next acquisition gives it back, and with Delete.
func TestPermitHolders(t *testing.T) {
	c := relocktest.Client(t, rlock.WithClientName("billing"))
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	s := c.GetSemaphore(name)
	setPermits(t, s, 3)

	worker, err := s.Acquire(rlock.WithOwner(t.Context(), "worker-1"), time.Minute)
	require.NoError(t, err)
	anon, err := s.Acquire(t.Context(), 0)
	require.NoError(t, err)
	got := holders(t, raw, name)
	assert.Equal(t, c.ID()+":worker-1", got[worker], "the holder of a permit taken with an owner")
	assert.Regexp(t, "^"+c.ID()+`:anon-[0-9]+@billing$`, got[anon], "the holder of a permit taken without one")
	assert.Len(t, got, 2, "holders")

	require.NoError(t, s.Release(t.Context(), worker))
	assert.NotContains(t, holders(t, raw, name), worker, "the holder of a released permit")

	// A permit whose lease ends is given back by the next acquisition,
	// and its holder goes with it.
	short, err := s.Acquire(rlock.WithOwner(t.Context(), "brief"), 10*time.Millisecond)
	require.NoError(t, err)
	relocktest.Eventually(t, 5*time.Second, "the short lease to end", func() bool {
		ends, err := leaseEnds(raw, name)
		return err == nil && ends[unhex(t, short)] < float64(time.Now().UnixMilli()-5)
	})
	next, err := s.Acquire(rlock.WithOwner(t.Context(), "next"), time.Minute)
	require.NoError(t, err)
	got = holders(t, raw, name)
	assert.NotContains(t, got, short, "the holder of a permit whose lease ended, after the next acquisition")
	assert.Equal(t, c.ID()+":next", got[next], "the holder of the next permit")

	// A bad owner is refused before anything is written.
	_, err = s.Acquire(rlock.WithOwner(t.Context(), "bad\x00owner"), time.Minute)
	require.ErrorIs(t, err, rlock.ErrInvalidArgument, "Acquire with a bad owner")
	assert.Len(t, holders(t, raw, name), 2, "holders after a refused acquisition")

	deleted, err := s.Delete(t.Context())
	require.NoError(t, err)
	require.True(t, deleted)
	n, err := raw.Do(t.Context(), raw.B().Exists().Key(semaphore.KeysOf(name).Holders).Build()).AsInt64()
	require.NoError(t, err)
	assert.Zero(t, n, "the holders after Delete")
}

// TestPermitHoldersExpire: the record of who took the permits lives as
// long as the longest lease in it: renewals of a permit on the watchdog
// lease keep it, and once the last lease ends (a Client that died gives
// back nothing) it goes by itself.
func TestPermitHoldersExpire(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	s := c.GetSemaphore(name).WithWatchdogTimeout(200 * time.Millisecond)
	setPermits(t, s, 2)
	key := semaphore.KeysOf(name).Holders

	id, err := s.Acquire(rlock.WithOwner(t.Context(), "renewed"), 0)
	require.NoError(t, err)
	first := leases(t, raw, name)[unhex(t, id)]
	ttl, err := raw.Do(t.Context(), raw.B().Pttl().Key(key).Build()).AsInt64()
	require.NoError(t, err)
	assert.True(t, ttl > 0 && ttl <= 200, "the holders' TTL %dms, want up to the 200ms lease", ttl)
	relocktest.Eventually(t, 5*time.Second, "renewals past the first lease", func() bool {
		ends, err := leaseEnds(raw, name)
		return err == nil && ends[unhex(t, id)] > first+250
	})
	assert.Equal(t, c.ID()+":renewed", holders(t, raw, name)[id], "the holder of a renewed permit, past its first lease")
	require.NoError(t, s.Release(t.Context(), id))

	_, err = s.Acquire(rlock.WithOwner(t.Context(), "gone"), 50*time.Millisecond)
	require.NoError(t, err)
	relocktest.Eventually(t, 5*time.Second, "the holders to expire", func() bool {
		n, err := raw.Do(t.Context(), raw.B().Exists().Key(key).Build()).AsInt64()
		return err == nil && n == 0
	})
}

// TestPermitHoldersMany: AcquirePermits records who took each of its
// permits, UpdateLease keeps the record at least as long as the new
// lease, and a Permit's Release drops its own entry alone.
func TestPermitHoldersMany(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	s := c.GetSemaphore(name)
	setPermits(t, s, 3)
	key := semaphore.KeysOf(name).Holders

	ps, err := s.AcquirePermits(rlock.WithOwner(t.Context(), "batch"), 3, 5*time.Second)
	require.NoError(t, err)
	require.Len(t, ps, 3)
	got := holders(t, raw, name)
	assert.Len(t, got, 3, "holders")
	for _, p := range ps {
		assert.Equal(t, c.ID()+":batch", got[p.ID()], "the holder of permit %s", p.ID())
	}

	require.NoError(t, ps[0].UpdateLease(t.Context(), time.Minute))
	ttl, err := raw.Do(t.Context(), raw.B().Pttl().Key(key).Build()).AsInt64()
	require.NoError(t, err)
	assert.Greater(t, ttl, int64(30000), "the holders' TTL after a lease made a minute long")
	left, err := ps[0].RemainingLease(t.Context())
	require.NoError(t, err)
	assert.Greater(t, left, 30*time.Second)

	require.NoError(t, ps[1].Release(t.Context()))
	got = holders(t, raw, name)
	assert.NotContains(t, got, ps[1].ID(), "the holder of a released permit")
	assert.Equal(t, c.ID()+":batch", got[ps[0].ID()], "the holder of a permit still held")
	require.NoError(t, ps[0].Release(t.Context()))
	require.NoError(t, ps[2].Release(t.Context()))
	assert.Empty(t, holders(t, raw, name), "holders after every release")
}
