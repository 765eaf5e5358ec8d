package redisproc

import (
	"os"
	"syscall"
)

var sigStop, sigCont os.Signal = syscall.SIGSTOP, syscall.SIGCONT

// procAttr puts the server in its own process group, so that a terminal's
// Ctrl-C reaches only the process that started it (which stops the server
// in its own time), and kills it when that process dies, even by SIGKILL.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
