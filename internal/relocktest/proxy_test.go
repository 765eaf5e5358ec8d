package relocktest_test

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
)

// echoServer accepts connections on loopback and sends back what it
// reads; got counts the bytes it read. Closed when t ends.
type echoServer struct {
	ln  net.Listener
	mu  sync.Mutex
	got int
	wg  sync.WaitGroup
}

func newEcho(t *testing.T) *echoServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &echoServer{ln: ln}
	var conns []net.Conn
	var mu sync.Mutex
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			s.wg.Go(func() {
				defer c.Close()
				buf := make([]byte, 4096)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						s.mu.Lock()
						s.got += n
						s.mu.Unlock()
						if _, err := c.Write(buf[:n]); err != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *echoServer) received() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got
}

func newProxy(t *testing.T, target string) *relocktest.Proxy {
	p, err := relocktest.NewProxy(target)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// TestProxyForwardsInOrder: 1 MiB written in random pieces through the
// proxy comes back from an echo server whole and in order, while the
// delay goes up and down (a shorter delay never lets newer bytes
// overtake older ones); Close ends every goroutine the proxy started.
func TestProxyForwardsInOrder(t *testing.T) {
	echo := newEcho(t)
	leaks := goleak.IgnoreCurrent()
	p, err := relocktest.NewProxy(echo.ln.Addr().String())
	require.NoError(t, err)
	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	data := make([]byte, 1<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rng.IntN(256))
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		rest := data
		for i := 0; len(rest) > 0; i++ {
			n := min(len(rest), 1+rng.IntN(64<<10))
			if i%4 == 0 {
				p.SetDelay(time.Duration(rng.IntN(3)) * time.Millisecond)
			}
			if _, err := c.Write(rest[:n]); !assert.NoError(t, err) {
				return
			}
			rest = rest[n:]
		}
	})
	got := make([]byte, len(data))
	_, err = io.ReadFull(c, got)
	require.NoError(t, err)
	wg.Wait()
	assert.True(t, bytes.Equal(data, got), "the bytes came back changed or out of order")
	assert.Equal(t, 1, p.Conns())
	require.NoError(t, c.Close())
	require.NoError(t, p.Close())
	assert.Zero(t, p.Conns())
	goleak.VerifyNone(t, leaks)
}

// TestProxyDelay: a PING to a real redis-server through the proxy takes
// at least the delay each way, and the delay is the one set when the
// bytes were read.
func TestProxyDelay(t *testing.T) {
	srv := redistest.Start(t)
	p := newProxy(t, srv.Addr)
	opt := srv.ClientOption()
	opt.InitAddress = []string{p.Addr()}
	opt.DisableCache = true
	c, err := rueidis.NewClient(opt)
	require.NoError(t, err)
	defer c.Close()
	ctx := context.Background()
	rtt := func() time.Duration {
		start := time.Now()
		require.NoError(t, c.Do(ctx, c.B().Ping().Build()).Error())
		return time.Since(start)
	}
	rtt() // connected
	for _, d := range []time.Duration{0, 5 * time.Millisecond, 30 * time.Millisecond, time.Millisecond} {
		p.SetDelay(d)
		assert.Equal(t, d, p.Delay())
		for range 3 {
			got := rtt()
			assert.GreaterOrEqual(t, got, 2*d, "a round trip with %v each way", d)
			assert.Less(t, got, 2*d+time.Second, "a round trip with %v each way", d)
		}
	}
}

// TestProxyStall: nothing crosses a stalled proxy, in either direction,
// and Resume delivers what it kept, in order.
func TestProxyStall(t *testing.T) {
	echo := newEcho(t)
	p := newProxy(t, echo.ln.Addr().String())
	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Write([]byte("ab"))
	require.NoError(t, err)
	got := make([]byte, 2)
	_, err = io.ReadFull(c, got)
	require.NoError(t, err)
	p.Stall()
	_, err = c.Write([]byte("cd"))
	require.NoError(t, err)
	_, err = c.Write([]byte("ef"))
	require.NoError(t, err)
	// Nothing crosses while it is stalled (looked at for a while: a stall
	// has no event to wait for).
	require.NoError(t, c.SetReadDeadline(time.Now().Add(100*time.Millisecond)))
	n, err := c.Read(got)
	assert.Zero(t, n)
	var ne net.Error
	assert.ErrorAs(t, err, &ne)
	assert.Equal(t, 2, echo.received(), "bytes reached the server through a stalled proxy")
	p.Resume()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	got = make([]byte, 4)
	_, err = io.ReadFull(c, got)
	require.NoError(t, err)
	assert.Equal(t, "cdef", string(got))
}

// TestProxyCut: Cut closes both sides of every connection and drops what
// a stall kept (it never reaches the server); a new connection works.
func TestProxyCut(t *testing.T) {
	echo := newEcho(t)
	p := newProxy(t, echo.ln.Addr().String())
	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c.Close()
	p.Stall()
	_, err = c.Write([]byte("dropped"))
	require.NoError(t, err)
	until(t, func() bool { return p.Conns() == 1 })
	assert.Equal(t, 1, p.Cut())
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	n, err := c.Read(make([]byte, 8))
	assert.Zero(t, n)
	assert.Error(t, err, "the client's side after a cut (EOF, or a reset when it had unread bytes)")
	assert.Zero(t, echo.received(), "bytes a stall kept reached the server after a cut")
	c2, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c2.Close()
	_, err = c2.Write([]byte("ok"))
	require.NoError(t, err)
	got := make([]byte, 2)
	require.NoError(t, c2.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = io.ReadFull(c2, got)
	require.NoError(t, err)
	assert.Equal(t, "ok", string(got))
}

// TestProxyServerCloses: a server that closes its connection (as CLIENT
// KILL does) closes the client's side, after what it sent before.
func TestProxyServerCloses(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		_, _ = c.Write([]byte("bye"))
		c.Close()
	})
	p := newProxy(t, ln.Addr().String())
	p.SetDelay(20 * time.Millisecond)
	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	got, err := io.ReadAll(c)
	require.NoError(t, err)
	assert.Equal(t, "bye", string(got))
}

func until(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(time.Millisecond)
	}
}
