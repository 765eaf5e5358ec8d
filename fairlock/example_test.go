package fairlock_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/rlock"
)

// client returns a Client on a throwaway redis-server.
func client() *rlock.Client {
	c, err := rlock.NewClient(rueidis.ClientOption{InitAddress: []string{redistest.Addr()}})
	if err != nil {
		panic(err)
	}
	return c
}

// A fair lock is handed out in the order its waiters arrived: Lock waits
// in the queue for its turn.
func ExampleLock() {
	c := client()
	defer c.Close()
	ctx := rlock.WithOwner(context.Background(), "report-job")
	l := c.GetFairLock("example:fair:report")
	if err := l.Lock(ctx); err != nil {
		panic(err)
	}
	fmt.Println("writing the report")
	if err := l.Unlock(ctx); err != nil {
		panic(err)
	}
	// Output: writing the report
}

// TryLock with a wait keeps the caller's place in the queue while it
// waits, and leaves the queue when the wait ends without the lock.
func ExampleLock_TryLock() {
	c := client()
	defer c.Close()
	l := c.GetFairLock("example:fair:try")
	a := rlock.WithOwner(context.Background(), "a")
	b := rlock.WithOwner(context.Background(), "b")

	ok, err := l.TryLock(a, 0, 10*time.Second) // one attempt, fixed 10s lease
	fmt.Println("a:", ok, err)
	ok, err = l.TryLock(b, 100*time.Millisecond, 0) // queued for up to 100ms
	fmt.Println("b:", ok, err)
	_ = l.Unlock(a)
	// Output:
	// a: true <nil>
	// b: false <nil>
}

func ExampleLock_Do() {
	c := client()
	defer c.Close()
	err := c.GetFairLock("example:fair:do").Do(context.Background(), func(ctx context.Context) error {
		// ctx is cancelled with cause rlock.ErrLockLost if the hold is lost.
		fmt.Println("in turn")
		return nil
	})
	fmt.Println(err)
	// Output:
	// in turn
	// <nil>
}
