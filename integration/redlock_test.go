package integration_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/multilock"
	"github.com/relock-go/relock/rlock"
)

// masters is n independent redis-servers, each with its own rlock.Client,
// and a raw client on each to look at what the locks wrote.
type masters struct {
	srvs    []*redistest.Server
	clients []*rlock.Client
	raws    []rueidis.Client
}

// startMasters starts n servers in parallel; they and their clients are
// stopped when t ends.
func startMasters(t testing.TB, n int, opts ...rlock.Option) *masters {
	t.Helper()
	m := &masters{srvs: make([]*redistest.Server, n)}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { m.srvs[i], errs[i] = redistest.StartServer() })
	}
	wg.Wait()
	for i, srv := range m.srvs {
		if srv != nil {
			t.Cleanup(func() { _ = srv.Stop() })
		}
		require.NoError(t, errs[i], "start redis-server %d", i)
	}
	for _, srv := range m.srvs {
		m.raws = append(m.raws, srv.Client(t))
		m.clients = append(m.clients, relocktest.ClientOn(t, srv, opts...))
	}
	return m
}

// locks returns the lock name on each master.
func (m *masters) locks(name string) []*rlock.Lock {
	ls := make([]*rlock.Lock, len(m.clients))
	for i, c := range m.clients {
		ls[i] = c.GetLock(name)
	}
	return ls
}

func lockers(ls []*rlock.Lock) []multilock.Locker {
	out := make([]multilock.Locker, len(ls))
	for i, l := range ls {
		out[i] = l
	}
	return out
}

// fields returns the fields of hash name on master i.
func (m *masters) fields(t testing.TB, i int, name string) map[string]string {
	t.Helper()
	return relocktest.HGetAll(t, m.raws[i], name)
}

// ownFields returns the fields of hash name on master i written by the
// Client of master i, or an error when the master does not answer. It
// never fails the test, so conditions of relocktest.Eventually use it.
func (m *masters) ownFields(i int, name string) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	fields, err := m.raws[i].Do(ctx, m.raws[i].B().Hgetall().Key(name).Build()).AsStrMap()
	if err != nil {
		return nil, err
	}
	var own []string
	for f := range fields {
		if strings.HasPrefix(f, m.clients[i].ID()+":") {
			own = append(own, f)
		}
	}
	return own, nil
}

// pttlNow is the PTTL of name on master i, or -3 when the master does not
// answer: for conditions of relocktest.Eventually.
func (m *masters) pttlNow(i int, name string) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	ms, err := m.raws[i].Do(ctx, m.raws[i].B().Pttl().Key(name).Build()).AsInt64()
	if err != nil {
		return -3
	}
	return time.Duration(ms) * time.Millisecond
}

func (m *masters) exists(t testing.TB, i int, name string) bool {
	t.Helper()
	n, err := m.raws[i].Do(t.Context(), m.raws[i].B().Exists().Key(name).Build()).AsInt64()
	require.NoError(t, err, "EXISTS %s on master %d", name, i)
	return n == 1
}

func (m *masters) pttl(t testing.TB, i int, name string) time.Duration {
	t.Helper()
	ms, err := m.raws[i].Do(t.Context(), m.raws[i].B().Pttl().Key(name).Build()).AsInt64()
	require.NoError(t, err, "PTTL %s on master %d", name, i)
	return time.Duration(ms) * time.Millisecond
}

// waitFree waits until no master of idx has a field of its Client in name.
func (m *masters) waitFree(t testing.TB, name string, idx ...int) {
	t.Helper()
	for _, i := range idx {
		relocktest.Eventually(t, 5*time.Second, fmt.Sprintf("no hold of ours on master %d", i), func() bool {
			own, err := m.ownFields(i, name)
			return err == nil && len(own) == 0
		})
	}
}

func TestRedLockAcquireRelease(t *testing.T) {
	m := startMasters(t, 5)
	const name = "redlock:acquire"
	rl := multilock.NewRedLock(lockers(m.locks(name))...)
	assert.Equal(t, name, rl.Name(), "Name")
	assert.Equal(t, 3, rl.Quorum(), "Quorum")
	ctx := rlock.WithOwner(t.Context(), "o")
	ok, err := rl.TryLock(ctx, 5*time.Second, time.Minute)
	require.NoError(t, err, "TryLock")
	require.True(t, ok, "TryLock")
	held := 0
	for i, c := range m.clients {
		if m.fields(t, i, name)[c.ID()+":o"] == "1" {
			held++
			d := m.pttl(t, i, name)
			assert.Positive(t, d, "master %d: PTTL", i)
			assert.LessOrEqual(t, d, time.Minute, "master %d: PTTL", i)
		}
	}
	assert.GreaterOrEqual(t, held, rl.Quorum(), "masters that hold it")
	require.NoError(t, rl.Unlock(ctx), "Unlock")
	for i := range m.srvs {
		assert.False(t, m.exists(t, i, name), "master %d: %s still exists after Unlock", i, name)
	}
	assert.ErrorIs(t, rl.Unlock(ctx), multilock.ErrNotHeld, "second Unlock")

	// Without an owner: an anonymous hold, released by Unlock without one.
	require.NoError(t, rl.Lock(t.Context()), "Lock")
	require.NoError(t, rl.Unlock(t.Context()), "anonymous Unlock")
	for i := range m.srvs {
		assert.False(t, m.exists(t, i, name), "master %d: %s still exists after the anonymous Unlock", i, name)
	}
}

func TestRedLockTwoMastersKilled(t *testing.T) {
	m := startMasters(t, 5)
	const name = "redlock:two-killed"
	m.srvs[1].Kill()
	m.srvs[3].Kill()
	rl := multilock.NewRedLock(lockers(m.locks(name))...)
	ctx := rlock.WithOwner(t.Context(), "o")
	ok, err := rl.TryLock(ctx, 5*time.Second, 0)
	require.NoError(t, err, "TryLock")
	require.True(t, ok, "TryLock")
	for _, i := range []int{0, 2, 4} {
		assert.Equal(t, "1", m.fields(t, i, name)[m.clients[i].ID()+":o"], "master %d: the hold count", i)
	}
	// The killed masters' failures are not the Unlock's business: the
	// hold never had them.
	require.NoError(t, rl.Unlock(ctx), "Unlock")
	for _, i := range []int{0, 2, 4} {
		assert.False(t, m.exists(t, i, name), "master %d: %s still exists after Unlock", i, name)
	}
}

func TestRedLockThreeMastersKilled(t *testing.T) {
	m := startMasters(t, 5)
	const name = "redlock:three-killed"
	for _, i := range []int{0, 2, 3} {
		m.srvs[i].Kill()
	}
	rl := multilock.NewRedLock(lockers(m.locks(name))...)
	ctx := rlock.WithOwner(t.Context(), "o")

	const wait = 300 * time.Millisecond
	start := time.Now()
	ok, err := rl.TryLock(ctx, wait, 0)
	elapsed := time.Since(start)
	require.False(t, ok, "TryLock with 3 of 5 masters down")
	assert.ErrorIs(t, err, multilock.ErrNotAcquired, "TryLock")
	var ne *multilock.NodeError
	if assert.ErrorAs(t, err, &ne, "TryLock") {
		assert.Contains(t, []int{0, 2, 3}, ne.Index, "NodeError.Index: a killed master")
	}
	// A round costs the per-instance timeout (50ms) plus rlock's grace
	// (100ms) against a dead master, not rlock's 5s attempt timeout.
	assert.LessOrEqual(t, elapsed, wait+2*time.Second, "the time TryLock took with a wait of %v", wait)
	m.waitFree(t, name, 1, 4)

	lctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	err = rl.Lock(lctx)
	assert.ErrorIs(t, err, multilock.ErrNotAcquired, "Lock")
	assert.ErrorIs(t, err, context.DeadlineExceeded, "Lock")
	m.waitFree(t, name, 1, 4)
}

func TestRedLockMajorityHeldByAnother(t *testing.T) {
	m := startMasters(t, 5)
	const name = "redlock:busy"
	// Another process (other Clients) holds name on 3 of the 5 masters.
	other := rlock.WithOwner(t.Context(), "other")
	for _, i := range []int{0, 2, 4} {
		c := relocktest.ClientOn(t, m.srvs[i])
		ok, err := c.GetLock(name).TryLock(other, 0, time.Minute)
		require.NoError(t, err, "setup on master %d", i)
		require.True(t, ok, "setup on master %d", i)
	}
	rl := multilock.NewRedLock(lockers(m.locks(name))...)
	ctx := rlock.WithOwner(t.Context(), "o")
	ok, err := rl.TryLock(ctx, 200*time.Millisecond, 0)
	require.NoError(t, err, "TryLock")
	require.False(t, ok, "TryLock")
	// None of our partial holds is left, on any master.
	m.waitFree(t, name, 0, 1, 2, 3, 4)
	for _, i := range []int{0, 2, 4} {
		assert.Len(t, m.fields(t, i, name), 1, "master %d: fields, the other owner's only", i)
	}
}

// While a majority lives, the watchdogs keep the RedLock held across
// several watchdog timeouts after two masters died.
func TestRedLockWatchdogSurvivesMinorityKilled(t *testing.T) {
	const timeout = 500 * time.Millisecond
	m := startMasters(t, 5, rlock.WithWatchdogTimeout(timeout))
	const name = "redlock:watchdog"
	locks := m.locks(name)
	rl := multilock.NewRedLock(lockers(locks)...).With(multilock.WithWatchdogTimeout(timeout))
	err := rl.Do(t.Context(), func(ctx context.Context) error {
		held := func() []int {
			var idx []int
			for i, l := range locks {
				select {
				case <-l.Done(ctx):
				default:
					idx = append(idx, i)
				}
			}
			return idx
		}
		// Kill two of the masters that hold it: a minority of the five.
		killed := held()[:2]
		for _, i := range killed {
			m.srvs[i].Kill()
		}
		// The killed masters' holds are reported lost once their lease
		// ran out unrenewed...
		for _, i := range killed {
			relocktest.Receive(t, locks[i].Done(ctx), 10*time.Second, fmt.Sprintf("the hold on killed master %d to be reported lost", i))
		}
		// ...while the live ones are renewed: watch three timeouts' worth
		// of renewals (each puts the lease back up) on a live master.
		live := held()
		if len(live) < rl.Quorum() {
			return errors.New("fewer than a majority held after killing a minority")
		}
		i := live[0]
		last := m.pttl(t, i, name)
		for r := range 9 {
			relocktest.Eventually(t, 5*time.Second, fmt.Sprintf("renewal %d on live master %d", r, i), func() bool {
				d := m.pttlNow(i, name)
				up := d > last
				if d >= 0 {
					last = d
				}
				return up
			})
		}
		if err := ctx.Err(); err != nil {
			return errors.Join(errors.New("fn's context ended while a majority was held"), context.Cause(ctx))
		}
		select {
		case <-rl.Done(ctx):
			return errors.New("RedLock.Done closed while a majority was held")
		default:
		}
		return nil
	})
	require.NoError(t, err)
}

// Killing a majority during Do cancels fn's context with ErrLockLost.
func TestRedLockLostWhenMajorityKilled(t *testing.T) {
	const timeout = 300 * time.Millisecond
	m := startMasters(t, 5, rlock.WithWatchdogTimeout(timeout))
	const name = "redlock:lost"
	rl := multilock.NewRedLock(lockers(m.locks(name))...).With(multilock.WithWatchdogTimeout(timeout))
	var cause error
	var doneClosed bool
	err := rl.Do(t.Context(), func(ctx context.Context) error {
		done := rl.Done(ctx)
		for _, i := range []int{0, 1, 2} {
			m.srvs[i].Kill()
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Second):
			return errors.New("fn's context not cancelled after 3 of 5 masters died")
		}
		cause = context.Cause(ctx)
		select {
		case <-done:
			doneClosed = true
		default:
		}
		return nil
	})
	assert.ErrorIs(t, cause, multilock.ErrLockLost, "context.Cause")
	assert.ErrorIs(t, err, rlock.ErrLockLost, "Do")
	assert.True(t, doneClosed, "RedLock.Done not closed when fn's context was cancelled")
	for _, i := range []int{3, 4} {
		assert.False(t, m.exists(t, i, name), "master %d: %s left after Do", i, name)
	}
}

// The attempts run in parallel, each bounded by the per-instance timeout:
// a hung master costs a round that timeout, not rlock's 5s.
func TestRedLockPausedMaster(t *testing.T) {
	m := startMasters(t, 5)
	const name = "redlock:paused"
	rl := multilock.NewRedLock(lockers(m.locks(name))...)
	require.NoError(t, m.srvs[2].Pause())
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			_ = m.srvs[2].Resume()
		}
	})
	ctx := rlock.WithOwner(t.Context(), "o")
	start := time.Now()
	ok, err := rl.TryLock(ctx, 5*time.Second, 0)
	elapsed := time.Since(start)
	require.NoError(t, err, "TryLock")
	require.True(t, ok, "TryLock")
	assert.LessOrEqual(t, elapsed, 2*time.Second, "the time TryLock took with one master paused")
	resumed = true
	require.NoError(t, m.srvs[2].Resume())
	require.NoError(t, rl.Unlock(ctx), "Unlock")
	// The paused master may run the attempt it got after Resume; the
	// Unlock sent to it after Resume follows it on the same connection.
	m.waitFree(t, name, 0, 1, 2, 3, 4)
}

// BenchmarkLockRelease compares acquire+release of a RedLock over 5 masters
// with that of a single lock, on the watchdog lease and on a fixed lease.
//
// "loopback" talks to local servers directly: on a small machine the five
// servers and the client then compete for the same cores, and a 5-way
// fan-out costs several times one round trip whatever the client does.
// "rtt1ms" puts every master behind a proxy that delays each direction by
// 0.5ms, as a network between hosts would: there the parallel rounds of
// RedLock cost about one round trip, like a single lock's.
func BenchmarkLockRelease(b *testing.B) {
	for _, net := range []struct {
		name  string
		delay time.Duration
	}{{"loopback", 0}, {"rtt1ms", 500 * time.Microsecond}} {
		for _, lease := range []struct {
			name string
			d    time.Duration
		}{{"watchdog", 0}, {"fixed", 10 * time.Second}} {
			b.Run(net.name+"/single/"+lease.name, func(b *testing.B) {
				clients := benchClients(b, 1, net.delay)
				l := clients[0].GetLock("bench:single")
				ctx := rlock.WithOwner(b.Context(), "o")
				for b.Loop() {
					ok, err := l.TryLock(ctx, 0, lease.d)
					require.NoError(b, err)
					require.True(b, ok)
					require.NoError(b, l.Unlock(ctx))
				}
			})
			b.Run(net.name+"/redlock5/"+lease.name, func(b *testing.B) {
				clients := benchClients(b, 5, net.delay)
				ls := make([]multilock.Locker, len(clients))
				for i, c := range clients {
					ls[i] = c.GetLock("bench:redlock")
				}
				rl := multilock.NewRedLock(ls...)
				ctx := rlock.WithOwner(b.Context(), "o")
				for b.Loop() {
					ok, err := rl.TryLock(ctx, time.Second, lease.d)
					require.NoError(b, err)
					require.True(b, ok)
					require.NoError(b, rl.Unlock(ctx))
				}
			})
		}
	}
}

// benchClients starts n servers and returns a Client of each, reaching it
// through a delaying proxy when delay > 0.
func benchClients(b *testing.B, n int, delay time.Duration) []*rlock.Client {
	m := startMasters(b, n)
	if delay == 0 {
		return m.clients
	}
	clients := make([]*rlock.Client, n)
	for i, srv := range m.srvs {
		p := startDelayProxy(b, srv.Addr, delay)
		opt := srv.ClientOption()
		opt.InitAddress = []string{p.Addr()}
		c, err := rlock.NewClient(opt)
		require.NoError(b, err)
		b.Cleanup(func() { _ = c.Close() })
		clients[i] = c
	}
	return clients
}

// delayProxy forwards TCP connections to a target and holds every chunk of
// bytes for delay in each direction, as a network with a round-trip time of
// twice delay would. It stops, and waits for its goroutines, when tb ends.
type delayProxy struct {
	ln     net.Listener
	target string
	delay  time.Duration
	wg     sync.WaitGroup

	mu     sync.Mutex
	conns  []net.Conn
	closed bool
}

func startDelayProxy(tb testing.TB, target string, delay time.Duration) *delayProxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	p := &delayProxy{ln: ln, target: target, delay: delay}
	p.wg.Go(p.accept)
	tb.Cleanup(p.close)
	return p
}

func (p *delayProxy) Addr() string { return p.ln.Addr().String() }

func (p *delayProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns = append(p.conns, c)
	return true
}

func (p *delayProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *delayProxy) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		if !p.track(in) || !p.track(out) {
			in.Close()
			out.Close()
			return
		}
		p.wg.Go(func() { p.forward(out, in) })
		p.wg.Go(func() { p.forward(in, out) })
	}
}

// forward copies src to dst, each chunk delivered delay after it was read.
// When either side fails, both connections close.
func (p *delayProxy) forward(dst, src net.Conn) {
	type chunk struct {
		b  []byte
		at time.Time
	}
	ch := make(chan chunk, 256)
	p.wg.Go(func() {
		defer close(ch)
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				ch <- chunk{append([]byte(nil), buf[:n]...), time.Now().Add(p.delay)}
			}
			if err != nil {
				return
			}
		}
	})
	defer func() {
		src.Close()
		dst.Close()
		for range ch { // let the reader finish
		}
	}()
	for c := range ch {
		time.Sleep(time.Until(c.at)) // the network's delay, which the proxy stands for
		if _, err := dst.Write(c.b); err != nil {
			return
		}
	}
}
