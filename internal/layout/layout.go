// Package layout is the one source of the Redis layout of every lock
// kind: the keys, hash fields and channels derived from a lock name, the
// sentinel values stored in them, and the reverse, the reading of a key or
// a channel back into the lock it belongs to (for tools that inspect Redis
// without the library, such as the command-line tool's status and scan).
//
// The layout is Redisson's, so that Go and Java holders of one name
// exclude each other; relock adds keys of its own (the wake-one registry,
// the semaphore's queue, the counting semaphore's grants, the latch's mark
// of its last opening), each named below.
//
// Hash tags: a key derived from a name must hash to the name's cluster
// slot. Redisson wraps the name in braces ("prefix:{name}", "{name}:suffix")
// unless the name already has a '{' (then "prefix:name", "name:suffix"),
// so that a user's own hash tag decides the slot. A wrapped key therefore
// reads two ways: "prefix:{a}" is derived from the name "a" and from the
// name "{a}"; Classify reports both.
//
// The package imports nothing of the project.
package layout

import (
	"strconv"
	"strings"
)

// Prefixes of the keys and channels derived from a lock name with Derived.
const (
	// ChannelPrefix names a lock's unlock channel (plain, fenced, fair).
	ChannelPrefix = "redisson_lock__channel"
	// QueuePrefix names a fair lock's queue of waiters (a list of fields).
	QueuePrefix = "redisson_lock_queue"
	// TimeoutPrefix names a fair lock's waiter deadlines (a sorted set:
	// field -> unix ms).
	TimeoutPrefix = "redisson_lock_timeout"
	// TokenPrefix names a fenced lock's counter of tokens (a string).
	TokenPrefix = "redisson_lock_token"
	// UnlockLatchPrefix names the short-lived keys Redisson writes while an
	// unlock is in flight: UnlockLatchPrefix:{name}:<request ID>. relock
	// writes none.
	UnlockLatchPrefix = "redisson_unlock_latch"
	// WakersPrefix names relock's wake-one registry of a lock (a sorted
	// set: client ID -> deadline); WakePrefix its per-Client wake channels.
	WakersPrefix = "relock_wakers"
	WakePrefix   = "relock_wake"
	// KnocksPrefix names relock's record of the clients that a lock's
	// acquisition refused lately (a sorted set: client ID -> deadline),
	// which a release that would grant the lock to its own client's
	// waiter reads (see Knocks).
	KnocksPrefix = "relock_knocks"
	// GranteesPrefix names relock's record, beside a lock's wake-one
	// registry, of the waiter of each registered client that a release
	// may hand the lock to (a hash: client ID -> grant; see Grantees).
	GranteesPrefix = "relock_grantees"
	// AlivePrefix names relock's heartbeats of a fair lock's waiters (a
	// sorted set: waiter field -> server ms of its last heartbeat), by
	// which relock finds its dead waiters without touching Redisson's
	// deadlines.
	AlivePrefix = "relock_lock_alive"
	// RWLockChannelPrefix names a read-write lock's channel.
	RWLockChannelPrefix = "redisson_rwlock"
	// SemaphoreChannelPrefix names a semaphore's channel.
	SemaphoreChannelPrefix = "redisson_sc"
	// RateLimiterChannelPrefix names relock's channel of a rate limiter,
	// on which a rate set anew is published (Redisson has none).
	RateLimiterChannelPrefix = "relock_ratelimiter"
	// CountDownLatchChannelPrefix starts a count-down latch's channel,
	// which is always followed by the name in braces (see LatchChannel).
	CountDownLatchChannelPrefix = "redisson_countdownlatch__channel__"
)

// Suffixes of the keys derived from a lock name with Suffixed.
const (
	// SemaphoreLeasesSuffix: the semaphore's permits held (a sorted set:
	// permit ID -> end of its lease, unix ms).
	SemaphoreLeasesSuffix = "timeout"
	// SemaphoreQueueSuffix and SemaphoreQueueDeadlinesSuffix are relock's
	// queue of a semaphore's waiters (sorted sets: permit ID -> when it
	// joined; permit ID -> when it is dropped unless it refreshes).
	SemaphoreQueueSuffix          = "relock_queue"
	SemaphoreQueueDeadlinesSuffix = "relock_queue_timeout"
	// SemaphoreHoldersSuffix: relock's record of who took each permit
	// (a hash: permit ID -> "<clientID>:<owner>"), beside Redisson's
	// layout, whose scripts ignore it.
	SemaphoreHoldersSuffix = "relock_holders"
	// CountingGrantsSuffix: relock's record of a counting semaphore's
	// recent grants (a sorted set: "<request ID>:<permits>" -> when it is
	// forgotten, server ms), by which a resent acquisition takes nothing
	// twice and a call whose reply was lost gives back what it took.
	CountingGrantsSuffix = "relock_grants"
	// RateValueSuffix and RatePermitsSuffix: a rate limiter's permits left
	// in the window (a string) and its grants in the window (a sorted set:
	// grant -> when it was made, ms); a client's own, for rate type
	// PER_CLIENT, add ":<client ID>".
	RateValueSuffix   = "value"
	RatePermitsSuffix = "permits"
	// ReadLeaseMark separates a read hold's field from its level in the
	// key of the level's lease (see ReadLeaseKey).
	ReadLeaseMark = "rwlock_timeout"
	// LatchOpenedSuffix names relock's mark of a count-down latch's
	// last opening (see LatchOpened).
	LatchOpenedSuffix = "relock_opened"
)

// Messages published on a lock's channel.
const (
	// UnlockMessage wakes one waiter: the lock was released.
	UnlockMessage = "0"
	// WakeAllMessage wakes every waiter (Redisson's read-lock release).
	WakeAllMessage = "1"
	// RegistrantWokenMessage (relock's own) comes just before the
	// UnlockMessage of a wake-one release that woke a registered Client on
	// its wake channel: a Client with registered waiters lets that
	// UnlockMessage pass, which is for the waiters that are not
	// registered. Redisson's waiters ignore it (neither 0 nor 1).
	RegistrantWokenMessage = "2"
	// GrantedMessage (relock's own) is published by a release that
	// granted the lock to a waiter of its own Client (grant on release; a
	// fair lock's on its lock channel, where no fair waiter listens):
	// it wakes nobody (that Client's waiters ignore it, Redisson's ignore
	// any integer but 0 and 1) and tells those who watch the channel
	// (relock top, Watch) that the lock changed hands.
	GrantedMessage = "3"
)

// Hash fields and values of a read-write lock.
const (
	// ModeField holds the mode of a read-write lock's hash; a lock hash
	// with it is a read-write lock.
	ModeField = "mode"
	// ModeRead and ModeWrite are the values of ModeField.
	ModeRead  = "read"
	ModeWrite = "write"
	// WriteSuffix ends a writer's field: "<clientID>:<owner>:write".
	WriteSuffix = ":write"
)

// A rate limiter's configuration: the fields of its hash under the name,
// and the values of RateTypeField (Redisson's RateType ordinals).
const (
	RateField          = "rate"
	RateIntervalField  = "interval" // ms
	RateTypeField      = "type"
	RateKeepAliveField = "keepAliveTime" // ms; 0: the keys do not expire
	RateOverall        = "0"
	RatePerClient      = "1"
)

// IsRateConfig reports whether a hash's fields are a rate limiter's.
func IsRateConfig(fields map[string]string) bool {
	if len(fields) == 0 {
		return false
	}
	for f := range fields {
		switch f {
		case RateField, RateIntervalField, RateTypeField, RateKeepAliveField:
		default:
			return false
		}
	}
	return true
}

// The score of a semaphore permit taken without a lease (Redisson's): it
// never expires. NoLease is the same number as the scripts take it.
const (
	NoLeaseScore = 922337203685477
	NoLease      = "922337203685477"
)

// Tagged is name wrapped in braces, "{name}", or name itself when it has
// a '{' (Redisson's rule): the start of every key Suffixed derives from
// name.
func Tagged(name string) string {
	if SelfTagged(name) {
		return name
	}
	return "{" + name + "}"
}

// SelfTagged reports whether name has a '{', so that Tagged leaves it as
// it is: name, not "{name}", starts the keys derived from it.
func SelfTagged(name string) bool { return strings.Contains(name, "{") }

// OtherForm is the other name that derives the same keys as name, and
// false when there is none. Because Tagged leaves a name with a '{' as it
// is, a name x without braces and the name "{x}" derive the same keys and
// channels ("prefix:{x}", "{x}:suffix"), in one hash slot; they differ
// only in the key under the name itself. So OtherForm("x") is "{x}" and
// OtherForm("{x}") is "x". A name with braces of another shape ("a{b}",
// "{a}b", "{a}{b}") has none, and so has a name with a '}' but no '{'
// ("a}b" and "{a}b}" derive the same keys too, but "a}b" hashes to
// another slot, where no script of "{a}b}" can look; relock refuses such
// names, see SharesSlot). The scripts refuse a name whose other form is
// in use (see OtherKey).
func OtherForm(name string) (string, bool) {
	if name == "" {
		return "", false
	}
	if !strings.ContainsAny(name, "{}") {
		return "{" + name + "}", true
	}
	if inner, ok := strings.CutPrefix(name, "{"); ok {
		if inner, ok = strings.CutSuffix(inner, "}"); ok && inner != "" && !strings.ContainsAny(inner, "{}") {
			return inner, true
		}
	}
	return "", false
}

// OtherKey is the key the scripts that create or take state under name
// are given as its other form's: the key under OtherForm(name), in name's
// slot, or name itself when it has no other form (the scripts then look
// no further). A script refuses when that key exists and is not name.
func OtherKey(name string) string {
	if other, ok := OtherForm(name); ok {
		return other
	}
	return name
}

// Derived is the key or channel prefix derives from name: "prefix:{name}",
// or "prefix:name" when name has a '{'. Either way it shares name's slot.
func Derived(prefix, name string) string {
	if SelfTagged(name) {
		return prefix + ":" + name
	}
	return prefix + ":{" + name + "}" // one allocation: it is made on every acquisition
}

// Suffixed is the key name derives with suffix: "{name}:suffix", or
// "name:suffix" when name has a '{'. Either way it shares name's slot.
func Suffixed(name, suffix string) string { return Tagged(name) + ":" + suffix }

// SharesSlot reports whether every key derived from name hashes to name's
// own cluster slot: a name without braces, or one whose first '{' opens a
// non-empty hash tag (its derived keys keep that tag).
func SharesSlot(name string) bool {
	open := strings.IndexByte(name, '{')
	if open < 0 {
		return !strings.Contains(name, "}")
	}
	return strings.IndexByte(name[open+1:], '}') > 0
}

// Field is the hash field of an owner of a Client: "<clientID>:<owner>".
func Field(clientID, owner string) string { return clientID + ":" + owner }

// SplitField splits a hash field "<clientID>:<owner>" (a client ID has no
// colon; an owner may). A field without a colon is all owner.
func SplitField(field string) (clientID, owner string) {
	clientID, owner, ok := strings.Cut(field, ":")
	if !ok {
		return "", field
	}
	return clientID, owner
}

// IsHolderField reports whether a hash field has a holder's shape: a
// client ID (a UUID, as both relock and Redisson make them), a colon, and
// the rest.
func IsHolderField(field string) bool {
	return len(field) > uuidLen && field[uuidLen] == ':' && isUUID(field[:uuidLen])
}

// Channel is a lock's unlock channel (plain, fenced and fair locks).
func Channel(name string) string { return Derived(ChannelPrefix, name) }

// FairWaiterChannel is a fair-lock waiter's own channel, on which only the
// head of the queue is woken.
func FairWaiterChannel(name, field string) string { return Channel(name) + ":" + field }

// Queue is a fair lock's queue of waiters.
func Queue(name string) string { return Derived(QueuePrefix, name) }

// Timeouts is a fair lock's waiter deadlines.
func Timeouts(name string) string { return Derived(TimeoutPrefix, name) }

// Token is a fenced lock's token counter.
func Token(name string) string { return Derived(TokenPrefix, name) }

// UnlockLatch is the key of Redisson's in-flight unlock requestID.
func UnlockLatch(name, requestID string) string {
	return Derived(UnlockLatchPrefix, name) + ":" + requestID
}

// Alive is relock's heartbeats of the waiters of the fair lock name.
func Alive(name string) string { return Derived(AlivePrefix, name) }

// Wakers is the wake-one registry of a lock (relock's own).
func Wakers(name string) string { return Derived(WakersPrefix, name) }

// Knocks is relock's record of the clients whose acquisitions of a lock
// (plain, fenced or spin) were refused in the last seconds: a release
// does not grant the lock to a waiter of its own client while another
// client is in it (spin waiters and pollers hear no release; a waiting
// call subscribes and is not recorded).
func Knocks(name string) string { return Derived(KnocksPrefix, name) }

// Grantees is relock's record of the waiters that a release may grant a
// lock to (wake-one with grant on release): for each client registered
// in Wakers, the waiter of that client whose latest attempt registered
// it, as "<kind> <window ms> <stamp> <field>" (kind "r" for a plain lock,
// "f" for a fenced one, in upper case, "R" and "F", for a name with a '{':
// the name and its other form share the grantees, and a release grants
// only an entry of its own form; the window is the granted hold's lease
// until its client confirms it; the stamp is the client's own clock at
// the attempt, which the client reads back from the grant). A release
// that grants removes the entry it used.
func Grantees(name string) string { return Derived(GranteesPrefix, name) }

// GrantMessagePrefix starts the message a release publishes on a
// Client's wake channel when it granted the lock to the Client's waiter:
// "g <kind> <token> <stamp> <field>", from the waiter's Grantees entry
// (token 0 for a plain lock; the kind's case, as the entry's, names the
// form of the name the grant is for: the names "x" and "{x}" share the
// wake channels).
const GrantMessagePrefix = "g "

// WakeChannelPrefix is what a Client's wake channel for a lock starts
// with; the client ID follows.
func WakeChannelPrefix(name string) string { return Derived(WakePrefix, name) + ":" }

// WakeChannel is the wake channel of the Client clientID for a lock.
func WakeChannel(name, clientID string) string { return WakeChannelPrefix(name) + clientID }

// RWChannel is a read-write lock's channel, shared by both sides.
func RWChannel(name string) string { return Derived(RWLockChannelPrefix, name) }

// ReadLeaseKey is the key of level n (1 for the first) of the read hold
// with field (the reader's "<clientID>:<owner>") on the read-write lock
// name: it holds that level's lease.
func ReadLeaseKey(name, field string, n int) string {
	return Tagged(name) + ":" + field + ":" + ReadLeaseMark + ":" + strconv.Itoa(n)
}

// SemaphoreKeys are the keys and the channel of a semaphore.
type SemaphoreKeys struct {
	// Available holds the count of permits available (a string), under
	// the semaphore's name.
	Available string
	// Leases holds the permits held (SemaphoreLeasesSuffix).
	Leases string
	// Channel carries the counts of permits that came free.
	Channel string
	// Queue and QueueDeadlines are relock's queue of waiters.
	Queue, QueueDeadlines string
	// Holders is relock's record of who took each permit held.
	Holders string
}

// Semaphore returns the keys of the semaphore name.
func Semaphore(name string) SemaphoreKeys {
	return SemaphoreKeys{
		Available:      name,
		Leases:         Suffixed(name, SemaphoreLeasesSuffix),
		Channel:        Derived(SemaphoreChannelPrefix, name),
		Queue:          Suffixed(name, SemaphoreQueueSuffix),
		QueueDeadlines: Suffixed(name, SemaphoreQueueDeadlinesSuffix),
		Holders:        Suffixed(name, SemaphoreHoldersSuffix),
	}
}

// CountingSemaphoreKeys are the keys and the channel of a counting
// semaphore (Redisson's RSemaphore).
type CountingSemaphoreKeys struct {
	// Count holds the permits available (a string), under the name: the
	// same key as a permit-expirable semaphore's available count.
	Count string
	// Grants is relock's record of recent grants (CountingGrantsSuffix).
	Grants string
	// Channel carries the new count when permits come free: the
	// semaphore channel, Redisson's for both semaphores.
	Channel string
}

// CountingSemaphore returns the keys of the counting semaphore name.
func CountingSemaphore(name string) CountingSemaphoreKeys {
	return CountingSemaphoreKeys{
		Count:   name,
		Grants:  Suffixed(name, CountingGrantsSuffix),
		Channel: Derived(SemaphoreChannelPrefix, name),
	}
}

// RateLimiterKeys are the keys and the channel of a rate limiter
// (Redisson's RRateLimiter).
type RateLimiterKeys struct {
	// Config is the hash under the name: RateField, RateIntervalField,
	// RateTypeField, RateKeepAliveField.
	Config string
	// Value holds the permits left in the window (a string); Permits the
	// grants in the window (a sorted set: Redisson's packed grant, a
	// length byte, that many random bytes and the permits as a 4-byte
	// little-endian integer -> when it was made, unix ms).
	Value, Permits string
	// Channel is relock's: a rate set anew is published there.
	Channel string
}

// UnpackGrant reads a rate limiter's grant as Redisson packs it (Lua's
// struct "Bc0I": a length byte, that many bytes of ID, the permits as a
// 4-byte little-endian integer); ok is false for anything else.
func UnpackGrant(member string) (id string, permits int64, ok bool) {
	if len(member) < 5 || int(member[0]) != len(member)-5 {
		return "", 0, false
	}
	p := member[len(member)-4:]
	return member[1 : len(member)-4], int64(p[0]) | int64(p[1])<<8 | int64(p[2])<<16 | int64(p[3])<<24, true
}

// RateLimiter returns the keys of the rate limiter name.
func RateLimiter(name string) RateLimiterKeys {
	return RateLimiterKeys{
		Config:  name,
		Value:   Suffixed(name, RateValueSuffix),
		Permits: Suffixed(name, RatePermitsSuffix),
		Channel: Derived(RateLimiterChannelPrefix, name),
	}
}

// ClientValue and ClientPermits are the value and the grants of one
// client (clientID) of the rate limiter, for rate type PER_CLIENT.
func (k RateLimiterKeys) ClientValue(clientID string) string { return k.Value + ":" + clientID }

// ClientPermits: see ClientValue.
func (k RateLimiterKeys) ClientPermits(clientID string) string { return k.Permits + ":" + clientID }

// LatchChannel is a count-down latch's channel. Redisson wraps the name in
// braces whatever it holds, so for a name with a hash tag of its own the
// channel is not in the name's slot.
func LatchChannel(name string) string { return CountDownLatchChannelPrefix + "{" + name + "}" }

// LatchOpened is relock's own key beside a count-down latch's layout: a
// string, the server's time in microseconds (TIME) of the last moment
// relock found the latch open, by a CountDown that took the count to 0 or
// a TrySetCount that found no count, always a value it did not hold
// before; it expires shortly after (see package latch). A waiter that
// finds it changed since it last read a count knows that the latch was
// open in between, even when a new count was set since. Like every
// Suffixed key, the name "x" and its braced form "{x}" derive the same
// (see OtherForm). Classify reads it as RoleLatchOpened, so that no lock
// may be named after it.
func LatchOpened(name string) string { return Suffixed(name, LatchOpenedSuffix) }

const uuidLen = 36

// isUUID reports whether s is a UUID in its text form
// (8-4-4-4-12 hexadecimal digits).
func isUUID(s string) bool {
	if len(s) != uuidLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch i {
		case 8, 13, 18, 23:
			if s[i] != '-' {
				return false
			}
		default:
			if !isHex(s[i]) {
				return false
			}
		}
	}
	return true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
