// Package lua holds relock's Lua scripts, one .lua file each, embedded in the
// binary. Each file opens with a header that states its KEYS, its ARGV and
// what it returns.
//
// The scripts that change a hold set its count rather than add to it: an
// acquisition by an owner that holds nothing sets the count to 1, a
// re-entry to the count its client expects plus one, an unlock to the
// count it expects minus one. Sending such a script twice has the effect
// of sending it once, so a request whose reply was lost can be sent again,
// or undone by setting the count back. relock does that itself rather than
// let rueidis resend them: it knows when a request is a resend (a resent
// unlock at the last level finds the field gone, and must not take that
// for a hold lost before), and a single attempt must fail at once on a
// dead connection, not retry until its deadline.
//
// The fair-lock scripts that read the queue are built as fair_prune.lua
// followed by the script's own file, so the pruning of dead waiters is
// written once.
package lua

import (
	"crypto/sha1"
	_ "embed"
	"encoding/hex"

	"github.com/redis/rueidis"
)

// Script is a Lua script with its source and SHA1, for callers that
// pipeline it with other commands themselves (EVALSHA, then EVAL on
// NOSCRIPT).
type Script struct {
	*rueidis.Lua
	Body string
	SHA1 string
}

func script(body string, retryable bool) *Script {
	sum := sha1.Sum([]byte(body))
	s := &Script{Body: body, SHA1: hex.EncodeToString(sum[:])}
	if retryable {
		s.Lua = rueidis.NewLuaScriptRetryable(body)
	} else {
		s.Lua = rueidis.NewLuaScript(body)
	}
	return s
}

var (
	//go:embed lock_acquire.lua
	lockAcquire string
	//go:embed lock_unlock.lua
	lockUnlock string
	//go:embed lock_force_unlock.lua
	lockForceUnlock string
	//go:embed lock_renew.lua
	lockRenew string
	//go:embed lock_reenter.lua
	lockReenter string
	//go:embed lock_wake.lua
	lockWake string
	//go:embed fenced_acquire.lua
	fencedAcquire string
	//go:embed fenced_token.lua
	fencedToken string
	//go:embed fence_write.lua
	fenceWrite string
	//go:embed fair_prune.lua
	fairPrune string
	//go:embed fair_acquire.lua
	fairAcquire string
	//go:embed fair_unlock.lua
	fairUnlock string
	//go:embed fair_abandon.lua
	fairAbandon string
	//go:embed fair_force_unlock.lua
	fairForceUnlock string
)

var (
	// LockAcquire takes a reentrant lock for an owner that holds none of it.
	// Safe to resend (by relock).
	LockAcquire = script(lockAcquire, false)
	// LockUnlock brings a hold down to a count. Resent by relock itself,
	// not by rueidis (see the package documentation).
	LockUnlock = script(lockUnlock, false)
	// LockForceUnlock deletes a lock whoever holds it. Never resent: a resent
	// delete could remove a newer hold.
	LockForceUnlock = script(lockForceUnlock, false)
	// LockRenew resets the lease of a hold that still exists. Owner-checked,
	// so resending it is safe.
	LockRenew = script(lockRenew, true)
	// LockReenter sets the count of an existing hold of any lock kind one
	// level up, or reports it gone. Safe to resend (by relock).
	LockReenter = script(lockReenter, false)
	// LockWake hands on a wake-up that reached a client with no waiter left
	// (wake-one). Safe to resend: a second one only wakes one more client.
	LockWake = script(lockWake, true)
	// FencedAcquire takes a fenced lock and returns its token. Safe to
	// resend by relock (a resent request may skip a token; tokens only
	// grow).
	FencedAcquire = script(fencedAcquire, false)
	// FencedToken reads the token of the caller's current hold. Read-only.
	FencedToken = script(fencedToken, true)
	// FenceWrite writes a fenced register if the token is not stale. Not
	// resent: a resent write could land after a newer one.
	FenceWrite = script(fenceWrite, false)

	// FairAcquire takes a fair lock, or joins (refreshes a place in) its
	// queue. Safe to resend (by relock).
	FairAcquire = script(fairPrune+fairAcquire, false)
	// FairUnlock brings a hold of a fair lock down to a count and wakes the
	// head of its queue when that frees it. Resent by relock itself.
	FairUnlock = script(fairPrune+fairUnlock, false)
	// FairAbandon takes a waiter out of a fair lock's queue. Idempotent.
	FairAbandon = script(fairAbandon, true)
	// FairForceUnlock deletes a fair lock and wakes the head of its queue.
	FairForceUnlock = script(fairPrune+fairForceUnlock, false)
)
