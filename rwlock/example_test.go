package rwlock_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/rlock"
)

func ExampleReadWriteLock() {
	c, err := rlock.NewClient(rueidis.ClientOption{InitAddress: []string{redistest.Addr()}})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	ctx := context.Background()
	rw := c.GetReadWriteLock("example:catalog")
	a := rlock.WithOwner(ctx, "reader-a")
	b := rlock.WithOwner(ctx, "reader-b")
	w := rlock.WithOwner(ctx, "writer")

	_ = rw.ReadLock().Lock(a)
	_ = rw.ReadLock().Lock(b) // readers share
	ok, _ := rw.WriteLock().TryLock(w, 0, 0)
	fmt.Println("write while reading:", ok)

	_ = rw.ReadLock().Unlock(a)
	_ = rw.ReadLock().Unlock(b)
	ok, _ = rw.WriteLock().TryLock(w, 0, 0)
	fmt.Println("write once the readers left:", ok)
	ok, _ = rw.ReadLock().TryLock(w, 0, 0) // the writer may read too
	fmt.Println("the writer reads:", ok)
	ok, _ = rw.ReadLock().TryLock(a, 0, 0)
	fmt.Println("another owner reads:", ok)
	_ = rw.ReadLock().Unlock(w)
	_ = rw.WriteLock().Unlock(w)
	// Output:
	// write while reading: false
	// write once the readers left: true
	// the writer reads: true
	// another owner reads: false
}

// Readers without an owner work like sync.RWMutex's RLock and RUnlock.
func ExampleLock_Unlock() {
	c, err := rlock.NewClient(rueidis.ClientOption{InitAddress: []string{redistest.Addr()}})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	ctx := context.Background()
	read := c.GetReadWriteLock("example:config").ReadLock()
	_ = read.Lock(ctx) // two anonymous read holds of one Client
	_ = read.Lock(ctx)
	fmt.Println(read.Unlock(ctx), read.Unlock(ctx)) // each releases one
	locked, _ := read.IsLocked(ctx)
	fmt.Println("locked:", locked)
	// Output:
	// <nil> <nil>
	// locked: false
}

// A fair lock in front of the read-write lock keeps a steady stream of
// readers from starving writers (see the package documentation).
func ExampleReadWriteLock_writerGate() {
	c, err := rlock.NewClient(rueidis.ClientOption{InitAddress: []string{redistest.Addr()}})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	ctx := context.Background()
	rw := c.GetReadWriteLock("example:prices")
	gate := c.GetFairLock("example:prices:gate")

	read := func(ctx context.Context, fn func()) error {
		if err := gate.Lock(ctx); err != nil { // wait behind queued writers
			return err
		}
		_ = gate.Unlock(ctx)
		if err := rw.ReadLock().Lock(ctx); err != nil {
			return err
		}
		defer rw.ReadLock().Unlock(ctx)
		fn()
		return nil
	}
	write := func(ctx context.Context, fn func()) error {
		if err := gate.Lock(ctx); err != nil { // new readers queue behind us
			return err
		}
		err := rw.WriteLock().Lock(ctx) // the readers inside drain
		_ = gate.Unlock(ctx)
		if err != nil {
			return err
		}
		defer rw.WriteLock().Unlock(ctx)
		fn()
		return nil
	}

	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_ = write(ctx, func() { fmt.Println("writing") })
	_ = read(ctx, func() { fmt.Println("reading") })
	// Output:
	// writing
	// reading
}

// ExampleReadWriteLock_readme is the README's code, compiled; it is not
// run.
func ExampleReadWriteLock_readme() {
	var (
		ctx = context.Background()
		c   *rlock.Client
	)
	// README begin
	rw := c.GetReadWriteLock("catalog")
	a := rlock.WithOwner(ctx, "reader-a")
	b := rlock.WithOwner(ctx, "reader-b")
	w := rlock.WithOwner(ctx, "writer")

	_ = rw.ReadLock().Lock(a)
	_ = rw.ReadLock().Lock(b)                // readers share
	ok, _ := rw.WriteLock().TryLock(w, 0, 0) // false: readers hold it
	_ = rw.ReadLock().Unlock(a)
	_ = rw.ReadLock().Unlock(b)             // the last reader wakes a waiting writer
	ok, _ = rw.WriteLock().TryLock(w, 0, 0) // true
	ok, _ = rw.ReadLock().TryLock(w, 0, 0)  // true: the writer may read too
	// README end
	_ = ok
}

// ExampleReadWriteLock_gate is the README's writer gate, compiled; it is
// not run.
func ExampleReadWriteLock_gate() {
	var c *rlock.Client
	reader := func(ctx context.Context) error {
		// README begin
		gate := c.GetFairLock("prices:gate")
		rw := c.GetReadWriteLock("prices")

		// reader
		if err := gate.Lock(ctx); err != nil { // behind queued writers
			return err
		}
		_ = gate.Unlock(ctx)
		if err := rw.ReadLock().Lock(ctx); err != nil {
			return err
		}
		defer rw.ReadLock().Unlock(ctx)

		// writer
		if err := gate.Lock(ctx); err != nil { // new readers queue behind
			return err
		}
		err := rw.WriteLock().Lock(ctx) // the readers inside drain
		_ = gate.Unlock(ctx)
		// README end
		return err
	}
	_ = reader
}
