package rwlock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/fairlock"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
	"github.com/relock-go/relock/rwlock"
)

// TestOverlappingReadersKeepWriterOut shows the starvation the package
// documentation warns of: readers that hand the read side on to each
// other (each takes it before the one before it leaves) keep a waiting
// writer out for as long as they go on.
func TestOverlappingReadersKeepWriterOut(t *testing.T) {
	c := relocktest.Client(t)
	name := relocktest.Name(t)
	rw := c.GetReadWriteLock(name)
	reader := func(i int) context.Context { return rlock.WithOwner(t.Context(), fmt.Sprint("r", i)) }
	require.NoError(t, rw.ReadLock().Lock(reader(0)))
	w := rlock.WithOwner(t.Context(), "w")
	got := make(chan bool, 1)
	go func() {
		ok, err := rw.WriteLock().TryLock(w, time.Second, 0)
		assert.NoError(t, err)
		got <- ok
	}()
	for i := 1; ; i++ {
		select {
		case ok := <-got:
			require.False(t, ok, "the writer got in between overlapping readers")
			_ = rw.ReadLock().Unlock(reader(i - 1))
			return
		default:
		}
		require.NoError(t, rw.ReadLock().Lock(reader(i)), "reader %d: granted while the writer waits", i)
		require.NoError(t, rw.ReadLock().Unlock(reader(i-1)))
		// The scenario, not a wait: reader i reads for 5ms, and the loop
		// ends when the writer's 1s TryLock gives up.
		time.Sleep(5 * time.Millisecond)
	}
}

// gated is the remedy of the package documentation: a fair lock in front
// of the read-write lock.
type gated struct {
	gate *fairlock.Lock
	rw   *rwlock.ReadWriteLock
}

func (g gated) rlock(ctx context.Context) error {
	if err := g.gate.Lock(ctx); err != nil {
		return err
	}
	if err := g.gate.Unlock(ctx); err != nil {
		return err
	}
	return g.rw.ReadLock().Lock(ctx)
}

func (g gated) lock(ctx context.Context) error {
	if err := g.gate.Lock(ctx); err != nil {
		return err
	}
	err := g.rw.WriteLock().Lock(ctx)
	_ = g.gate.Unlock(ctx)
	return err
}

// TestGateLetsWriterIn: the same overlapping readers, through the gate,
// let a writer in as soon as the readers inside when it came have left.
func TestGateLetsWriterIn(t *testing.T) {
	c := relocktest.Client(t)
	name := relocktest.Name(t)
	g := gated{gate: c.GetFairLock(name + ":gate"), rw: c.GetReadWriteLock(name)}
	t.Cleanup(func() { _, _ = g.gate.ForceUnlock(context.Background()) })
	reader := func(i int) context.Context { return rlock.WithOwner(t.Context(), fmt.Sprint("r", i)) }
	require.NoError(t, g.rlock(reader(0)))
	w := rlock.WithOwner(t.Context(), "w")
	got := make(chan error, 1)
	go func() { got <- g.lock(w) }()
	relocktest.Eventually(t, handoff, "the writer to hold the gate", func() bool {
		held, _ := g.gate.IsLocked(t.Context())
		return held
	})
	// The next reader queues at the gate behind the writer.
	next := make(chan error, 1)
	go func() { next <- g.rlock(reader(1)) }()
	notYet(t, got, "the writer while reader 0 reads")
	require.NoError(t, g.rw.ReadLock().Unlock(reader(0)))
	within(t, got, handoff, "the writer once reader 0 left")
	notYet(t, next, "reader 1 while the writer writes")
	require.NoError(t, g.rw.WriteLock().Unlock(w))
	within(t, next, handoff, "reader 1 after the writer")
	_ = g.rw.ReadLock().Unlock(reader(1))
}
