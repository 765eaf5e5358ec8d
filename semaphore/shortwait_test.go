package semaphore_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/rlock"
	"github.com/relock-go/relock/semaphore"
)

// TestGrantAfterWaitKept: a waiter woken by a release sends its attempt
// before its wait ends; the attempt reaches the server, and takes the
// permit, after the wait ended. The permit is the call's: TryAcquire
// returns it (it used to give it back and return false, nil).
func TestGrantAfterWaitKept(t *testing.T) {
	// The waiter queues at its first attempt and never refreshes its
	// place: only the release wakes it.
	semaphore.SetTiming(t, 0, time.Hour)
	name := relocktest.Name(t)
	holder := relocktest.Client(t).GetSemaphore(name)
	setPermits(t, holder, 1)
	held, err := holder.Acquire(t.Context(), 0)
	require.NoError(t, err)

	const wait = time.Second
	faulty := relocktest.NewFaulty(redistest.Shared(t).Client(t))
	var hold atomic.Bool
	waitOver := make(chan struct{})
	sentAt := make(chan time.Time, 1)
	// Once hold is set, an attempt is held back on its way to the server
	// until the wait has ended (and a little more, for the end to be
	// seen).
	attempts := faulty.Inject(&relocktest.Rule{SHA1s: []string{lua.SemAcquire.SHA1}, N: -1, Run: true, Keep: true,
		Before: func([]string) {
			if hold.Load() {
				select {
				case sentAt <- time.Now():
				default:
				}
				<-waitOver
			}
		}})
	c, err := rlock.New(faulty)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	s := c.GetSemaphore(name)

	type result struct {
		id  string
		ok  bool
		err error
	}
	res := make(chan result, 1)
	over := time.AfterFunc(wait+100*time.Millisecond, func() { close(waitOver) })
	defer over.Stop()
	start := time.Now()
	go func() {
		id, ok, err := s.TryAcquire(t.Context(), wait, 0)
		res <- result{id, ok, err}
	}()
	relocktest.Eventually(t, handoff, "the waiter's two refused attempts", func() bool { return attempts.Hits() == 2 })
	relocktest.Eventually(t, handoff, "the waiter to subscribe", func() bool {
		return relocktest.Subscribers(relocktest.Raw(t), semaphore.KeysOf(name).Channel) >= 1
	})
	hold.Store(true)
	require.NoError(t, holder.Release(t.Context(), held))
	sent := relocktest.Receive(t, sentAt, handoff, "the woken waiter's attempt").Sub(start)
	require.Less(t, sent, wait, "the attempt was sent after the wait ended: the scenario did not happen")
	r := relocktest.Receive(t, res, 2*handoff, "TryAcquire to return")
	require.NoError(t, r.err, "TryAcquire")
	require.True(t, r.ok, "TryAcquire whose attempt was sent within the wait (at %v) and granted after it", sent)
	assert.Greater(t, time.Since(start), wait, "TryAcquire returned before its wait ended: the grant did not come after it")
	require.NoError(t, s.Release(t.Context(), r.id))
	assert.Equal(t, 1, available(t, holder), "permits after the release")
}
