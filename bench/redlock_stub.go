//go:build nomultilock

package main

// Built with -tags nomultilock (bench.sh does so while the multilock
// package does not build): the RedLock scenario is skipped.

func (r *run) redlockPeers([]string) []peer { return nil }
