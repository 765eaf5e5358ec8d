package rlock_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// TestDeadlockOverlappingReaders: r1 and r2 read a read-write lock RW; w
// holds P and waits for RW's write side; then r1 and r2 each wait for P.
// Two cycles (w, r1 and w, r2) overlap in w's wait, the oldest: ending
// the youngest wait of each cycle would end both r1 and r2 (and w would
// still wait for the other's read until it ended). Exactly one wait ends,
// w's, which all the cycles share; r1 and r2 then get P.
func TestDeadlockOverlappingReaders(t *testing.T) {
	// The first look is a reader's, a second after the readers' waits
	// begin back to back, so that both of them wait when it is made: w's
	// Client looks later, when the readers' Clients have had their look
	// (any member of the set names the same victim).
	const after = time.Second
	raw := relocktest.Raw(t)
	cs := make([]*rlock.Client, 3)
	for i := range cs {
		delay := after
		if i == 2 {
			delay = 5 * after
		}
		cs[i] = relocktest.Client(t, rlock.WithDeadlockDetection(delay))
	}
	rw, p := relocktest.Name(t), relocktest.Name(t)
	own := func(o string) context.Context { return rlock.WithOwner(t.Context(), o) }
	require.NoError(t, cs[0].GetReadWriteLock(rw).ReadLock().Lock(own("r1")))
	require.NoError(t, cs[1].GetReadWriteLock(rw).ReadLock().Lock(own("r2")))
	require.NoError(t, cs[2].GetLock(p).Lock(own("w")))
	wait := func(o string, lock func(context.Context) error, then func(error)) <-chan error {
		done := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(own(o), 10*time.Second)
			defer cancel()
			err := lock(ctx)
			then(err)
			done <- err
		}()
		return done
	}
	ew := wait("w", cs[2].GetReadWriteLock(rw).WriteLock().Lock, func(err error) {
		if err == nil {
			_ = cs[2].GetReadWriteLock(rw).WriteLock().Unlock(own("w"))
		}
		_ = cs[2].GetLock(p).Unlock(own("w"))
	})
	recs := awaitRecords(t, raw, cs[2], rw, 1)
	// The readers' waits begin after w's, in the server's time.
	relocktest.Eventually(t, 5*time.Second, "the server's clock past w's record", func() bool {
		now, err := raw.Do(t.Context(), raw.B().Time().Build()).AsStrSlice()
		require.NoError(t, err)
		sec, _ := strconv.ParseInt(now[0], 10, 64)
		usec, _ := strconv.ParseInt(now[1], 10, 64)
		return sec*1000+usec/1000 > recs[0].Since
	})
	reader := func(i int, o string) <-chan error {
		return wait(o, cs[i].GetLock(p).Lock, func(err error) {
			if err == nil {
				_ = cs[i].GetLock(p).Unlock(own(o))
			}
			_ = cs[i].GetReadWriteLock(rw).ReadLock().Unlock(own(o))
		})
	}
	er1, er2 := reader(0, "r1"), reader(1, "r2")
	errs := map[string]error{}
	for o, ch := range map[string]<-chan error{"w": ew, "r1": er1, "r2": er2} {
		errs[o] = relocktest.Receive(t, ch, 15*time.Second, o)
	}
	victims := 0
	for _, err := range errs {
		if errors.Is(err, rlock.ErrDeadlock) {
			victims++
		}
	}
	require.Equal(t, 1, victims, "one wait ends: %v", errs)
	require.ErrorIs(t, errs["w"], rlock.ErrDeadlock, "the wait the cycles share")
	require.Contains(t, errs["w"].Error(), "which every cycle through these owners shares", "the error says why this wait")
	require.NoError(t, errs["r1"])
	require.NoError(t, errs["r2"])
}
