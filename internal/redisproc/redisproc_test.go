package redisproc_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/relock-go/relock/internal/redisproc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// start starts a server for t and stops it when t ends.
func start(t *testing.T, args ...string) *redisproc.Server {
	t.Helper()
	s, err := redisproc.Start(args...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

// do runs one command on a client of addr that is closed before it returns.
func do(t *testing.T, addr string, args ...string) rueidis.RedisMessage {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	require.NoError(t, err, "client of %s", addr)
	defer c.Close()
	msg, err := c.Do(t.Context(), c.B().Arbitrary(args...).Build()).ToMessage()
	require.NoError(t, err, "%v", args)
	return msg
}

func TestStartStop(t *testing.T) {
	s, err := redisproc.Start()
	require.NoError(t, err)
	require.NoError(t, redisproc.Ping(s.Addr, time.Second), "PING after Start")
	assert.Positive(t, s.PID(), "PID")
	assert.True(t, strings.HasPrefix(s.Addr, "127.0.0.1:"), "Addr = %q, want a loopback address", s.Addr)
	assert.NotZero(t, s.Port, "Port")
	require.NoError(t, s.Stop(), "Stop")
	assert.Error(t, redisproc.Ping(s.Addr, time.Second), "PING of a stopped server")
	_, err = os.Stat(s.Dir)
	assert.ErrorIs(t, err, os.ErrNotExist, "Stop must remove the server's directory")
	assert.NoError(t, s.Stop(), "second Stop")
}

func TestArgsAndConfig(t *testing.T) {
	s, err := redisproc.StartWithConfig("maxmemory 12mb\n", "--maxmemory-policy", "allkeys-lru")
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Stop() })
	for param, want := range map[string]string{"maxmemory": "12582912", "maxmemory-policy": "allkeys-lru"} {
		msg := do(t, s.Addr, "CONFIG", "GET", param)
		got, _ := msg.AsStrMap()
		assert.Equal(t, want, got[param], "CONFIG GET %s", param)
	}
}

func TestKillRestart(t *testing.T) {
	s := start(t, "--appendonly", "yes", "--appendfsync", "always")
	do(t, s.Addr, "SET", "k", "v")
	pid := s.PID()
	s.Kill()
	require.Error(t, redisproc.Ping(s.Addr, time.Second), "PING of a killed server")
	assert.ErrorIs(t, s.Pause(), redisproc.ErrNotRunning, "Pause of a killed server")
	require.NoError(t, s.Restart())
	assert.NotEqual(t, pid, s.PID(), "PID after Restart must not be the killed process's")
	msg := do(t, s.Addr, "GET", "k")
	got, _ := msg.ToString()
	assert.Equal(t, "v", got, "GET k after Restart: the value written before the kill")
	assert.Error(t, s.Restart(), "Restart of a running server")
}

func TestPauseResume(t *testing.T) {
	s := start(t)
	require.NoError(t, s.Pause())
	assert.Error(t, redisproc.Ping(s.Addr, 200*time.Millisecond), "PING of a paused server")
	require.NoError(t, s.Resume())
	assert.NoError(t, redisproc.Ping(s.Addr, 5*time.Second), "PING after Resume")
	// A paused server can still be killed.
	require.NoError(t, s.Pause())
	s.Kill()
}

func TestNotInstalled(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := redisproc.Start()
	require.ErrorIs(t, err, redisproc.ErrNotInstalled, "Start without redis-server")
	assert.ErrorContains(t, err, "apt-get install -y redis-server", "the error must say how to install redis-server")
}

// TestStartErrorSaysWhy: a server that stops before opening its log (an
// option it refuses) is reported with what it wrote to stderr.
func TestStartErrorSaysWhy(t *testing.T) {
	_, err := redisproc.Start("--rename-command", "NO-SUCH-COMMAND", "")
	require.Error(t, err, "Start with a command to rename that the server does not have")
	assert.ErrorContains(t, err, "No such command in rename-command", "the error must say why the server stopped")
}
