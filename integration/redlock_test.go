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
		if errs[i] != nil {
			t.Fatalf("start redis-server %d: %v", i, errs[i])
		}
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
// Client of master i.
func (m *masters) ownFields(t testing.TB, i int, name string) []string {
	t.Helper()
	var own []string
	for f := range m.fields(t, i, name) {
		if strings.HasPrefix(f, m.clients[i].ID()+":") {
			own = append(own, f)
		}
	}
	return own
}

func (m *masters) exists(t testing.TB, i int, name string) bool {
	t.Helper()
	n, err := m.raws[i].Do(t.Context(), m.raws[i].B().Exists().Key(name).Build()).AsInt64()
	if err != nil {
		t.Fatalf("EXISTS %s on master %d: %v", name, i, err)
	}
	return n == 1
}

func (m *masters) pttl(t testing.TB, i int, name string) time.Duration {
	t.Helper()
	ms, err := m.raws[i].Do(t.Context(), m.raws[i].B().Pttl().Key(name).Build()).AsInt64()
	if err != nil {
		t.Fatalf("PTTL %s on master %d: %v", name, i, err)
	}
	return time.Duration(ms) * time.Millisecond
}

// waitFree waits until no master of idx has a field of its Client in name.
func (m *masters) waitFree(t testing.TB, name string, idx ...int) {
	t.Helper()
	for _, i := range idx {
		relocktest.Eventually(t, 5*time.Second, fmt.Sprintf("no hold of ours on master %d", i), func() bool {
			return len(m.ownFields(t, i, name)) == 0
		})
	}
}

func TestRedLockAcquireRelease(t *testing.T) {
	m := startMasters(t, 5)
	const name = "redlock:acquire"
	rl := multilock.NewRedLock(lockers(m.locks(name))...)
	if got, want := rl.Name(), name; got != want {
		t.Errorf("Name = %q, want %q", got, want)
	}
	if got, want := rl.Quorum(), 3; got != want {
		t.Errorf("Quorum = %d, want %d", got, want)
	}
	ctx := rlock.WithOwner(t.Context(), "o")
	ok, err := rl.TryLock(ctx, 5*time.Second, time.Minute)
	if !ok || err != nil {
		t.Fatalf("TryLock = %v, %v; want true, nil", ok, err)
	}
	held := 0
	for i, c := range m.clients {
		if m.fields(t, i, name)[c.ID()+":o"] == "1" {
			held++
			if d := m.pttl(t, i, name); d <= 0 || d > time.Minute {
				t.Errorf("master %d: PTTL %v, want within (0, 1m]", i, d)
			}
		}
	}
	if held < rl.Quorum() {
		t.Errorf("held on %d masters, want at least %d", held, rl.Quorum())
	}
	if err := rl.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	for i := range m.srvs {
		if m.exists(t, i, name) {
			t.Errorf("master %d: %s still exists after Unlock", i, name)
		}
	}
	if err := rl.Unlock(ctx); !errors.Is(err, multilock.ErrNotHeld) {
		t.Errorf("second Unlock = %v, want ErrNotHeld", err)
	}

	// Without an owner: an anonymous hold, released by Unlock without one.
	if err := rl.Lock(t.Context()); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if err := rl.Unlock(t.Context()); err != nil {
		t.Fatalf("anonymous Unlock: %v", err)
	}
	for i := range m.srvs {
		if m.exists(t, i, name) {
			t.Errorf("master %d: %s still exists after the anonymous Unlock", i, name)
		}
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
	if !ok || err != nil {
		t.Fatalf("TryLock = %v, %v; want true, nil", ok, err)
	}
	for _, i := range []int{0, 2, 4} {
		if got := m.fields(t, i, name)[m.clients[i].ID()+":o"]; got != "1" {
			t.Errorf("master %d: hold count %q, want 1", i, got)
		}
	}
	// The killed masters' failures are not the Unlock's business: the
	// hold never had them.
	if err := rl.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	for _, i := range []int{0, 2, 4} {
		if m.exists(t, i, name) {
			t.Errorf("master %d: %s still exists after Unlock", i, name)
		}
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
	if ok {
		t.Fatal("TryLock = true with 3 of 5 masters down")
	}
	if !errors.Is(err, multilock.ErrNotAcquired) {
		t.Errorf("TryLock error = %v, want one matching ErrNotAcquired", err)
	}
	var ne *multilock.NodeError
	if !errors.As(err, &ne) || (ne.Index != 0 && ne.Index != 2 && ne.Index != 3) {
		t.Errorf("NodeError = %+v, want one for a killed master", ne)
	}
	// A round costs the per-instance timeout (50ms) plus rlock's grace
	// (100ms) against a dead master, not rlock's 5s attempt timeout.
	if elapsed > wait+2*time.Second {
		t.Errorf("TryLock took %v with a wait of %v", elapsed, wait)
	}
	m.waitFree(t, name, 1, 4)

	lctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	err = rl.Lock(lctx)
	if !errors.Is(err, multilock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Lock = %v, want ErrNotAcquired and DeadlineExceeded", err)
	}
	m.waitFree(t, name, 1, 4)
}

func TestRedLockMajorityHeldByAnother(t *testing.T) {
	m := startMasters(t, 5)
	const name = "redlock:busy"
	// Another process (other Clients) holds name on 3 of the 5 masters.
	other := rlock.WithOwner(t.Context(), "other")
	for _, i := range []int{0, 2, 4} {
		c := relocktest.ClientOn(t, m.srvs[i])
		if ok, err := c.GetLock(name).TryLock(other, 0, time.Minute); !ok || err != nil {
			t.Fatalf("setup on master %d: %v, %v", i, ok, err)
		}
	}
	rl := multilock.NewRedLock(lockers(m.locks(name))...)
	ctx := rlock.WithOwner(t.Context(), "o")
	ok, err := rl.TryLock(ctx, 200*time.Millisecond, 0)
	if ok || err != nil {
		t.Fatalf("TryLock = %v, %v; want false, nil", ok, err)
	}
	// None of our partial holds is left, on any master.
	m.waitFree(t, name, 0, 1, 2, 3, 4)
	for _, i := range []int{0, 2, 4} {
		if n := len(m.fields(t, i, name)); n != 1 {
			t.Errorf("master %d: %d fields, want the other owner's only", i, n)
		}
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
			select {
			case <-locks[i].Done(ctx):
			case <-time.After(10 * time.Second):
				return errors.New("the hold on a killed master was never reported lost")
			}
		}
		// ...while the live ones are renewed: watch three timeouts' worth
		// of renewals on a live master.
		live := held()
		if len(live) < rl.Quorum() {
			return errors.New("fewer than a majority held after killing a minority")
		}
		i := live[0]
		renewals, last := 0, m.pttl(t, i, name)
		deadline := time.Now().Add(20 * time.Second)
		for renewals < 9 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
			d := m.pttl(t, i, name)
			if d > last {
				renewals++
			}
			last = d
		}
		if renewals < 9 {
			return errors.New("the watchdog did not renew the live holds")
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
	if err != nil {
		t.Fatal(err)
	}
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
	if !errors.Is(cause, multilock.ErrLockLost) {
		t.Errorf("context.Cause = %v, want ErrLockLost", cause)
	}
	if !errors.Is(err, rlock.ErrLockLost) {
		t.Errorf("Do = %v, want ErrLockLost", err)
	}
	if !doneClosed {
		t.Error("RedLock.Done not closed when fn's context was cancelled")
	}
	for _, i := range []int{3, 4} {
		if m.exists(t, i, name) {
			t.Errorf("master %d: %s left after Do", i, name)
		}
	}
}

// The attempts run in parallel, each bounded by the per-instance timeout:
// a hung master costs a round that timeout, not rlock's 5s.
func TestRedLockPausedMaster(t *testing.T) {
	m := startMasters(t, 5)
	const name = "redlock:paused"
	rl := multilock.NewRedLock(lockers(m.locks(name))...)
	if err := m.srvs[2].Pause(); err != nil {
		t.Fatal(err)
	}
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
	if !ok || err != nil {
		t.Fatalf("TryLock = %v, %v; want true, nil", ok, err)
	}
	if elapsed > 2*time.Second {
		t.Errorf("TryLock took %v with one master paused", elapsed)
	}
	resumed = true
	if err := m.srvs[2].Resume(); err != nil {
		t.Fatal(err)
	}
	if err := rl.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
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
					if ok, err := l.TryLock(ctx, 0, lease.d); !ok || err != nil {
						b.Fatal(ok, err)
					}
					if err := l.Unlock(ctx); err != nil {
						b.Fatal(err)
					}
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
					if ok, err := rl.TryLock(ctx, time.Second, lease.d); !ok || err != nil {
						b.Fatal(ok, err)
					}
					if err := rl.Unlock(ctx); err != nil {
						b.Fatal(err)
					}
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
		if err != nil {
			b.Fatal(err)
		}
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
	if err != nil {
		tb.Fatal(err)
	}
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
		time.Sleep(time.Until(c.at))
		if _, err := dst.Write(c.b); err != nil {
			return
		}
	}
}
