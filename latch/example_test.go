package latch_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/rlock"
)

func ExampleCountDownLatch() {
	c, err := rlock.NewClient(rueidis.ClientOption{InitAddress: []string{redistest.Addr()}})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l := c.GetCountDownLatch("example:batch")
	_, _ = l.TrySetCount(ctx, 3) // three workers

	done := make(chan error)
	go func() { done <- l.Await(ctx) }() // wakes when the count reaches 0

	for range 3 {
		_ = l.CountDown(ctx) // each worker, when its part is done
	}
	fmt.Println("await:", <-done)
	n, _ := l.Count(ctx)
	fmt.Println("count:", n)
	// Output:
	// await: <nil>
	// count: 0
}

// ExampleCountDownLatch_readme is the README's code, compiled; it is not
// run.
func ExampleCountDownLatch_readme() {
	var (
		ctx  = context.Background()
		c    *rlock.Client
		done = make(chan error, 1)
	)
	// README begin
	l := c.GetCountDownLatch("batch")
	_, _ = l.TrySetCount(ctx, 3)         // three workers
	go func() { done <- l.Await(ctx) }() // wakes when the count reaches 0
	for range 3 {
		_ = l.CountDown(ctx) // each worker, when its part is done
	}
	// README end
}
