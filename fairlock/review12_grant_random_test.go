package fairlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// TestReview12RandomGrants: goroutines of three Clients take one fair
// lock in turn by Lock (its context ending at random), TryLock (random
// waits, the watchdog's lease or a fixed one) and LockLease, holding it
// a moment. No two hold it at once, each success holds its own field at
// a count of 1, every failure is a wait that ended, and at the end the
// lock is free with nothing queued. Many hand-offs are grants.
func TestReview12RandomGrants(t *testing.T) {
	const (
		clients = 3
		perC    = 3
		ops     = 30
	)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	cs := make([]*rlock.Client, clients)
	for i := range cs {
		cs[i] = relocktest.Client(t)
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	var (
		holders  atomic.Int32
		wins     atomic.Int64
		failures atomic.Int64
		mu       sync.Mutex
		errs     []error
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	g0 := lockcore.GrantsMade()
	var wg sync.WaitGroup
	for ci, c := range cs {
		for gi := range perC {
			owner := fmt.Sprintf("c%d-g%d", ci, gi)
			rng := rand.New(rand.NewPCG(seed, uint64(ci*perC+gi)))
			wg.Go(func() {
				l := c.GetFairLock(name)
				field := layout.Field(c.ID(), owner)
				for op := range ops {
					base := rlock.WithOwner(t.Context(), owner)
					var (
						ok  bool
						err error
					)
					switch rng.IntN(4) {
					case 0:
						ctx, cancel := context.WithTimeout(base, time.Duration(rng.IntN(150))*time.Millisecond)
						err = l.Lock(ctx)
						cancel()
						ok = err == nil
					case 1:
						ok, err = l.TryLock(base, time.Duration(rng.IntN(150))*time.Millisecond, 0)
					case 2:
						ok, err = l.TryLock(base, time.Duration(rng.IntN(150))*time.Millisecond, 4*time.Second)
					default:
						ctx, cancel := context.WithTimeout(base, time.Duration(rng.IntN(300))*time.Millisecond)
						err = l.LockLease(ctx, 2*time.Second)
						cancel()
						ok = err == nil
					}
					if !ok {
						if err != nil && !errors.Is(err, rlock.ErrNotAcquired) {
							fail(fmt.Errorf("%s op %d: %w", owner, op, err))
						}
						failures.Add(1)
						continue
					}
					if !holders.CompareAndSwap(0, 1) {
						fail(fmt.Errorf("%s op %d: took the lock while another held it", owner, op))
					}
					wins.Add(1)
					got, herr := raw.Do(context.WithoutCancel(base), raw.B().Hgetall().Key(name).Build()).AsStrMap()
					if herr != nil {
						fail(herr)
					} else if len(got) != 1 || got[field] != "1" {
						fail(fmt.Errorf("%s op %d: hash %v while it holds, want only its field at 1", owner, op, got))
					}
					time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
					holders.Store(0)
					if err := l.Unlock(base); err != nil {
						fail(fmt.Errorf("%s op %d: Unlock: %w", owner, op, err))
					}
				}
			})
		}
	}
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	relocktest.Eventually(t, 5*time.Second, "the lock free, nothing queued", func() bool {
		n, err := raw.Do(t.Context(), raw.B().Exists().Key(name, layout.Queue(name), layout.Timeouts(name)).Build()).AsInt64()
		return err == nil && n == 0
	})
	t.Logf("%d acquisitions, %d failed waits, %d grants", wins.Load(), failures.Load(), lockcore.GrantsMade()-g0)
	if wins.Load() == 0 {
		t.Error("nobody took the lock")
	}
}

// TestReview12RandomCancelsKeepOrder: one Client's waiters queue one
// after another behind a holder; while they hand the lock on (by grants
// or wake-ups), some of them give up at random moments (their context
// cancelled). Those that take the lock take it in the order they queued,
// each alone, and the lock is free with nothing queued at the end.
func TestReview12RandomCancelsKeepOrder(t *testing.T) {
	const n = 12
	cs := []*rlock.Client{relocktest.Client(t), relocktest.Client(t)}
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	l := cs[0].GetFairLock(name)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	h := rlock.WithOwner(t.Context(), "holder")
	if err := l.Lock(h); err != nil {
		t.Fatal(err)
	}
	var (
		holders atomic.Int32
		mu      sync.Mutex
		order   []int
		errs    []error
		wg      sync.WaitGroup
	)
	cancels := make([]context.CancelFunc, n)
	for i := range n {
		owner := fmt.Sprintf("w%02d", i)
		ctx, cancel := context.WithCancel(rlock.WithOwner(t.Context(), owner))
		cancels[i] = cancel
		hold := time.Duration(rng.IntN(4)) * time.Millisecond
		// Two of three on the holder's Client, the rest on another.
		l := cs[min(1, i%3/2)].GetFairLock(name)
		wg.Go(func() {
			err := l.Lock(ctx)
			if err != nil {
				if !errors.Is(err, context.Canceled) {
					mu.Lock()
					errs = append(errs, fmt.Errorf("%s: %w", owner, err))
					mu.Unlock()
				}
				return
			}
			if !holders.CompareAndSwap(0, 1) {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s took the lock while another held it", owner))
				mu.Unlock()
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			time.Sleep(hold)
			holders.Store(0)
			if err := l.Unlock(context.WithoutCancel(ctx)); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: Unlock: %w", owner, err))
				mu.Unlock()
			}
		})
		relocktest.Eventually(t, 5*time.Second, owner+" queued", func() bool { return len(queue(t, raw, name)) == i+1 })
	}
	// About a third give up, each after a random moment of the run.
	var cwg sync.WaitGroup
	for i := range n {
		if rng.IntN(3) == 0 {
			after := time.Duration(rng.IntN(40)) * time.Millisecond
			cwg.Go(func() {
				time.Sleep(after)
				cancels[i]()
			})
		}
	}
	g0 := lockcore.GrantsMade()
	if err := l.Unlock(h); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	cwg.Wait()
	for _, cancel := range cancels {
		cancel()
	}
	for _, err := range errs {
		t.Error(err)
	}
	if !slices.IsSorted(order) {
		t.Errorf("waiters took the lock in order %v, not the order they queued", order)
	}
	relocktest.Eventually(t, 5*time.Second, "the lock free, nothing queued", func() bool {
		n, err := raw.Do(t.Context(), raw.B().Exists().Key(name, layout.Queue(name), layout.Timeouts(name)).Build()).AsInt64()
		return err == nil && n == 0
	})
	t.Logf("order %v, %d grants", order, lockcore.GrantsMade()-g0)
}
