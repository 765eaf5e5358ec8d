package ratelimit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/rlock"
)

func ExampleLimiter() {
	c, err := rlock.NewClient(rueidis.ClientOption{InitAddress: []string{redistest.Addr()}})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	ctx := context.Background()
	l := c.GetRateLimiter("example:sms")
	set, _ := l.TrySetRate(ctx, 3, time.Minute)
	fmt.Println("set:", set)
	_ = l.Acquire(ctx, 2)            // 2 of the 3 for this minute
	ok, _ := l.TryAcquire(ctx, 2, 0) // all or none: 1 is left
	n, _ := l.AvailablePermits(ctx)
	fmt.Println("two more:", ok, "left:", n)
	// Output:
	// set: true
	// two more: false left: 1
}

// ExampleLimiter_readme is the docs' code, compiled; it is not run.
func ExampleLimiter_readme() {
	var (
		ctx = context.Background()
		c   *rlock.Client
	)
	// README begin
	l := c.GetRateLimiter("sms")                // Java: redisson.getRateLimiter("sms")
	_, _ = l.TrySetRate(ctx, 100, time.Minute)  // once, by whoever comes first
	_ = l.Acquire(ctx, 1)                       // waits until the window has room
	ok, _ := l.TryAcquire(ctx, 10, time.Second) // 10 at once, or none
	n, _ := l.AvailablePermits(ctx)             // left in the window now
	_ = l.SetRate(ctx, 200, time.Minute)        // a new rate, an empty window
	// README end
	_, _ = ok, n
}
