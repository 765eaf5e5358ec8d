package main

import "github.com/relock-go/relock/rlock"

// noGrant is the option that turns grant on release off (a release
// publishes, and the woken waiter acquires with a round trip of its own,
// as before issue 35): the "before" of the no-grant implementations.
//
// While the option is not in the library, it returns nil and the no-grant
// implementations are relock's defaults (their settings say so).
func noGrant() []rlock.Option {
	// TODO(grant): return []rlock.Option{rlock.WithoutGrantOnRelease()}
	return nil
}

// grantSwitchable reports whether noGrant turns anything off: false until
// the library has the option and noGrant returns it.
func grantSwitchable() bool { return len(noGrant()) > 0 }
