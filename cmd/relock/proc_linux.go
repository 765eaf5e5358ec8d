package main

import "syscall"

// setDeathSignal makes run's COMMAND get SIGTERM when relock dies, so that
// it does not go on running without the lock.
func setDeathSignal(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGTERM
}

// detachedAttr is for the demo's workers and redis-server: their own
// process group, so that a terminal's Ctrl-C reaches only the demo (which
// stops them in order), and SIGKILL when the demo dies.
func detachedAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
