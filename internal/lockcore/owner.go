package lockcore

import (
	"context"
	"strings"
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

// WithOwner returns a context that carries owner.
func WithOwner(ctx context.Context, owner string) context.Context {
	return context.WithValue(ctx, ownerKey{}, owner)
}

// OwnerFrom returns the owner ctx carries, if any.
func OwnerFrom(ctx context.Context) (string, bool) {
	owner, ok := ctx.Value(ownerKey{}).(string)
	return owner, ok
}

// CheckOwner reports whether owner is a valid owner string: non-empty, at
// most MaxOwnerLen bytes, valid UTF-8, no control characters.
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
	return nil
}

// CheckName reports whether name is a valid lock name: non-empty, at most
// MaxNameLen bytes, valid UTF-8, no control characters, and either no
// braces or a proper hash tag ("orders:{user:7}"), so that all of the
// lock's keys share one cluster slot.
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
	if !sharesSlot(name) {
		return invalid("lock name %q: braces that do not form a hash tag ({tag} with a non-empty tag) would put its keys in different cluster slots", name)
	}
	return nil
}

// sharesSlot reports whether every key Derived makes from name hashes to
// name's own cluster slot: a name without braces (its derived keys are
// tagged with the whole name), or one whose first '{' opens a non-empty
// hash tag (its derived keys keep that tag).
func sharesSlot(name string) bool {
	open := strings.IndexByte(name, '{')
	if open < 0 {
		return !strings.Contains(name, "}")
	}
	close := strings.IndexByte(name[open+1:], '}')
	return close > 0
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
