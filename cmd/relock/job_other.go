//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package main

import (
	"os"
	"os/exec"
	"syscall"
)

// Where there are no process groups to manage, COMMAND runs as a plain
// child and gets the signals relock gets passed on to it.

// forwardedSignals are passed on to COMMAND.
var forwardedSignals = []os.Signal{os.Interrupt, syscall.SIGTERM}

// job is run's COMMAND, started by startJob.
type job struct {
	cmd    *exec.Cmd
	events chan jobEvent
}

// jobEvent is how COMMAND ended (it never reports a stop here).
type jobEvent struct {
	stopped bool
	status  syscall.WaitStatus
	err     error
}

func startJob(cmd *exec.Cmd) (*job, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	j := &job{cmd: cmd, events: make(chan jobEvent, 1)}
	go func() {
		err := cmd.Wait()
		ev := jobEvent{err: err}
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
			ev = jobEvent{status: ws}
		}
		j.events <- ev
	}()
	return j, nil
}

func (j *job) pgid() int { return j.cmd.Process.Pid }

func (j *job) signal(sig os.Signal) {
	if sig == syscall.SIGKILL {
		_ = j.cmd.Process.Kill()
		return
	}
	_ = j.cmd.Process.Signal(sig)
}

func (j *job) terminate() { j.signal(syscall.SIGTERM) }

func (j *job) suspendSelf() {}

func (j *job) finish() {}

func signalName(s syscall.Signal) string { return "signal " + s.String() }
