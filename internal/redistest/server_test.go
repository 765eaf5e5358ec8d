package redistest_test

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/redisproc"
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
	for _, fallback := range []func(...string) (string, func() error, error){
		nil,
		func(...string) (string, func() error, error) {
			return "", nil, fmt.Errorf("%w: no engine", redistest.ErrNoFallback)
		},
	} {
		setFallback(t, fallback)
		_, err := redistest.StartServer()
		if !errors.Is(err, redisproc.ErrNotInstalled) || !strings.Contains(err.Error(), "apt-get install -y redis-server") {
			t.Errorf("StartServer without redis-server (fallback set: %t) = %v, want ErrNotInstalled with the install hint",
				fallback != nil, err)
		}
	}
}

// TestFallback checks that a server comes from Fallback when redis-server
// is missing, and that what only a local process can do fails on it.
func TestFallback(t *testing.T) {
	local := redistest.Start(t) // before PATH loses redis-server
	t.Setenv("PATH", t.TempDir())
	var gotArgs []string
	stops := 0
	setFallback(t, func(args ...string) (string, func() error, error) {
		gotArgs = args
		return local.Addr, func() error { stops++; return nil }, nil
	})
	srv, err := redistest.StartServer("--appendonly", "yes")
	if err != nil {
		t.Fatal(err)
	}
	if srv.Addr != local.Addr || srv.Port != local.Port {
		t.Errorf("fallback server at %s (port %d), want %s", srv.Addr, srv.Port, local.Addr)
	}
	if want := []string{"--appendonly", "yes"}; !slices.Equal(gotArgs, want) {
		t.Errorf("Fallback got args %q, want %q", gotArgs, want)
	}
	if _, err := srv.Do(t.Context(), "PING"); err != nil {
		t.Errorf("PING a fallback server: %v", err)
	}
	if err := srv.Pause(); err == nil {
		t.Error("Pause of a fallback server succeeded")
	}
	if err := srv.Restart(); err == nil {
		t.Error("Restart of a fallback server succeeded")
	}
	_ = srv.Stop()
	_ = srv.Stop()
	if stops != 1 {
		t.Errorf("two Stops called the fallback's stop %d times, want 1", stops)
	}
}

func setFallback(t *testing.T, f func(...string) (string, func() error, error)) {
	old := redistest.Fallback
	redistest.Fallback = f
	t.Cleanup(func() { redistest.Fallback = old })
}
