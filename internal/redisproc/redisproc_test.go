package redisproc_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/relock-go/relock/internal/redisproc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// start starts a server for t and stops it when t ends.
func start(t *testing.T, args ...string) *redisproc.Server {
	t.Helper()
	s, err := redisproc.Start(args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

// do runs one command on a client of addr that is closed before it returns.
func do(t *testing.T, addr string, args ...string) rueidis.RedisMessage {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		t.Fatalf("client of %s: %v", addr, err)
	}
	defer c.Close()
	msg, err := c.Do(t.Context(), c.B().Arbitrary(args...).Build()).ToMessage()
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return msg
}

func TestStartStop(t *testing.T) {
	s, err := redisproc.Start()
	if err != nil {
		t.Fatal(err)
	}
	if err := redisproc.Ping(s.Addr, time.Second); err != nil {
		t.Fatalf("PING after Start: %v", err)
	}
	if s.PID() <= 0 {
		t.Errorf("PID = %d, want a process ID", s.PID())
	}
	if !strings.HasPrefix(s.Addr, "127.0.0.1:") || s.Port == 0 {
		t.Errorf("Addr, Port = %q, %d, want a loopback address", s.Addr, s.Port)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := redisproc.Ping(s.Addr, time.Second); err == nil {
		t.Error("a stopped server answers PING")
	}
	if _, err := os.Stat(s.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Stop left the server's directory: %v", err)
	}
	if err := s.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

func TestArgsAndConfig(t *testing.T) {
	s, err := redisproc.StartWithConfig("maxmemory 12mb\n", "--maxmemory-policy", "allkeys-lru")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	for param, want := range map[string]string{"maxmemory": "12582912", "maxmemory-policy": "allkeys-lru"} {
		msg := do(t, s.Addr, "CONFIG", "GET", param)
		got, _ := msg.AsStrMap()
		if got[param] != want {
			t.Errorf("CONFIG GET %s = %q, want %q", param, got[param], want)
		}
	}
}

func TestKillRestart(t *testing.T) {
	s := start(t, "--appendonly", "yes", "--appendfsync", "always")
	do(t, s.Addr, "SET", "k", "v")
	pid := s.PID()
	s.Kill()
	if err := redisproc.Ping(s.Addr, time.Second); err == nil {
		t.Fatal("a killed server answers PING")
	}
	if err := s.Pause(); !errors.Is(err, redisproc.ErrNotRunning) {
		t.Errorf("Pause of a killed server = %v, want ErrNotRunning", err)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if s.PID() == pid {
		t.Errorf("PID after Restart = %d, the killed process's", pid)
	}
	msg := do(t, s.Addr, "GET", "k")
	if got, _ := msg.ToString(); got != "v" {
		t.Errorf("GET k after Restart = %q, want the value written before the kill", got)
	}
	if err := s.Restart(); err == nil {
		t.Error("Restart of a running server succeeded")
	}
}

func TestPauseResume(t *testing.T) {
	s := start(t)
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := redisproc.Ping(s.Addr, 200*time.Millisecond); err == nil {
		t.Error("a paused server answers PING")
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := redisproc.Ping(s.Addr, 5*time.Second); err != nil {
		t.Errorf("PING after Resume: %v", err)
	}
	// A paused server can still be killed.
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	s.Kill()
}

func TestNotInstalled(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := redisproc.Start()
	if !errors.Is(err, redisproc.ErrNotInstalled) {
		t.Fatalf("Start without redis-server = %v, want ErrNotInstalled", err)
	}
	if !strings.Contains(err.Error(), "apt-get install -y redis-server") {
		t.Errorf("error %q does not say how to install redis-server", err)
	}
}
