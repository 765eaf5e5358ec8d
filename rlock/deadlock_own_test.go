package rlock_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/internal/waitrec"
	"github.com/relock-go/relock/rlock"
)

// TestDeadlockOwnRecordsNotRead: a look reads the waits of its own
// Client's owners from what the Client wrote, not from the Client's
// record hash: with N calls of one Client waiting, each looking once per
// delay, reading the hash would read all N records in every look (10,000
// waiters made 10,000 reads of 10,000 records a second). A cycle of three
// owners of the one Client still ends exactly one wait: a look that finds
// a cycle reads the hash, to name the victim from what the other Clients
// read (see TestReview35s9LostRecordReplyOneVictim), the others do not.
func TestDeadlockOwnRecordsNotRead(t *testing.T) {
	const after = 100 * time.Millisecond
	held := relocktest.Name(t)
	var (
		own             atomic.Pointer[string]
		ownReads, looks atomic.Int64
	)
	watch := func(args []string) func(rueidis.RedisResult) {
		if len(args) == 2 && args[0] == "HGETALL" {
			if k := own.Load(); k != nil && args[1] == *k {
				ownReads.Add(1)
			} else if args[1] == held {
				looks.Add(1) // each look reads the holders of what it waits for
			}
		}
		return nil
	}
	c := relocktest.SlowClient(t, 0, func(rdb rueidis.Client) rueidis.Client { return relocktest.NewTap(rdb, watch) },
		rlock.WithDeadlockDetection(after))
	key := waitrec.Key("", c.ID())
	own.Store(&key)

	// Calls of c wait for the other Client's lock: no look reads c's
	// hash.
	const waiters = 20
	stop := waitBehindOther(t, c, relocktest.Client(t), held, waiters)
	relocktest.Eventually(t, 10*time.Second, "each waiter to look a few times", func() bool {
		return looks.Load() >= 3*waiters
	})

	require.Zero(t, ownReads.Load(), "looks that found no cycle read the Client's own record hash")

	// A cycle of three owners of c, beside those waits.
	names := []string{relocktest.Name(t), relocktest.Name(t), relocktest.Name(t)}
	members := make([]cycleMember, len(names))
	for i := range members {
		members[i] = cycleMember{c: c, owner: fmt.Sprintf("o%d", i), hold: names[i], wait: names[(i+1)%len(names)]}
	}
	var victims int
	for owner, err := range runCycle(t, members, 10*time.Second) {
		if err != nil {
			require.ErrorIs(t, err, rlock.ErrDeadlock, owner)
			victims++
		}
	}
	require.Equal(t, 1, victims, "one wait of the cycle ends")
	cycleReads, before := ownReads.Load(), looks.Load()
	relocktest.Eventually(t, 10*time.Second, "each waiter to look a few times more", func() bool {
		return looks.Load() >= before+3*waiters
	})

	stop()
	require.Equal(t, cycleReads, ownReads.Load(), "looks that found no cycle read the Client's own record hash")
}

// TestDeadlockOtherRecordsShared: the looks of one Client share their
// reads of another Client's record hash (for lockcore.RecordsFresh, or a
// tenth of the delay): with N calls of a Client waiting for an owner of
// another, each look would otherwise read all of the other Client's
// records. Each look still reads the lock's holders itself.
func TestDeadlockOtherRecordsShared(t *testing.T) {
	const after = 500 * time.Millisecond
	other := relocktest.Client(t)
	held := relocktest.Name(t)
	otherKey := waitrec.Key("", other.ID())
	var holderReads, recordReads atomic.Int64
	watch := func(args []string) func(rueidis.RedisResult) {
		if len(args) == 2 && args[0] == "HGETALL" {
			switch args[1] {
			case held:
				holderReads.Add(1)
			case otherKey:
				recordReads.Add(1)
			}
		}
		return nil
	}
	c := relocktest.SlowClient(t, 0, func(rdb rueidis.Client) rueidis.Client { return relocktest.NewTap(rdb, watch) },
		rlock.WithDeadlockDetection(after))
	const waiters = 20
	stop := waitBehindOther(t, c, other, held, waiters)
	relocktest.Eventually(t, 20*time.Second, "each waiter to look three times", func() bool {
		return holderReads.Load() >= 3*waiters
	})
	stop()
	looks, reads := holderReads.Load(), recordReads.Load()
	t.Logf("%d looks read the holders, %d read the other Client's records", looks, reads)
	require.NotZero(t, reads, "the looks read the other Client's records")
	require.LessOrEqual(t, 4*reads, looks, "the looks share their reads of the other Client's records")
}

// waitBehindOther makes n calls of c wait for held, which other holds for
// an owner of its own until the test ends. stop cancels the calls and
// checks that each ended only by that.
func waitBehindOther(t *testing.T, c, other *rlock.Client, held string, n int) (stop func()) {
	t.Helper()
	holder := rlock.WithOwner(t.Context(), "holder")
	require.NoError(t, other.GetLock(held).Lock(holder))
	t.Cleanup(func() { assert.NoError(t, other.GetLock(held).Unlock(holder)) })
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			if err := c.GetLock(held).Lock(ctx); err != nil && ctx.Err() == nil {
				errs <- err
			}
		})
	}
	return func() {
		t.Helper()
		cancel()
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
	}
}
