// Package lua holds relock's Lua scripts, one .lua file each, embedded in the
// binary. Each file opens with a header that states its KEYS, its ARGV and
// what it returns.
//
// The scripts that change a hold move its count with HINCRBY, one level
// at a time, as Redisson's do: +1 for an acquisition by an owner that
// holds nothing and for a re-entry, -1 for an unlock (the last level
// removes the field). Each is told the count its client expects after the
// call, and moves the count only when it stands where the client expects
// it before the call (one level away); a count already at the target is
// an earlier send of the same request and is left, and a count that
// matches neither (moved by a request whose reply was lost) is set to the
// client's, the truth about its own field (see count_down.lua). Sending
// such a script twice has the effect of sending it once, so a request
// whose reply was lost can be sent again, or undone by bringing the count
// back to what the client was granted. relock does that itself rather
// than let rueidis resend them: it knows when a request is a resend (a
// resent unlock at the last level finds the field gone, and must not take
// that for a hold lost before), and a single attempt must fail at once on
// a dead connection, not retry until its deadline.
//
// Every fair-lock script is built as fair_prune.lua followed by the
// script's own file, so the pruning of dead waiters and the wake-up of the
// head are written once; the scripts that change a count follow
// count_down.lua; in the same way the read-write lock's scripts follow
// rw_reads.lua, the semaphore's scripts that look at permits follow
// sem_reclaim.lua, the rate limiter's scripts that look at its window
// follow rate_window.lua, and the scripts that may shorten a lock's lease follow
// lease.lua, which tells the waiters when they do: a waiter sleeps until
// the end of the lease its last attempt saw, and every script that makes
// a lease shorter without freeing the lock publishes, so that no waiter
// sleeps past the new end (sem_update_lease.lua does the same for a
// semaphore's permit, whose end a waiter sleeps until as well).
//
// Every script that creates or takes state under a name (the acquire and
// re-enter scripts of every lock kind, the semaphore's scripts that read
// its leases or write its count, the counting semaphore's acquire, add
// and drain, every script of the rate limiter, a latch's set) starts with
// refuse.lua: it refuses, before writing anything, a name whose other
// form ("a" for "{a}", which derives the same keys) is in use, and a hash
// of another kind, with the error replies NameConflict and WrongKind.
package lua

import (
	"crypto/sha1"
	_ "embed"
	"encoding/hex"

	"github.com/redis/rueidis"
)

// The error replies with which a script refuses a name (see refuse.lua):
// the code, a space, and what was found.
const (
	// NameConflict: the name's other form is in use; what follows is
	// the key under that form (its name).
	NameConflict = "RELOCK_NAME_CONFLICT"
	// WrongKind: the name holds another kind; what follows is the kind
	// found, as internal/layout.Kind names it ("rwlock", "lock", "fair",
	// "rate_limiter").
	WrongKind = "RELOCK_WRONG_KIND"
	// TooManyPermits: a call asked a semaphore for more permits than it
	// has, available and held; what follows is how many it has (see
	// sem_acquire_many.lua).
	TooManyPermits = "RELOCK_TOO_MANY_PERMITS"
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

// readOnly is script for a script that writes nothing: it is sent as
// EVALSHA_RO (Redis 7), which a client built with SendToReplicas may send
// to a replica. Always retryable.
func readOnly(body string) *Script {
	s := script(body, true)
	s.Lua = rueidis.NewLuaScriptReadOnly(body)
	return s
}

var (
	//go:embed refuse.lua
	refuse string
	//go:embed lock_acquire.lua
	lockAcquire string
	//go:embed count_down.lua
	countDown string
	//go:embed lease.lua
	lease string
	//go:embed wake.lua
	wake string
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

	//go:embed rw_reads.lua
	rwReads string
	//go:embed rw_read_acquire.lua
	rwReadAcquire string
	//go:embed rw_read_reenter.lua
	rwReadReenter string
	//go:embed rw_read_unlock.lua
	rwReadUnlock string
	//go:embed rw_read_renew.lua
	rwReadRenew string
	//go:embed rw_write_acquire.lua
	rwWriteAcquire string
	//go:embed rw_write_reenter.lua
	rwWriteReenter string
	//go:embed rw_write_unlock.lua
	rwWriteUnlock string
	//go:embed rw_write_renew.lua
	rwWriteRenew string
	//go:embed rw_force_unlock.lua
	rwForceUnlock string
	//go:embed rw_locked.lua
	rwLocked string

	//go:embed sem_reclaim.lua
	semReclaim string
	//go:embed sem_refused.lua
	semRefused string
	//go:embed sem_acquire.lua
	semAcquire string
	//go:embed sem_release.lua
	semRelease string
	//go:embed sem_renew.lua
	semRenew string
	//go:embed sem_available.lua
	semAvailable string
	//go:embed sem_set.lua
	semSet string
	//go:embed sem_add.lua
	semAdd string
	//go:embed sem_abandon.lua
	semAbandon string
	//go:embed sem_delete.lua
	semDelete string
	//go:embed sem_acquire_many.lua
	semAcquireMany string
	//go:embed sem_update_lease.lua
	semUpdateLease string
	//go:embed sem_lease_left.lua
	semLeaseLeft string

	//go:embed csem_acquire.lua
	csemAcquire string
	//go:embed csem_undo.lua
	csemUndo string
	//go:embed csem_add.lua
	csemAdd string
	//go:embed csem_drain.lua
	csemDrain string

	//go:embed rate_window.lua
	rateWindow string
	//go:embed rate_acquire.lua
	rateAcquire string
	//go:embed rate_undo.lua
	rateUndo string
	//go:embed rate_available.lua
	rateAvailable string
	//go:embed rate_set.lua
	rateSet string

	//go:embed latch_opened.lua
	latchOpened string
	//go:embed latch_set.lua
	latchSet string
	//go:embed latch_count_down.lua
	latchCountDown string

	//go:embed wait_record.lua
	waitRecord string
	//go:embed wait_expire.lua
	waitExpire string
	//go:embed wait_rewrite.lua
	waitRewrite string
)

var (
	// LockAcquire takes a reentrant lock for an owner that holds none of it.
	// Safe to resend (by relock).
	LockAcquire = script(refuse+countDown+wake+lockAcquire, false)
	// LockUnlock brings a hold down to a count. Resent by relock itself,
	// not by rueidis (see the package documentation).
	LockUnlock = script(countDown+lease+wake+lockUnlock, false)
	// LockForceUnlock deletes a lock whoever holds it. Never resent: a resent
	// delete could remove a newer hold.
	LockForceUnlock = script(lockForceUnlock, false)
	// LockRenew resets the lease of a hold that still exists. Owner-checked,
	// so resending it is safe.
	LockRenew = script(lease+lockRenew, true)
	// LockReenter adds a level to an existing hold of any lock kind, or
	// reports it gone. Safe to resend (by relock).
	LockReenter = script(refuse+countDown+lease+lockReenter, false)
	// LockWake hands on a wake-up that reached a client with no waiter left
	// (wake-one). Safe to resend: a second one only wakes one more client.
	LockWake = script(wake+lockWake, true)
	// FencedAcquire takes a fenced lock and returns its token. Safe to
	// resend by relock (a resent request may skip a token; tokens only
	// grow).
	FencedAcquire = script(refuse+countDown+wake+fencedAcquire, false)
	// FencedToken reads the token of the caller's current hold, as a
	// read-only script (EVALSHA_RO, which a client that sends reads to
	// replicas may send there).
	FencedToken = readOnly(fencedToken)
	// FencedTokenPrimary is FencedToken sent as EVALSHA, for servers
	// older than Redis 7, which have no EVALSHA_RO.
	FencedTokenPrimary = script(fencedToken, true)
	// FenceWrite writes a fenced register if the token is not stale. Not
	// resent: a resent write could land after a newer one.
	FenceWrite = script(fenceWrite, false)

	// FairAcquire takes a fair lock, or joins (refreshes a place in) its
	// queue. Safe to resend (by relock).
	FairAcquire = script(refuse+countDown+fairPrune+fairAcquire, false)
	// FairUnlock brings a hold of a fair lock down to a count and, when
	// that frees it, grants it to a waiter of the releasing client that
	// heads its queue, or wakes the head. Resent by relock itself (a
	// resend carries no grant).
	FairUnlock = script(countDown+fairPrune+fairUnlock, false)
	// FairAbandon takes a waiter out of a fair lock's queue. Idempotent.
	FairAbandon = script(fairPrune+fairAbandon, true)
	// FairForceUnlock deletes a fair lock and wakes the head of its queue.
	FairForceUnlock = script(fairPrune+fairForceUnlock, false)

	// RWReadAcquire takes a read-write lock's read side for an owner that
	// holds no read level of it. Safe to resend (by relock).
	RWReadAcquire = script(refuse+countDown+rwReads+rwReadAcquire, false)
	// RWReadReenter adds a level to an existing read hold, or reports it
	// gone. Safe to resend (by relock).
	RWReadReenter = script(refuse+countDown+rwReads+lease+rwReadReenter, false)
	// RWReadUnlock brings a read hold down to a count. Resent by relock
	// itself.
	RWReadUnlock = script(countDown+rwReads+lease+rwReadUnlock, false)
	// RWReadRenew resets the lease of a read hold that still exists.
	// Owner-checked, so resending it is safe.
	RWReadRenew = script(rwReads+rwReadRenew, true)
	// RWWriteAcquire takes a read-write lock's write side for an owner
	// that holds no write level of it. Safe to resend (by relock).
	RWWriteAcquire = script(refuse+countDown+rwReads+rwWriteAcquire, false)
	// RWWriteReenter adds a level to an existing write hold, or reports it
	// gone. Safe to resend (by relock).
	RWWriteReenter = script(refuse+countDown+rwReads+lease+rwWriteReenter, false)
	// RWWriteUnlock brings a write hold down to a count. Resent by relock
	// itself.
	RWWriteUnlock = script(countDown+rwReads+lease+rwWriteUnlock, false)
	// RWWriteRenew resets the lease of a write hold that still exists.
	// Owner-checked, so resending it is safe.
	RWWriteRenew = script(rwReads+rwWriteRenew, true)
	// RWForceUnlock deletes a read-write lock in one mode. Never resent.
	RWForceUnlock = script(rwForceUnlock, false)
	// RWLocked tells whether one side of a read-write lock is held.
	// Read-only.
	RWLocked = script(rwLocked, true)

	// SemAcquire takes a semaphore's permit, or keeps a waiter's place.
	// Safe to resend (by relock): the permit ID is the same for every
	// attempt of a call.
	SemAcquire = script(refuse+semReclaim+semRefused+semAcquire, false)
	// SemRelease gives a permit back. Safe to resend in effect (a resent
	// request finds the permit gone), but relock does not: it could not
	// tell a resent release from a stale permit.
	SemRelease = script(refuse+semReclaim+semRelease, false)
	// SemRenew resets the lease of a permit still held. Safe to resend.
	SemRenew = script(refuse+semReclaim+semRenew, true)
	// SemAvailable reads a semaphore's available count, after giving back
	// the permits whose lease ended. Safe to resend.
	SemAvailable = script(refuse+semReclaim+semAvailable, true)
	// SemSet sets a semaphore's permits if they were never set. Safe to
	// resend in effect, but not resent: the second reply would say the
	// count was already set.
	SemSet = script(refuse+semSet, false)
	// SemAdd adds (or takes away) permits. Never resent: it would add
	// twice.
	SemAdd = script(refuse+semAdd, false)
	// SemAbandon takes a waiter out of a semaphore's queue. Idempotent.
	SemAbandon = script(semAbandon, true)
	// SemDelete deletes a semaphore's keys. Safe to resend in effect, but
	// not resent: the second reply would say there was no count.
	SemDelete = script(refuse+semDelete, false)
	// SemAcquireMany takes several permits of a semaphore, all or none,
	// or keeps a waiter's place. Safe to resend (by relock): the permit
	// IDs are the same for every attempt of a call.
	SemAcquireMany = script(refuse+semReclaim+semRefused+semAcquireMany, false)
	// SemUpdateLease gives a held permit a new lease. Safe to resend: a
	// resent request sets the same lease from a moment later.
	SemUpdateLease = script(refuse+semReclaim+semUpdateLease, true)
	// SemLeaseLeft reads how long a permit's lease has to run, after
	// giving back the permits whose lease ended. Safe to resend.
	SemLeaseLeft = script(refuse+semReclaim+semLeaseLeft, true)

	// CountingAcquire takes permits of a counting semaphore, all or none.
	// Safe to resend (by relock): every attempt of a call sends the same
	// grant, and a grant remembered takes nothing again.
	CountingAcquire = script(refuse+csemAcquire, false)
	// CountingUndo gives back the permits of a call's grant. Idempotent.
	CountingUndo = script(csemUndo, true)
	// CountingAdd gives permits to a counting semaphore, or takes some
	// away. Never resent: it would add twice.
	CountingAdd = script(refuse+csemAdd, false)
	// CountingDrain takes every permit available. Not resent: the second
	// reply would say 0.
	CountingDrain = script(refuse+csemDrain, false)

	// RateAcquire takes permits of a rate limiter's window, all or none.
	// Safe to resend (by relock): every attempt of a call sends the same
	// grant ID, and a grant in the window takes nothing again.
	RateAcquire = script(refuse+rateWindow+rateAcquire, false)
	// RateUndo gives a call's grant back. Idempotent.
	RateUndo = script(refuse+rateWindow+rateUndo, true)
	// RateAvailable reads the permits left in a rate limiter's window.
	// Safe to resend.
	RateAvailable = script(refuse+rateWindow+rateAvailable, true)
	// RateSet sets a rate limiter's rate. Not resent: the second reply of
	// a TrySetRate would say the rate was set already.
	RateSet = script(refuse+rateSet, false)

	// LatchSet sets a count-down latch's count if it is not set. Not
	// resent (the second reply would say it was already set).
	LatchSet = script(refuse+latchOpened+latchSet, false)
	// LatchCountDown counts a latch down by one. Never resent: it would
	// count twice.
	LatchCountDown = script(latchOpened+latchCountDown, false)

	// WaitRecord writes a waiting call's record (see internal/waitrec),
	// stamped with the server's time, and sets its hash's expiry. Safe to
	// resend: the field is the call's own.
	WaitRecord = script(waitRecord, true)
	// WaitExpire renews the expiry of a Client's wait record hash and
	// deletes the records the Client no longer has; it replies 2 when a
	// record of a running wait is missing. Safe to resend.
	WaitExpire = script(waitExpire, true)
	// WaitRewrite writes again the records of a Client's running waits
	// that its hash lost (an outage longer than its expiry). Safe to
	// resend: the fields are the Client's own.
	WaitRewrite = script(waitRewrite, true)
)
