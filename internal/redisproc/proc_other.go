//go:build !unix

package redisproc

import (
	"os"
	"syscall"
)

// No SIGSTOP here: Pause and Resume return errors.ErrUnsupported.
var sigStop, sigCont os.Signal

func procAttr() *syscall.SysProcAttr { return nil }
