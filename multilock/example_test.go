package multilock_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/multilock"
	"github.com/relock-go/relock/rlock"
)

// startServers starts n throwaway redis-servers for an example and returns
// their addresses and a function that stops them.
func startServers(n int) ([]string, func()) {
	var srvs []*redistest.Server
	stop := func() {
		for _, s := range srvs {
			_ = s.Stop()
		}
	}
	var addrs []string
	for range n {
		s, err := redistest.StartServer()
		if err != nil {
			stop()
			panic(err)
		}
		srvs = append(srvs, s)
		addrs = append(addrs, s.Addr)
	}
	return addrs, stop
}

func ExampleNew() {
	addrs, stop := startServers(1)
	defer stop()
	c, err := rlock.NewClient(rueidis.ClientOption{InitAddress: addrs})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	// Both accounts or neither; the order of the arguments does not matter.
	transfer := multilock.New(c.GetLock("account:2"), c.GetLock("account:1"))
	fmt.Println(transfer.Name())
	err = transfer.Do(context.Background(), func(ctx context.Context) error {
		// ctx is cancelled with cause multilock.ErrLockLost if a lock is lost.
		fmt.Println("moving money")
		return nil
	})
	fmt.Println(err)
	// Output:
	// multilock[account:1,account:2]
	// moving money
	// <nil>
}

func ExampleNewRedLock() {
	addrs, stop := startServers(3) // three independent masters
	defer stop()
	var locks []multilock.Locker
	for _, addr := range addrs {
		c, err := rlock.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
		if err != nil {
			panic(err)
		}
		defer c.Close()
		locks = append(locks, c.GetLock("report"))
	}

	rl := multilock.NewRedLock(locks...)
	ctx := rlock.WithOwner(context.Background(), "replica-a")
	ok, err := rl.TryLock(ctx, time.Second, 10*time.Second) // fixed 10s lease
	fmt.Println("held:", ok, err, "quorum:", rl.Quorum())
	if ok {
		_ = rl.Unlock(ctx)
	}
	// Output: held: true <nil> quorum: 2
}

func ExampleRedLock_Do() {
	addrs, stop := startServers(3)
	defer stop()
	var locks []multilock.Locker
	for _, addr := range addrs {
		c, err := rlock.NewClient(rueidis.ClientOption{InitAddress: []string{addr}},
			rlock.WithWatchdogTimeout(10*time.Second))
		if err != nil {
			panic(err)
		}
		defer c.Close()
		locks = append(locks, c.GetLock("migration"))
	}

	// Tell the RedLock the Clients' watchdog timeout, for its validity.
	rl := multilock.NewRedLock(locks...).With(multilock.WithWatchdogTimeout(10 * time.Second))
	err := rl.Do(context.Background(), func(ctx context.Context) error {
		// The watchdogs keep a majority held; ctx is cancelled with cause
		// multilock.ErrLockLost when fewer than a majority remain.
		fmt.Println("migrating")
		return nil
	})
	fmt.Println(err)
	// Output:
	// migrating
	// <nil>
}

// ExampleNewRedLock_clients is the README's code, compiled; it is not run.
func ExampleNewRedLock_clients() {
	var (
		ctx                   = context.Background()
		c, c1, c2, c3, c4, c5 *rlock.Client
		move                  func(context.Context) error
	)
	// README begin
	transfer := multilock.New(c.GetLock("account:1"), c.GetLock("account:2")) // both, or neither
	err := transfer.Do(ctx, func(ctx context.Context) error { return move(ctx) })

	// One rlock.Client per independent master.
	rl := multilock.NewRedLock(c1.GetLock("job"), c2.GetLock("job"), c3.GetLock("job"),
		c4.GetLock("job"), c5.GetLock("job"))
	ok, err := rl.TryLock(ctx, time.Second, 10*time.Second)
	// README end
	_, _ = ok, err
}
