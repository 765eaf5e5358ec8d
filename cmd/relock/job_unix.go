//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package main

import (
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"unsafe"
)

// How run's COMMAND runs: in a process group of its own, so that a signal
// sent to relock's group or typed at the terminal reaches it once, not
// once directly and once more through relock. relock passes on every
// signal it gets to that group. When relock's stdin is its controlling
// terminal and relock runs in the foreground, COMMAND's group becomes the
// terminal's foreground group, so that COMMAND can read the terminal and
// gets Ctrl-C and Ctrl-Z straight from it; relock takes the terminal back
// when COMMAND ends.

// forwardedSignals are passed on to COMMAND's process group.
var forwardedSignals = []os.Signal{
	syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGALRM, syscall.SIGWINCH,
	syscall.SIGTSTP, syscall.SIGCONT,
}

// job is run's COMMAND, started by startJob.
type job struct {
	cmd *exec.Cmd
	// events reports that the process stopped, and finally how it ended.
	events chan jobEvent
	// tty is relock's controlling terminal (its stdin), or -1.
	tty int
	// jobControl is set when relock has a controlling terminal, so that
	// someone can continue it after it stopped itself.
	jobControl bool
}

// jobEvent is a change of COMMAND's process: stopped, or ended (with its
// wait status, or err if it could not be waited for).
type jobEvent struct {
	stopped bool
	status  syscall.WaitStatus
	err     error
}

// startJob starts cmd in a process group of its own, in the terminal's
// foreground when relock is there.
func startJob(cmd *exec.Cmd) (*job, error) {
	j := &job{cmd: cmd, tty: -1, events: make(chan jobEvent, 4)}
	attr := &syscall.SysProcAttr{Setpgid: true}
	setDeathSignal(attr)
	if fd := int(os.Stdin.Fd()); cmd.Stdin == os.Stdin {
		if fg, err := tcgetpgrp(fd); err == nil {
			j.tty = fd
			if fg == syscall.Getpgrp() {
				attr.Foreground, attr.Ctty = true, fd
			}
		}
	}
	j.jobControl = j.tty >= 0 || hasControllingTerminal()
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	if j.tty >= 0 {
		// relock now hands the terminal to and fro from the background,
		// and may write warnings to it from there: SIGTTOU must not stop
		// it. (Ignored only now: COMMAND must not inherit that.)
		signal.Ignore(syscall.SIGTTOU)
	}
	go j.wait()
	return j, nil
}

// wait reports the process's stops and its end on j.events. It reaps the
// process itself (os/exec's Wait does not report stops).
func (j *job) wait() {
	pid := j.cmd.Process.Pid
	for {
		var ws syscall.WaitStatus
		_, err := syscall.Wait4(pid, &ws, syscall.WUNTRACED, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err == nil && ws.Stopped() {
			j.events <- jobEvent{stopped: true, status: ws}
			continue
		}
		// Reaped: let os/exec release what it holds (its own wait fails).
		_ = j.cmd.Wait()
		j.events <- jobEvent{status: ws, err: err}
		return
	}
}

// pgid is the process group of the job.
func (j *job) pgid() int { return j.cmd.Process.Pid }

// signal sends sig to the job's process group. Before SIGCONT, it hands the
// terminal back to the job if relock was resumed in the foreground.
func (j *job) signal(sig os.Signal) {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return
	}
	if s == syscall.SIGCONT && j.tty >= 0 {
		if fg, err := tcgetpgrp(j.tty); err == nil && fg == syscall.Getpgrp() {
			_ = tcsetpgrp(j.tty, j.pgid())
		}
	}
	_ = syscall.Kill(-j.pgid(), s)
}

// terminate sends the job SIGTERM, and SIGCONT: a stopped process must run
// to die.
func (j *job) terminate() {
	j.signal(syscall.SIGTERM)
	j.signal(syscall.SIGCONT)
}

// suspendSelf stops relock, after its job stopped, so that the shell that
// started relock sees the job stop and takes the terminal back. SIGCONT
// wakes relock, which passes it on to the job. Without a controlling
// terminal there is no such shell, and relock goes on (and renews the
// lease) while the job is stopped.
func (j *job) suspendSelf() {
	if j.jobControl {
		_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
	}
}

// hasControllingTerminal reports whether relock has a controlling
// terminal.
func hasControllingTerminal() bool {
	f, err := os.Open("/dev/tty")
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// finish takes the terminal back after the job's process ended, if the
// job still had it.
func (j *job) finish() {
	if j.tty < 0 {
		return
	}
	if fg, err := tcgetpgrp(j.tty); err == nil && fg == j.pgid() {
		_ = tcsetpgrp(j.tty, syscall.Getpgrp())
	}
}

func tcgetpgrp(fd int) (int, error) {
	var pgrp int32
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), uintptr(syscall.TIOCGPGRP), uintptr(unsafe.Pointer(&pgrp)))
	if errno != 0 {
		return 0, errno
	}
	return int(pgrp), nil
}

func tcsetpgrp(fd, pgrp int) error {
	p := int32(pgrp)
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), uintptr(syscall.TIOCSPGRP), uintptr(unsafe.Pointer(&p)))
	if errno != 0 {
		return errno
	}
	return nil
}

// signalName is "SIGTERM" for syscall.SIGTERM.
func signalName(s syscall.Signal) string {
	for _, n := range signalNames {
		if n.sig == s {
			return n.name
		}
	}
	return "signal " + s.String()
}

var signalNames = []struct {
	sig  syscall.Signal
	name string
}{
	{syscall.SIGHUP, "SIGHUP"}, {syscall.SIGINT, "SIGINT"}, {syscall.SIGQUIT, "SIGQUIT"},
	{syscall.SIGABRT, "SIGABRT"}, {syscall.SIGKILL, "SIGKILL"}, {syscall.SIGSEGV, "SIGSEGV"},
	{syscall.SIGPIPE, "SIGPIPE"}, {syscall.SIGALRM, "SIGALRM"}, {syscall.SIGTERM, "SIGTERM"},
	{syscall.SIGUSR1, "SIGUSR1"}, {syscall.SIGUSR2, "SIGUSR2"},
}
