// Package lua holds relock's Lua scripts, one .lua file each, embedded in the
// binary. Each file opens with a header that states its KEYS, its ARGV and
// what it returns.
//
// Scripts that are safe to send twice (an owner-checked renewal, a read, an
// unlock guarded by a per-request latch key) are marked retryable, so
// rueidis resends them after a connection error; the others are never
// resent, because a resent HINCRBY adds a hold level.
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
	// LockAcquire takes or re-enters a reentrant lock. Never resent.
	LockAcquire = script(lockAcquire, false)
	// LockUnlock releases one hold level; latched by request ID, so resending
	// it is safe.
	LockUnlock = script(lockUnlock, true)
	// LockForceUnlock deletes a lock whoever holds it. Never resent: a resent
	// delete could remove a newer hold.
	LockForceUnlock = script(lockForceUnlock, false)
	// LockRenew resets the lease of a hold that still exists. Owner-checked,
	// so resending it is safe.
	LockRenew = script(lockRenew, true)
	// LockReenter adds a level to an existing hold of any lock kind, or
	// reports it gone. Never resent.
	LockReenter = script(lockReenter, false)
	// FencedAcquire takes or re-enters a fenced lock and returns its token.
	// Never resent.
	FencedAcquire = script(fencedAcquire, false)
	// FencedToken reads the token of the caller's current hold. Read-only.
	FencedToken = script(fencedToken, true)
	// FenceWrite writes a fenced register if the token is not stale. Not
	// resent: a resent write could land after a newer one.
	FenceWrite = script(fenceWrite, false)

	// FairAcquire takes or re-enters a fair lock, or joins (refreshes a place
	// in) its queue. Never resent.
	FairAcquire = script(fairPrune+fairAcquire, false)
	// FairUnlock releases one level of a fair lock and wakes the head of its
	// queue; latched by request ID.
	FairUnlock = script(fairPrune+fairUnlock, true)
	// FairAbandon takes a waiter out of a fair lock's queue. Idempotent.
	FairAbandon = script(fairAbandon, true)
	// FairForceUnlock deletes a fair lock and wakes the head of its queue.
	FairForceUnlock = script(fairPrune+fairForceUnlock, false)
)
