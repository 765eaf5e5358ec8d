package main

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// TestReviewWaitsNoFalseCycle: waits flags no cycle where none is: a
// read wait's record that outlived its grant (the name read by the owner
// it would point at, and by the waiter), and the records of a dead
// Client whose holds were force-unlocked.
func TestReviewWaitsNoFalseCycle(t *testing.T) {
	c1, c2 := relocktest.Client(t), relocktest.Client(t)
	own := func(o string) context.Context { return rlock.WithOwner(t.Context(), o) }
	t.Run("read grant", func(t *testing.T) {
		names, match := testNames(t, 2)
		x, y := names[0], names[1]
		require.NoError(t, c1.GetLock(x).Lock(own("a")))
		require.NoError(t, c2.GetReadWriteLock(y).ReadLock().Lock(own("b")))
		require.NoError(t, c1.GetReadWriteLock(y).ReadLock().Lock(own("a")))
		recordWait(t, "", c1.ID(), "a", y, "read", 2*time.Second) // its delete on its way
		recordWait(t, "", c2.ID(), "b", x, "lock", time.Second)
		out := runWaits(t, exitOK, "--match", match)
		assert.Empty(t, out.cycles)
	})
	t.Run("dead client", func(t *testing.T) {
		names, match := testNames(t, 2)
		x, z := names[0], names[1]
		dead := uuid.NewString()
		require.NoError(t, c1.GetLock(x).Lock(own("a")))
		recordWait(t, "", dead, "d", x, "lock", 3*time.Second)
		recordWait(t, "", c1.ID(), "a", z, "lock", time.Second) // z was d's: force-unlocked
		out := runWaits(t, exitOK, "--match", match)
		assert.Empty(t, out.cycles)
	})
}
