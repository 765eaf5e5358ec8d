package rlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/rlock"
)

// TestReview35s6ShortDelayFirstLookFinds: with a deadlock detection delay
// no longer than lockcore.RecordAfter, a wait's record is written when its
// first look for a deadlock is due, and that look must see it (wait for
// the write's reply), not skip the look and find the cycle only one delay
// later. b waits for X (a holds it), recorded; then a waits for Y (b
// holds it) with a wait limit just under two delays: its first look, a
// delay into its wait, must end it with ErrDeadlock (a's is the younger
// wait). A look that skipped finds nothing before the limit (the next
// look would be two delays into the wait), and a's TryLock returns false
// without an error. For each lock kind whose holders the detector reads
// (a spin lock's waits have no channel: its timer alone brings the
// record and the look).
func TestReview35s6ShortDelayFirstLookFinds(t *testing.T) {
	// The longest such delay: the record and the first look are both due
	// RecordAfter into the wait.
	const after = lockcore.RecordAfter
	kinds := []struct {
		kind string
		get  func(c *rlock.Client, name string) relocktest.Lockable
	}{
		{"lock", func(c *rlock.Client, name string) relocktest.Lockable { return c.GetLock(name) }},
		{"spin", func(c *rlock.Client, name string) relocktest.Lockable { return c.GetSpinLock(name) }},
		{"fair", func(c *rlock.Client, name string) relocktest.Lockable { return c.GetFairLock(name) }},
		{"write", func(c *rlock.Client, name string) relocktest.Lockable { return c.GetReadWriteLock(name).WriteLock() }},
	}
	raw := relocktest.Raw(t)
	for _, k := range kinds {
		t.Run(k.kind, func(t *testing.T) {
			c := relocktest.Client(t, rlock.WithDeadlockDetection(after))
			x, y := relocktest.Name(t), relocktest.Name(t)
			lx, ly := k.get(c, x), k.get(c, y)
			a := rlock.WithOwner(t.Context(), "a")
			b := rlock.WithOwner(t.Context(), "b")
			require.NoError(t, lx.Lock(a))
			require.NoError(t, ly.Lock(b))
			bGot := make(chan error, 1)
			go func() { bGot <- lx.Lock(b) }()
			awaitRecords(t, raw, c, x, 1)
			ok, err := ly.TryLock(a, 2*after-time.Millisecond, 0)
			require.False(t, ok)
			require.ErrorIs(t, err, rlock.ErrDeadlock, "the first look, a delay into the wait, found no cycle")
			require.NoError(t, lx.Unlock(a))
			require.NoError(t, relocktest.Receive(t, bGot, 5*time.Second, "b's Lock"))
			require.NoError(t, lx.Unlock(b))
			require.NoError(t, ly.Unlock(b))
			awaitNoRecords(t, raw, c)
		})
	}
}

// TestReview35s6FailedWriteWrittenAgain: a wait's record is written once
// the wait has lasted lockcore.RecordAfter, whatever the state of Redis
// then; a write that fails (an outage that began after the wait did) is
// sent again on a later watchdog tick that reaches Redis, with the wait's
// start as its since, and not left missing for the rest of the wait (an
// operator and the deadlock detector would never see it).
func TestReview35s6FailedWriteWrittenAgain(t *testing.T) {
	raw := relocktest.Raw(t)
	f := relocktest.NewFaulty(raw)
	lost := f.Inject(&relocktest.Rule{SHA1s: []string{lua.WaitRecord.SHA1}, N: 1, Reply: relocktest.LostReply()})
	c, err := rlock.New(f, rlock.WithWatchdogTimeout(600*time.Millisecond), rlock.WithDeadlockDetection(0))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	holder := relocktest.Client(t)
	name := relocktest.Name(t)
	h := rlock.WithOwner(t.Context(), "h")
	require.NoError(t, holder.GetLock(name).Lock(h))
	w := rlock.WithOwner(t.Context(), "w")
	start := serverMillis(t, raw)
	got := lockAsync(c.GetLock(name), w)
	relocktest.Eventually(t, 5*time.Second, "the record's write to fail", func() bool { return lost.Hits() == 1 })
	recs := awaitRecords(t, raw, c, name, 1)
	assert.GreaterOrEqual(t, recs[0].Since, start, "since before the call began")
	assert.Less(t, recs[0].Since, start+lockcore.RecordAfter.Milliseconds(), "since is not the wait's start")
	require.NoError(t, holder.GetLock(name).Unlock(h))
	require.NoError(t, relocktest.Receive(t, got, 5*time.Second, "the waiter to acquire"))
	require.NoError(t, c.GetLock(name).Unlock(w))
	awaitNoRecords(t, raw, c)
}

// serverMillis is the server's time in ms.
func serverMillis(t *testing.T, raw rueidis.Client) int64 {
	t.Helper()
	now, err := raw.Do(t.Context(), raw.B().Time().Build()).AsStrSlice()
	require.NoError(t, err)
	return mustInt(t, now[0])*1000 + mustInt(t, now[1])/1000
}

// TestReview35s6LostWriteReplyVictimLooks: the write of b's record runs
// but its reply is lost. Others see the record, and b's is the youngest
// wait of the cycle a-b: the victim every member names. Only the victim
// ends itself, and a wait whose write was not answered never looks: b's
// record is sent again after a watchdog tick, and b's next look ends its
// wait with ErrDeadlock, where the cycle stayed until b's context ended.
func TestReview35s6LostWriteReplyVictimLooks(t *testing.T) {
	const after = 200 * time.Millisecond
	raw := relocktest.Raw(t)
	f := relocktest.NewFaulty(raw)
	ca := relocktest.Client(t, rlock.WithDeadlockDetection(after))
	cb, err := rlock.New(f, rlock.WithWatchdogTimeout(600*time.Millisecond), rlock.WithDeadlockDetection(after))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cb.Close() })
	x, y := relocktest.Name(t), relocktest.Name(t)
	a := rlock.WithOwner(t.Context(), "a")
	b := rlock.WithOwner(t.Context(), "b")
	require.NoError(t, ca.GetLock(x).Lock(a))
	require.NoError(t, cb.GetLock(y).Lock(b))
	aGot := lockAsync(ca.GetLock(y), a)
	awaitRecords(t, raw, ca, y, 1)
	lost := f.Inject(&relocktest.Rule{SHA1s: []string{lua.WaitRecord.SHA1}, N: 1, Run: true, Reply: relocktest.LostReply()})
	ctx, cancel := context.WithTimeout(b, 5*time.Second)
	defer cancel()
	err = cb.GetLock(x).Lock(ctx)
	require.Equal(t, int64(1), lost.Hits(), "the record's write ran, its reply lost")
	require.ErrorIs(t, err, rlock.ErrDeadlock, "the victim never looked")
	require.NoError(t, cb.GetLock(y).Unlock(b))
	require.NoError(t, relocktest.Receive(t, aGot, 5*time.Second, "a's Lock"))
	require.NoError(t, ca.GetLock(y).Unlock(a))
	require.NoError(t, ca.GetLock(x).Unlock(a))
	awaitNoRecords(t, raw, ca)
	awaitNoRecords(t, raw, cb)
}
