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
