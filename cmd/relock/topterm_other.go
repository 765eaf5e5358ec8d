//go:build !linux

package main

import "errors"

// cbreak is not done on this system: top reads q when Enter follows it.
func cbreak(int) (restore func(), err error) {
	return nil, errors.New("no cbreak mode here")
}
