package relocktest

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"testing"

	"github.com/redis/rueidis"
)

// Mortal lets a test kill a rueidis client as a process dies: at once,
// with whatever it was sending. After Kill nothing the client writes
// reaches the server, it makes no new connection, and the server has
// closed every connection it had, so that no command the client sent
// before Kill runs after Kill returns (it ran before, or never).
//
// Closing the rueidis client is not the same: Close lets what is queued
// go out first, and a connection being made as Close runs may still carry
// a command afterwards.
type Mortal struct {
	raw  rueidis.Client
	name string

	mu    sync.RWMutex // held for reading by every write, for writing by Kill
	dead  bool
	conns []net.Conn
}

// NewMortal makes the connections of a client made with opt mortal: it
// sets opt's client name (the server closes the connections by it, so it
// must be unique on the server) and its dial function. raw is a client of
// the same server that stays alive.
func NewMortal(raw rueidis.Client, opt *rueidis.ClientOption, name string) *Mortal {
	m := &Mortal{raw: raw, name: name}
	opt.ClientName = name
	opt.DialCtxFn = func(ctx context.Context, dst string, d *net.Dialer, cfg *tls.Config) (net.Conn, error) {
		if m.isDead() {
			return nil, net.ErrClosed
		}
		var c net.Conn
		var err error
		if cfg != nil {
			c, err = (&tls.Dialer{NetDialer: d, Config: cfg}).DialContext(ctx, "tcp", dst)
		} else {
			c, err = d.DialContext(ctx, "tcp", dst)
		}
		if err != nil {
			return nil, err
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.dead {
			c.Close()
			return nil, net.ErrClosed
		}
		m.conns = append(m.conns, c)
		return mortalConn{Conn: c, m: m}, nil
	}
	return m
}

func (m *Mortal) isDead() bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.dead
}

// Kill ends the client's connections as a killed process's end. It
// returns how many connections the server closed (those the client had
// closed itself are gone already).
func (m *Mortal) Kill(t testing.TB) int {
	t.Helper()
	m.mu.Lock()
	m.dead = true
	conns := m.conns
	m.mu.Unlock()
	// No write is under way from here on. What was written is either read
	// by the server (and run) before it closes the connection, or dropped
	// with it.
	n := KillConnections(t, m.raw, m.name)
	for _, c := range conns {
		_ = c.Close()
	}
	return n
}

// mortalConn is a connection whose writes fail once its Mortal is dead.
type mortalConn struct {
	net.Conn
	m *Mortal
}

func (c mortalConn) Write(b []byte) (int, error) {
	c.m.mu.RLock()
	defer c.m.mu.RUnlock()
	if c.m.dead {
		return 0, net.ErrClosed
	}
	return c.Conn.Write(b)
}
