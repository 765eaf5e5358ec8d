package redistest_test

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

func TestStartKillRestart(t *testing.T) {
	srv := redistest.Start(t)
	if _, err := srv.Do(t.Context(), "SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	// A raw dial: a rueidis client of a dead server leaves a reconnect
	// goroutine sleeping for a while after Close.
	if conn, err := net.DialTimeout("tcp", srv.Addr, time.Second); err == nil {
		conn.Close()
		t.Fatal("a killed server still accepts connections")
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if msg, err := srv.Do(t.Context(), "PING"); err != nil {
		t.Fatalf("PING after Restart: %v", err)
	} else if s, _ := msg.ToString(); s != "PONG" {
		t.Errorf("PING = %q", s)
	}
}

func TestMissingRedisServerSaysHowToInstall(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	_, err := redistest.StartServer()
	if err == nil || !strings.Contains(err.Error(), "apt-get install -y redis-server") {
		t.Errorf("StartServer without redis-server = %v, want the install hint", err)
	}
}
