package fairlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
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
						ok, err = l.TryLock(base, time.Duration(rng.IntN(150))*time.Millisecond, 2*time.Second)
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
