package main

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// TestTopOnTerminal: on a terminal top redraws its frame in place with
// the cursor hidden, reads q as soon as it is typed (no Enter: the
// terminal is out of line mode), and leaves the cursor shown and the
// terminal in line mode again.
func TestTopOnTerminal(t *testing.T) {
	p := openPTY(t)
	c := relocktest.Client(t)
	names, match := testNames(t, 1)
	require.NoError(t, c.GetLock(names[0]).Lock(rlock.WithOwner(t.Context(), "h")))
	recordWait(t, "", c.ID(), "w", names[0], "lock", time.Second)

	cmd := exec.Command(relockBin, "top", "--interval", "50ms", "--redis", server(t).Addr, "--match", match)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = p.slave, p.slave, p.slave
	cmd.Env = append(os.Environ(), "TERM=xterm", "RELOCK_PREFIX=", "NO_COLOR=1", "GORACE=atexit_sleep_ms=0 exitcode=66")
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	waitUntil(t, 15*time.Second, "two frames on the terminal", func() (bool, error) {
		return strings.Count(p.output(), "\x1b[H") >= 3, nil
	}, func() string { return p.output() })
	p.typeIn(t, "q")
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		require.NoError(t, err, "top's exit\n%s", p.output())
	case <-time.After(10 * time.Second):
		require.Fail(t, "top did not quit on q", "%q", p.output())
	}
	// What top wrote last reaches the terminal's master side after top
	// ended: wait for it.
	waitUntil(t, 10*time.Second, "the cursor shown again", func() (bool, error) {
		return strings.HasSuffix(p.output(), ansiShowCursor), nil
	}, func() string { return p.output() })
	out := p.output()
	assert.True(t, strings.HasPrefix(out, ansiHideCursor), "the cursor hidden first: %q", out)
	assert.Contains(t, out, names[0]+" ", "the name's line")
	var tio syscall.Termios
	require.NoError(t, termios(int(p.slave.Fd()), syscall.TCGETS, &tio))
	assert.NotZero(t, tio.Lflag&syscall.ICANON, "line mode after top")
	assert.NotZero(t, tio.Lflag&syscall.ECHO, "echo after top")
}
