package rlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/rlock"
)

func ExampleClient_GetLock() {
	c, err := rlock.NewClient(rueidis.ClientOption{InitAddress: []string{redistest.Addr()}})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	l := c.GetLock("example:orders:42") // no I/O
	fmt.Println(l.Name())
	// Output: example:orders:42
}

func ExampleLock_Lock() {
	c, err := rlock.NewClient(rueidis.ClientOption{InitAddress: []string{redistest.Addr()}})
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
	c, err := rlock.NewClient(rueidis.ClientOption{InitAddress: []string{redistest.Addr()}})
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
	c, err := rlock.NewClient(rueidis.ClientOption{InitAddress: []string{redistest.Addr()}})
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
	c, err := rlock.NewClient(rueidis.ClientOption{InitAddress: []string{redistest.Addr()}})
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

// The examples below are the README's code, compiled (between the README
// markers); they are not run: they reach for a Redis on 127.0.0.1:6379.

func ExampleNewClient() {
	use := func(ctx context.Context) error {
		// README begin
		c, err := rlock.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
		if err != nil {
			return err
		}
		defer c.Close() // stops the watchdog and the subscription, and waits for them

		l := c.GetLock("orders:42")         // a handle: no I/O, no error
		if err := l.Lock(ctx); err != nil { // waits; the watchdog keeps it held
			return err
		}
		defer l.Unlock(ctx) // the same ctx, so the same owner; works even once ctx is cancelled
		// README end
		return nil
	}
	_ = use(context.Background())
}

func ExampleLock_TryLock_lease() {
	var (
		ctx = context.Background()
		l   *rlock.Lock
	)
	// README begin
	ok, err := l.TryLock(ctx, 0, 10*time.Second)      // one attempt, 10s lease, no watchdog
	ok, err = l.TryLock(ctx, 100*time.Millisecond, 0) // wait up to 100ms, watchdog lease
	// ok == false, err == nil: the wait ended without the lock, ctx still live.
	// README end
	_, _ = ok, err
}

func ExampleLock_Do_lost() {
	var (
		ctx    = context.Background()
		l      *rlock.Lock
		settle func(context.Context) error
	)
	// README begin
	err := l.Do(ctx, func(ctx context.Context) error {
		// ctx is cancelled as soon as the hold is known to be lost:
		// errors.Is(context.Cause(ctx), rlock.ErrLockLost) is then true.
		return settle(ctx)
	})
	// README end
	_ = err
}

func ExampleWithOwner_reentry() {
	var (
		ctx = context.Background()
		l   *rlock.Lock
	)
	// README begin
	ctx = rlock.WithOwner(ctx, "job-42")
	_ = l.Lock(ctx)
	_ = l.Lock(ctx)          // the same owner re-enters: hold count 2
	n, _ := l.HoldCount(ctx) // 2
	_ = l.Unlock(ctx)
	_ = l.Unlock(ctx) // the last level releases the lock
	// README end
	_ = n
}

func ExampleLock_Unlock_anonymous() {
	var (
		ctx = context.Background()
		c   *rlock.Client
	)
	// README begin
	_ = c.GetLock("report").Lock(ctx)   // no owner in ctx
	_ = c.GetLock("report").Unlock(ctx) // another handle, same Client and name: released
	// README end
}

// A name and the same name in braces derive the same keys: the second is
// refused while the first is in use.
func ExampleErrNameConflict() {
	var (
		ctx = context.Background()
		c   *rlock.Client
	)
	// README begin
	_ = c.GetLock("orders:42").Lock(ctx)
	err := c.GetLock("{orders:42}").Lock(ctx) // ErrNameConflict: "orders:42" is in use
	// README end
	_ = err
}

func ExampleErrDeadlock() {
	var (
		ctx           context.Context
		orders, stock *rlock.Lock
		retryLater    func(error) error
	)
	_ = func() error {
		// README begin
		err := orders.Lock(ctx)
		if errors.Is(err, rlock.ErrDeadlock) {
			_ = stock.Unlock(ctx) // what this owner already holds
			return retryLater(err)
		}
		// README end
		return err
	}
}
