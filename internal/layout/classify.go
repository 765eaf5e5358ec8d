package layout

import "strings"

// Match is what a key or a channel is to a lock.
type Match struct {
	// Kind is the kind the key implies (Role.Kind): for a key that
	// several kinds share, its value or the name's other keys tell which.
	Kind Kind
	Role Role
	// Name is the lock's name. Alt is the other name the key belongs to
	// when it reads two ways ("prefix:{a}" is a key of "a" and of "{a}"),
	// else "".
	Name, Alt string
	// Detail is what the key or channel carries after the name: the
	// field of a read lease or a fair-lock waiter's channel, the client ID
	// of a wake channel, the request ID of an unlock latch; else "".
	Detail string
}

// Classify says what key, of Redis type typ (as TYPE names it), is to
// which lock, reversing the names this package makes. Every hash is taken
// for a lock (RoleLock): only its fields tell whether it is one. A count
// (RoleCount) is a plain integer under the name, which no key name tells
// apart from any other: Classify never reports one. ok is false for a key
// of no lock.
func Classify(key, typ string) (m Match, ok bool) {
	prefixed := func(r Role, want, prefix string) bool {
		if typ != want {
			return false
		}
		rest, found := strings.CutPrefix(key, prefix+":")
		if !found {
			return false
		}
		m, ok = match(r, rest, "")
		return ok
	}
	suffixed := func(r Role, suffix string) bool {
		want := TypeZSet
		if r == RoleHolders {
			want = TypeHash
		}
		if typ != want {
			return false
		}
		head, found := strings.CutSuffix(key, ":"+suffix)
		if !found {
			return false
		}
		m, ok = match(r, head, "")
		return ok
	}
	switch {
	case prefixed(RoleQueue, TypeList, QueuePrefix),
		prefixed(RoleTimeouts, TypeZSet, TimeoutPrefix),
		prefixed(RoleToken, TypeString, TokenPrefix),
		prefixed(RoleWakers, TypeZSet, WakersPrefix),
		prefixed(RoleKnocks, TypeZSet, KnocksPrefix),
		prefixed(RoleGrantees, TypeHash, GranteesPrefix),
		prefixed(RoleAlive, TypeZSet, AlivePrefix),
		suffixed(RoleWaitDeadlines, SemaphoreQueueDeadlinesSuffix),
		suffixed(RoleWaitQueue, SemaphoreQueueSuffix),
		suffixed(RoleHolders, SemaphoreHoldersSuffix),
		suffixed(RoleGrants, CountingGrantsSuffix),
		suffixed(RoleRatePermits, RatePermitsSuffix),
		suffixed(RoleLeases, SemaphoreLeasesSuffix):
		return m, true
	}
	if typ == TypeString || typ == TypeZSet {
		// <tagged name>:value:<client ID> or <tagged name>:permits:<client ID>
		r, suffix := RoleRateClientValue, ":"+RateValueSuffix+":"
		if typ == TypeZSet {
			r, suffix = RoleRateClientPermits, ":"+RatePermitsSuffix+":"
		}
		if i := len(key) - uuidLen - len(suffix); i > 0 && key[i:i+len(suffix)] == suffix && isUUID(key[i+len(suffix):]) {
			if m, ok := match(r, key[:i], key[i+len(suffix):]); ok {
				return m, true
			}
		}
	}
	if typ == TypeString {
		if head, found := strings.CutSuffix(key, ":"+LatchOpenedSuffix); found {
			if m, ok := match(RoleLatchOpened, head, ""); ok {
				return m, true
			}
		}
		if key, found := strings.CutSuffix(key, ":"+RateValueSuffix); found {
			if m, ok := match(RoleRateValue, key, ""); ok {
				return m, true
			}
		}
		if rest, found := strings.CutPrefix(key, UnlockLatchPrefix+":"); found {
			// <tagged name>:<request ID, 32 hex digits>
			if i := strings.LastIndexByte(rest, ':'); i >= 0 && isHexID(rest[i+1:]) {
				return match(RoleUnlockLatch, rest[:i], rest[i+1:])
			}
			return Match{}, false
		}
		// <tagged name>:<field>:rwlock_timeout:<level>
		mark := ":" + ReadLeaseMark + ":"
		if i := strings.LastIndex(key, mark); i > 0 && isDigits(key[i+len(mark):]) {
			if name, alt, field, found := cutField(key[:i]); found {
				return Match{RoleReadLease.Kind(), RoleReadLease, name, alt, field}, true
			}
		}
		return Match{}, false
	}
	if typ == TypeHash {
		return Match{RoleLock.Kind(), RoleLock, key, "", ""}, true
	}
	return Match{}, false
}

// DerivedKey reports whether key is a key that relock derives from a lock
// name (Classify reads it, as a list, a sorted set or a string, as such a
// key: a fair lock's queue, a fenced lock's token counter, a semaphore's
// leases, a read hold's lease..., or as a hash, a semaphore's holders or
// a lock's grantees),
// and of which lock. A name that is one would share that key with the
// lock it belongs to, so relock refuses it as a lock name. Another hash
// is never one (every hash reads as a lock's own), nor is a name without
// '{' (every derived key has one).
func DerivedKey(key string) (Match, bool) {
	for _, typ := range []string{TypeList, TypeZSet, TypeString} {
		if m, ok := Classify(key, typ); ok {
			return m, true
		}
	}
	if m, ok := Classify(key, TypeHash); ok && (m.Role == RoleHolders || m.Role == RoleGrantees) {
		return m, true
	}
	return Match{}, false
}

// ClassifyChannel says what a pub/sub channel is to which lock; ok is
// false for a channel of no lock.
func ClassifyChannel(ch string) (m Match, ok bool) {
	if rest, found := strings.CutPrefix(ch, CountDownLatchChannelPrefix); found {
		// Always "{name}", whatever the name holds: one reading.
		if len(rest) > 2 && rest[0] == '{' && rest[len(rest)-1] == '}' {
			return Match{RoleLatchChannel.Kind(), RoleLatchChannel, rest[1 : len(rest)-1], "", ""}, true
		}
		return Match{}, false
	}
	if rest, found := strings.CutPrefix(ch, SemaphoreChannelPrefix+":"); found {
		return match(RoleSemChannel, rest, "")
	}
	if rest, found := strings.CutPrefix(ch, RateLimiterChannelPrefix+":"); found {
		return match(RoleRateChannel, rest, "")
	}
	if rest, found := strings.CutPrefix(ch, RWLockChannelPrefix+":"); found {
		return match(RoleRWChannel, rest, "")
	}
	if rest, found := strings.CutPrefix(ch, WakePrefix+":"); found {
		// <tagged name>:<client ID>
		if i := len(rest) - uuidLen - 1; i > 0 && rest[i] == ':' && isUUID(rest[i+1:]) {
			return match(RoleWakeChannel, rest[:i], rest[i+1:])
		}
		return Match{}, false
	}
	if rest, found := strings.CutPrefix(ch, ChannelPrefix+":"); found {
		// A waiter's channel first: a name with a hash tag of its own
		// would read the whole rest as a name.
		if name, alt, field, ok := cutField(rest); ok {
			return Match{RoleWaiterChannel.Kind(), RoleWaiterChannel, name, alt, field}, true
		}
		return match(RoleChannel, rest, "")
	}
	return Match{}, false
}

// match is the Match of role r for a tagged name (see untag).
func match(r Role, tagged, detail string) (Match, bool) {
	name, alt, ok := untag(tagged)
	if !ok {
		return Match{}, false
	}
	return Match{r.Kind(), r, name, alt, detail}, true
}

// untag reverses Tagged: "{name}" for a name without '{' (also the name
// "{name}" itself: the alternative, its OtherForm), a name with a '{' as
// it is.
func untag(s string) (name, alt string, ok bool) {
	if len(s) > 2 && s[0] == '{' && s[len(s)-1] == '}' && !strings.Contains(s[1:len(s)-1], "{") {
		return s[1 : len(s)-1], s, true
	}
	if SelfTagged(s) {
		return s, "", true
	}
	return "", "", false
}

// cutField splits "<tagged name>:<clientID>:<owner>" at the first
// ":<UUID>:" whose left part is a tagged name.
func cutField(s string) (name, alt, field string, ok bool) {
	for i := 0; i+uuidLen+1 < len(s); i++ {
		if s[i] != ':' || s[i+uuidLen+1] != ':' || !isUUID(s[i+1:i+1+uuidLen]) {
			continue
		}
		if name, alt, ok := untag(s[:i]); ok {
			return name, alt, s[i+1:], true
		}
	}
	return "", "", "", false
}

func isHexID(s string) bool {
	if len(s) != 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isHex(s[i]) {
			return false
		}
	}
	return true
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
