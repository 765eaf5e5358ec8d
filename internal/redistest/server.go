// Package redistest starts throwaway redis-server processes for tests (and
// for the relock demo).
//
// Each server listens on a free loopback port, keeps its files in a private
// temporary directory, and is stopped by PID (and its directory removed) when
// the test that started it ends. Tests never need a server started by hand.
//
// redis-server is taken from PATH. When it is missing and a Docker engine
// answers, a container is used instead (see docker.go); otherwise the test
// fails with a message that says how to install redis-server.
package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// InstallHint says how to get redis-server on a Debian machine.
const InstallHint = "redis-server is not in PATH: install it with `apt-get install -y redis-server` (or run .ci/run, which does)"

// startTimeout bounds how long a server may take to accept connections.
const startTimeout = 15 * time.Second

// Server is one redis-server process (or container) started for tests.
type Server struct {
	// Addr is the server's loopback address, host:port.
	Addr string
	// Port is the TCP port the server listens on.
	Port int
	// Dir holds the server's files (dump, append-only file, log).
	Dir string

	args []string
	conf string // a config file given first on the command line (sentinels)

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	stopped bool
	stop    func() error // set for servers that are not local processes
}

// Start starts a private redis-server for tb and stops it when tb ends.
// Extra args are passed to redis-server as command-line options, for example
// "--appendonly", "yes" or "--enable-debug-command", "local".
func Start(tb testing.TB, args ...string) *Server {
	tb.Helper()
	s, err := StartServer(args...)
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	tb.Cleanup(func() { _ = s.Stop() })
	return s
}

// StartServer starts a redis-server that the caller must Stop.
func StartServer(args ...string) (*Server, error) {
	return startWith("", args...)
}

// startWith starts a redis-server with an optional config file, which is
// written into the server's directory first (confText "" for none).
func startWith(confText string, args ...string) (*Server, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		if s, derr := startDocker(args...); derr == nil {
			return s, nil
		} else if !errors.Is(derr, errNoDocker) {
			return nil, derr
		}
		return nil, errors.New(InstallHint)
	}
	dir, err := os.MkdirTemp("", "relock-redis-*")
	if err != nil {
		return nil, err
	}
	conf := ""
	if confText != "" {
		conf = filepath.Join(dir, "server.conf")
		if err := os.WriteFile(conf, []byte(confText), 0o600); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	var lastErr error
	// A free port can be taken by someone else between the probe and the
	// server's bind; try a few ports before giving up.
	for range 5 {
		port, err := freePort()
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Port: port, Dir: dir, args: args, conf: conf}
		if lastErr = s.launch(); lastErr == nil {
			return s, nil
		}
	}
	_ = os.RemoveAll(dir)
	return nil, lastErr
}

// launch starts the process on s.Port and waits until it answers PING.
func (s *Server) launch() error {
	var argv []string
	if s.conf != "" {
		argv = append(argv, s.conf)
	}
	argv = append(argv,
		"--port", strconv.Itoa(s.Port),
		"--bind", "127.0.0.1",
		"--dir", s.Dir,
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
		"--logfile", filepath.Join(s.Dir, "redis.log"),
		"--protected-mode", "no",
	)
	argv = append(argv, s.args...)
	cmd := exec.Command("redis-server", argv...)
	// The server dies with the process that started it, even when that is
	// killed, and lives in its own process group, so a terminal's Ctrl-C
	// reaches only that process, which stops the server in its own time.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.mu.Lock()
	s.cmd, s.exited, s.stopped = cmd, exited, false
	s.mu.Unlock()
	if err := waitReady(s.Addr, exited); err != nil {
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("redis-server on %s: %w (log: %s)", s.Addr, err, s.logTail())
	}
	return nil
}

func waitReady(addr string, exited <-chan struct{}) error {
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return errors.New("exited during start-up")
		default:
		}
		if pingOnce(addr) == nil {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return errors.New("not ready in time")
}

// pingOnce sends a RESP PING and reads +PONG.
func pingOnce(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	return nil
}

func (s *Server) logTail() string {
	b, err := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
	if err != nil {
		return "no log"
	}
	if len(b) > 600 {
		b = b[len(b)-600:]
	}
	return strings.TrimSpace(string(b))
}

// Stop stops the server by PID, waits for it, and removes its files.
// It is safe to call more than once.
func (s *Server) Stop() error {
	if s.stop != nil {
		return s.stop()
	}
	s.kill(syscall.SIGKILL)
	return os.RemoveAll(s.Dir)
}

// Kill ends the server with SIGKILL, as a crash would, and keeps its files
// so that Restart can bring it back with whatever it persisted.
func (s *Server) Kill() {
	s.kill(syscall.SIGKILL)
}

func (s *Server) kill(sig syscall.Signal) {
	s.mu.Lock()
	cmd, exited, stopped := s.cmd, s.exited, s.stopped
	s.stopped = true
	s.mu.Unlock()
	if cmd == nil || stopped {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT) // a paused server cannot exit
	_ = cmd.Process.Signal(sig)
	<-exited
}

// Restart starts a killed server again on the same port and directory.
func (s *Server) Restart() error {
	if s.stop != nil {
		return errors.New("redistest: Restart needs a local redis-server process")
	}
	s.mu.Lock()
	stopped := s.stopped
	s.mu.Unlock()
	if !stopped {
		return errors.New("redistest: Restart of a running server")
	}
	return s.launch()
}

// Pause stops the server process with SIGSTOP: it keeps its connections but
// answers nothing until Resume.
func (s *Server) Pause() error { return s.signal(syscall.SIGSTOP) }

// Resume continues a paused server.
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.stopped {
		return errors.New("redistest: server is not running")
	}
	return s.cmd.Process.Signal(sig)
}

// PID is the server's process ID (0 for a container).
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
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
	if err != nil {
		tb.Fatalf("redistest: client of %s: %v", s.Addr, err)
	}
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

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
