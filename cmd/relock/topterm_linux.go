package main

import (
	"syscall"
	"unsafe"
)

// cbreak turns off the terminal fd's line editing and echo, so that top
// reads a key as soon as it is typed; Ctrl-C still sends SIGINT. restore
// puts the terminal back as it was.
func cbreak(fd int) (restore func(), err error) {
	var old syscall.Termios
	if err := termios(fd, syscall.TCGETS, &old); err != nil {
		return nil, err
	}
	t := old
	t.Lflag &^= syscall.ICANON | syscall.ECHO
	t.Cc[syscall.VMIN], t.Cc[syscall.VTIME] = 1, 0
	if err := termios(fd, syscall.TCSETS, &t); err != nil {
		return nil, err
	}
	return func() { _ = termios(fd, syscall.TCSETS, &old) }, nil
}

func termios(fd int, req uintptr, t *syscall.Termios) error {
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), req, uintptr(unsafe.Pointer(t))); errno != 0 {
		return errno
	}
	return nil
}
