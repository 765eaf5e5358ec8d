//go:build !linux

package main

import "syscall"

// setDeathSignal: only Linux can tie a child's life to relock's.
func setDeathSignal(*syscall.SysProcAttr) {}

// detachedAttr: elsewhere, demo workers stop when their stdin (a pipe from
// the demo) closes, which happens when the demo dies.
func detachedAttr() *syscall.SysProcAttr { return nil }
