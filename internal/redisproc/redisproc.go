// Package redisproc starts and controls local redis-server processes: the
// relock demo's throwaway server and, through internal/redistest, the
// servers of the tests.
//
// Each server listens on a free loopback port, keeps its files in a private
// temporary directory, and runs in its own process group (on Linux it also
// dies with the process that started it). It is stopped by PID. The package
// uses the standard library only; redis-server is taken from PATH, and
// Start reports its absence with an error that matches ErrNotInstalled.
package redisproc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ErrNotInstalled means that redis-server is not in PATH. Start's error
// then also says how to install it (InstallHint).
var ErrNotInstalled = errors.New("redis-server is not in PATH")

// InstallHint says how to get redis-server on a Debian machine.
const InstallHint = "install it with `apt-get install -y redis-server`"

// ErrNotRunning is returned by Pause and Resume when the server has been
// killed or stopped.
var ErrNotRunning = errors.New("redis-server is not running")

// startTimeout bounds how long a server may take to accept connections.
const startTimeout = 15 * time.Second

// portAttempts is how many free ports Start tries: a port found free can be
// taken by someone else before the server binds it.
const portAttempts = 5

// Server is one local redis-server process.
type Server struct {
	// Addr is the server's loopback address, host:port.
	Addr string
	// Port is the TCP port the server listens on.
	Port int
	// Dir holds the server's files (dump, append-only file, log, config).
	Dir string

	args []string
	conf string // a config file given first on the command line, or ""

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has been waited for
	stopped bool          // killed or stopped; Restart may launch it again
}

// Start starts a redis-server on a free loopback port and waits until it
// answers PING. Extra args are passed to redis-server as command-line
// options after the package's own (port, directory, no persistence, log
// file), so they can override them: for example "--appendonly", "yes" or
// "--enable-debug-command", "local". The caller must Stop the server.
func Start(args ...string) (*Server, error) {
	return StartWithConfig("", args...)
}

// Version returns the version of the redis-server in PATH as its
// --version reports it: "7.0.15", or Valkey's own ("8.0.1").
func Version() (string, error) {
	out, err := exec.Command("redis-server", "--version").Output()
	if err != nil {
		return "", fmt.Errorf("redis-server --version: %w", err)
	}
	for _, f := range strings.Fields(string(out)) {
		if v, ok := strings.CutPrefix(f, "v="); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("redis-server --version: no version in %q", out)
}

// StartWithConfig is Start with a config file: config is written into the
// server's directory and given to redis-server before every option. A
// sentinel needs one (it rewrites its config file); config "" means none.
func StartWithConfig(config string, args ...string) (*Server, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrNotInstalled, InstallHint)
	}
	dir, err := os.MkdirTemp("", "relock-redis-*")
	if err != nil {
		return nil, err
	}
	conf := ""
	if config != "" {
		conf = filepath.Join(dir, "server.conf")
		if err := os.WriteFile(conf, []byte(config), 0o600); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	var lastErr error
	for range portAttempts {
		port, err := freePort()
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		s := &Server{
			Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
			Port: port,
			Dir:  dir,
			args: args,
			conf: conf,
		}
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
	cmd.SysProcAttr = procAttr()
	// What the server says before its log file is open (a bad option, a
	// command to rename that it does not have) goes to its stderr.
	out, err := os.Create(filepath.Join(s.Dir, "stderr.log"))
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = out, out
	err = cmd.Start()
	_ = out.Close() // the process has its own descriptor
	if err != nil {
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
		s.Kill()
		return fmt.Errorf("redis-server on %s: %w (log: %s)", s.Addr, err, s.LogTail())
	}
	return nil
}

// waitReady waits until addr answers PING, the process exits, or
// startTimeout passes.
func waitReady(addr string, exited <-chan struct{}) error {
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return errors.New("exited during start-up")
		default:
		}
		if Ping(addr, time.Second) == nil {
			return nil
		}
		time.Sleep(10 * time.Millisecond) // the poll interval: readiness sends no notification
	}
	return errors.New("not ready in time")
}

// Ping sends one PING to addr on a plain connection and returns nil when
// +PONG comes back within timeout.
func Ping(addr string, timeout time.Duration) error {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, err := conn.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if line = strings.TrimSpace(line); line != "+PONG" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// LogTail returns the end of the server's log file, or of what it wrote
// to stderr when its log is empty (it stopped before opening it), for
// error messages.
func (s *Server) LogTail() string {
	b, err := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
	if len(bytes.TrimSpace(b)) == 0 {
		if e, _ := os.ReadFile(filepath.Join(s.Dir, "stderr.log")); len(bytes.TrimSpace(e)) > 0 {
			b, err = e, nil
		}
	}
	if err != nil {
		return "no log"
	}
	if len(b) > 600 {
		b = b[len(b)-600:]
	}
	return strings.TrimSpace(string(b))
}

// Stop kills the server, waits for it to exit, and removes its files.
// It is safe to call more than once, and after Kill.
func (s *Server) Stop() error {
	s.Kill()
	return os.RemoveAll(s.Dir)
}

// Kill ends the server with SIGKILL, as a crash would, waits for it to
// exit, and keeps its files so that Restart can bring it back with whatever
// it persisted. A paused server is killed too. Killing a server that is not
// running does nothing.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, exited, stopped := s.cmd, s.exited, s.stopped
	s.stopped = true
	s.mu.Unlock()
	if cmd == nil || stopped {
		return
	}
	_ = cmd.Process.Kill()
	<-exited
}

// Restart starts a killed server again, on the same port and directory and
// with the same options. It returns an error if the server is running, or
// if it does not answer PING in time (the port may have been taken).
func (s *Server) Restart() error {
	s.mu.Lock()
	stopped := s.stopped
	s.mu.Unlock()
	if !stopped {
		return errors.New("redisproc: Restart of a running server")
	}
	return s.launch()
}

// Pause stops the server process with SIGSTOP: it keeps its connections
// but answers nothing until Resume.
func (s *Server) Pause() error { return s.signal(sigStop) }

// Resume continues a paused server with SIGCONT.
func (s *Server) Resume() error { return s.signal(sigCont) }

func (s *Server) signal(sig os.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.stopped {
		return fmt.Errorf("redisproc: %s: %w", s.Addr, ErrNotRunning)
	}
	if sig == nil {
		return fmt.Errorf("redisproc: pausing a process: %w", errors.ErrUnsupported)
	}
	return s.cmd.Process.Signal(sig)
}

// PID is the process ID of the server's current process (it changes on
// Restart).
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
