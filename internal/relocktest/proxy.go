package relocktest

import (
	"net"
	"sync"
	"time"
)

// Proxy is a TCP proxy on loopback between clients and one server that
// adds latency, stalls and cuts connections: the network between a
// Client and Redis, as tests need it (the kernel here has no netem).
//
// Every byte a side sends reaches the other side in order, Delay after
// the proxy read it (the delay is the one set when the bytes were read;
// a shorter delay set later never lets newer bytes overtake older ones).
// While the proxy is stalled it forwards nothing, in either direction,
// and keeps what it reads; Resume delivers it, Cut drops it. A side that
// closes its connection ends the pair once what was read from it before
// has been delivered: both sides close, and what the other direction still
// held is dropped.
//
// It lives in the test binary (no process of its own) and is safe for
// concurrent use; Close ends every goroutine it started.
type Proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	delay   time.Duration
	stalled chan struct{} // closed by Resume; nil when not stalled
	pairs   map[*pair]struct{}
	closed  bool
	wg      sync.WaitGroup
}

// NewProxy starts a proxy on a free loopback port that forwards every
// connection to target (host:port).
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, pairs: make(map[*pair]struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address clients dial instead of the server's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetDelay sets the latency added in each direction to the bytes read
// from now on.
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

// Delay is the latency added in each direction.
func (p *Proxy) Delay() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.delay
}

// Stall stops forwarding, in both directions, on every connection and on
// those made later, until Resume or Cut; what is read meanwhile is kept.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stalled == nil {
		p.stalled = make(chan struct{})
	}
}

// Resume ends a stall: what was kept is delivered, in order, each chunk
// no sooner than its delay after it was read.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stalled != nil {
		close(p.stalled)
		p.stalled = nil
	}
}

// Cut closes every connection through the proxy, both sides at once,
// dropping whatever it had read and not delivered (a stall's bytes too),
// and ends a stall. It returns the number of connections cut. New
// connections are forwarded as before.
func (p *Proxy) Cut() int {
	p.mu.Lock()
	pairs := make([]*pair, 0, len(p.pairs))
	for c := range p.pairs {
		pairs = append(pairs, c)
	}
	p.mu.Unlock()
	for _, c := range pairs {
		c.cut()
	}
	p.Resume()
	return len(pairs)
}

// Conns is the number of connections open through the proxy.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pairs)
}

// Close stops accepting, cuts every connection and waits for every
// goroutine of the proxy to end.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.Cut()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		down, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			down.Close()
			continue
		}
		c := &pair{p: p, down: down, up: up, done: make(chan struct{})}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			down.Close()
			up.Close()
			return
		}
		p.pairs[c] = struct{}{}
		// Four goroutines per connection: a reader and a writer each way.
		p.wg.Add(4)
		p.mu.Unlock()
		toUp, toDown := make(chan chunk, 256), make(chan chunk, 256)
		go c.read(down, toUp)
		go c.write(toUp, up)
		go c.read(up, toDown)
		go c.write(toDown, down)
	}
}

// chunk is what one read returned, and when it may be delivered; a chunk
// with eof set says that the side closed (or failed) after the chunks
// before it.
type chunk struct {
	b   []byte
	at  time.Time
	eof bool
}

// pair is one connection through the proxy: the client's side (down) and
// the server's (up).
type pair struct {
	p        *Proxy
	down, up net.Conn
	once     sync.Once
	done     chan struct{} // closed by cut
}

// cut closes both sides at once; what is queued is dropped.
func (c *pair) cut() {
	c.once.Do(func() {
		close(c.done)
		c.down.Close()
		c.up.Close()
		c.p.mu.Lock()
		delete(c.p.pairs, c)
		c.p.mu.Unlock()
	})
}

// read reads from src and queues each chunk for write with its delivery
// time, never earlier than the one before it.
func (c *pair) read(src net.Conn, q chan<- chunk) {
	defer c.p.wg.Done()
	var last time.Time
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			at := time.Now().Add(c.p.Delay())
			if at.Before(last) {
				at = last
			}
			last = at
			select {
			case q <- chunk{b: append([]byte(nil), buf[:n]...), at: at}:
			case <-c.done:
				return
			}
		}
		if err != nil {
			select {
			case q <- chunk{at: last, eof: true}:
			case <-c.done:
			}
			return
		}
	}
}

// write delivers the chunks of q to dst, each at its time and not while
// the proxy is stalled; after the end of the other side, or a failed
// write, it cuts the pair.
func (c *pair) write(q <-chan chunk, dst net.Conn) {
	defer c.p.wg.Done()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		var ch chunk
		select {
		case ch = <-q:
		case <-c.done:
			return
		}
		if d := time.Until(ch.at); d > 0 {
			t.Reset(d)
			select {
			case <-t.C:
			case <-c.done:
				return
			}
		}
		for {
			c.p.mu.Lock()
			stalled := c.p.stalled
			c.p.mu.Unlock()
			if stalled == nil {
				break
			}
			select {
			case <-stalled:
			case <-c.done:
				return
			}
		}
		if ch.eof {
			c.cut()
			return
		}
		if _, err := dst.Write(ch.b); err != nil {
			c.cut()
			return
		}
	}
}
