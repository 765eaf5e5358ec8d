package semaphore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/rlock"
)

func ExampleSemaphore() {
	c, err := rlock.NewClient(rueidis.ClientOption{InitAddress: []string{redistest.Addr()}})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	ctx := context.Background()
	s := c.GetSemaphore("example:exports")
	set, _ := s.TrySetPermits(ctx, 2) // once, by whoever comes first
	fmt.Println("set:", set)

	a, _ := s.Acquire(ctx, 0)              // renewed by the watchdog until Release
	b, _ := s.Acquire(ctx, 10*time.Second) // a fixed lease: back by itself after 10s
	_, ok, _ := s.TryAcquire(ctx, 0, 0)    // none left
	n, _ := s.AvailablePermits(ctx)
	fmt.Println("third permit:", ok, "available:", n)

	_ = s.Release(ctx, a)
	_ = s.Release(ctx, b)
	n, _ = s.AvailablePermits(ctx)
	fmt.Println("available:", n)
	fmt.Println("release twice:", s.Release(ctx, a) != nil)
	_, _ = s.Delete(ctx) // no longer needed
	// Output:
	// set: true
	// third permit: false available: 0
	// available: 2
	// release twice: true
}

// ExampleSemaphore_readme is the README's code, compiled; it is not run.
func ExampleSemaphore_readme() {
	var (
		ctx = context.Background()
		c   *rlock.Client
	)
	// README begin
	s := c.GetSemaphore("exports")
	_, _ = s.TrySetPermits(ctx, 2)         // once, by whoever comes first
	a, _ := s.Acquire(ctx, 0)              // waits; renewed until Release
	b, _ := s.Acquire(ctx, 10*time.Second) // a fixed lease: back by itself after 10s
	_, ok, _ := s.TryAcquire(ctx, 0, 0)    // false: none left
	_ = s.Release(ctx, a)
	_ = s.Release(ctx, b)
	err := s.Release(ctx, a) // ErrNotHeld: released (or expired) already
	// README end
	_, _ = ok, err
}

func ExampleSemaphore_AcquirePermits() {
	c, err := rlock.NewClient(rueidis.ClientOption{InitAddress: []string{redistest.Addr()}})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	ctx := context.Background()
	s := c.GetSemaphore("example:render-slots")
	_, _ = s.TrySetPermits(ctx, 4)
	ps, err := s.AcquirePermits(ctx, 3, time.Minute) // three at once, each on a 1-minute lease
	if err != nil {
		panic(err)
	}
	more, _ := s.TryAcquirePermits(ctx, 2, 0, 0) // two more: all or none
	n, _ := s.AvailablePermits(ctx)
	fmt.Println("held:", len(ps), "two more:", more != nil, "available:", n)

	_ = ps[0].UpdateLease(ctx, time.Hour) // a longer lease for the first
	left, _ := ps[0].RemainingLease(ctx)
	fmt.Println("the first's lease, about an hour:", left > 59*time.Minute)
	d, _ := ps[0].Context().Deadline()
	fmt.Println("its context's deadline moved:", time.Until(d) > 59*time.Minute)

	for _, p := range ps {
		_ = p.Release(ctx)
	}
	n, _ = s.AvailablePermits(ctx)
	fmt.Println("available:", n)
	_, _ = s.Delete(ctx)
	// Output:
	// held: 3 two more: false available: 1
	// the first's lease, about an hour: true
	// its context's deadline moved: true
	// available: 4
}

// ExampleSemaphore_AcquirePermits_readme is docs/kinds.md's code,
// compiled; it is not run.
func ExampleSemaphore_AcquirePermits_readme() {
	var (
		ctx = context.Background()
		c   *rlock.Client
		id  string
	)
	s := c.GetSemaphore("exports")
	// README begin
	ps, err := s.AcquirePermits(ctx, 3, 0)                          // three at once, each renewed until released
	ps, err = s.TryAcquirePermits(ctx, 3, time.Second, time.Minute) // nil: not three free within 1s
	err = s.UpdateLease(ctx, id, 5*time.Minute)                     // a fixed lease from now; ErrNotHeld if it is gone
	left, err := s.RemainingLease(ctx, id)                          // semaphore.NeverExpires: a Redisson permit without one
	err = ps[0].UpdateLease(ctx, time.Minute)                       // and its Context now ends with that lease
	// README end
	_, _ = left, err
}

func ExampleCounting() {
	c, err := rlock.NewClient(rueidis.ClientOption{InitAddress: []string{redistest.Addr()}})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	ctx := context.Background()
	s := c.GetCountingSemaphore("example:slots")
	set, _ := s.TrySetPermits(ctx, 3)
	fmt.Println("set:", set)
	_ = s.Acquire(ctx, 2)            // waits until 2 are free, takes both
	ok, _ := s.TryAcquire(ctx, 2, 0) // all or none: 1 is left
	n, _ := s.AvailablePermits(ctx)
	fmt.Println("two more:", ok, "available:", n)
	_ = s.Release(ctx, 2)
	drained, _ := s.DrainPermits(ctx)
	fmt.Println("drained:", drained)
	// Output:
	// set: true
	// two more: false available: 1
	// drained: 3
}

// ExampleCounting_readme is the docs' code, compiled; it is not run.
func ExampleCounting_readme() {
	var (
		ctx = context.Background()
		c   *rlock.Client
	)
	// README begin
	s := c.GetCountingSemaphore("renders") // Java: redisson.getSemaphore("renders")
	_, _ = s.TrySetPermits(ctx, 4)         // once, by whoever comes first
	_ = s.Acquire(ctx, 3)                  // waits until 3 are free, takes them at once
	ok, _ := s.TryAcquire(ctx, 2, 0)       // false: all or none, and 1 is left
	_ = s.Release(ctx, 3)                  // by anyone: permits have no owner
	_ = s.AddPermits(ctx, -1)              // one fewer from now on
	n, _ := s.DrainPermits(ctx)            // takes the 3 free: nobody gets one now
	// README end
	_, _ = ok, n
}
