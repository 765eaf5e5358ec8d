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

	"github.com/relock-go/relock/internal/relocktest"
)

// countINT is a command that counts the SIGINTs it gets: it creates $0
// when ready, and on SIGTERM writes the count to $1 and exits 0. Its sleep
// is in its process group too: it must not end the command early.
const countINT = `n=0
trap 'n=$((n+1))' INT
trap 'echo $n > "$1"; kill $s 2>/dev/null; exit 0' TERM
sleep 60 & s=$!
: > "$0"
while kill -0 $s 2>/dev/null; do wait $s; done`

// TestRunSignalToProcessGroup sends SIGINT to relock's process group, as a
// supervisor or a shell without job control would: the command must get
// it once (relock passes it on; the command is not in that group itself).
func TestRunSignalToProcessGroup(t *testing.T) {
	srv := server(t)
	name := relocktest.Name(t)
	dir := t.TempDir()
	ready, count := filepath.Join(dir, "ready"), filepath.Join(dir, "count")
	p := startRelockWith(t, procOptions{setpgid: true}, "run", "--redis", srv.Addr, name, "--", "sh", "-c", countINT, ready, count)
	waitFile(t, ready, p)
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	// SIGTERM after it, to relock's PID: relock passes signals on in the
	// order it got them, and the shell runs its traps in signal order, so
	// the count written on SIGTERM includes every SIGINT.
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r := p.wait(10 * time.Second)
	wantCode(t, r, 0)
	if b, err := os.ReadFile(count); err != nil || strings.TrimSpace(string(b)) != "1" {
		t.Errorf("the command got SIGINT %q times (%v), want once\nstderr:\n%s", strings.TrimSpace(string(b)), err, r.stderr)
	}
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
	var unlock int32
	if err := ioctl(master, syscall.TIOCSPTLCK, unsafe.Pointer(&unlock)); err != nil {
		master.Close()
		t.Fatal(err)
	}
	var n uint32
	if err := ioctl(master, syscall.TIOCGPTN, unsafe.Pointer(&n)); err != nil {
		master.Close()
		t.Fatal(err)
	}
	slave, err := os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		master.Close()
		t.Fatal(err)
	}
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
	if _, err := io.WriteString(p.master, s); err != nil {
		t.Fatal(err)
	}
}

// foreground is the terminal's foreground process group.
func (p *pty) foreground(t *testing.T) int {
	t.Helper()
	var pgrp int32
	if err := ioctl(p.master, syscall.TIOCGPGRP, unsafe.Pointer(&pgrp)); err != nil {
		t.Fatal(err)
	}
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
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
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
	// The command: writes relock's PID to $0 when ready, reads a line into
	// $2, counts SIGINTs into $1, and ends on SIGTERM.
	command := `n=0
trap 'n=$((n+1)); echo $n > "$1"' INT
trap 'echo "final $n" > "$1"; kill $s 2>/dev/null; exit 0' TERM
echo $PPID > "$0"
read l
echo "$l" > "$2"
sleep 60 & s=$!
while kill -0 $s 2>/dev/null; do wait $s; done`
	// The shell: runs relock, then reads a line from the terminal, which
	// only works if relock gave the terminal back.
	shell := `"$0" run --redis "$1" "$2" -- sh -c "$3" "$4" "$5" "$6"
echo "relock exited $?"
read a
echo "$a" > "$7"`
	p := openPTY(t)
	_, exited := startOnTerminal(t, p, shell, srv.Addr, name, command, ready, count, line, after)
	waitForFile(t, ready, exited, p)
	b, _ := os.ReadFile(ready)
	relockPID, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("relock's PID: %q", b)
	}
	if fg := p.foreground(t); fg == getpgid(t, relockPID) {
		t.Errorf("the terminal's foreground group is relock's (%d), want the command's", fg)
	}

	// Ctrl-Z: the command stops, then relock stops itself.
	p.typeIn(t, "\x1a")
	relocktest.Eventually(t, 10*time.Second, "relock to stop", func() bool { return processState(relockPID) == 'T' })
	// As a shell's fg or bg would: continue relock, which continues the
	// command.
	if err := syscall.Kill(relockPID, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	p.typeIn(t, "typed line\n")
	waitForFile(t, line, exited, p)
	if b, _ := os.ReadFile(line); strings.TrimSpace(string(b)) != "typed line" {
		t.Errorf("the command read %q from the terminal", b)
	}

	p.typeIn(t, "\x03")
	waitForFile(t, count, exited, p)
	if err := syscall.Kill(relockPID, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.typeIn(t, "after relock\n")
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		t.Fatalf("the shell did not end; terminal output:\n%s", p.output())
	}
	out := p.drain()
	if !strings.Contains(out, "relock exited 0") {
		t.Errorf("relock did not exit 0; terminal output:\n%s", out)
	}
	if b, err := os.ReadFile(count); err != nil || strings.TrimSpace(string(b)) != "final 1" {
		t.Errorf("the command's SIGINT count: %q (%v), want \"final 1\" (Ctrl-C reaches it once)\nterminal output:\n%s", b, err, out)
	}
	if b, err := os.ReadFile(after); err != nil || strings.TrimSpace(string(b)) != "after relock" {
		t.Errorf("the shell read %q (%v) after relock: relock did not give the terminal back\nterminal output:\n%s", b, err, out)
	}
}

// waitForFile is waitFile for a process started by startOnTerminal.
func waitForFile(t *testing.T, path string, exited <-chan struct{}, p *pty) {
	t.Helper()
	relocktest.Eventually(t, 15*time.Second, path+" to appear", func() bool {
		if _, err := os.Stat(path); err == nil {
			return true
		}
		select {
		case <-exited:
			t.Fatalf("relock ended before %s appeared; terminal output:\n%s", path, p.output())
		default:
		}
		return false
	})
}

func getpgid(t *testing.T, pid int) int {
	t.Helper()
	pgid, err := syscall.Getpgid(pid)
	if err != nil {
		t.Fatal(err)
	}
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
