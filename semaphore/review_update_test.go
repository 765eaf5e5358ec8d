package semaphore_test

import (
	"context"
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

// TestPermitUpdateLeaseLostReply: a Permit on a fixed lease of a minute
// whose update to 50ms ran but whose reply was lost returns the error,
// and its context ends at the sooner end (the permit may have it), with
// a cause matching ErrLockLost: it used to stay live for the minute while
// another Client took the permit after 50ms. A longer lease whose reply
// was lost leaves the context's end as it was.
func TestPermitUpdateLeaseLostReply(t *testing.T) {
	f := relocktest.NewFaulty(redistest.Shared(t).Client(t))
	c, err := rlock.New(f)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	s := c.GetSemaphore(relocktest.Name(t))
	setPermits(t, s, 2)
	lost := func() {
		f.Inject(&relocktest.Rule{SHA1s: []string{lua.SemUpdateLease.SHA1}, N: 1, Run: true, Reply: relocktest.LostReply()})
	}

	p, err := s.AcquirePermit(t.Context(), time.Minute)
	require.NoError(t, err)
	was, _ := p.Context().Deadline()
	lost()
	require.Error(t, p.UpdateLease(t.Context(), time.Hour), "a longer lease, its reply lost")
	d, _ := p.Context().Deadline()
	assert.Equal(t, was, d, "the end after a longer lease whose reply was lost")

	const short = 50 * time.Millisecond
	before := time.Now()
	lost()
	require.Error(t, p.UpdateLease(t.Context(), short), "a shorter lease, its reply lost")
	after := time.Now()
	d, _ = p.Context().Deadline()
	assert.False(t, d.Before(before.Add(short)) || d.After(after.Add(short)),
		"the end %v after a shorter lease whose reply was lost: between %v and %v", d, before.Add(short), after.Add(short))
	relocktest.Receive(t, p.Done(), 5*time.Second, "the permit's context at the sooner end")
	assert.ErrorIs(t, context.Cause(p.Context()), semaphore.ErrLockLost)
}

// TestWatchdogPermitUpdateLeaseLostReply: a permit on the watchdog lease
// whose update to a 1s lease ran but whose reply was lost is renewed at
// once (back on the watchdog's lease), not at its next renewal, after
// the 1s lease would have given the permit back: it stays held while its
// context is live, and another Client does not take it.
func TestWatchdogPermitUpdateLeaseLostReply(t *testing.T) {
	f := relocktest.NewFaulty(redistest.Shared(t).Client(t))
	c, err := rlock.New(f, rlock.WithWatchdogTimeout(9*time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	name := relocktest.Name(t)
	s := c.GetSemaphore(name)
	setPermits(t, s, 1)
	p, err := s.AcquirePermit(t.Context(), 0)
	require.NoError(t, err)
	f.Inject(&relocktest.Rule{SHA1s: []string{lua.SemUpdateLease.SHA1}, N: 1, Run: true, Reply: relocktest.LostReply()})
	require.Error(t, p.UpdateLease(t.Context(), time.Second), "an update whose reply was lost")
	other, err := relocktest.Client(t).GetSemaphore(name).TryAcquirePermit(t.Context(), 2*time.Second, time.Minute)
	require.NoError(t, err)
	assert.Nil(t, other, "another Client took the permit")
	assert.NoError(t, p.Context().Err(), "the permit's context")
	require.NoError(t, p.Release(t.Context()))
}

// TestPermitUpdateLeaseConcurrent: two updates of one Permit's fixed
// lease on two goroutines, the first (an hour) run by Redis before the
// second (a second) but answered after it: the Permit's context must not
// outlive the lease Redis has (a second). Updates of a Permit are made
// one at a time, so the second waits for the first.
func TestPermitUpdateLeaseConcurrent(t *testing.T) {
	f := relocktest.NewFaulty(redistest.Shared(t).Client(t))
	c, err := rlock.New(f)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	s := c.GetSemaphore(relocktest.Name(t))
	setPermits(t, s, 1)
	p, err := s.AcquirePermit(t.Context(), time.Minute)
	require.NoError(t, err)

	inFirst, secondDone := make(chan struct{}), make(chan struct{})
	f.Inject(&relocktest.Rule{SHA1s: []string{lua.SemUpdateLease.SHA1}, N: 1, Run: true, Keep: true,
		After: func([]string) {
			close(inFirst)
			// The second update, if it is sent meanwhile, runs and is
			// answered before this one is: its end is set first, and
			// this one's after it. Updates made one at a time never
			// send it before this one returns: this waits out a bound
			// then.
			select {
			case <-secondDone:
			case <-time.After(time.Second):
			}
		}})
	first := make(chan error, 1)
	go func() { first <- p.UpdateLease(context.Background(), time.Hour) }()
	<-inFirst
	err = p.UpdateLease(t.Context(), time.Second)
	close(secondDone)
	require.NoError(t, err, "the second update")
	require.NoError(t, <-first, "the first update")
	left, err := s.RemainingLease(t.Context(), p.ID())
	require.NoError(t, err)
	d, _ := p.Context().Deadline()
	// PTTL is whole milliseconds, rounded down: Redis's end is up to 1ms
	// after now+left.
	assert.False(t, d.After(time.Now().Add(left+time.Millisecond)), "the Permit's end %v after the lease Redis has (%v left)", time.Until(d), left)
}
