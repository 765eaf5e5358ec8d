package redistest_test

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redisproc"
	"github.com/relock-go/relock/internal/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

func TestStartKillRestart(t *testing.T) {
	srv := redistest.Start(t)
	_, err := srv.Do(t.Context(), "SET", "k", "v")
	require.NoError(t, err)
	srv.Kill()
	// A raw dial: a rueidis client of a dead server leaves a reconnect
	// goroutine sleeping for a while after Close.
	if conn, err := net.DialTimeout("tcp", srv.Addr, time.Second); err == nil {
		conn.Close()
		require.Fail(t, "a killed server still accepts connections")
	}
	require.NoError(t, srv.Restart())
	msg, err := srv.Do(t.Context(), "PING")
	require.NoError(t, err, "PING after Restart")
	s, _ := msg.ToString()
	assert.Equal(t, "PONG", s, "PING after Restart")
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
		assert.ErrorIs(t, err, redisproc.ErrNotInstalled, "StartServer without redis-server (fallback set: %t)", fallback != nil)
		assert.ErrorContains(t, err, "apt-get install -y redis-server", "the install hint (fallback set: %t)", fallback != nil)
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
	require.NoError(t, err)
	assert.Equal(t, local.Addr, srv.Addr, "the fallback server's address")
	assert.Equal(t, local.Port, srv.Port, "the fallback server's port")
	assert.Equal(t, []string{"--appendonly", "yes"}, gotArgs, "the args Fallback got")
	_, err = srv.Do(t.Context(), "PING")
	assert.NoError(t, err, "PING a fallback server")
	assert.Error(t, srv.Pause(), "Pause of a fallback server")
	assert.Error(t, srv.Restart(), "Restart of a fallback server")
	_ = srv.Stop()
	_ = srv.Stop()
	assert.Equal(t, 1, stops, "calls of the fallback's stop after two Stops")
}

func setFallback(t *testing.T, f func(...string) (string, func() error, error)) {
	old := redistest.Fallback
	redistest.Fallback = f
	t.Cleanup(func() { redistest.Fallback = old })
}
