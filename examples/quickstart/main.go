// Command quickstart runs a piece of work under a distributed lock: the
// first program of relock's README. Start several at once and they take
// turns. It reaches Redis at $RELOCK_REDIS, or 127.0.0.1:6379.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/rlock"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	addr := os.Getenv("RELOCK_REDIS")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	c, err := rlock.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
	if err != nil {
		return err
	}
	defer c.Close() // stops lease renewals and subscriptions, and waits for them

	lock := c.GetLock("orders:42") // a handle: no I/O, no error
	return lock.Do(ctx, func(ctx context.Context) error {
		// One process at a time runs this, however many run the program.
		// If the lock is lost, ctx is cancelled (its cause matches rlock.ErrLockLost).
		fmt.Println("settling order 42")
		return nil
	})
}
