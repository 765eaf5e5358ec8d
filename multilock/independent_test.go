package multilock_test

import (
	"context"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/multilock"
	"github.com/relock-go/relock/rlock"
)

// TestRedLockNeedsIndependentMasters: a RedLock two of whose locks share a
// Client or a server is refused before any I/O, with a message that says
// why; locks on separate servers are accepted.
func TestRedLockNeedsIndependentMasters(t *testing.T) {
	srv := redistest.Shared(t)
	c1 := relocktest.Client(t)
	c2 := relocktest.Client(t) // another Client on the same server
	name := relocktest.Name(t)

	other, err := redistest.StartServer()
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.Stop() })
	c3, err := rlock.NewClient(rueidis.ClientOption{InitAddress: []string{other.Addr}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c3.Close() })

	cases := []struct {
		desc  string
		locks []multilock.Locker
		want  string // in the error; empty: accepted
	}{
		{"one Client", []multilock.Locker{c1.GetLock(name), c3.GetLock(name), c1.GetFencedLock(name)}, "locks 0 and 2 share a Client"},
		{"one server", []multilock.Locker{c1.GetLock(name), c2.GetFairLock(name), c3.GetLock(name)}, "locks 0 and 1 are on the same Redis server " + srv.Addr},
		{"independent", []multilock.Locker{c1.GetLock(name), c3.GetLock(name)}, ""},
	}
	ctx := rlock.WithOwner(context.Background(), "o")
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			rl := multilock.NewRedLock(tc.locks...)
			ok, err := rl.TryLock(ctx, 0, 0)
			if tc.want == "" {
				require.NoError(t, err, "TryLock")
				require.True(t, ok, "TryLock")
				require.NoError(t, rl.Unlock(ctx))
				return
			}
			assert.False(t, ok, "TryLock")
			assert.ErrorIs(t, err, multilock.ErrInvalidArgument, "TryLock")
			assert.ErrorContains(t, err, tc.want, "TryLock")
			assert.ErrorContains(t, err, "independent Redis masters", "TryLock")
			locked, err := c1.GetLock(name).IsLocked(t.Context())
			require.NoError(t, err)
			assert.False(t, locked, "a refused RedLock wrote to Redis")
		})
	}
}
