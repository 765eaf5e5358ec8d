package lockcore

import (
	"context"
	"github.com/relock-go/relock/internal/layout"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// MaxOwnerLen is the longest owner string, in bytes.
const MaxOwnerLen = 256

// MaxNameLen is the longest lock name, in bytes.
const MaxNameLen = 1024

// MaxLease is the longest lease or wait accepted. Longer ones would overflow
// Redis' expiry arithmetic.
const MaxLease = 100 * 365 * 24 * time.Hour

type ownerKey struct{}

// ownerValue is what a context carries for its owner. reserved marks an
// owner that relock made up itself (Do's owner for a context that had none,
// a MultiLock's anonymous owner): it has the reserved form "anon-<n>",
// which CheckOwner refuses from users, so no user's owner can collide
// with it.
type ownerValue struct {
	owner    string
	reserved bool
}

// WithOwner returns a context that carries owner.
func WithOwner(ctx context.Context, owner string) context.Context {
	return context.WithValue(ctx, ownerKey{}, ownerValue{owner: owner})
}

// WithReservedOwner returns a context that carries an owner made by
// AnonymousOwner.
func WithReservedOwner(ctx context.Context, owner string) context.Context {
	return context.WithValue(ctx, ownerKey{}, ownerValue{owner: owner, reserved: true})
}

// WithOwnerOf returns ctx carrying the owner that from carries (none when
// from carries none), as from carries it: given, or made by relock.
func WithOwnerOf(ctx, from context.Context) context.Context {
	v, ok := from.Value(ownerKey{}).(ownerValue)
	if !ok {
		return ctx
	}
	return context.WithValue(ctx, ownerKey{}, v)
}

// OwnerFrom returns the owner ctx carries, if any.
func OwnerFrom(ctx context.Context) (string, bool) {
	v, ok := ctx.Value(ownerKey{}).(ownerValue)
	return v.owner, ok
}

// ContextOwner returns the owner in ctx, checked, and whether there was
// one. An owner given with WithOwner must pass CheckOwner; one made by
// relock (WithReservedOwner) is trusted.
func ContextOwner(ctx context.Context) (owner string, ok bool, err error) {
	v, ok := ctx.Value(ownerKey{}).(ownerValue)
	if !ok {
		return "", false, nil
	}
	if !v.reserved {
		if err := CheckOwner(v.owner); err != nil {
			return "", true, err
		}
	}
	return v.owner, true, nil
}

// anonSeq numbers the owners that relock makes up, process-wide.
var anonSeq atomic.Uint64

// AnonymousOwner returns a fresh owner, "anon-<n>", for an acquisition made
// with a context that carries none, outside any one Client (a MultiLock's).
// A Client's own anonymous owners also name the Client (see
// Core.anonymousOwner). The form is reserved: CheckOwner refuses it, so it
// never names a user's owner.
func AnonymousOwner() string {
	return anonPrefix + strconv.FormatUint(anonSeq.Add(1), 10)
}

// ReusedOwner returns a fresh owner, "anon-<n>@", of the reserved form,
// for one that relock makes up and then uses again: a RedLock's anonymous
// acquisitions reuse theirs once released. A Client keeps its record of
// such an owner's hold once idle, as for an owner given with WithOwner
// (see Core.tidyLocked), instead of forgetting it. No Client's own
// anonymous owner has this form: a Client's name is never empty.
func ReusedOwner() string {
	return AnonymousOwner() + "@"
}

// reusedOwner reports whether owner, of the reserved form, was made by
// ReusedOwner: its first '@' ends it.
func reusedOwner(owner string) bool {
	return strings.IndexByte(owner, '@') == len(owner)-1
}

// anonymousOwner returns a fresh anonymous owner of this Client:
// "anon-<n>@<name>", the Client's name (Config.Name) telling an operator
// which process holds the lock.
func (c *Core) anonymousOwner() string {
	return AnonymousOwner() + "@" + c.name
}

const anonPrefix = "anon-"

// reservedOwner reports whether owner has the form "anon-<digits>", or
// "anon-<digits>@<anything>".
func reservedOwner(owner string) bool {
	digits, ok := strings.CutPrefix(owner, anonPrefix)
	if !ok {
		return false
	}
	if at := strings.IndexByte(digits, '@'); at >= 0 {
		digits = digits[:at]
	}
	if digits == "" {
		return false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return false
		}
	}
	return true
}

// MaxClientNameLen is the longest Client name, in bytes: an anonymous
// owner, "anon-<n>@<name>", stays within MaxOwnerLen.
const MaxClientNameLen = 200

// CheckClientName reports whether name is a valid Client name: non-empty,
// at most MaxClientNameLen bytes, valid UTF-8, no control characters.
func CheckClientName(name string) error {
	if name == "" {
		return invalid("empty client name")
	}
	if len(name) > MaxClientNameLen {
		return invalid("client name is %d bytes, the limit is %d", len(name), MaxClientNameLen)
	}
	if err := checkText(name); err != nil {
		return invalid("client name %q: %v", name, err)
	}
	return nil
}

// DefaultClientName is "<hostname>:<pid>" of this process.
var DefaultClientName = func() string {
	host, err := os.Hostname()
	if err != nil || host == "" || checkText(host) != nil {
		host = "localhost"
	}
	return host + ":" + strconv.Itoa(os.Getpid())
}()

// CheckOwner reports whether owner is a valid owner string: non-empty, at
// most MaxOwnerLen bytes, valid UTF-8, no control characters, and not of
// the form "anon-<n>", which relock reserves for the owners it makes up.
func CheckOwner(owner string) error {
	if owner == "" {
		return invalid("empty owner")
	}
	if len(owner) > MaxOwnerLen {
		return invalid("owner is %d bytes, the limit is %d", len(owner), MaxOwnerLen)
	}
	if err := checkText(owner); err != nil {
		return invalid("owner %q: %v", owner, err)
	}
	if reservedOwner(owner) {
		return invalid("owner %q: the forms anon-<n> and anon-<n>@<name> are reserved for anonymous holds", owner)
	}
	return nil
}

// CheckName reports whether name is a valid lock name: non-empty, at most
// MaxNameLen bytes, valid UTF-8, no control characters, either no braces
// or a proper hash tag ("orders:{user:7}"), so that all of the lock's keys
// share one cluster slot, and not itself a key that relock derives from
// another name ("redisson_lock_queue:{a}", "{a}:timeout": see
// layout.DerivedKey), which it would share with that lock.
func CheckName(name string) error {
	if name == "" {
		return invalid("empty lock name")
	}
	if len(name) > MaxNameLen {
		return invalid("lock name is %d bytes, the limit is %d", len(name), MaxNameLen)
	}
	if err := checkText(name); err != nil {
		return invalid("lock name %q: %v", name, err)
	}
	if !layout.SharesSlot(name) {
		return invalid("lock name %q: braces that do not form a hash tag ({tag} with a non-empty tag) would put its keys in different cluster slots", name)
	}
	if m, ok := layout.DerivedKey(name); ok {
		spec, _ := layout.SpecOf(m.Kind)
		return invalid("lock name %q: it is the %s key of the %s %q, which the two would share", name, m.Role, spec.Noun, m.Name)
	}
	return nil
}

type textError string

func (e textError) Error() string { return string(e) }

func checkText(s string) error {
	if !utf8.ValidString(s) {
		return textError("not valid UTF-8")
	}
	if strings.ContainsFunc(s, isControl) {
		return textError("contains a control character")
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }

// CheckWait checks a wait argument: 0 (try once) or positive.
func CheckWait(wait time.Duration) error {
	if wait < 0 {
		return invalid("negative wait %v", wait)
	}
	if wait > MaxLease {
		return invalid("wait %v is longer than %v", wait, MaxLease)
	}
	return nil
}

// CheckLease checks a fixed lease: at least 1ms, at most MaxLease.
func CheckLease(lease time.Duration) error {
	if lease < time.Millisecond {
		if lease < 0 {
			return invalid("negative lease %v", lease)
		}
		return invalid("lease %v is under 1ms", lease)
	}
	if lease > MaxLease {
		return invalid("lease %v is longer than %v", lease, MaxLease)
	}
	return nil
}

// Millis converts a lease to whole milliseconds for PEXPIRE, rounding up,
// so a holder is never granted less than it asked for and a lease never
// reaches Redis as 0 (PEXPIRE 0 deletes the key).
func Millis(d time.Duration) int64 {
	ms := int64((d + time.Millisecond - 1) / time.Millisecond)
	return max(ms, 1)
}
