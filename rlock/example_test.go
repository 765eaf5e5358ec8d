package rlock_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/rlock"
)

// redisAddr is a throwaway redis-server for the examples.
func redisAddr() string {
	srv, err := redistest.SharedServer()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	return srv.Addr
}

func ExampleClient_GetLock() {
	c, err := rlock.NewClient(rueidis.ClientOption{InitAddress: []string{redisAddr()}})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	l := c.GetLock("example:orders:42") // no I/O
	fmt.Println(l.Name())
	// Output: example:orders:42
}

func ExampleLock_Lock() {
	c, err := rlock.NewClient(rueidis.ClientOption{InitAddress: []string{redisAddr()}})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	ctx := context.Background()
	l := c.GetLock("example:migration")
	if err := l.Lock(ctx); err != nil { // waits; the watchdog keeps it held
		panic(err)
	}
	fmt.Println("running the migration")
	if err := l.Unlock(ctx); err != nil {
		panic(err)
	}
	// Output: running the migration
}

func ExampleLock_TryLock() {
	c, err := rlock.NewClient(rueidis.ClientOption{InitAddress: []string{redisAddr()}})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	ctx := context.Background()
	a := rlock.WithOwner(ctx, "replica-a")
	b := rlock.WithOwner(ctx, "replica-b")
	l := c.GetLock("example:report")

	ok, err := l.TryLock(a, 0, 10*time.Second) // one attempt, fixed 10s lease
	fmt.Println("a:", ok, err)
	ok, err = l.TryLock(b, 100*time.Millisecond, 0) // wait up to 100ms
	fmt.Println("b:", ok, err)
	_ = l.Unlock(a)
	// Output:
	// a: true <nil>
	// b: false <nil>
}

func ExampleWithOwner() {
	c, err := rlock.NewClient(rueidis.ClientOption{InitAddress: []string{redisAddr()}})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	ctx := rlock.WithOwner(context.Background(), "job-42")
	l := c.GetLock("example:job")
	_ = l.Lock(ctx)
	_ = l.Lock(ctx) // the same owner re-enters
	n, _ := l.HoldCount(ctx)
	fmt.Println("hold count:", n)
	_ = l.Unlock(ctx)
	_ = l.Unlock(ctx)
	n, _ = l.HoldCount(ctx)
	fmt.Println("hold count:", n)
	// Output:
	// hold count: 2
	// hold count: 0
}

func ExampleLock_Do() {
	c, err := rlock.NewClient(rueidis.ClientOption{InitAddress: []string{redisAddr()}})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	err = c.GetLock("example:settle").Do(context.Background(), func(ctx context.Context) error {
		// ctx is cancelled with cause rlock.ErrLockLost if the hold is lost.
		fmt.Println("settling")
		return nil
	})
	fmt.Println(err)
	// Output:
	// settling
	// <nil>
}
