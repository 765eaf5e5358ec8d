package rlock_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/rlock"
)

// TestShortWaitSendsNoRecord: a wait that ends before it lasted
// lockcore.RecordAfter writes no wait record (and so deletes none): a
// hand-off of a busy lock costs no command for the records. A try whose
// whole Lock call took RecordAfter or longer (a loaded machine) proves
// nothing and is made again.
func TestShortWaitSendsNoRecord(t *testing.T) {
	raw := relocktest.Raw(t)
	f := relocktest.NewFaulty(raw)
	writes := f.Inject(&relocktest.Rule{SHA1s: []string{lua.WaitRecord.SHA1}, N: -1, Run: true, Keep: true})
	c, err := rlock.New(f)
	require.NoError(t, err)
	defer c.Close()
	holder := relocktest.Client(t)
	name := relocktest.Name(t)
	channel := layout.Channel(name)
	h := rlock.WithOwner(t.Context(), "h")
	w := rlock.WithOwner(t.Context(), "w")
	for try := 1; ; try++ {
		require.NoError(t, holder.GetLock(name).Lock(h))
		start := time.Now()
		got := lockAsync(c.GetLock(name), w)
		relocktest.Eventually(t, 5*time.Second, "the waiter to subscribe", func() bool { return numsub(raw, channel) >= 1 })
		require.NoError(t, holder.GetLock(name).Unlock(h))
		require.NoError(t, relocktest.Receive(t, got, 5*time.Second, "the waiter to acquire"))
		took := time.Since(start)
		require.NoError(t, c.GetLock(name).Unlock(w))
		if took < lockcore.RecordAfter {
			assert.Zero(t, writes.Hits(), "a wait of %v wrote its record", took)
			assert.Empty(t, waitRecords(t, raw, c))
			return
		}
		require.Less(t, try, 20, "no Lock call took less than %v", lockcore.RecordAfter)
		relocktest.Eventually(t, 5*time.Second, "the subscription to end", func() bool { return numsub(raw, channel) == 0 })
		writes = f.Inject(&relocktest.Rule{SHA1s: []string{lua.WaitRecord.SHA1}, N: -1, Run: true, Keep: true})
	}
}

// TestWaitRecordSinceIsWaitStart: a record written once the wait lasted
// lockcore.RecordAfter says when the wait began, not when it was written:
// its since is at least RecordAfter before the server's time when the
// record is first seen.
func TestWaitRecordSinceIsWaitStart(t *testing.T) {
	raw := relocktest.Raw(t)
	c := relocktest.Client(t)
	holder := relocktest.Client(t)
	name := relocktest.Name(t)
	h := rlock.WithOwner(t.Context(), "h")
	require.NoError(t, holder.GetLock(name).Lock(h))
	w := rlock.WithOwner(t.Context(), "w")
	got := lockAsync(c.GetLock(name), w)
	recs := awaitRecords(t, raw, c, name, 1)
	now, err := raw.Do(t.Context(), raw.B().Time().Build()).AsStrSlice()
	require.NoError(t, err)
	seen := mustInt(t, now[0])*1000 + mustInt(t, now[1])/1000
	assert.LessOrEqual(t, recs[0].Since, seen-lockcore.RecordAfter.Milliseconds(),
		"since %d is the write's time, not the wait's start (seen at %d)", recs[0].Since, seen)
	require.NoError(t, holder.GetLock(name).Unlock(h))
	require.NoError(t, relocktest.Receive(t, got, 5*time.Second, "the waiter to acquire"))
	require.NoError(t, c.GetLock(name).Unlock(w))
	awaitNoRecords(t, raw, c)
}
