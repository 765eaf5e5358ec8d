// Package lua holds relock's Lua scripts, one .lua file each, embedded in the
// binary. Each file opens with a header that states its KEYS, its ARGV and
// what it returns.
//
// Scripts that are safe to send twice (an owner-checked renewal, a read, an
// unlock guarded by a per-request latch key) are built with
// rueidis.NewLuaScriptRetryable; the others are never resent, because a
// resent HINCRBY adds a hold level.
//
// The fair-lock scripts that read the queue are built as fair_prune.lua
// followed by the script's own file, so the pruning of dead waiters is
// written once.
package lua

import (
	_ "embed"

	"github.com/redis/rueidis"
)

var (
	//go:embed lock_acquire.lua
	lockAcquire string
	//go:embed lock_unlock.lua
	lockUnlock string
	//go:embed lock_force_unlock.lua
	lockForceUnlock string
	//go:embed lock_renew.lua
	lockRenew string
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
	LockAcquire = rueidis.NewLuaScript(lockAcquire)
	// LockUnlock releases one hold level; latched by request ID, so resending
	// it is safe.
	LockUnlock = rueidis.NewLuaScriptRetryable(lockUnlock)
	// LockForceUnlock deletes a lock whoever holds it. Never resent: a resent
	// delete could remove a newer hold.
	LockForceUnlock = rueidis.NewLuaScript(lockForceUnlock)
	// LockRenew resets the lease of a hold that still exists. Owner-checked,
	// so resending it is safe.
	LockRenew = rueidis.NewLuaScriptRetryable(lockRenew)
	// FencedAcquire takes or re-enters a fenced lock and returns its token.
	// Never resent.
	FencedAcquire = rueidis.NewLuaScript(fencedAcquire)
	// FencedToken reads the token of the caller's current hold. Read-only.
	FencedToken = rueidis.NewLuaScriptRetryable(fencedToken)
	// FenceWrite writes a fenced register if the token is not stale. Not
	// resent: a resent write could land after a newer one.
	FenceWrite = rueidis.NewLuaScript(fenceWrite)

	// FairAcquire takes or re-enters a fair lock, or joins (refreshes a place
	// in) its queue. Never resent.
	FairAcquire = rueidis.NewLuaScript(fairPrune + fairAcquire)
	// FairUnlock releases one level of a fair lock and wakes the head of its
	// queue; latched by request ID.
	FairUnlock = rueidis.NewLuaScriptRetryable(fairPrune + fairUnlock)
	// FairAbandon takes a waiter out of a fair lock's queue. Idempotent.
	FairAbandon = rueidis.NewLuaScriptRetryable(fairAbandon)
	// FairForceUnlock deletes a fair lock and wakes the head of its queue.
	FairForceUnlock = rueidis.NewLuaScript(fairPrune + fairForceUnlock)
)
