package main

import "github.com/relock-go/relock/rlock"

// noGrant is the option that turns grant on release off (a release
// publishes, and the woken waiter acquires with a round trip of its own,
// as before issue 35): the "before" of the no-grant implementations.
func noGrant() []rlock.Option {
	return []rlock.Option{rlock.WithoutGrantOnRelease()}
}

// grantSwitchable reports whether noGrant turns anything off: false until
// the library has the option and noGrant returns it.
func grantSwitchable() bool { return len(noGrant()) > 0 }
