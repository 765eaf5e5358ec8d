//go:build unix && !linux

package redisproc

import (
	"os"
	"syscall"
)

var sigStop, sigCont os.Signal = syscall.SIGSTOP, syscall.SIGCONT

// procAttr puts the server in its own process group, so that a terminal's
// Ctrl-C reaches only the process that started it. Only Linux can also tie
// the server's life to that process's.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
