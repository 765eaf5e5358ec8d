package main

import (
	"regexp"
	"strings"
	"testing"
	"time"
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
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	// Every worker got the lock, and it changed hands.
	for _, w := range []string{"w1", "w2", "w3", "w4"} {
		m := regexp.MustCompile(`(?m)^  ` + w + `\s+(\d+)\s`).FindStringSubmatch(r.stdout)
		if m == nil || m[1] == "0" {
			t.Errorf("worker %s: no acquisitions in the summary:\n%s", w, r.stdout)
		}
	}
	if !regexp.MustCompile(`hand-offs: [1-9]\d* to another worker`).MatchString(r.stdout) {
		t.Errorf("no hand-offs in the summary:\n%s", r.stdout)
	}
	if r.stderr != "" {
		t.Errorf("stderr:\n%s", r.stderr)
	}
}

// TestDemoFairOnServer runs the demo with a fair lock on a server that
// answers, and checks that it leaves none of its keys behind.
func TestDemoFairOnServer(t *testing.T) {
	srv := server(t)
	r := startRelock(t, "demo", "--duration", "2s", "--workers", "3", "--fair", "--redis", srv.Addr).wait(45 * time.Second)
	wantCode(t, r, 0)
	for _, want := range []string{"using the Redis server at " + srv.Addr, "summary: fair lock, 3 worker processes", "violations: 0"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	rdb := srv.Client(t)
	keys, err := rdb.Do(t.Context(), rdb.B().Keys().Pattern("*relock-demo:*").Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) > 0 {
		t.Errorf("the demo left keys behind: %v", keys)
	}
}

// TestDemoWithoutRedisServer: no Redis answers and redis-server is not
// installed, so the demo says how to get one and exits 69.
func TestDemoWithoutRedisServer(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	r := relock(t, "demo", "--duration", "1s", "--redis", "127.0.0.1:1")
	wantCode(t, r, exitUnavailable)
	for _, want := range []string{"redis-server is not in PATH", "apt-get install -y redis-server", "./demo.sh"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
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
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}

	r = relock(t, "demo", "--duration", "1s", "--redis", srv.Addr)
	wantCode(t, r, exitUnavailable)
	wantOneLine(t, r, "NOAUTH")
}
