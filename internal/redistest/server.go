// Package redistest starts throwaway Redis servers for tests: a server per
// test or one shared by a test package, clusters and sentinel set-ups, and
// a TestMain that stops them and checks for leaked goroutines.
//
// Servers are local redis-server processes started with internal/redisproc:
// each listens on a free loopback port, keeps its files in a private
// temporary directory, and is stopped by PID (and its directory removed)
// when the test that started it ends. Tests never need a server started by
// hand. When redis-server is not installed, Fallback (if a test package
// set one) starts a server some other way, else the test fails with a
// message that says how to install redis-server.
package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redisproc"
)

// InstallHint says how to get redis-server on a Debian machine.
const InstallHint = redisproc.InstallHint

// ErrNoFallback is what a Fallback returns, wrapped, when it cannot start a
// server here (for a container, when no container engine answers).
var ErrNoFallback = errors.New("redistest: no fallback server")

// Fallback, when set, starts a Redis server when redis-server is not in
// PATH, with args as redis-server command-line options; it returns the
// server's address and a function that stops the server. The integration
// module's tests set one that runs Redis in a container. Set it in TestMain,
// before any test starts a server.
//
// A fallback server can be stopped but not killed, paused or restarted:
// tests that need those get an error, and clusters and sentinel set-ups
// refuse to start.
var Fallback func(args ...string) (addr string, stop func() error, err error)

// Server is one Redis server started for tests: a local redis-server
// process, or a server started by Fallback.
type Server struct {
	// Addr is the server's address, host:port (loopback for a local one).
	Addr string
	// Port is the TCP port the server listens on.
	Port int
	// Dir holds a local server's files (dump, append-only file, log);
	// it is "" for a fallback server.
	Dir string

	proc *redisproc.Server // nil for a fallback server
	stop func() error      // stops a fallback server
}

// errNotLocal is returned by what only a local process can do.
var errNotLocal = errors.New("redistest: needs a local redis-server process, not a fallback server")

// Start starts a private redis-server for tb and stops it when tb ends.
// Extra args are passed to redis-server as command-line options, for example
// "--appendonly", "yes" or "--enable-debug-command", "local".
func Start(tb testing.TB, args ...string) *Server {
	tb.Helper()
	s, err := StartServer(args...)
	require.NoError(tb, err, "redistest")
	tb.Cleanup(func() { _ = s.Stop() })
	return s
}

// DebugCommandArgs are the options that let a server started with them
// run DEBUG (DEBUG SLEEP, DEBUG SET-ACTIVE-EXPIRE): "--enable-debug-command
// local" on Redis 7 and later (and Valkey), where DEBUG is off by default;
// none on Redis 6, which always runs DEBUG and refuses to start with an
// option it does not know.
func DebugCommandArgs() []string {
	if v, err := redisproc.Version(); err == nil {
		major, _, _ := strings.Cut(v, ".")
		if n, err := strconv.Atoi(major); err == nil && n < 7 {
			return nil
		}
	}
	return []string{"--enable-debug-command", "local"}
}

// StartServer starts a redis-server that the caller must Stop. When
// redis-server is not installed and Fallback cannot help, the error matches
// redisproc.ErrNotInstalled.
func StartServer(args ...string) (*Server, error) {
	return startWith("", args...)
}

// startWith starts a local redis-server with an optional config file
// (config "" for none), or a fallback server when redis-server is missing
// and there is no config.
func startWith(config string, args ...string) (*Server, error) {
	p, err := redisproc.StartWithConfig(config, args...)
	if err == nil {
		return &Server{Addr: p.Addr, Port: p.Port, Dir: p.Dir, proc: p}, nil
	}
	if !errors.Is(err, redisproc.ErrNotInstalled) || Fallback == nil || config != "" {
		return nil, withHint(err)
	}
	s, ferr := startFallback(args...)
	if errors.Is(ferr, ErrNoFallback) {
		return nil, withHint(err)
	}
	return s, ferr
}

// withHint adds to a missing redis-server's error the script that
// installs it.
func withHint(err error) error {
	if errors.Is(err, redisproc.ErrNotInstalled) {
		return fmt.Errorf("%w (or run ./test.sh, which installs it)", err)
	}
	return err
}

func startFallback(args ...string) (*Server, error) {
	addr, stop, err := Fallback(args...)
	if err != nil {
		return nil, err
	}
	s := &Server{Addr: addr, stop: stop}
	if _, port, err := net.SplitHostPort(addr); err == nil {
		s.Port, _ = strconv.Atoi(port)
	}
	return s, nil
}

// Stop stops the server, waits for it, and removes its files.
// It is safe to call more than once.
func (s *Server) Stop() error {
	if s.proc == nil {
		stop := s.stop
		s.stop = nil
		if stop == nil {
			return nil
		}
		return stop()
	}
	return s.proc.Stop()
}

// Kill ends the server with SIGKILL, as a crash would, and keeps its files
// so that Restart can bring it back with whatever it persisted. A fallback
// server is stopped instead, and cannot be restarted.
func (s *Server) Kill() {
	if s.proc == nil {
		_ = s.Stop()
		return
	}
	s.proc.Kill()
}

// Restart starts a killed server again on the same port and directory.
func (s *Server) Restart() error {
	if s.proc == nil {
		return errNotLocal
	}
	return s.proc.Restart()
}

// Pause stops the server process with SIGSTOP: it keeps its connections but
// answers nothing until Resume.
func (s *Server) Pause() error {
	if s.proc == nil {
		return errNotLocal
	}
	return s.proc.Pause()
}

// Resume continues a paused server.
func (s *Server) Resume() error {
	if s.proc == nil {
		return errNotLocal
	}
	return s.proc.Resume()
}

// PID is the server's process ID (0 for a fallback server).
func (s *Server) PID() int {
	if s.proc == nil {
		return 0
	}
	return s.proc.PID()
}

// ClientOption returns rueidis options for a client of s. Client-side
// caching is off, so the server needs no tracking.
func (s *Server) ClientOption() rueidis.ClientOption {
	return rueidis.ClientOption{InitAddress: []string{s.Addr}, DisableCache: true}
}

// Client returns a raw rueidis client of s, closed when tb ends. Tests use
// it to look at and change what the locks wrote.
func (s *Server) Client(tb testing.TB) rueidis.Client {
	tb.Helper()
	c, err := rueidis.NewClient(s.ClientOption())
	require.NoError(tb, err, "redistest: client of %s", s.Addr)
	tb.Cleanup(c.Close)
	return c
}

// Do runs one command on a short-lived connection and returns its reply.
func (s *Server) Do(ctx context.Context, args ...string) (rueidis.RedisMessage, error) {
	c, err := rueidis.NewClient(s.ClientOption())
	if err != nil {
		return rueidis.RedisMessage{}, err
	}
	defer c.Close()
	return c.Do(ctx, c.B().Arbitrary(args...).Build()).ToMessage()
}
