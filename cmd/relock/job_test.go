//go:build linux

package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/relocktest"
)

// countINT is a command that counts the SIGINTs it gets: the count goes
// to $1 at each SIGINT; SIGTERM ends it, and it writes "final N" to $1 and
// exits 0. Its sleep runs in its process group too, ignoring SIGINT (a
// background job of a script does), so that only the SIGTERM passed on to
// the group ends it. The sleep writes the ready line to $0 itself, so
// that it runs, SIGINT ignored, before the test sends any signal. The
// final line is written after the wait, not by the SIGTERM trap: dash may
// skip a trap for a signal that comes just after another trap ran.
const countINT = `n=0
trap 'n=$((n+1)); echo $n > "$1"' INT
trap 'kill $s 2>/dev/null' TERM
sh -c 'echo ready > "$0"; exec sleep 60' "$0" & s=$!
while kill -0 $s 2>/dev/null; do wait $s; done
echo "final $n" > "$1"`

// TestRunSignalToProcessGroup sends SIGINT to relock's process group, as a
// supervisor or a shell without job control would: the command must get
// it once (relock passes it on; the command is not in that group itself).
func TestRunSignalToProcessGroup(t *testing.T) {
	srv := server(t)
	name := relocktest.Name(t)
	dir := t.TempDir()
	ready, count := filepath.Join(dir, "ready"), filepath.Join(dir, "count")
	p := startRelockWith(t, procOptions{setpgid: true}, "run", "--redis", srv.Addr, name, "--", "sh", "-c", countINT, ready, count)
	waitReady(t, ready, p)
	require.NoError(t, syscall.Kill(-p.cmd.Process.Pid, syscall.SIGINT))
	assert.Equal(t, "1", strings.TrimSpace(waitReady(t, count, p)), "SIGINTs the command got")
	// SIGTERM once the SIGINT has come through: relock passes signals on
	// as it gets them, but two that reach it at once may come out in
	// either order.
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	r := p.wait(10 * time.Second)
	wantCode(t, r, 0)
	wantMarker(t, count, "final 1", "the command's SIGINT count when it ended")
}

// pty is the master side of a pseudo-terminal whose output the test
// collects.
type pty struct {
	master *os.File
	slave  *os.File
	mu     sync.Mutex
	out    bytes.Buffer
	done   chan struct{}
}

func openPTY(t *testing.T) *pty {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	var unlock int32
	require.NoError(t, ioctl(master, syscall.TIOCSPTLCK, unsafe.Pointer(&unlock)))
	var n uint32
	require.NoError(t, ioctl(master, syscall.TIOCGPTN, unsafe.Pointer(&n)))
	slave, err := os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err)
	p := &pty{master: master, slave: slave, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			p.mu.Lock()
			p.out.Write(buf[:n])
			p.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		slave.Close()
		master.Close()
		<-p.done
	})
	return p
}

func ioctl(f *os.File, req uint, arg unsafe.Pointer) error {
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), uintptr(req), uintptr(arg)); errno != 0 {
		return errno
	}
	return nil
}

// drain closes the terminal once every process using it has ended, and
// returns all it printed.
func (p *pty) drain() string {
	p.slave.Close()
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
	}
	return p.output()
}

func (p *pty) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// type writes s as if typed at the terminal.
func (p *pty) typeIn(t *testing.T, s string) {
	t.Helper()
	_, err := io.WriteString(p.master, s)
	require.NoError(t, err)
}

// foreground is the terminal's foreground process group.
func (p *pty) foreground(t *testing.T) int {
	t.Helper()
	var pgrp int32
	require.NoError(t, ioctl(p.master, syscall.TIOCGPGRP, unsafe.Pointer(&pgrp)))
	return int(pgrp)
}

// startOnTerminal starts a shell script as the session leader of the
// terminal p, with p as its stdin, stdout and stderr, as a login shell
// would run. $0 in the script is the relock binary; args follow.
func startOnTerminal(t *testing.T, p *pty, script string, args ...string) (cmd *exec.Cmd, exited <-chan struct{}) {
	t.Helper()
	cmd = exec.Command("sh", append([]string{"-c", script, relockBin}, args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = p.slave, p.slave, p.slave
	cmd.Env = append(os.Environ(), "RELOCK_REDIS=", "RELOCK_PASSWORD=", "REDISCLI_AUTH=", "GORACE=atexit_sleep_ms=0 exitcode=66")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	})
	return cmd, done
}

// TestRunOnTerminal runs relock from a shell on a terminal: the command
// owns the terminal while it runs (it reads a line typed there), a Ctrl-C
// typed there reaches it once, a Ctrl-Z stops it and relock until relock
// is continued, and relock gives the terminal back to the shell at the end.
func TestRunOnTerminal(t *testing.T) {
	srv := server(t)
	name := relocktest.Name(t)
	dir := t.TempDir()
	ready, count, line, after := filepath.Join(dir, "ready"), filepath.Join(dir, "count"), filepath.Join(dir, "line"), filepath.Join(dir, "after")
	// The command: reads a line into $2, then counts SIGINTs into $1 as
	// countINT does; its sleep writes relock's PID to $0 when it runs.
	// Each file gets one line, by a builtin: a shell that is starting a
	// program in the foreground when a signal comes may lose the signal
	// (dash forks with vfork), so the command starts none once it is ready.
	command := `n=0
trap 'n=$((n+1)); echo $n > "$1"' INT
trap 'kill $s 2>/dev/null' TERM
sh -c 'echo "$1" > "$0"; exec sleep 60' "$0" $PPID & s=$!
read l
echo "$l" > "$2"
while kill -0 $s 2>/dev/null; do wait $s; done
echo "final $n" > "$1"`
	// The shell: runs relock, then reads a line from the terminal, which
	// only works if relock gave the terminal back.
	shell := `"$0" run --redis "$1" "$2" -- sh -c "$3" "$4" "$5" "$6"
echo "relock exited $?"
read a
echo "$a" > "$7"`
	p := openPTY(t)
	_, exited := startOnTerminal(t, p, shell, srv.Addr, name, command, ready, count, line, after)
	onTerminal := func() string { return "terminal output:\n" + p.output() }
	pid := waitFile(t, ready, exited, onTerminal)
	relockPID, err := strconv.Atoi(strings.TrimSpace(pid))
	require.NoError(t, err, "relock's PID")
	assert.NotEqual(t, getpgid(t, relockPID), p.foreground(t), "the terminal's foreground group is relock's, want the command's")

	// Ctrl-Z: the command stops, then relock stops itself.
	p.typeIn(t, "\x1a")
	waitUntil(t, 10*time.Second, "relock to stop", func() (bool, error) { return processState(relockPID) == 'T', nil })
	// As a shell's fg or bg would: continue relock, which continues the
	// command.
	require.NoError(t, syscall.Kill(relockPID, syscall.SIGCONT))
	p.typeIn(t, "typed line\n")
	assert.Equal(t, "typed line", strings.TrimSpace(waitFile(t, line, exited, onTerminal)), "the line the command read from the terminal")

	p.typeIn(t, "\x03")
	assert.Equal(t, "1", strings.TrimSpace(waitFile(t, count, exited, onTerminal)), "SIGINTs the command got")
	require.NoError(t, syscall.Kill(relockPID, syscall.SIGTERM))
	p.typeIn(t, "after relock\n")
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		require.Failf(t, "the shell did not end", "terminal output:\n%s", p.output())
	}
	out := p.drain()
	assert.Contains(t, out, "relock exited 0", "terminal output")
	b, err := os.ReadFile(count)
	require.NoError(t, err)
	assert.Equal(t, "final 1", strings.TrimSpace(string(b)), "the command's SIGINT count (Ctrl-C reaches it once)\nterminal output:\n%s", out)
	b, err = os.ReadFile(after)
	require.NoError(t, err, "the shell read nothing after relock: relock did not give the terminal back\nterminal output:\n%s", out)
	assert.Equal(t, "after relock", strings.TrimSpace(string(b)), "what the shell read after relock\nterminal output:\n%s", out)
}

func getpgid(t *testing.T, pid int) int {
	t.Helper()
	pgid, err := syscall.Getpgid(pid)
	require.NoError(t, err)
	return pgid
}

// processState is the state letter of pid in /proc ('T' when stopped), or
// 0 if it cannot be read.
func processState(pid int) byte {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// "pid (comm) S ...": comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}
