package layout

import "strconv"

// Kind is a kind of lock or synchronizer, by the name tools print.
type Kind string

// The kinds.
const (
	KindLock      Kind = "lock"           // reentrant lock
	KindFenced    Kind = "fenced"         // reentrant lock with fencing tokens
	KindFair      Kind = "fair"           // fair (FIFO) lock
	KindRWLock    Kind = "rwlock"         // read-write lock
	KindSemaphore Kind = "semaphore"      // permit-expirable semaphore
	KindLatch     Kind = "countdownlatch" // count-down latch
	// KindCountingSemaphore is Redisson's RSemaphore: a count without
	// permit IDs.
	KindCountingSemaphore Kind = "counting_semaphore"
	// KindRateLimiter is Redisson's RRateLimiter.
	KindRateLimiter Kind = "rate_limiter"
)

// Role is what a key or a channel is to the lock it belongs to.
type Role int

// The roles. Each belongs to one kind (Role.Kind), except RoleLock and
// RoleCount, which every kind with a key under the name itself shares.
const (
	RoleNone Role = iota
	// RoleLock is a lock's hash, under the lock's name: plain, fenced,
	// fair and read-write locks (a hash with ModeField is a read-write
	// lock's).
	RoleLock
	// RoleCount is the count under the name of a semaphore (its permits
	// available), a counting semaphore or a latch: a plain integer, which
	// nothing tells apart from any other counter.
	RoleCount
	RoleWakers        // relock's wake-one registry (Wakers)
	RoleToken         // fenced lock's token counter (Token)
	RoleQueue         // fair lock's queue (Queue)
	RoleTimeouts      // fair lock's waiter deadlines (Timeouts)
	RoleAlive         // fair lock's heartbeats of relock's waiters (Alive)
	RoleUnlockLatch   // Redisson's in-flight unlock (UnlockLatch)
	RoleReadLease     // a read hold's level lease (ReadLeaseKey)
	RoleLeases        // semaphore's permits held
	RoleWaitQueue     // semaphore's queue of waiters (relock's)
	RoleWaitDeadlines // semaphore's queue deadlines (relock's)
	RoleGrants        // counting semaphore's recent grants (relock's)
	RoleRateValue     // rate limiter's permits left in the window (RateLimiter)
	RoleRatePermits   // rate limiter's grants in the window (RateLimiter)
	// RoleRateClientValue and RoleRateClientPermits are a rate limiter's
	// value and grants of one client (rate type PER_CLIENT): the client
	// ID is the Match's Detail.
	RoleRateClientValue
	RoleRateClientPermits
	RoleLatchOpened // count-down latch's mark of its last opening (relock's, LatchOpened)
	RoleHolders     // semaphore's record of who took each permit (relock's)
	RoleKnocks      // the clients refused a lock lately (relock's, Knocks)
	RoleGrantees    // the waiters a release may grant a lock to (relock's, Grantees)

	// Channels.
	RoleChannel       // lock's unlock channel (Channel)
	RoleWaiterChannel // fair-lock waiter's channel (FairWaiterChannel)
	RoleWakeChannel   // a Client's wake-one channel (WakeChannel)
	RoleRWChannel     // read-write lock's channel (RWChannel)
	RoleSemChannel    // semaphore's channel
	RoleLatchChannel  // count-down latch's channel (LatchChannel)
	RoleRateChannel   // rate limiter's channel (relock's own)
)

var roleNames = [...]string{
	RoleNone: "none", RoleLock: "lock", RoleCount: "count", RoleWakers: "wakers",
	RoleToken: "token", RoleQueue: "queue", RoleTimeouts: "timeouts", RoleAlive: "heartbeats",
	RoleUnlockLatch: "unlock latch", RoleReadLease: "read lease", RoleLeases: "leases",
	RoleWaitQueue: "wait queue", RoleWaitDeadlines: "wait deadlines", RoleGrants: "grants", RoleLatchOpened: "opening mark",
	RoleRateValue: "rate value", RoleRatePermits: "rate permits",
	RoleRateClientValue: "client rate value", RoleRateClientPermits: "client rate permits", RoleHolders: "holders",
	RoleKnocks: "knocks", RoleGrantees: "grantees",
	RoleChannel: "channel", RoleWaiterChannel: "waiter channel", RoleWakeChannel: "wake channel",
	RoleRWChannel: "rwlock channel", RoleSemChannel: "semaphore channel", RoleLatchChannel: "latch channel",
	RoleRateChannel: "rate limiter channel",
}

func (r Role) String() string {
	if r >= 0 && int(r) < len(roleNames) {
		return roleNames[r]
	}
	return "Role(" + strconv.Itoa(int(r)) + ")"
}

// Kind is the kind a key or channel of role r implies: KindLock for the
// roles that several kinds share (RoleLock, RoleWakers, RoleKnocks, RoleGrantees, RoleUnlockLatch,
// RoleChannel: the value of the key, or other keys, tell which lock it
// is), KindSemaphore for RoleCount and RoleSemChannel (a latch's count
// and a counting semaphore's count and channel look the same).
func (r Role) Kind() Kind {
	switch r {
	case RoleToken:
		return KindFenced
	case RoleQueue, RoleTimeouts, RoleAlive, RoleWaiterChannel:
		return KindFair
	case RoleReadLease, RoleRWChannel:
		return KindRWLock
	case RoleCount, RoleLeases, RoleWaitQueue, RoleWaitDeadlines, RoleHolders, RoleSemChannel:
		return KindSemaphore
	case RoleLatchOpened, RoleLatchChannel:
		return KindLatch
	case RoleGrants:
		return KindCountingSemaphore
	case RoleRateValue, RoleRatePermits, RoleRateClientValue, RoleRateClientPermits, RoleRateChannel:
		return KindRateLimiter
	case RoleNone:
		return ""
	}
	return KindLock
}

// Redis types of keys, as TYPE names them.
const (
	TypeHash   = "hash"
	TypeList   = "list"
	TypeZSet   = "zset"
	TypeString = "string"
)

// Key is one key of a lock: its name, its Redis type and its role.
type Key struct {
	Name string
	Type string
	Role Role
}

// Spec is what one kind keeps in Redis.
type Spec struct {
	Kind Kind
	// Noun names the kind to people ("fair lock").
	Noun string
	// Roles are the roles of the keys a reader of the kind reads, the
	// key under the name first. Keys whose names depend on their content
	// (a read-write lock's read leases, from its hash fields) are not
	// among them.
	Roles []Role
	// Channel is the role of the channel its waiters listen on.
	Channel Role
}

// Specs lists every kind.
var Specs = []Spec{
	{KindLock, "lock", []Role{RoleLock, RoleWakers, RoleKnocks, RoleGrantees}, RoleChannel},
	{KindFenced, "fenced lock", []Role{RoleLock, RoleToken, RoleWakers, RoleKnocks, RoleGrantees}, RoleChannel},
	{KindFair, "fair lock", []Role{RoleLock, RoleQueue, RoleTimeouts, RoleAlive}, RoleChannel},
	{KindRWLock, "read-write lock", []Role{RoleLock}, RoleRWChannel},
	{KindSemaphore, "semaphore", []Role{RoleCount, RoleLeases, RoleWaitQueue, RoleWaitDeadlines, RoleHolders}, RoleSemChannel},
	{KindLatch, "count-down latch", []Role{RoleCount, RoleLatchOpened}, RoleLatchChannel},
	{KindCountingSemaphore, "counting semaphore", []Role{RoleCount, RoleGrants}, RoleSemChannel},
	// The rate limiter's configuration is a hash under the name (a
	// RoleLock key: only its fields, RateFields, tell it from a lock's).
	{KindRateLimiter, "rate limiter", []Role{RoleLock, RoleRateValue, RoleRatePermits}, RoleRateChannel},
}

// SpecOf returns the Spec of kind k, and false for an unknown kind.
func SpecOf(k Kind) (Spec, bool) {
	for _, s := range Specs {
		if s.Kind == k {
			return s, true
		}
	}
	return Spec{}, false
}

// KeyOf is the key of role r of the lock name. It panics for a role whose
// key needs more than the name (RoleUnlockLatch, RoleReadLease) or is a
// channel (see ChannelOf).
func KeyOf(name string, r Role) Key {
	switch r {
	case RoleLock:
		return Key{name, TypeHash, r}
	case RoleCount:
		return Key{name, TypeString, r}
	case RoleWakers:
		return Key{Wakers(name), TypeZSet, r}
	case RoleKnocks:
		return Key{Knocks(name), TypeZSet, r}
	case RoleGrantees:
		return Key{Grantees(name), TypeHash, r}
	case RoleToken:
		return Key{Token(name), TypeString, r}
	case RoleQueue:
		return Key{Queue(name), TypeList, r}
	case RoleTimeouts:
		return Key{Timeouts(name), TypeZSet, r}
	case RoleAlive:
		return Key{Alive(name), TypeZSet, r}
	case RoleLeases:
		return Key{Semaphore(name).Leases, TypeZSet, r}
	case RoleWaitQueue:
		return Key{Semaphore(name).Queue, TypeZSet, r}
	case RoleWaitDeadlines:
		return Key{Semaphore(name).QueueDeadlines, TypeZSet, r}
	case RoleHolders:
		return Key{Semaphore(name).Holders, TypeHash, r}
	case RoleGrants:
		return Key{CountingSemaphore(name).Grants, TypeZSet, r}
	case RoleRateValue:
		return Key{RateLimiter(name).Value, TypeString, r}
	case RoleRatePermits:
		return Key{RateLimiter(name).Permits, TypeZSet, r}
	case RoleLatchOpened:
		return Key{LatchOpened(name), TypeString, r}
	}
	panic("layout: no key of role " + r.String() + " is named by the lock name alone")
}

// ChannelOf is the channel of role r of the lock name, for the roles of
// channels named by the name alone.
func ChannelOf(name string, r Role) string {
	switch r {
	case RoleChannel:
		return Channel(name)
	case RoleRWChannel:
		return RWChannel(name)
	case RoleSemChannel:
		return Semaphore(name).Channel
	case RoleLatchChannel:
		return LatchChannel(name)
	case RoleRateChannel:
		return RateLimiter(name).Channel
	}
	panic("layout: no channel of role " + r.String() + " is named by the lock name alone")
}

// KeysOf returns the keys of the lock name that a reader of the kinds
// reads (of every kind when kinds is empty), each once, in the order of
// Specs.
func KeysOf(name string, kinds ...Kind) []Key {
	var out []Key
	seen := map[Role]bool{}
	for _, s := range Specs {
		if len(kinds) > 0 && !contains(kinds, s.Kind) {
			continue
		}
		for _, r := range s.Roles {
			if !seen[r] {
				seen[r] = true
				out = append(out, KeyOf(name, r))
			}
		}
	}
	return out
}

func contains(ks []Kind, k Kind) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}
