package main

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// commandGoroutines are the stacks of the goroutines that run code of
// this package's commands (not its tests) now.
func commandGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var found []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "relock/cmd/relock.(*topper)") || strings.Contains(g, "relock/cmd/relock.readKeys") {
			found = append(found, g)
		}
	}
	return found
}

// TestTopWaitsInProcessNoLeak: top --once and waits, run in this process
// (the other tests run the binary, whose goroutines end with it), leave
// no goroutine when they return: top waits for its subscription's
// goroutine, which ends once top's context is cancelled and its client
// closed. (TestMain's goleak check, in redistest.Run, sees only this
// process: this test is what puts the commands' code under it.)
func TestTopWaitsInProcessNoLeak(t *testing.T) {
	srv := server(t)
	t.Setenv("RELOCK_REDIS", "")
	t.Setenv("RELOCK_PREFIX", "")
	c := relocktest.Client(t)
	name := relocktest.Name(t)
	holder := rlock.WithOwner(t.Context(), "holder")
	require.NoError(t, c.GetLock(name).Lock(holder))
	recordWait(t, "", c.ID(), "w", name, "lock", time.Second)
	leaks := goleak.IgnoreCurrent()

	for _, args := range [][]string{
		{"--redis", srv.Addr, "top", "--once", "--interval", "10ms", "--match", name},
		{"--redis", srv.Addr, "waits", "--match", name},
		{"--redis", srv.Addr, "waits", "--json", "--match", name},
	} {
		var stdout, stderr bytes.Buffer
		cl := &cli{stdout: &stdout, stderr: &stderr}
		require.Equal(t, exitOK, cl.main(args), "%v\nstdout:\n%s\nstderr:\n%s", args, stdout.String(), stderr.String())
		require.Contains(t, stdout.String(), name, "%v", args)
		// At once, with no grace: a goroutine of the command still
		// running outlived the call.
		require.Empty(t, commandGoroutines(), "goroutines of relock %s after it returned", args[2])
	}
	goleak.VerifyNone(t, leaks)
}
