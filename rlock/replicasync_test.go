package rlock_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
	"github.com/relock-go/relock/semaphore"
)

// commandCounts counts the commands a Client sends, by name.
type commandCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *commandCounts) get(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name]
}

// commandCountingClient is a Client on rdb whose commands are counted.
func commandCountingClient(t *testing.T, rdb rueidis.Client, opts ...rlock.Option) (*rlock.Client, *commandCounts) {
	t.Helper()
	counts := &commandCounts{n: map[string]int{}}
	tap := relocktest.NewTap(rdb, func(args []string) func(rueidis.RedisResult) {
		counts.mu.Lock()
		counts.n[strings.ToUpper(args[0])]++
		counts.mu.Unlock()
		return nil
	})
	c, err := rlock.New(tap, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c, counts
}

// startReplica starts a replica of master and waits until master counts
// it connected and in sync.
func startReplica(t testing.TB, master *redistest.Server) *redistest.Server {
	t.Helper()
	replica := redistest.Start(t, "--replicaof", "127.0.0.1", strconv.Itoa(master.Port))
	raw := master.Client(t)
	relocktest.Eventually(t, 20*time.Second, "the replica to connect", func() bool {
		info, err := raw.Do(context.Background(), raw.B().Info().Section("replication").Build()).ToString()
		return err == nil && strings.Contains(info, "connected_slaves:1") && strings.Contains(info, "state=online")
	})
	return replica
}

// lockCycle takes and releases a lock and a semaphore permit.
func lockCycle(t *testing.T, c *rlock.Client, name string) {
	t.Helper()
	ctx := rlock.WithOwner(t.Context(), "a")
	l := c.GetLock(name)
	require.NoError(t, l.Lock(ctx))
	require.NoError(t, l.Unlock(ctx))
	s := c.GetSemaphore(name + ":sem")
	_, err := s.TrySetPermits(ctx, 1)
	require.NoError(t, err)
	id, err := s.Acquire(ctx, time.Minute)
	require.NoError(t, err)
	require.NoError(t, s.Release(ctx, id))
}

// TestReplicaSyncDefault: by default, lock and permit operations wait
// (WAIT) for the replicas the server counts, and send no WAIT when there
// are none; WithoutReplicaSync sends none; an acquisition that no replica
// confirms within 1s fails with ErrReplicaSync and is given back.
func TestReplicaSyncDefault(t *testing.T) {
	t.Run("no replica", func(t *testing.T) {
		srv := redistest.Start(t)
		c, counts := commandCountingClient(t, srv.Client(t))
		for i := range 3 {
			lockCycle(t, c, "sync:alone:"+strconv.Itoa(i))
		}
		assert.Zero(t, counts.get("WAIT"), "WAIT sent without replicas")
		assert.Positive(t, counts.get("INFO"), "INFO sent to count the replicas")
	})

	master := redistest.Start(t)
	replica := startReplica(t, master)
	ctx := rlock.WithOwner(t.Context(), "a")

	t.Run("one replica", func(t *testing.T) {
		c, counts := commandCountingClient(t, master.Client(t))
		lockCycle(t, c, "sync:one")
		// Lock and Unlock, the permit's Acquire and Release; TrySetPermits
		// is not a lock operation.
		assert.Equal(t, 4, counts.get("WAIT"), "WAIT sent")
		l := c.GetLock("sync:held")
		require.NoError(t, l.Lock(ctx))
		// WAIT returned: the replica has the lock already.
		n, err := replica.Do(t.Context(), "EXISTS", "sync:held")
		require.NoError(t, err)
		v, _ := n.AsInt64()
		assert.EqualValues(t, 1, v, "the replica has the lock once Lock returned")
		require.NoError(t, l.Unlock(ctx))
	})

	t.Run("every kind", func(t *testing.T) {
		c, counts := commandCountingClient(t, master.Client(t))
		fixed, fixedCounts := commandCountingClient(t, master.Client(t), rlock.WithReplicaSync(1, time.Second))
		name := relocktest.Name(t)
		waits := func(counts *commandCounts, what string, want int, op func() error) {
			t.Helper()
			before := counts.get("WAIT")
			require.NoError(t, op(), what)
			assert.Equal(t, want, counts.get("WAIT")-before, "WAITs sent by %s", what)
		}
		lockUnlock := func(what string, lock, unlock func(context.Context) error) {
			t.Helper()
			waits(counts, what+" Lock", 1, func() error { return lock(ctx) })
			waits(counts, what+" Lock again (re-entry)", 1, func() error { return lock(ctx) })
			waits(counts, what+" Unlock", 1, func() error { return unlock(ctx) })
			waits(counts, what+" last Unlock", 1, func() error { return unlock(ctx) })
		}
		l := c.GetLock(name + ":lock")
		lockUnlock("Lock", l.Lock, l.Unlock)
		f := c.GetFencedLock(name + ":fenced")
		lockUnlock("FencedLock", f.Lock, f.Unlock)
		fair := c.GetFairLock(name + ":fair")
		lockUnlock("FairLock", fair.Lock, fair.Unlock)
		rw := c.GetReadWriteLock(name + ":rw")
		lockUnlock("ReadLock", rw.ReadLock().Lock, rw.ReadLock().Unlock)
		lockUnlock("WriteLock", rw.WriteLock().Lock, rw.WriteLock().Unlock)
		spin := c.GetSpinLock(name + ":spin")
		lockUnlock("SpinLock", spin.Lock, spin.Unlock)

		sem := c.GetSemaphore(name + ":sem")
		waits(counts, "Semaphore.TrySetPermits", 0, func() error { _, err := sem.TrySetPermits(ctx, 1); return err })
		var id string
		waits(counts, "Semaphore.Acquire", 1, func() (err error) { id, err = sem.Acquire(ctx, time.Minute); return err })
		waits(counts, "Semaphore.UpdateLease", 1, func() error { return sem.UpdateLease(ctx, id, time.Hour) })
		waits(counts, "Semaphore.Release", 1, func() error { return sem.Release(ctx, id) })
		waits(counts, "Semaphore.AddPermits", 0, func() error { return sem.AddPermits(ctx, 1) })
		var permits []*semaphore.Permit
		waits(counts, "Semaphore.AcquirePermits(2)", 1, func() (err error) { permits, err = sem.AcquirePermits(ctx, 2, time.Minute); return err })
		for _, p := range permits {
			waits(counts, "Permit.Release", 1, func() error { return p.Release(ctx) })
		}

		cs := c.GetCountingSemaphore(name + ":counting")
		waits(counts, "Counting.TrySetPermits", 0, func() error { _, err := cs.TrySetPermits(ctx, 2); return err })
		waits(counts, "Counting.Acquire", 1, func() error { return cs.Acquire(ctx, 2) })
		waits(counts, "Counting.Release", 1, func() error { return cs.Release(ctx, 2) })

		// A rate limiter's grant is no lock operation: the default does not
		// wait for it; WithReplicaSync(n, timeout) does.
		rl := c.GetRateLimiter(name + ":rate")
		waits(counts, "Limiter.TrySetRate", 0, func() error { _, err := rl.TrySetRate(ctx, 10, time.Minute); return err })
		waits(counts, "Limiter.Acquire", 0, func() error { return rl.Acquire(ctx, 1) })
		frl := fixed.GetRateLimiter(name + ":rate")
		waits(fixedCounts, "Limiter.Acquire with WithReplicaSync(1, 1s)", 1, func() error { return frl.Acquire(ctx, 1) })
	})

	t.Run("WAIT refused", func(t *testing.T) {
		// A user whose ACL refuses WAIT (as a proxy that does not know it
		// does): the default waits for nothing and fails nothing; a number
		// asked for with WithReplicaSync is refused as before.
		_, err := master.Do(t.Context(), "ACL", "SETUSER", "nowait", "on", ">pw", "~*", "&*", "+@all", "-wait")
		require.NoError(t, err)
		opt := master.ClientOption()
		opt.Username, opt.Password = "nowait", "pw"
		rdb, err := rueidis.NewClient(opt)
		require.NoError(t, err)
		t.Cleanup(rdb.Close)
		c, counts := commandCountingClient(t, rdb)
		lockCycle(t, c, "sync:refused")
		assert.Positive(t, counts.get("WAIT"), "WAIT sent to a server with a replica")
		fixed, _ := commandCountingClient(t, rdb, rlock.WithReplicaSync(1, time.Second))
		err = fixed.GetLock("sync:refused:fixed").Lock(ctx)
		require.ErrorIs(t, err, rlock.ErrReplicaSync)
		require.ErrorIs(t, err, rlock.ErrNotAcquired)
	})

	t.Run("off", func(t *testing.T) {
		c, counts := commandCountingClient(t, master.Client(t), rlock.WithoutReplicaSync())
		lockCycle(t, c, "sync:off")
		assert.Zero(t, counts.get("WAIT"), "WAIT sent with WithoutReplicaSync")
		assert.Zero(t, counts.get("INFO"), "INFO sent with WithoutReplicaSync")
		c, counts = commandCountingClient(t, master.Client(t), rlock.WithReplicaSync(0, 0))
		lockCycle(t, c, "sync:off0")
		assert.Zero(t, counts.get("WAIT"), "WAIT sent with WithReplicaSync(0, 0)")
	})

	t.Run("replica stopped", func(t *testing.T) {
		c, _ := commandCountingClient(t, master.Client(t))
		require.NoError(t, replica.Pause())
		t.Cleanup(func() { _ = replica.Resume() })
		l := c.GetLock("sync:stopped")
		start := time.Now()
		err := l.Lock(ctx)
		took := time.Since(start)
		require.ErrorIs(t, err, rlock.ErrReplicaSync)
		require.ErrorIs(t, err, rlock.ErrNotAcquired)
		assert.GreaterOrEqual(t, took, 900*time.Millisecond, "Lock returned before the replica wait")
		assert.Less(t, took, 5*time.Second, "Lock waited past the 1s replica wait")
		locked, err := l.IsLocked(context.WithoutCancel(ctx))
		require.NoError(t, err)
		assert.False(t, locked, "the unconfirmed acquisition was not given back")
		s := c.GetSemaphore("sync:stopped:sem")
		_, err = s.TrySetPermits(ctx, 1)
		require.NoError(t, err)
		_, err = s.Acquire(ctx, time.Minute)
		require.ErrorIs(t, err, rlock.ErrReplicaSync)
		avail, err := s.AvailablePermits(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, avail, "the unconfirmed permit was not given back")
		require.NoError(t, s.AddPermits(ctx, 1))
		_, err = s.AcquirePermits(ctx, 2, time.Minute)
		require.ErrorIs(t, err, rlock.ErrReplicaSync)
		avail, err = s.AvailablePermits(ctx)
		require.NoError(t, err)
		assert.Equal(t, 2, avail, "the unconfirmed permits of AcquirePermits were not given back")
		cs := c.GetCountingSemaphore("sync:stopped:counting")
		_, err = cs.TrySetPermits(ctx, 2)
		require.NoError(t, err)
		err = cs.Acquire(ctx, 2)
		require.ErrorIs(t, err, rlock.ErrReplicaSync)
		require.ErrorIs(t, err, rlock.ErrNotAcquired)
		avail, err = cs.AvailablePermits(ctx)
		require.NoError(t, err)
		assert.Equal(t, 2, avail, "the unconfirmed permits of the counting semaphore were not given back")
	})
}

// BenchmarkReplicaSync is the cost of replica sync on the uncontended
// path (Lock and Unlock): on a server without replicas (the default sends
// no WAIT) and on one with a replica, replica sync on (the default) and
// off.
func BenchmarkReplicaSync(b *testing.B) {
	alone := redistest.Start(b)
	master := redistest.Start(b)
	startReplica(b, master)
	for _, srv := range []struct {
		name string
		s    *redistest.Server
	}{{"no replica", alone}, {"one replica", master}} {
		for _, mode := range []struct {
			name string
			opts []rlock.Option
		}{{"default", nil}, {"off", []rlock.Option{rlock.WithoutReplicaSync()}}} {
			b.Run(srv.name+"/"+mode.name, func(b *testing.B) {
				c := relocktest.ClientOn(b, srv.s, mode.opts...)
				l := c.GetLock(relocktest.Name(b))
				ctx := rlock.WithOwner(b.Context(), "bench")
				b.ReportAllocs()
				for b.Loop() {
					require.NoError(b, l.Lock(ctx))
					require.NoError(b, l.Unlock(ctx))
				}
			})
		}
	}
}

// heldCall is a script sent with WAIT that holdingClient holds back, as a
// network that delays it would.
type heldCall struct {
	ctx       context.Context // the context the Client sent it with
	release   chan struct{}   // closed by the test: deliver it
	forwarded chan struct{}   // closed when the server answered it
}

// holdingClient passes every command on, except the next DoMulti that
// carries WAIT once armed: that one reaches the server only when the test
// releases it, however the Client's context ends meanwhile (its bytes are
// on the wire); the Client gets its replies, or its context's error when
// the context ends first, as rueidis answers.
type holdingClient struct {
	rueidis.Client
	armed atomic.Bool
	held  chan heldCall
}

func (h *holdingClient) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	wait := false
	for _, cmd := range cmds {
		wait = wait || strings.EqualFold(cmd.Commands()[0], "WAIT")
	}
	if !wait || !h.armed.CompareAndSwap(true, false) {
		return h.Client.DoMulti(ctx, cmds...)
	}
	hc := heldCall{ctx: ctx, release: make(chan struct{}), forwarded: make(chan struct{})}
	h.held <- hc
	res := make(chan []rueidis.RedisResult, 1)
	go func() {
		<-hc.release
		res <- h.Client.DoMulti(context.WithoutCancel(ctx), cmds...)
		close(hc.forwarded)
	}()
	select {
	case r := <-res:
		return r
	case <-ctx.Done():
		out := make([]rueidis.RedisResult, len(cmds))
		for i := range out {
			out[i] = rueidis.NewErrorResult(ctx.Err())
		}
		return out
	}
}

// TestReplicaSyncGiveBackAfterScript: when the caller's context ends while
// an acquisition sent with WAIT is in flight, the Client still reads the
// script's reply and gives back what it won after it. (The script and WAIT
// go on a connection of rueidis' blocking pool: a Client that gave up on
// the reply at once settled the attempt on its other connection before
// the script reached the server, and the script then left a hold that
// nobody renews, locked until its lease ran out.)
func TestReplicaSyncGiveBackAfterScript(t *testing.T) {
	master := redistest.Start(t)
	startReplica(t, master)
	hold := &holdingClient{Client: master.Client(t), held: make(chan heldCall, 1)}
	c, err := rlock.New(hold)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	l := c.GetLock(relocktest.Name(t))
	owner := rlock.WithOwner(t.Context(), "a")
	// The replicas are counted and the script's body sent.
	require.NoError(t, l.Lock(owner))
	require.NoError(t, l.Unlock(owner))

	hold.armed.Store(true)
	ctx, cancel := context.WithCancel(owner)
	done := make(chan error, 1)
	go func() { done <- l.Lock(ctx) }()
	h := <-hold.held
	cancel()
	var lockErr error
	returned := false
	select {
	case <-h.ctx.Done():
		// The Client gave up on the script's reply: let it finish what it
		// does then (settle the attempt) before the script arrives.
		lockErr, returned = <-done, true
	case lockErr = <-done:
		returned = true
	case <-time.After(time.Second / 2):
		// The Client still waits for the reply (its context for the
		// script outlives the caller's by the replica timeout, 1s).
	}
	close(h.release)
	<-h.forwarded
	if !returned {
		lockErr = <-done
	}
	require.ErrorIs(t, lockErr, context.Canceled)
	locked, err := l.IsLocked(context.WithoutCancel(owner))
	require.NoError(t, err)
	assert.False(t, locked, "the lock is held after a Lock that failed: its script landed after the give-back")
}
