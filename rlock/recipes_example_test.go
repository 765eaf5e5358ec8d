package rlock_test

// The README's recipes: each README region below runs, on the test
// package's throwaway redis-server, inside an Example whose output is
// checked.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/fence"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/rlock"
)

// newClient returns a Client on the test package's redis-server.
func newClient(opts ...rlock.Option) *rlock.Client {
	c, err := rlock.NewClient(rueidis.ClientOption{InitAddress: []string{redistest.Addr()}}, opts...)
	if err != nil {
		panic(err)
	}
	return c
}

// One replica at a time: the others wait their turn.
func ExampleLock_Do_oneAtATime() {
	c := newClient()
	defer c.Close()
	ctx := context.Background()
	migrate := func(context.Context) error {
		fmt.Println("migrating")
		return nil
	}

	// README begin
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute) // bounds the wait and the work
	defer cancel()
	err := c.GetLock("schema-migration").Do(ctx, func(ctx context.Context) error {
		// One replica at a time runs this; the others wait their turn.
		// If the lock is lost, ctx ends (its cause matches rlock.ErrLockLost).
		return migrate(ctx)
	})
	// README end
	fmt.Println(err)
	// Output:
	// migrating
	// <nil>
}

// Skip the work when another replica is doing it.
func ExampleLock_TryDo() {
	c := newClient()
	defer c.Close()
	ctx := context.Background()
	other := rlock.WithOwner(ctx, "another-replica")
	if err := c.GetLock("cleanup").Lock(other); err != nil {
		panic(err)
	}
	cleanup := func(context.Context) error {
		fmt.Println("cleaning up")
		return nil
	}

	// README begin
	ran, err := c.GetLock("cleanup").TryDo(ctx, 0, func(ctx context.Context) error {
		return cleanup(ctx)
	})
	if err == nil && !ran {
		fmt.Println("another replica is cleaning up: skipped")
	}
	// README end

	if err := c.GetLock("cleanup").Unlock(other); err != nil {
		panic(err)
	}
	ran, err = c.GetLock("cleanup").TryDo(ctx, 0, cleanup)
	fmt.Println(ran, err)
	// Output:
	// another replica is cleaning up: skipped
	// cleaning up
	// true <nil>
}

// A Hold keeps a lock across calls and goroutines, and releases itself:
// no owner to carry around.
func ExampleLock_Acquire() {
	c := newClient()
	defer c.Close()
	stopped := make(chan error, 1)
	consume := func(ctx context.Context) {
		<-ctx.Done()
		stopped <- context.Cause(ctx)
	}
	run := func(ctx context.Context) error {
		// README begin
		h, err := c.GetLock("partition:7").Acquire(ctx) // the Hold knows its owner
		if err != nil {
			return err
		}
		go consume(h.Context()) // h.Context() ends with the hold: released, lost, or Close
		// ... later, in any goroutine, with any context:
		if err := h.Release(ctx); err != nil { // a second Release is ErrNotHeld
			return err
		}
		// README end
		return nil
	}
	fmt.Println(run(context.Background()))
	fmt.Println("consume stopped:", <-stopped)
	// Output:
	// <nil>
	// consume stopped: context canceled
}

// Lock and Unlock act for the owner in their context: an Unlock with
// another context does not release the lock.
func ExampleLock_Unlock_otherOwner() {
	c := newClient()
	defer c.Close()
	ctx := context.Background()

	// README begin
	l := c.GetLock("partition:8")
	job := rlock.WithOwner(ctx, "job-42")
	_ = l.Lock(job)
	err := l.Unlock(ctx)                          // ctx is not job: it carries no owner
	fmt.Println(errors.Is(err, rlock.ErrNotHeld)) // true, and the watchdog keeps the lock held
	// README end

	locked, _ := l.IsLocked(ctx)
	fmt.Println("locked:", locked)
	fmt.Println(l.Unlock(job))
	// Output:
	// true
	// locked: true
	// <nil>
}

// A fencing token, checked by the resource, stops the writes of a holder
// whose lease ran out while it was paused.
func ExampleFencedLock() {
	c := newClient()
	defer c.Close()
	ctx := context.Background()
	write := func(ctx context.Context) error {
		// README begin
		h, err := c.GetFencedLock("ledger").Acquire(ctx)
		if err != nil {
			return err
		}
		defer h.Release(ctx)
		balance := fence.NewRegister(c.Redis(), "ledger:balance") // a value that checks tokens
		// Refused, with fence.ErrStaleToken, once a later holder has
		// written: this one's lease ran out while it was paused.
		return balance.Write(ctx, h.Token(), "100")
		// README end
	}
	fmt.Println(write(ctx))

	// A holder with an older token, late: refused.
	balance := fence.NewRegister(c.Redis(), "ledger:balance")
	_, token, _ := balance.Read(ctx)
	err := balance.Write(ctx, token-1, "90")
	fmt.Println(errors.Is(err, fence.ErrStaleToken))
	// Output:
	// <nil>
	// true
}

// Three calls at a time to an API, across every process.
func ExampleClient_GetSemaphore() {
	c := newClient()
	defer c.Close()
	geocode := func(_ context.Context, address string) error {
		fmt.Println("geocoding", address)
		return nil
	}
	call := func(ctx context.Context, address string) error {
		// README begin
		// Permits of a worker that crashed come back within 5s.
		api := c.GetSemaphore("geocoder-api").WithWatchdogTimeout(5 * time.Second)
		if _, err := api.TrySetPermits(ctx, 3); err != nil { // the first call sets 3; later ones change nothing
			return err
		}
		p, err := api.AcquirePermit(ctx, 0) // waits for one of the 3; renewed until Release
		if err != nil {
			return err
		}
		defer p.Release(ctx)
		return geocode(p.Context(), address) // p.Context() ends if the permit is lost
		// README end
	}
	ctx := context.Background()
	fmt.Println(call(ctx, "1 Main St"))
	n, _ := c.GetSemaphore("geocoder-api").AvailablePermits(ctx)
	fmt.Println("available:", n)
	// Output:
	// geocoding 1 Main St
	// <nil>
	// available: 3
}

// Learn that a lock was lost: the Client's handler hears of every loss,
// and the hold's context ends with it.
func ExampleWithLostHandler() {
	opt := rueidis.ClientOption{InitAddress: []string{redistest.Addr()}}
	other := newClient()
	defer other.Close()
	consume := func(held context.Context) error {
		// Someone deletes the lock: the holder hears of it at once.
		if _, err := other.GetLock("partition:9").ForceUnlock(context.Background()); err != nil {
			return err
		}
		<-held.Done()
		return context.Cause(held)
	}
	run := func(ctx context.Context) error {
		// README begin
		c, err := rlock.NewClient(opt, rlock.WithLostHandler(func(name, owner string, cause error) {
			slog.Error("lock lost", "lock", name, "owner", owner, "cause", cause) // any hold of c
		}))
		if err != nil {
			return err
		}
		defer c.Close()

		l := c.GetLock("partition:9")
		if err := l.Lock(ctx); err != nil {
			return err
		}
		defer l.Unlock(ctx)
		held := l.HoldContext(ctx) // ends with the hold; context.Cause(held) says why
		return consume(held)       // after a loss, context.Cause(held) matches rlock.ErrLockLost
		// README end
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := run(ctx)
	fmt.Println("lost:", errors.Is(err, rlock.ErrLockLost))
	// Output: lost: true
}

// A pool of slots shared with Java services (Redisson's getSemaphore).
func ExampleClient_GetCountingSemaphore() {
	c := newClient()
	defer c.Close()
	render := func(_ context.Context, job string) error {
		fmt.Println("rendering", job)
		return nil
	}
	run := func(ctx context.Context, job string) error {
		// README begin
		// The slots Java's redisson.getSemaphore("render-slots") shares.
		slots := c.GetCountingSemaphore("render-slots")
		if _, err := slots.TrySetPermits(ctx, 8); err != nil { // the first call sets 8
			return err
		}
		if err := slots.Acquire(ctx, 2); err != nil { // a big job takes 2 slots: both or none
			return err
		}
		defer slots.Release(ctx, 2) // works after ctx ended; a process that dies first never gives them back
		return render(ctx, job)
		// README end
	}
	ctx := context.Background()
	fmt.Println(run(ctx, "poster"))
	n, _ := c.GetCountingSemaphore("render-slots").AvailablePermits(ctx)
	fmt.Println("available:", n)
	// Output:
	// rendering poster
	// <nil>
	// available: 8
}

// At most 100 messages a minute, across every process and Java service.
func ExampleClient_GetRateLimiter() {
	c := newClient()
	defer c.Close()
	send := func(_ context.Context, to string) error {
		fmt.Println("sending to", to)
		return nil
	}
	notify := func(ctx context.Context, to string) error {
		// README begin
		// The limiter Java's redisson.getRateLimiter("sms") shares.
		sms := c.GetRateLimiter("sms")
		if _, err := sms.TrySetRate(ctx, 100, time.Minute); err != nil { // the first call sets it
			return err
		}
		if err := sms.Acquire(ctx, 1); err != nil { // sleeps until the oldest grants leave the minute
			return err
		}
		return send(ctx, to)
		// README end
	}
	ctx := context.Background()
	fmt.Println(notify(ctx, "+15550100"))
	n, _ := c.GetRateLimiter("sms").AvailablePermits(ctx)
	fmt.Println("left this minute:", n)
	// Output:
	// sending to +15550100
	// <nil>
	// left this minute: 99
}

// Many waiters for a short lock, with no pub/sub: a spin lock.
func ExampleSpinLock() {
	c := newClient()
	defer c.Close()
	ctx := context.Background()
	bump := func(context.Context) error {
		fmt.Println("counted")
		return nil
	}

	// README begin
	// The lock Java's redisson.getSpinLock("counter") shares.
	err := c.GetSpinLock("counter").Do(ctx, func(ctx context.Context) error {
		return bump(ctx) // waiters back off (1ms doubling to 128ms) instead of subscribing
	})
	// README end
	fmt.Println(err)
	// Output:
	// counted
	// <nil>
}
