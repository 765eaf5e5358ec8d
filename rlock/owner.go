package rlock

import (
	"context"

	"github.com/relock-go/relock/internal/lockcore"
)

// WithOwner returns a copy of ctx that carries owner. Every lock call made
// with that context, on any handle of the same Client, acts for that owner:
// taking a lock it already holds re-enters it and raises its hold count.
//
// An owner is any non-empty string of at most 256 bytes without control
// characters, other than the forms "anon-<number>" and
// "anon-<number>@<anything>", which relock reserves for the owners it
// makes up (anonymous holds, Do and Acquire without an owner). An
// invalid owner is reported, as ErrInvalidArgument, by the lock call that
// uses it.
//
// A context without an owner gets a fresh owner for each acquisition: the
// lock then behaves like sync.Mutex keyed by name on its Client, and is not
// reentrant (a goroutine that locks twice waits for itself until its
// context ends). An Unlock without an owner, on any handle of that name of
// the same Client, releases the Client's current anonymous hold of it.
func WithOwner(ctx context.Context, owner string) context.Context {
	return lockcore.WithOwner(ctx, owner)
}

// OwnerFrom returns the owner ctx carries, if any.
func OwnerFrom(ctx context.Context) (owner string, ok bool) {
	return lockcore.OwnerFrom(ctx)
}
