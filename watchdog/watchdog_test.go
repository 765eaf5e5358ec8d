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

	"go.uber.org/goleak"

	"github.com/relock-go/relock/watchdog"
)

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
	if err != nil {
		t.Fatalf("Add: %v", err)
	}
	return l
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
	time.Sleep(d)
	synctest.Wait()
}

func TestRenewalEveryThirdOfLease(t *testing.T) {
	for _, offset := range []time.Duration{0, 3 * time.Millisecond, 7 * time.Millisecond} {
		t.Run(fmt.Sprint("offset=", offset), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := &renewer{}
				w := newWatchdog(r)
				defer w.Close()
				time.Sleep(offset) // Add between two ticks
				start := time.Now()
				l := mustAdd(t, w, lease, "a", nil)
				sleep(65 * time.Second)

				at := r.callsFor("a")
				if len(at) != 6 {
					t.Fatalf("%d renewals in 65s, want 6: %v", len(at), at)
				}
				prev := start
				for i, a := range at {
					if gap := a.Sub(prev); gap < lease/3 || gap > lease/3+tick {
						t.Errorf("renewal %d came %v after the previous one, want %v..%v", i, gap, lease/3, lease/3+tick)
					}
					prev = a
				}
				if l.Err() != nil || isDone(l) || w.Len() != 1 {
					t.Errorf("Err %v, done %v, Len %d; want a live lease", l.Err(), isDone(l), w.Len())
				}
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
		if len(at) != 10 {
			t.Fatalf("%d renewals in 10 ticks, want 10", len(at))
		}
		for i := 1; i < len(at); i++ {
			if gap := at[i].Sub(at[i-1]); gap != tick {
				t.Errorf("gap %v between renewals, want one tick", gap)
			}
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
		if len(calls) != 1 {
			t.Fatalf("%d calls, want 1", len(calls))
		}
		got := slices.Clone(calls[0].values)
		slices.SortFunc(got, func(a, b any) int { return a.(int) - b.(int) })
		if !slices.Equal(got, []any{0, 1, 2, 3, 4}) {
			t.Errorf("batch %v, want the 5 leases", got)
		}
		sleep(lease / 3)
		if n := len(r.Calls()); n != 2 {
			t.Errorf("%d calls after two rounds, want 2", n)
		}
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
		if len(calls) != 3 {
			t.Fatalf("%d calls, want 3", len(calls))
		}
		seen := map[any]bool{}
		for _, c := range calls {
			if len(c.values) > 3 {
				t.Errorf("batch of %d leases, want at most 3", len(c.values))
			}
			for _, v := range c.values {
				seen[v] = true
			}
		}
		if len(seen) != 7 {
			t.Errorf("%d leases renewed, want 7", len(seen))
		}
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
		if got := renewed.Load(); got != 3*n {
			t.Errorf("%d renewals, want %d", got, 3*n)
		}
		if calls := len(r.Calls()); calls != 3*n/watchdog.DefaultMaxBatch {
			t.Errorf("%d calls, want %d", calls, 3*n/watchdog.DefaultMaxBatch)
		}
		if w.Len() != n {
			t.Errorf("Len %d, want %d", w.Len(), n)
		}
	})
}

func TestRenewalContextDeadlineIsEarliestLeaseDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &renewer{}
		w := newWatchdog(r)
		defer w.Close()
		start := time.Now()
		mustAdd(t, w, lease, "a", nil) // due at 10s, runs out at 30s
		time.Sleep(5 * time.Second)
		mustAdd(t, w, 15*time.Second, "b", nil) // due at 10s, runs out at 20s
		sleep(5*time.Second + tick)
		calls := r.Calls()
		if len(calls) != 1 || len(calls[0].values) != 2 {
			t.Fatalf("calls %v, want one with both leases", calls)
		}
		if want := start.Add(20 * time.Second); !calls[0].deadline.Equal(want) {
			t.Errorf("context deadline %v after start, want 20s", calls[0].deadline.Sub(start))
		}
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
		if stopped.Load() {
			t.Fatal("Stop returned while a renewal was in flight")
		}
		close(release)
		synctest.Wait()
		if !stopped.Load() {
			t.Fatal("Stop did not return after the renewal")
		}
		sleep(time.Minute)
		if n := len(r.Calls()); n != 1 {
			t.Errorf("%d renewals, want 1 (none after Stop)", n)
		}
		if lost.count() != 0 || isDone(l) || l.Err() != nil {
			t.Errorf("onLost calls %d, done %v, Err %v; want no loss after Stop", lost.count(), isDone(l), l.Err())
		}
		if w.Len() != 0 {
			t.Errorf("Len %d, want 0", w.Len())
		}
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
		if n := stopped.Load(); n != 0 {
			t.Fatalf("%d Stop calls returned while a renewal was in flight", n)
		}
		close(release)
		synctest.Wait()
		if n := stopped.Load(); n != 3 {
			t.Fatalf("%d Stop calls returned, want 3", n)
		}
		l.Stop() // idempotent
		sleep(time.Minute)
		if n := len(r.Calls()); n != 1 {
			t.Errorf("%d renewals, want 1", n)
		}
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
		if at := r.callsFor("a"); len(at) != 1 {
			t.Errorf("%d renewals of the stopped lease, want 1", len(at))
		}
		if at := r.callsFor("b"); len(at) != 7 {
			t.Errorf("%d renewals of the other lease, want 7", len(at))
		}
		if w.Len() != 1 || other.Err() != nil {
			t.Errorf("Len %d, other's Err %v; want 1, nil", w.Len(), other.Err())
		}
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
		<-entered

		var stopped atomic.Bool
		go func() {
			l.Stop()
			if !returned.Load() {
				t.Error("Stop returned before onLost")
			}
			stopped.Store(true)
		}()
		synctest.Wait()
		if stopped.Load() {
			t.Fatal("Stop returned while onLost was running")
		}
		close(proceed)
		synctest.Wait()
		if !stopped.Load() {
			t.Fatal("Stop did not return after onLost")
		}
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
		if len(called) != 1 {
			t.Fatalf("onLost called for %v, want one lease", called)
		}
		first := called[0]
		mu.Unlock()
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
		if !stopped.Load() {
			t.Error("Stop of a lease whose onLost has not started waited")
		}
		close(proceed)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(called, []string{first}) {
			t.Errorf("onLost called for %v, want only %q", called, first)
		}
		if l := leases[second]; !isDone(l) || !errors.Is(l.Err(), watchdog.ErrNotHeld) {
			t.Errorf("stopped lost lease: done %v, Err %v; want it still lost", isDone(l), l.Err())
		}
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
		if isDone(gone) || gone.Err() != nil {
			t.Fatal("lost before the renewal")
		}
		sleep(tick)
		if !isDone(gone) {
			t.Fatal("Done not closed after ErrNotHeld")
		}
		if err := gone.Err(); err != notHeld {
			t.Errorf("Err %v, want %v", err, notHeld)
		}
		if causes, at := lost.calls(); len(causes) != 1 || causes[0] != notHeld || !at[0].Equal(start.Add(lease/3)) {
			t.Errorf("onLost calls %v at %v, want one with %v at 10s", causes, at, notHeld)
		}
		if w.Len() != 1 {
			t.Errorf("Len %d, want 1", w.Len())
		}
		sleep(time.Minute)
		if at := r.callsFor("gone"); len(at) != 1 {
			t.Errorf("%d renewals of the lost lease, want 1", len(at))
		}
		if lost.count() != 1 {
			t.Errorf("onLost called %d times, want once", lost.count())
		}
		if kept.Err() != nil {
			t.Errorf("other lease lost: %v", kept.Err())
		}
		gone.Stop() // harmless after loss
		if !errors.Is(gone.Err(), watchdog.ErrNotHeld) {
			t.Errorf("Err after Stop %v, want it kept", gone.Err())
		}
	})
}

func TestNilOnLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &renewer{answer: func(context.Context, *watchdog.Lease) error { return watchdog.ErrNotHeld }}
		w := newWatchdog(r)
		defer w.Close()
		l := mustAdd(t, w, lease, "a", nil)
		sleep(lease / 3)
		if !isDone(l) || !errors.Is(l.Err(), watchdog.ErrNotHeld) {
			t.Errorf("done %v, Err %v; want lost", isDone(l), l.Err())
		}
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
		if at := r.callsFor("a"); !slices.EqualFunc(at, want, time.Time.Equal) {
			t.Errorf("renewals at %v, want %v", at, want)
		}
		sleep(time.Minute)
		if lost.count() != 0 || l.Err() != nil || w.Len() != 1 {
			t.Errorf("onLost calls %d, Err %v, Len %d; want a live lease", lost.count(), l.Err(), w.Len())
		}
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
		if isDone(l) || lost.count() != 0 {
			t.Fatal("lost before the deadline")
		}
		sleep(2 * tick)
		if !isDone(l) {
			t.Fatal("not lost one tick after the deadline")
		}
		if err := l.Err(); !errors.Is(err, watchdog.ErrExpired) || !errors.Is(err, errTransient) {
			t.Errorf("Err %v, want ErrExpired joined with the last error", err)
		}
		if _, lostAt := lost.calls(); len(lostAt) != 1 || lostAt[0].Before(deadline) || lostAt[0].After(deadline.Add(tick)) {
			t.Errorf("onLost at %v, want once within a tick after %v", lostAt, deadline)
		}
		at := r.callsFor("a")
		if len(at) != 20 { // 10s, 11s, ..., 29s
			t.Errorf("%d attempts, want 20", len(at))
		}
		for _, a := range at {
			if !a.Before(deadline) {
				t.Errorf("renewal attempted at %v, after the deadline", a.Sub(start))
			}
		}
		if w.Len() != 0 {
			t.Errorf("Len %d, want 0", w.Len())
		}
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
		if !errors.Is(l.Err(), watchdog.ErrExpired) || calls.Load() < 2 {
			t.Errorf("Err %v after %d calls; want ErrExpired after retries", l.Err(), calls.Load())
		}
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
		time.Sleep(time.Second)
		mustAdd(t, w, lease, "fast", nil)
		sleep(time.Minute)

		var want []time.Time
		for s := 11; s <= 61; s += 10 {
			want = append(want, start.Add(time.Duration(s)*time.Second))
		}
		if at := r.callsFor("fast"); !slices.EqualFunc(at, want, time.Time.Equal) {
			t.Errorf("fast lease renewed at %v, want %v", at, want)
		}
		// The slow renewal is cut by its context at the lease deadline.
		if at := r.callsFor("slow"); len(at) != 1 {
			t.Errorf("%d renewals of the slow lease, want 1 (none while in flight)", len(at))
		}
		err := slow.Err()
		if !errors.Is(err, watchdog.ErrExpired) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("slow lease Err %v, want ErrExpired and DeadlineExceeded", err)
		}
		if _, lostAt := lost.calls(); len(lostAt) != 1 || !lostAt[0].Equal(start.Add(lease)) {
			t.Errorf("slow lease lost at %v, want once at its deadline", lostAt)
		}
	})
}

func TestSlowSuccessRenewsFromCallStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		first := true
		r := &renewer{answer: func(context.Context, *watchdog.Lease) error {
			if first {
				first = false
				time.Sleep(15 * time.Second)
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
		if at := r.callsFor("a"); !slices.EqualFunc(at, want, time.Time.Equal) {
			t.Errorf("renewals at %v, want %v", at, want)
		}
		if l.Err() != nil {
			t.Errorf("Err %v, want nil", l.Err())
		}
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
		time.Sleep(time.Second)
		scheduled := mustAdd(t, w, lease, "scheduled", lost.onLost)
		sleep(lease/3 - time.Second + tick)

		w.Close()
		calls := r.Calls()
		if len(calls) != 1 || !errors.Is(calls[0].ctxErr, context.Canceled) {
			t.Fatalf("calls %v, want one, cancelled by Close", calls)
		}
		w.Close() // idempotent
		for _, l := range []*watchdog.Lease{inFlight, scheduled} {
			l.Stop() // returns at once after Close
			if isDone(l) || l.Err() != nil {
				t.Errorf("%v: done %v, Err %v after Close; want stopped, not lost", l.Value(), isDone(l), l.Err())
			}
		}
		if lost.count() != 0 || w.Len() != 0 {
			t.Errorf("onLost calls %d, Len %d after Close; want 0, 0", lost.count(), w.Len())
		}
		if _, err := w.Add(lease, "late", nil); !errors.Is(err, watchdog.ErrClosed) {
			t.Errorf("Add after Close: %v, want ErrClosed", err)
		}
		sleep(time.Minute)
		if n := len(r.Calls()); n != 1 {
			t.Errorf("%d renewals, want none after Close", n-1)
		}
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
		if closed.Load() {
			t.Fatal("Close returned while a RenewFunc was running")
		}
		close(release)
		synctest.Wait()
		if !closed.Load() {
			t.Fatal("Close did not return after the RenewFunc")
		}
	})
}

func TestAddValidation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWatchdog(&renewer{})
		for _, d := range []time.Duration{0, -time.Second} {
			if l, err := w.Add(d, nil, nil); err == nil || l != nil {
				t.Errorf("Add(%v) = %v, %v; want an error", d, l, err)
			}
		}
		l := mustAdd(t, w, lease, "v", nil)
		if l.Value() != "v" || l.Duration() != lease {
			t.Errorf("Value %v, Duration %v; want v, %v", l.Value(), l.Duration(), lease)
		}
		w.Close()
		if _, err := w.Add(lease, nil, nil); err != watchdog.ErrClosed {
			t.Errorf("Add after Close: %v, want ErrClosed", err)
		}
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
		if w.Len() != 3 {
			t.Errorf("Len %d, want 3", w.Len())
		}
		stopped.Stop()
		if w.Len() != 2 {
			t.Errorf("Len %d after Stop, want 2", w.Len())
		}
		sleep(lease / 3)
		if w.Len() != 1 {
			t.Errorf("Len %d after a loss, want 1", w.Len())
		}
	})
}

func TestIdleWheelSleeps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &renewer{}
		w := newWatchdog(r)
		defer w.Close()
		sleep(time.Hour)
		if n := watchdog.Wakeups(w); n > 1 {
			t.Errorf("wheel woke %d times in an idle hour", n)
		}

		l := mustAdd(t, w, lease, "a", nil)
		sleep(time.Second)
		l.Stop()
		sleep(time.Minute) // let the wheel notice it is empty
		before := watchdog.Wakeups(w)
		sleep(time.Hour)
		if n := watchdog.Wakeups(w) - before; n != 0 {
			t.Errorf("empty wheel woke %d times in an hour", n)
		}
		if len(r.Calls()) != 0 {
			t.Errorf("renewals of a stopped lease: %v", r.Calls())
		}

		// Adding resumes the wheel.
		start := time.Now()
		mustAdd(t, w, lease, "b", nil)
		sleep(lease/3 + tick)
		if at := r.callsFor("b"); len(at) != 1 || !at[0].Equal(start.Add(lease/3)) {
			t.Errorf("renewals after resuming at %v, want one at 10s", at)
		}
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
			time.Sleep(time.Millisecond)
		}
		// 1000 holds over 1s of a 30s lease: the first wakes the wheel,
		// which then sleeps until the first one's renewal tick.
		if n := watchdog.Wakeups(w) - before; n > 3 {
			t.Errorf("%d holds woke the wheel %d times", holds, n)
		}
		if len(r.Calls()) != 0 {
			t.Errorf("renewals of stopped leases: %v", r.Calls())
		}
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
		if n := watchdog.Wakeups(w); n > 40 {
			t.Errorf("wheel woke %d times in a minute for one lease", n)
		}
		if n := len(r.Calls()); n != 6 {
			t.Errorf("%d renewals, want 6", n)
		}
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
					l := mustAdd(t, w, d, g*1000+i, func(error) {
						if stopped.Load() {
							t.Error("onLost called after Stop returned")
						}
					})
					time.Sleep(d * time.Duration(g+1) / 4) // before, during or after renewals and losses
					l.Stop()
					stopped.Store(true)
				}
			})
		}
		wg.Wait()
		if w.Len() != 0 {
			t.Errorf("Len %d after stopping everything, want 0", w.Len())
		}
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
		if perLease >= 1024 {
			t.Errorf("%d bytes per lease, want under 1 KiB", perLease)
		}
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
		if err != nil {
			b.Fatal(err)
		}
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
			if err != nil {
				b.Error(err)
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
		if at := r.callsFor("a"); len(at) != 1 {
			t.Fatalf("%d renewals a tick after RenewNow, want 1", len(at))
		}
		// During a renewal in flight: another one right after it.
		hold.Store(true)
		sleep(lease / 3)
		l.RenewNow()
		hold.Store(false)
		close(gate)
		sleep(2 * tick)
		if at := r.callsFor("a"); len(at) != 3 {
			t.Fatalf("%d renewals, want 3 (the one in flight and one more at once)", len(at))
		}
		sleep(lease/3 - 2*tick)
		if at := r.callsFor("a"); len(at) != 3 {
			t.Errorf("%d renewals before the next third of the lease, want 3", len(at))
		}
		sleep(3 * tick)
		if at := r.callsFor("a"); len(at) != 4 {
			t.Errorf("%d renewals a third of the lease after the early one, want 4", len(at))
		}
		l.Stop()
		l.RenewNow() // nothing
		sleep(lease)
		if at := r.callsFor("a"); len(at) != 4 {
			t.Errorf("%d renewals after Stop and RenewNow, want 4", len(at))
		}
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
		if w.Rearm(l) {
			t.Fatal("Rearm of a registered lease = true")
		}
		l.Stop()
		if !w.Rearm(l) || w.Len() != 1 {
			t.Fatalf("Rearm after Stop: Len %d, want a registered lease", w.Len())
		}
		start := time.Now()
		sleep(lease / 3)
		if at := r.callsFor("a"); len(at) != 1 || at[0].Sub(start) > lease/3+tick {
			t.Errorf("renewals after Rearm: %v, want one a third of the lease later", at)
		}
		notHeld.Store(true)
		sleep(lease / 3)
		if !isDone(l) || losses.count() != 1 {
			t.Fatalf("done %v, %d losses, want the lease lost once", isDone(l), losses.count())
		}
		notHeld.Store(false)
		if !w.Rearm(l) {
			t.Fatal("Rearm after a loss = false")
		}
		if isDone(l) || l.Err() != nil {
			t.Errorf("after Rearm: done %v, Err %v; want a live lease", isDone(l), l.Err())
		}
		l.Stop()
		w.Close()
		if w.Rearm(l) {
			t.Error("Rearm after Close = true")
		}
	})
}
