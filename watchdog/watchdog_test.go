package watchdog_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/relock-go/relock/watchdog"
)

// Every test here runs in a synctest bubble: time.Sleep advances the fake
// clock (the scenario's time passing, in no real time), and synctest.Wait
// is how a test waits for the watchdog's goroutines to settle.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const (
	tick  = 10 * time.Millisecond
	lease = 30 * time.Second
)

var errTransient = errors.New("transient")

// renewCall is one call of a renewer.
type renewCall struct {
	at       time.Time
	values   []any
	deadline time.Time // of the context
	ctxErr   error     // of the context, when the call returned
}

// renewer is a RenewFunc that records its calls and answers each lease with
// answer (nil: success).
type renewer struct {
	answer func(ctx context.Context, l *watchdog.Lease) error

	mu    sync.Mutex
	calls []renewCall
}

func (r *renewer) renew(ctx context.Context, leases []*watchdog.Lease) []error {
	c := renewCall{at: time.Now()}
	c.deadline, _ = ctx.Deadline()
	for _, l := range leases {
		c.values = append(c.values, l.Value())
	}
	errs := make([]error, len(leases))
	if r.answer != nil {
		for i, l := range leases {
			errs[i] = r.answer(ctx, l)
		}
	}
	c.ctxErr = ctx.Err()
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
	return errs
}

// Calls returns the calls that have returned.
func (r *renewer) Calls() []renewCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// callsFor returns the start times of the calls that renewed value.
func (r *renewer) callsFor(value any) []time.Time {
	var at []time.Time
	for _, c := range r.Calls() {
		if slices.Contains(c.values, value) {
			at = append(at, c.at)
		}
	}
	return at
}

// lossRecorder is an onLost that records its calls.
type lossRecorder struct {
	mu     sync.Mutex
	causes []error
	at     []time.Time
}

func (r *lossRecorder) onLost(cause error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.causes = append(r.causes, cause)
	r.at = append(r.at, time.Now())
}

func (r *lossRecorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.causes)
}

// calls returns the causes onLost was called with, and when.
func (r *lossRecorder) calls() (causes []error, at []time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.causes), slices.Clone(r.at)
}

func newWatchdog(r *renewer) *watchdog.Watchdog {
	return watchdog.New(watchdog.Config{Renew: r.renew, Tick: tick})
}

func mustAdd(t *testing.T, w *watchdog.Watchdog, d time.Duration, value any, onLost func(error)) *watchdog.Lease {
	t.Helper()
	l, err := w.Add(d, value, onLost)
	require.NoError(t, err, "Add")
	return l
}

// assertLive checks that l is live (not done, no Err) in w with n leases.
func assertLive(t *testing.T, w *watchdog.Watchdog, l *watchdog.Lease, n int) {
	t.Helper()
	assert.NoError(t, l.Err(), "Err of a live lease")
	assert.False(t, isDone(l), "Done of a live lease is closed")
	assert.Equal(t, n, w.Len(), "Len")
}

func isDone(l *watchdog.Lease) bool {
	select {
	case <-l.Done():
		return true
	default:
		return false
	}
}

// sleep advances the fake clock by d and lets every goroutine settle.
func sleep(d time.Duration) {
	time.Sleep(d) // fake clock: the scenario's time passing
	synctest.Wait()
}

func TestRenewalEveryThirdOfLease(t *testing.T) {
	for _, offset := range []time.Duration{0, 3 * time.Millisecond, 7 * time.Millisecond} {
		t.Run(fmt.Sprint("offset=", offset), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := &renewer{}
				w := newWatchdog(r)
				defer w.Close()
				time.Sleep(offset) // fake clock: Add between two ticks
				start := time.Now()
				l := mustAdd(t, w, lease, "a", nil)
				sleep(65 * time.Second)

				at := r.callsFor("a")
				require.Len(t, at, 6, "renewals in 65s")
				prev := start
				for i, a := range at {
					assert.GreaterOrEqual(t, a.Sub(prev), lease/3, "gap before renewal %d", i)
					assert.LessOrEqual(t, a.Sub(prev), lease/3+tick, "gap before renewal %d", i)
					prev = a
				}
				assertLive(t, w, l, 1)
			})
		})
	}
}

func TestShortLeaseRenewedEveryTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &renewer{}
		w := newWatchdog(r)
		defer w.Close()
		mustAdd(t, w, 2*tick, "a", nil) // lease/3 is below one tick
		sleep(10*tick + tick/2)
		at := r.callsFor("a")
		require.Len(t, at, 10, "renewals in 10 ticks")
		for i := 1; i < len(at); i++ {
			assert.Equal(t, tick, at[i].Sub(at[i-1]), "gap between renewals %d and %d", i-1, i)
		}
	})
}

func TestLeasesDueTogetherAreBatched(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &renewer{}
		w := newWatchdog(r)
		defer w.Close()
		for i := range 5 {
			mustAdd(t, w, lease, i, nil)
		}
		sleep(lease/3 + tick)
		calls := r.Calls()
		require.Len(t, calls, 1, "calls")
		assert.ElementsMatch(t, []any{0, 1, 2, 3, 4}, calls[0].values, "the batch")
		sleep(lease / 3)
		assert.Len(t, r.Calls(), 2, "calls after two rounds")
	})
}

func TestBatchesAreCapped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &renewer{}
		w := watchdog.New(watchdog.Config{Renew: r.renew, Tick: tick, MaxBatch: 3})
		defer w.Close()
		for i := range 7 {
			mustAdd(t, w, lease, i, nil)
		}
		sleep(lease/3 + tick)
		calls := r.Calls()
		require.Len(t, calls, 3, "calls")
		seen := map[any]bool{}
		for _, c := range calls {
			assert.LessOrEqual(t, len(c.values), 3, "leases in a batch")
			for _, v := range c.values {
				seen[v] = true
			}
		}
		assert.Len(t, seen, 7, "leases renewed")
	})
}

func TestManyLeasesFewCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 10_000
		var renewed atomic.Int64
		r := &renewer{answer: func(context.Context, *watchdog.Lease) error {
			renewed.Add(1)
			return nil
		}}
		w := newWatchdog(r)
		defer w.Close()
		for i := range n {
			mustAdd(t, w, lease, i, nil)
		}
		sleep(lease + tick) // three rounds
		assert.EqualValues(t, 3*n, renewed.Load(), "renewals")
		assert.Len(t, r.Calls(), 3*n/watchdog.DefaultMaxBatch, "calls")
		assert.Equal(t, n, w.Len(), "Len")
	})
}

func TestRenewalContextDeadlineIsEarliestLeaseDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &renewer{}
		w := newWatchdog(r)
		defer w.Close()
		start := time.Now()
		mustAdd(t, w, lease, "a", nil) // due at 10s, runs out at 30s
		// fake clock: the second lease comes 5s later
		time.Sleep(5 * time.Second)
		mustAdd(t, w, 15*time.Second, "b", nil) // due at 10s, runs out at 20s
		sleep(5*time.Second + tick)
		calls := r.Calls()
		require.Len(t, calls, 1, "calls")
		require.Len(t, calls[0].values, 2, "leases in the call")
		assert.Equal(t, 20*time.Second, calls[0].deadline.Sub(start), "the context's deadline, after the start")
	})
}

func TestStopWaitsForRenewalInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		r := &renewer{answer: func(context.Context, *watchdog.Lease) error {
			<-release
			return watchdog.ErrNotHeld // would be a loss, were it not stopped
		}}
		w := newWatchdog(r)
		defer w.Close()
		var lost lossRecorder
		l := mustAdd(t, w, lease, "a", lost.onLost)
		sleep(lease / 3) // the renewal is in flight

		var stopped atomic.Bool
		go func() {
			l.Stop()
			stopped.Store(true)
		}()
		synctest.Wait()
		require.False(t, stopped.Load(), "Stop returned while a renewal was in flight")
		close(release)
		synctest.Wait()
		require.True(t, stopped.Load(), "Stop did not return after the renewal")
		sleep(time.Minute)
		assert.Len(t, r.Calls(), 1, "renewals (none after Stop)")
		assert.Zero(t, lost.count(), "onLost calls after Stop")
		assert.False(t, isDone(l), "Done closed after Stop")
		assert.NoError(t, l.Err(), "Err after Stop")
		assert.Zero(t, w.Len(), "Len")
	})
}

func TestConcurrentStopsAllWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		r := &renewer{answer: func(context.Context, *watchdog.Lease) error {
			<-release
			return nil
		}}
		w := newWatchdog(r)
		defer w.Close()
		l := mustAdd(t, w, lease, "a", nil)
		sleep(lease / 3)

		var stopped atomic.Int32
		for range 3 {
			go func() {
				l.Stop()
				stopped.Add(1)
			}()
		}
		synctest.Wait()
		require.Zero(t, stopped.Load(), "Stop calls returned while a renewal was in flight")
		close(release)
		synctest.Wait()
		require.EqualValues(t, 3, stopped.Load(), "Stop calls returned after the renewal")
		l.Stop() // idempotent
		sleep(time.Minute)
		assert.Len(t, r.Calls(), 1, "renewals")
	})
}

func TestStopPreventsRenewals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &renewer{}
		w := newWatchdog(r)
		defer w.Close()
		l := mustAdd(t, w, lease, "a", nil)
		other := mustAdd(t, w, lease, "b", nil)
		sleep(lease/3 + time.Second) // one renewal
		l.Stop()
		l.Stop()
		sleep(time.Minute)
		assert.Len(t, r.callsFor("a"), 1, "renewals of the stopped lease")
		assert.Len(t, r.callsFor("b"), 7, "renewals of the other lease")
		assertLive(t, w, other, 1)
	})
}

func TestStopWaitsForRunningOnLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &renewer{answer: func(context.Context, *watchdog.Lease) error { return watchdog.ErrNotHeld }}
		w := newWatchdog(r)
		defer w.Close()
		entered, proceed := make(chan struct{}), make(chan struct{})
		var returned atomic.Bool
		l := mustAdd(t, w, lease, "a", func(error) {
			close(entered)
			<-proceed // a slow onLost, to see that Stop waits for it
			returned.Store(true)
		})
		sleep(lease / 3)
		select {
		case <-entered:
		default:
			require.FailNow(t, "onLost was not called at the renewal that lost the lease")
		}

		var stopped atomic.Bool
		go func() {
			l.Stop()
			assert.True(t, returned.Load(), "Stop returned before onLost")
			stopped.Store(true)
		}()
		synctest.Wait()
		require.False(t, stopped.Load(), "Stop returned while onLost was running")
		close(proceed)
		synctest.Wait()
		require.True(t, stopped.Load(), "Stop did not return after onLost")
	})
}

func TestStopBeforeOnLostStartsCancelsIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &renewer{answer: func(context.Context, *watchdog.Lease) error { return watchdog.ErrNotHeld }}
		w := newWatchdog(r)
		defer w.Close()
		// Both leases are lost in one batch; their onLost run one after
		// the other. The first blocks; the second is stopped meanwhile.
		proceed := make(chan struct{})
		var mu sync.Mutex
		var called []string
		onLost := func(name string) func(error) {
			return func(error) {
				mu.Lock()
				called = append(called, name)
				mu.Unlock()
				<-proceed
			}
		}
		leases := map[string]*watchdog.Lease{
			"a": mustAdd(t, w, lease, "a", onLost("a")),
			"b": mustAdd(t, w, lease, "b", onLost("b")),
		}
		sleep(lease / 3)
		mu.Lock()
		calledNow := slices.Clone(called)
		mu.Unlock()
		require.Len(t, calledNow, 1, "leases onLost was called for")
		first := calledNow[0]
		second := "a"
		if first == "a" {
			second = "b"
		}

		var stopped atomic.Bool
		go func() {
			leases[second].Stop()
			stopped.Store(true)
		}()
		synctest.Wait()
		assert.True(t, stopped.Load(), "Stop of a lease whose onLost has not started waited")
		close(proceed)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		assert.Equal(t, []string{first}, called, "leases onLost was called for")
		l := leases[second]
		assert.True(t, isDone(l), "the stopped lost lease's Done must stay closed")
		assert.ErrorIs(t, l.Err(), watchdog.ErrNotHeld, "the stopped lost lease's Err")
	})
}

func TestNotHeldLosesLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		notHeld := fmt.Errorf("%w: owner changed", watchdog.ErrNotHeld)
		r := &renewer{answer: func(_ context.Context, l *watchdog.Lease) error {
			if l.Value() == "gone" {
				return notHeld
			}
			return nil
		}}
		w := newWatchdog(r)
		defer w.Close()
		var lost lossRecorder
		start := time.Now()
		gone := mustAdd(t, w, lease, "gone", lost.onLost)
		kept := mustAdd(t, w, lease, "kept", nil)

		sleep(lease/3 - tick)
		require.False(t, isDone(gone), "lost before the renewal")
		require.NoError(t, gone.Err(), "lost before the renewal")
		sleep(tick)
		require.True(t, isDone(gone), "Done not closed after ErrNotHeld")
		assert.Equal(t, notHeld, gone.Err(), "Err")
		causes, at := lost.calls()
		if assert.Len(t, causes, 1, "onLost calls") {
			assert.Equal(t, notHeld, causes[0], "onLost's cause")
			assert.Equal(t, lease/3, at[0].Sub(start), "when onLost was called, after the start")
		}
		assert.Equal(t, 1, w.Len(), "Len")
		sleep(time.Minute)
		assert.Len(t, r.callsFor("gone"), 1, "renewals of the lost lease")
		assert.Equal(t, 1, lost.count(), "onLost calls")
		assert.NoError(t, kept.Err(), "the other lease's Err")
		gone.Stop() // harmless after loss
		assert.ErrorIs(t, gone.Err(), watchdog.ErrNotHeld, "Err after Stop must be kept")
	})
}

func TestNilOnLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &renewer{answer: func(context.Context, *watchdog.Lease) error { return watchdog.ErrNotHeld }}
		w := newWatchdog(r)
		defer w.Close()
		l := mustAdd(t, w, lease, "a", nil)
		sleep(lease / 3)
		assert.True(t, isDone(l), "Done of the lost lease")
		assert.ErrorIs(t, l.Err(), watchdog.ErrNotHeld, "Err of the lost lease")
	})
}

func TestTransientErrorsRetriedUntilSuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		failures := 3
		r := &renewer{answer: func(context.Context, *watchdog.Lease) error {
			if failures > 0 {
				failures--
				return errTransient
			}
			return nil
		}}
		w := newWatchdog(r)
		defer w.Close()
		var lost lossRecorder
		start := time.Now()
		l := mustAdd(t, w, lease, "a", lost.onLost)
		sleep(25 * time.Second)

		// Retries every lease/30 (1s), then lease/3 after the success.
		var want []time.Time
		for _, s := range []int{10, 11, 12, 13, 23} {
			want = append(want, start.Add(time.Duration(s)*time.Second))
		}
		assert.Equal(t, want, r.callsFor("a"), "renewal times")
		sleep(time.Minute)
		assert.Zero(t, lost.count(), "onLost calls")
		assertLive(t, w, l, 1)
	})
}

func TestTransientErrorsUntilDeadlineExpire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &renewer{answer: func(context.Context, *watchdog.Lease) error { return errTransient }}
		w := newWatchdog(r)
		defer w.Close()
		var lost lossRecorder
		start := time.Now()
		deadline := start.Add(lease)
		l := mustAdd(t, w, lease, "a", lost.onLost)

		sleep(lease - tick)
		require.False(t, isDone(l), "lost before the deadline")
		require.Zero(t, lost.count(), "onLost called before the deadline")
		sleep(2 * tick)
		require.True(t, isDone(l), "not lost one tick after the deadline")
		assert.ErrorIs(t, l.Err(), watchdog.ErrExpired, "Err")
		assert.ErrorIs(t, l.Err(), errTransient, "Err must carry the last error")
		_, lostAt := lost.calls()
		if assert.Len(t, lostAt, 1, "onLost calls") {
			assert.WithinRange(t, lostAt[0], deadline, deadline.Add(tick), "onLost must come within a tick after the deadline")
		}
		at := r.callsFor("a")
		assert.Len(t, at, 20, "attempts (10s, 11s, ..., 29s)")
		for _, a := range at {
			assert.True(t, a.Before(deadline), "renewal attempted at %v, after the deadline", a.Sub(start))
		}
		assert.Zero(t, w.Len(), "Len")
	})
}

func TestMissingResultIsTransient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		w := watchdog.New(watchdog.Config{Tick: tick, Renew: func(context.Context, []*watchdog.Lease) []error {
			calls.Add(1)
			return nil
		}})
		defer w.Close()
		l := mustAdd(t, w, lease, "a", nil)
		sleep(lease + tick)
		assert.ErrorIs(t, l.Err(), watchdog.ErrExpired, "Err")
		assert.GreaterOrEqual(t, calls.Load(), int32(2), "calls: a missing result must be retried")
	})
}

func TestSlowRenewalDoesNotBlockOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &renewer{answer: func(ctx context.Context, l *watchdog.Lease) error {
			if l.Value() == "slow" {
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		}}
		w := newWatchdog(r)
		defer w.Close()
		var lost lossRecorder
		start := time.Now()
		slow := mustAdd(t, w, lease, "slow", lost.onLost)
		time.Sleep(time.Second) // fake clock: the second lease comes 1s later
		mustAdd(t, w, lease, "fast", nil)
		sleep(time.Minute)

		var want []time.Time
		for s := 11; s <= 61; s += 10 {
			want = append(want, start.Add(time.Duration(s)*time.Second))
		}
		assert.Equal(t, want, r.callsFor("fast"), "renewal times of the fast lease")
		// The slow renewal is cut by its context at the lease deadline.
		assert.Len(t, r.callsFor("slow"), 1, "renewals of the slow lease (none while in flight)")
		assert.ErrorIs(t, slow.Err(), watchdog.ErrExpired, "the slow lease's Err")
		assert.ErrorIs(t, slow.Err(), context.DeadlineExceeded, "the slow lease's Err")
		_, lostAt := lost.calls()
		assert.Equal(t, []time.Time{start.Add(lease)}, lostAt, "when the slow lease was lost: once, at its deadline")
	})
}

func TestSlowSuccessRenewsFromCallStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		first := true
		r := &renewer{answer: func(context.Context, *watchdog.Lease) error {
			if first {
				first = false
				time.Sleep(15 * time.Second) // fake clock: a renewal that takes 15s
			}
			return nil
		}}
		w := newWatchdog(r)
		defer w.Close()
		start := time.Now()
		l := mustAdd(t, w, lease, "a", nil)
		sleep(40 * time.Second)
		// The call of 10s returns at 25s; the next was due at 20s, so it
		// goes at the next tick; the one after 10s later.
		want := []time.Time{start.Add(10 * time.Second), start.Add(25*time.Second + tick), start.Add(35*time.Second + tick)}
		assert.Equal(t, want, r.callsFor("a"), "renewal times")
		assert.NoError(t, l.Err())
	})
}

func TestCloseCancelsRenewalsAndStopsLeases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &renewer{answer: func(ctx context.Context, l *watchdog.Lease) error {
			<-ctx.Done()
			return watchdog.ErrNotHeld // ignored after Close
		}}
		w := newWatchdog(r)
		var lost lossRecorder
		inFlight := mustAdd(t, w, lease, "in flight", lost.onLost)
		time.Sleep(time.Second) // fake clock: the second lease comes 1s later
		scheduled := mustAdd(t, w, lease, "scheduled", lost.onLost)
		sleep(lease/3 - time.Second + tick)

		w.Close()
		calls := r.Calls()
		require.Len(t, calls, 1, "calls")
		require.ErrorIs(t, calls[0].ctxErr, context.Canceled, "the renewal's context must be cancelled by Close")
		w.Close() // idempotent
		for _, l := range []*watchdog.Lease{inFlight, scheduled} {
			l.Stop() // returns at once after Close
			assert.False(t, isDone(l), "%v: Done closed after Close, want stopped, not lost", l.Value())
			assert.NoError(t, l.Err(), "%v: Err after Close", l.Value())
		}
		assert.Zero(t, lost.count(), "onLost calls after Close")
		assert.Zero(t, w.Len(), "Len after Close")
		_, err := w.Add(lease, "late", nil)
		assert.ErrorIs(t, err, watchdog.ErrClosed, "Add after Close")
		sleep(time.Minute)
		assert.Len(t, r.Calls(), 1, "calls (none after Close)")
	})
}

func TestCloseWaitsForRenewFunc(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		r := &renewer{answer: func(context.Context, *watchdog.Lease) error {
			<-release // ignores its context
			return nil
		}}
		w := newWatchdog(r)
		mustAdd(t, w, lease, "a", nil)
		sleep(lease / 3)
		var closed atomic.Bool
		go func() {
			w.Close()
			closed.Store(true)
		}()
		synctest.Wait()
		require.False(t, closed.Load(), "Close returned while a RenewFunc was running")
		close(release)
		synctest.Wait()
		require.True(t, closed.Load(), "Close did not return after the RenewFunc")
	})
}

func TestAddValidation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWatchdog(&renewer{})
		for _, d := range []time.Duration{0, -time.Second} {
			l, err := w.Add(d, nil, nil)
			assert.Error(t, err, "Add(%v)", d)
			assert.Nil(t, l, "Add(%v)", d)
		}
		l := mustAdd(t, w, lease, "v", nil)
		assert.Equal(t, "v", l.Value(), "Value")
		assert.Equal(t, lease, l.Duration(), "Duration")
		w.Close()
		_, err := w.Add(lease, nil, nil)
		assert.Equal(t, watchdog.ErrClosed, err, "Add after Close")
	})
}

func TestLen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &renewer{answer: func(_ context.Context, l *watchdog.Lease) error {
			if l.Value() == "lost" {
				return watchdog.ErrNotHeld
			}
			return nil
		}}
		w := newWatchdog(r)
		defer w.Close()
		mustAdd(t, w, lease, "kept", nil)
		stopped := mustAdd(t, w, lease, "stopped", nil)
		mustAdd(t, w, lease, "lost", nil)
		assert.Equal(t, 3, w.Len(), "Len")
		stopped.Stop()
		assert.Equal(t, 2, w.Len(), "Len after Stop")
		sleep(lease / 3)
		assert.Equal(t, 1, w.Len(), "Len after a loss")
	})
}

func TestIdleWheelSleeps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &renewer{}
		w := newWatchdog(r)
		defer w.Close()
		sleep(time.Hour)
		assert.LessOrEqual(t, watchdog.Wakeups(w), uint64(1), "wake-ups of the wheel in an idle hour")

		l := mustAdd(t, w, lease, "a", nil)
		sleep(time.Second)
		l.Stop()
		sleep(time.Minute) // the wheel's next slot passes: it sees it is empty
		before := watchdog.Wakeups(w)
		sleep(time.Hour)
		assert.Zero(t, watchdog.Wakeups(w)-before, "wake-ups of the empty wheel in an hour")
		assert.Empty(t, r.Calls(), "renewals of a stopped lease")

		// Adding resumes the wheel.
		start := time.Now()
		mustAdd(t, w, lease, "b", nil)
		sleep(lease/3 + tick)
		assert.Equal(t, []time.Time{start.Add(lease / 3)}, r.callsFor("b"), "renewals after resuming: one at 10s")
	})
}

// TestShortHoldsDoNotWakeTheWheel: a holder that takes a lease and stops
// it again and again, each time before its first renewal is due, wakes
// the wheel goroutine about once per lease/3, not once per hold. (Each
// wake-up is a goroutine switch: on the hot path of an uncontended
// Lock+Unlock it cost a tenth of the client's CPU.)
func TestShortHoldsDoNotWakeTheWheel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &renewer{}
		w := newWatchdog(r)
		defer w.Close()
		before := watchdog.Wakeups(w)
		const holds = 1000
		for range holds {
			l := mustAdd(t, w, lease, "a", nil)
			l.Stop()
			// The wheel goroutine, if woken, runs only now, after the
			// Stop, as it often does when the hold is short.
			synctest.Wait()
			time.Sleep(time.Millisecond) // fake clock: the next hold comes 1ms later
		}
		// 1000 holds over 1s of a 30s lease: the first wakes the wheel,
		// which then sleeps until the first one's renewal tick.
		assert.LessOrEqual(t, watchdog.Wakeups(w)-before, uint64(3), "wake-ups of the wheel for %d holds", holds)
		assert.Empty(t, r.Calls(), "renewals of stopped leases")
	})
}

func TestSparseWheelWakesRarely(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &renewer{}
		w := newWatchdog(r)
		defer w.Close()
		mustAdd(t, w, lease, "a", nil)
		sleep(time.Minute)
		// 6000 ticks in a minute; the wheel wakes only at occupied slots.
		t.Logf("%d wakeups", watchdog.Wakeups(w))
		assert.LessOrEqual(t, watchdog.Wakeups(w), uint64(40), "wake-ups of the wheel in a minute for one lease")
		assert.Len(t, r.Calls(), 6, "renewals")
	})
}

func TestConcurrentUse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &renewer{answer: func(_ context.Context, l *watchdog.Lease) error {
			switch l.Value().(int) % 7 {
			case 0:
				return watchdog.ErrNotHeld
			case 1, 2:
				return errTransient
			}
			return nil
		}}
		w := newWatchdog(r)
		defer w.Close()
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range 50 {
					var stopped atomic.Bool
					d := time.Duration(i+1) * 100 * time.Millisecond
					l, err := w.Add(d, g*1000+i, func(error) {
						assert.False(t, stopped.Load(), "onLost called after Stop returned")
					})
					if !assert.NoError(t, err, "Add") {
						return
					}
					// fake clock: Stop before, during or after renewals and losses
					time.Sleep(d * time.Duration(g+1) / 4)
					l.Stop()
					stopped.Store(true)
				}
			})
		}
		wg.Wait()
		assert.Zero(t, w.Len(), "Len after stopping everything")
	})
}

func TestMemoryPerLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 100_000
		w := newWatchdog(&renewer{})
		defer w.Close()
		leases := make([]*watchdog.Lease, n)
		perLease := heapGrowth(func() {
			for i := range leases {
				leases[i] = mustAdd(t, w, lease, nil, nil)
			}
		}) / n
		t.Logf("%d bytes per lease", perLease)
		assert.Less(t, perLease, uint64(1024), "bytes per lease")
		for _, l := range leases {
			l.Stop()
		}
	})
}

// heapGrowth returns by how many bytes the live heap grew across f.
func heapGrowth(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.GC()
	runtime.ReadMemStats(&after)
	if after.HeapAlloc < before.HeapAlloc {
		return 0
	}
	return after.HeapAlloc - before.HeapAlloc
}

func noRenew(_ context.Context, leases []*watchdog.Lease) []error {
	return make([]error, len(leases))
}

func BenchmarkAddStop(b *testing.B) {
	w := watchdog.New(watchdog.Config{Renew: noRenew})
	defer w.Close()
	b.ReportAllocs()
	for b.Loop() {
		l, err := w.Add(lease, nil, nil)
		require.NoError(b, err)
		l.Stop()
	}
}

func BenchmarkAddStopParallel(b *testing.B) {
	w := watchdog.New(watchdog.Config{Renew: noRenew})
	defer w.Close()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l, err := w.Add(lease, nil, nil)
			if !assert.NoError(b, err) {
				return
			}
			l.Stop()
		}
	})
}

// BenchmarkLeaseMemory reports the live heap per registered lease.
func BenchmarkLeaseMemory(b *testing.B) {
	const n = 100_000
	for b.Loop() {
		w := watchdog.New(watchdog.Config{Renew: noRenew})
		leases := make([]*watchdog.Lease, n)
		grown := heapGrowth(func() {
			for i := range leases {
				leases[i], _ = w.Add(lease, nil, nil)
			}
		})
		b.ReportMetric(float64(grown)/n, "B/lease")
		w.Close()
	}
}

// TestRenewNow: RenewNow brings the next renewal forward to the next tick,
// a renewal in flight is followed by another at once, and the rhythm
// resumes from the early renewal; after a loss it does nothing.
func TestRenewNow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		var hold atomic.Bool
		r := &renewer{answer: func(ctx context.Context, l *watchdog.Lease) error {
			if hold.Load() {
				<-gate
			}
			return nil
		}}
		w := newWatchdog(r)
		defer w.Close()
		l := mustAdd(t, w, lease, "a", nil)
		sleep(time.Second)
		l.RenewNow()
		sleep(tick)
		require.Len(t, r.callsFor("a"), 1, "renewals a tick after RenewNow")
		// During a renewal in flight: another one right after it.
		hold.Store(true)
		sleep(lease / 3)
		l.RenewNow()
		hold.Store(false)
		close(gate)
		sleep(2 * tick)
		require.Len(t, r.callsFor("a"), 3, "renewals (the one in flight and one more at once)")
		sleep(lease/3 - 2*tick)
		assert.Len(t, r.callsFor("a"), 3, "renewals before the next third of the lease")
		sleep(3 * tick)
		assert.Len(t, r.callsFor("a"), 4, "renewals a third of the lease after the early one")
		l.Stop()
		l.RenewNow() // nothing
		sleep(lease)
		assert.Len(t, r.callsFor("a"), 4, "renewals after Stop and RenewNow")
	})
}

// TestRearm: a stopped or lost lease is registered again with Rearm, with
// its duration from then on, a new Done channel and no Err; a lease that
// is registered, or whose onLost is still running, is not.
func TestRearm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var notHeld atomic.Bool
		r := &renewer{answer: func(ctx context.Context, l *watchdog.Lease) error {
			if notHeld.Load() {
				return watchdog.ErrNotHeld
			}
			return nil
		}}
		w := newWatchdog(r)
		defer w.Close()
		var losses lossRecorder
		l := mustAdd(t, w, lease, "a", losses.onLost)
		require.False(t, w.Rearm(l), "Rearm of a registered lease")
		l.Stop()
		require.True(t, w.Rearm(l), "Rearm after Stop")
		require.Equal(t, 1, w.Len(), "Len after Rearm")
		start := time.Now()
		sleep(lease / 3)
		at := r.callsFor("a")
		if assert.Len(t, at, 1, "renewals after Rearm") {
			assert.LessOrEqual(t, at[0].Sub(start), lease/3+tick, "the renewal after Rearm: a third of the lease later")
		}
		notHeld.Store(true)
		sleep(lease / 3)
		require.True(t, isDone(l), "the lease must be lost")
		require.Equal(t, 1, losses.count(), "losses")
		notHeld.Store(false)
		require.True(t, w.Rearm(l), "Rearm after a loss")
		assertLive(t, w, l, 1)
		l.Stop()
		w.Close()
		assert.False(t, w.Rearm(l), "Rearm after Close")
	})
}
