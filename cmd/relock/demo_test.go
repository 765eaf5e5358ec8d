package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDemo runs the demo against a redis-server it starts itself (nothing
// answers at 127.0.0.1:1), to its end.
func TestDemo(t *testing.T) {
	r := startRelock(t, "demo", "--duration", "3s", "--redis", "127.0.0.1:1").wait(45 * time.Second)
	wantCode(t, r, 0)
	for _, want := range []string{
		"starting a throwaway redis-server",
		"summary: plain lock, 4 worker processes",
		"violations: 0",
		"redis-server stopped",
	} {
		assert.Contains(t, r.stdout, want, "output")
	}
	// Every worker got the lock, and it changed hands.
	for _, w := range []string{"w1", "w2", "w3", "w4"} {
		assert.Regexp(t, `(?m)^  `+w+`\s+[1-9]\d*\s`, r.stdout, "worker %s: no acquisitions in the summary", w)
	}
	assert.Regexp(t, `hand-offs: [1-9]\d* to another worker`, r.stdout, "no hand-offs in the summary")
	assert.Empty(t, r.stderr, "stderr")
}

// TestDemoFairOnServer runs the demo with a fair lock on a server that
// answers, and checks that it leaves none of its keys behind.
func TestDemoFairOnServer(t *testing.T) {
	srv := server(t)
	r := startRelock(t, "demo", "--duration", "2s", "--workers", "3", "--fair", "--redis", srv.Addr).wait(45 * time.Second)
	wantCode(t, r, 0)
	for _, want := range []string{"using the Redis server at " + srv.Addr, "summary: fair lock, 3 worker processes", "violations: 0"} {
		assert.Contains(t, r.stdout, want, "output")
	}
	rdb := srv.Client(t)
	keys, err := rdb.Do(t.Context(), rdb.B().Keys().Pattern("*relock-demo:*").Build()).AsStrSlice()
	require.NoError(t, err)
	assert.Empty(t, keys, "the demo left keys behind")
}

// TestDemoWithoutRedisServer: no Redis answers and redis-server is not
// installed, so the demo says how to get one and exits 69.
func TestDemoWithoutRedisServer(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	r := relock(t, "demo", "--duration", "1s", "--redis", "127.0.0.1:1")
	wantCode(t, r, exitUnavailable)
	for _, want := range []string{"redis-server is not in PATH", "apt-get install -y redis-server", "./demo.sh"} {
		assert.Contains(t, r.stderr, want, "stderr")
	}
}

// TestDemoWithPassword runs the demo on a server that wants a password,
// given in the URL: the demo and its workers connect, and the password
// shows nowhere. Without it, the demo exits 69 instead of starting a
// server of its own.
func TestDemoWithPassword(t *testing.T) {
	srv := startAuthServer(t)
	r := startRelock(t, "--redis", "redis://:"+testPassword+"@"+srv.Addr, "demo", "--duration", "1s", "--workers", "2").wait(45 * time.Second)
	wantCode(t, r, 0)
	wantNoSecret(t, r)
	for _, want := range []string{"using the Redis server at redis://:xxxxx@" + srv.Addr, "violations: 0"} {
		assert.Contains(t, r.stdout, want, "output")
	}

	r = relock(t, "demo", "--duration", "1s", "--redis", srv.Addr)
	wantCode(t, r, exitUnavailable)
	wantOneLine(t, r, "NOAUTH")
}
