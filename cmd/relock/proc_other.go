//go:build !linux

package main

import "syscall"

// childAttr: only Linux can tie a child's life to relock's.
func childAttr() *syscall.SysProcAttr { return nil }

// detachedAttr: elsewhere, demo workers stop when their stdin (a pipe from
// the demo) closes, which happens when the demo dies.
func detachedAttr() *syscall.SysProcAttr { return nil }
