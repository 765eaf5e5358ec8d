package main

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// wire counts what one implementation's clients put on the wire: the
// commands they send (each RESP array written to a connection is one
// command), by name, and the bytes each way. It sees every connection the
// clients open, through their dial hooks, so it needs nothing from the
// libraries but their public options, and it counts what a library sends
// whatever its internals: scripts, pipelines, subscriptions, pings.
type wire struct {
	cmds    atomic.Int64
	out, in atomic.Int64
	mu      sync.Mutex
	byName  map[string]*int64
	conns   atomic.Int64 // connections dialled so far
}

func newWire() *wire { return &wire{byName: make(map[string]*int64)} }

// wireCounts is a snapshot of a wire's counters.
type wireCounts struct {
	Cmds, Out, In, Conns int64
	ByName               map[string]int64
}

func (w *wire) snap() wireCounts {
	c := wireCounts{Cmds: w.cmds.Load(), Out: w.out.Load(), In: w.in.Load(), Conns: w.conns.Load(),
		ByName: make(map[string]int64)}
	w.mu.Lock()
	for k, v := range w.byName {
		c.ByName[k] = *v
	}
	w.mu.Unlock()
	return c
}

func (a wireCounts) sub(b wireCounts) wireCounts {
	d := wireCounts{Cmds: a.Cmds - b.Cmds, Out: a.Out - b.Out, In: a.In - b.In, Conns: a.Conns - b.Conns,
		ByName: make(map[string]int64)}
	for k, v := range a.ByName {
		if n := v - b.ByName[k]; n != 0 {
			d.ByName[k] = n
		}
	}
	return d
}

func (a *wireCounts) add(b wireCounts) {
	a.Cmds += b.Cmds
	a.Out += b.Out
	a.In += b.In
	a.Conns += b.Conns
	if a.ByName == nil {
		a.ByName = make(map[string]int64)
	}
	for k, v := range b.ByName {
		a.ByName[k] += v
	}
}

// record counts one command named name (lower case, at most the first
// bytes of it).
func (w *wire) record(name []byte) {
	w.cmds.Add(1)
	w.mu.Lock()
	if p, ok := w.byName[string(name)]; ok {
		*p++
	} else {
		n := int64(1)
		w.byName[string(name)] = &n
	}
	w.mu.Unlock()
}

// wrap returns c counting through w.
func (w *wire) wrap(c net.Conn) net.Conn {
	w.conns.Add(1)
	return &wireConn{Conn: c, w: w}
}

// dial dials addr over TCP with d and wraps the connection.
func (w *wire) dial(ctx context.Context, d *net.Dialer, addr string) (net.Conn, error) {
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return w.wrap(c), nil
}

// rueidisOption is the client option of every rueidis-based implementation:
// addr, and connections counted by w.
func (w *wire) rueidisOption(addr string) rueidis.ClientOption {
	return rueidis.ClientOption{
		InitAddress: []string{addr},
		DialCtxFn: func(ctx context.Context, dst string, d *net.Dialer, cfg *tls.Config) (net.Conn, error) {
			if cfg != nil {
				return nil, errors.New("bench: TLS is not counted")
			}
			return w.dial(ctx, d, dst)
		},
	}
}

// goredisOptions is the same for the go-redis-based implementations: the
// go-redis defaults, with connections counted by w. The dialer has
// go-redis's own default timeout and keep-alive.
func (w *wire) goredisOptions(addr string) *goredis.Options {
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 5 * time.Minute}
	return &goredis.Options{
		Addr: addr,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return w.dial(ctx, d, addr)
		},
	}
}

// wireConn counts the bytes read and written, and the commands written.
// Clients write each connection from one goroutine at a time (a RESP
// stream written by two at once would be garbage), but the scanner is
// locked anyway so that a library that does not would not break the count.
type wireConn struct {
	net.Conn
	w  *wire
	mu sync.Mutex
	sc respScanner
}

func (c *wireConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if n > 0 {
		c.w.out.Add(int64(n))
		c.mu.Lock()
		c.sc.scan(b[:n], c.w)
		c.mu.Unlock()
	}
	return n, err
}

func (c *wireConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.w.in.Add(int64(n))
	}
	return n, err
}

// SyscallConn lets go-redis run its connection health check on the socket,
// as it does on a connection it dialled itself. The check only peeks.
func (c *wireConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}

// respScanner follows the RESP stream a client writes: arrays of bulk
// strings (*<n>\r\n then n times $<len>\r\n<bytes>\r\n). It keeps its state
// between writes, since a write may end anywhere in a command.
type respScanner struct {
	state   uint8 // scanLine, scanNumber or scanBulk
	kind    byte  // '*' or '$' for the line being read
	num     int64
	left    int64 // bulk strings left in the command
	skip    int64 // bytes of the bulk string (and its CRLF) left
	first   bool  // the bulk string being read is the command's name
	nameLen int
	name    [24]byte
}

const (
	scanLine = iota
	scanNumber
	scanBulk
)

func (s *respScanner) scan(b []byte, w *wire) {
	for i := 0; i < len(b); {
		switch s.state {
		case scanLine:
			s.kind, s.num, s.state = b[i], 0, scanNumber
			i++
		case scanNumber:
			c := b[i]
			i++
			switch {
			case c >= '0' && c <= '9':
				s.num = s.num*10 + int64(c-'0')
			case c == '\n':
				s.endLine(w)
			}
		case scanBulk:
			k := int(min(s.skip, int64(len(b)-i)))
			if s.first {
				// The name is the payload, without the CRLF at its end.
				payload := max(0, min(k, int(s.skip)-2))
				for _, c := range b[i : i+payload] {
					if s.nameLen < len(s.name) {
						if c >= 'A' && c <= 'Z' {
							c += 'a' - 'A'
						}
						s.name[s.nameLen] = c
						s.nameLen++
					}
				}
			}
			i += k
			s.skip -= int64(k)
			if s.skip == 0 {
				if s.first {
					w.record(s.name[:s.nameLen])
					s.first = false
				}
				s.left--
				s.state = scanLine
			}
		}
	}
}

// endLine acts on a complete *<n> or $<len> line.
func (s *respScanner) endLine(w *wire) {
	s.state = scanLine
	switch s.kind {
	case '*':
		s.left = s.num
		s.first = s.num > 0
		s.nameLen = 0
		if s.num == 0 {
			w.record(nil)
		}
	case '$':
		s.skip = s.num + 2
		s.state = scanBulk
	}
}

// perOp divides every count in m by n.
func perOp(m map[string]int64, n int64) map[string]float64 {
	if n <= 0 || len(m) == 0 {
		return nil
	}
	out := make(map[string]float64, len(m))
	for k, v := range m {
		out[k] = float64(v) / float64(n)
	}
	return out
}
