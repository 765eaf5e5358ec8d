package rlock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/internal/waitrec"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/rlock"
)

// TestWaitRecordsWrittenAgain: the wait record hash of a Client whose
// waits run on is written again when it is lost: deleted while the waits
// run, or expired during an outage of the ticks longer than the watchdog
// timeout (the hash comes off the watchdog then, and is put back). The
// records come back as they were (the same since), and go when the waits
// end.
func TestWaitRecordsWrittenAgain(t *testing.T) {
	raw := relocktest.Raw(t)
	holder := relocktest.Client(t)
	h := rlock.WithOwner(t.Context(), "h")
	const timeout = 600 * time.Millisecond

	t.Run("deleted", func(t *testing.T) {
		c := relocktest.Client(t, rlock.WithWatchdogTimeout(timeout), rlock.WithDeadlockDetection(0))
		name := relocktest.Name(t)
		require.NoError(t, holder.GetLock(name).Lock(h))
		w := rlock.WithOwner(t.Context(), "w")
		got := lockAsync(c.GetLock(name), w)
		before := awaitRecords(t, raw, c, name, 1)
		require.NoError(t, raw.Do(t.Context(), raw.B().Del().Key(waitrec.Key("", c.ID())).Build()).Error())
		after := awaitRecords(t, raw, c, name, 1)
		assert.Equal(t, before, after, "the record as it was written")
		pttl, err := raw.Do(t.Context(), raw.B().Pttl().Key(waitrec.Key("", c.ID())).Build()).AsInt64()
		require.NoError(t, err)
		assert.Greater(t, pttl, int64(0), "the hash expires")
		require.NoError(t, holder.GetLock(name).Unlock(h))
		require.NoError(t, relocktest.Receive(t, got, 5*time.Second, "the waiter to acquire"))
		require.NoError(t, c.GetLock(name).Unlock(w))
		awaitNoRecords(t, raw, c)
	})

	t.Run("expired during an outage", func(t *testing.T) {
		f := relocktest.NewFaulty(raw)
		c, err := rlock.New(f, rlock.WithWatchdogTimeout(timeout), rlock.WithDeadlockDetection(0))
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		name := relocktest.Name(t)
		require.NoError(t, holder.GetLock(name).Lock(h))
		w := rlock.WithOwner(t.Context(), "w")
		got := lockAsync(c.GetLock(name), w)
		before := awaitRecords(t, raw, c, name, 1)
		// The ticks fail (the wait's own attempts still reach Redis): the
		// hash expires, and the Client's lease on it runs out no later.
		outage := f.Inject(&relocktest.Rule{SHA1s: []string{lua.WaitExpire.SHA1}, N: -1, Reply: relocktest.LostReply()})
		relocktest.Eventually(t, 5*time.Second, "the hash to expire", func() bool {
			n, err := raw.Do(t.Context(), raw.B().Exists().Key(waitrec.Key("", c.ID())).Build()).AsInt64()
			require.NoError(t, err)
			return n == 0
		})
		// The lease ran out before the hash did: a tick after this is one
		// of the lease put back on the watchdog.
		hits := outage.Hits()
		relocktest.Eventually(t, 5*time.Second, "a tick after the lease ran out", func() bool {
			return outage.Hits() > hits
		})
		f.Clear()
		after := awaitRecords(t, raw, c, name, 1)
		assert.Equal(t, before, after, "the record as it was written")
		require.NoError(t, holder.GetLock(name).Unlock(h))
		require.NoError(t, relocktest.Receive(t, got, 5*time.Second, "the waiter to acquire"))
		require.NoError(t, c.GetLock(name).Unlock(w))
		awaitNoRecords(t, raw, c)
	})
}

// TestDeadlockRecordsWrittenAgain: A holds L1 and waits for L2, B holds L2
// and waits for L1; their Clients' record writes were answered but the
// records are not in Redis (as after an outage that outlasted the hashes'
// expiry). The ticks write them again, and the cycle is broken: one wait
// ends with ErrDeadlock.
func TestDeadlockRecordsWrittenAgain(t *testing.T) {
	raw := relocktest.Raw(t)
	now, err := raw.Do(t.Context(), raw.B().Time().Build()).AsStrSlice()
	require.NoError(t, err)
	sec, err := strconv.ParseInt(now[0], 10, 64)
	require.NoError(t, err)
	clients := make([]*rlock.Client, 2)
	for i := range clients {
		f := relocktest.NewFaulty(raw)
		// The write is answered, with a since, but not made.
		since := raw.Do(t.Context(), raw.B().Eval().Script("return tonumber(ARGV[1])").Numkeys(0).
			Arg(strconv.FormatInt(sec*1000+int64(i), 10)).Build())
		f.Inject(&relocktest.Rule{SHA1s: []string{lua.WaitRecord.SHA1}, N: -1, Reply: since})
		c, err := rlock.New(f, rlock.WithWatchdogTimeout(600*time.Millisecond),
			rlock.WithDeadlockDetection(200*time.Millisecond))
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		clients[i] = c
	}
	l1, l2 := relocktest.Name(t), relocktest.Name(t)
	errs := runCycle(t, []cycleMember{
		{c: clients[0], owner: "a", hold: l1, wait: l2},
		{c: clients[1], owner: "b", hold: l2, wait: l1},
	}, 8*time.Second)
	var victims int
	for owner, err := range errs {
		if errors.Is(err, rlock.ErrDeadlock) {
			victims++
			assert.Equal(t, "b", owner, "the youngest wait: %v", err)
		} else {
			assert.NoError(t, err, owner)
		}
	}
	assert.Equal(t, 1, victims, "%v", errs)
	for _, c := range clients {
		awaitNoRecords(t, raw, c)
	}
}

// hdelOrder is a client that notes an HDEL of a wait record hash sent
// before rewritten is set.
type hdelOrder struct {
	rueidis.Client
	rewritten atomic.Bool
	early     atomic.Bool
}

func (h *hdelOrder) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	args := cmd.Commands()
	if len(args) > 1 && strings.EqualFold(args[0], "HDEL") && strings.Contains(args[1], waitrec.Base) &&
		!h.rewritten.Load() {
		h.early.Store(true)
	}
	return h.Client.Do(ctx, cmd)
}

// TestWaitRecordRewriteDoesNotOutliveTheWait: the records' rewrite is on
// its way when the wait gives up: the record's delete is sent after the
// rewrite's reply, so that the rewrite cannot bring back a wait that has
// ended (its owner would read as waiting to the deadlock detector).
func TestWaitRecordRewriteDoesNotOutliveTheWait(t *testing.T) {
	raw := relocktest.Raw(t)
	f := relocktest.NewFaulty(raw)
	order := &hdelOrder{Client: f}
	c, err := rlock.New(order, rlock.WithWatchdogTimeout(600*time.Millisecond), rlock.WithDeadlockDetection(0))
	require.NoError(t, err)
	defer c.Close()
	holder := relocktest.Client(t)
	h := rlock.WithOwner(t.Context(), "h")
	name := relocktest.Name(t)
	require.NoError(t, holder.GetLock(name).Lock(h))
	entered, gate := make(chan struct{}), make(chan struct{})
	var once sync.Once // EVALSHA, and EVAL if the script was not loaded
	f.Inject(&relocktest.Rule{SHA1s: []string{lua.WaitRewrite.SHA1}, N: 1, Run: true, Keep: true,
		Before: func([]string) {
			once.Do(func() { close(entered) })
			<-gate
		},
		After: func([]string) { order.rewritten.Store(true) },
	})
	ctx, cancel := context.WithCancel(rlock.WithOwner(t.Context(), "w"))
	defer cancel()
	got := lockAsync(c.GetLock(name), ctx)
	awaitRecords(t, raw, c, name, 1)
	require.NoError(t, raw.Do(t.Context(), raw.B().Del().Key(waitrec.Key("", c.ID())).Build()).Error())
	relocktest.Receive(t, entered, 5*time.Second, "the rewrite")
	cancel()
	require.ErrorIs(t, relocktest.Receive(t, got, 5*time.Second, "the wait to end"), context.Canceled)
	close(gate)
	awaitNoRecords(t, raw, c)
	assert.False(t, order.early.Load(), "the delete was sent before the rewrite's reply")
}
