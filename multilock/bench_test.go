package multilock_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/multilock"
	"github.com/relock-go/relock/rlock"
)

// BenchmarkRedLock is an uncontended RedLock acquisition and release over
// 3 and 5 independent redis-servers (one Client each), on the watchdog
// lease: one round of TryLock on every master, then an Unlock on every
// master. The allocations per op are the RedLock's and its locks'
// together; the "single" case is one of its locks alone, taken and
// released the same way, for the share of one underlying lock. The "do"
// case is Do, whose hold is watched: each lock's Client then listens for
// a force-unlock of it, and hears every release. Each case has lock names
// of its own, so that none pays for what another left subscribed.
func BenchmarkRedLock(b *testing.B) {
	for _, n := range []int{3, 5} {
		var clients []*rlock.Client
		for range n {
			clients = append(clients, relocktest.ClientOn(b, redistest.Start(b)))
		}
		locks := func(name string) []multilock.Locker {
			ls := make([]multilock.Locker, n)
			for i, c := range clients {
				ls[i] = c.GetLock(name)
			}
			return ls
		}
		owners := []struct {
			desc string
			ctx  context.Context
		}{
			{"anonymous", context.Background()},
			{"owner", rlock.WithOwner(context.Background(), "bench")},
		}
		for _, o := range owners {
			name := func(op string) string { return fmt.Sprintf("relock-bench:redlock:%s:%d:%s", op, n, o.desc) }
			b.Run(fmt.Sprintf("lock/servers=%d/%s", n, o.desc), func(b *testing.B) {
				benchLockUnlock(b, o.ctx, multilock.NewRedLock(locks(name("lock"))...))
			})
			b.Run(fmt.Sprintf("do/servers=%d/%s", n, o.desc), func(b *testing.B) {
				rl := multilock.NewRedLock(locks(name("do"))...)
				b.ReportAllocs()
				for b.Loop() {
					require.NoError(b, rl.Do(o.ctx, func(context.Context) error { return nil }), "Do")
				}
			})
			if n == 3 {
				b.Run(fmt.Sprintf("single/%s", o.desc), func(b *testing.B) {
					benchLockUnlock(b, o.ctx, locks(name("single"))[0])
				})
			}
		}
	}
}

func benchLockUnlock(b *testing.B, ctx context.Context, l multilock.Locker) {
	b.ReportAllocs()
	for b.Loop() {
		ok, err := l.TryLock(ctx, 0, 0)
		require.NoError(b, err, "TryLock")
		require.True(b, ok, "TryLock")
		require.NoError(b, l.Unlock(ctx), "Unlock")
	}
}
