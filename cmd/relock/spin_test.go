package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// TestStatusAndScanSpinLock: a spin lock keeps the plain lock's hash, so
// status and scan show it as a lock, with its holder and hold count (the
// hash does not say which kind of handle took it).
func TestStatusAndScanSpinLock(t *testing.T) {
	srv := server(t)
	c := relocktest.Client(t)
	name := relocktest.Name(t)
	holder := rlock.WithOwner(t.Context(), "holder")
	l := c.GetSpinLock(name)
	for range 2 {
		require.NoError(t, l.Lock(holder))
	}
	t.Cleanup(func() { _, _ = l.ForceUnlock(context.Background()) })

	st := status(t, srv.Addr, name)
	assert.Equal(t, "lock", st.Kind, "kind")
	assert.True(t, st.Locked, "locked")
	require.Len(t, st.Holders, 1, "holders")
	assert.Equal(t, c.ID()+":holder", st.Holders[0].Field, "holder's field")
	assert.EqualValues(t, 2, st.Holders[0].HoldCount, "hold count")

	_, all := scanAll(t, srv.Addr, "--match", name)
	e, ok := all[name]
	require.True(t, ok, "scan lists the spin lock")
	assert.Equal(t, "lock", e.Kind, "scan kind")
	require.Len(t, e.Holders, 1, "scan holders")
	assert.EqualValues(t, 2, e.Holders[0].HoldCount, "scan hold count")
	assert.False(t, e.Leaked, "scan: leaked")
}
