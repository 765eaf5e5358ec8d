package lockcore_test

import (
	"errors"
	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/layout"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// rueidis' cluster client closes the connections of removed nodes from a
// goroutine that sleeps 5s first (TestBraceNamesOnCluster).
func TestMain(m *testing.M) {
	redistest.Main(m, redistest.ClusterLeftovers...)
}

// isControl is the API's definition of a control character: C0, DEL, C1.
func isControl(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }

// wantValid is the rule of API.md for names and owners.
func wantValid(s string, limit int) bool {
	return s != "" && len(s) <= limit && utf8.ValidString(s) && !strings.ContainsFunc(s, isControl)
}

// reserved reports whether owner has the form relock keeps for the
// owners it makes up, "anon-<digits>".
func reserved(owner string) bool {
	digits, ok := strings.CutPrefix(owner, "anon-")
	return ok && digits != "" && strings.Trim(digits, "0123456789") == ""
}

// checkTextErr checks what an invalid name or owner gets: an error that
// matches ErrInvalidArgument and is safe to log (no raw control character
// nor invalid UTF-8 from the input).
func checkTextErr(t *testing.T, what, s string, err error, valid bool) {
	t.Helper()
	if valid {
		if err != nil {
			t.Fatalf("%s %q rejected: %v", what, s, err)
		}
		return
	}
	if !errors.Is(err, relock.ErrInvalidArgument) {
		t.Fatalf("%s %q = %v, want ErrInvalidArgument", what, s, err)
	}
	if msg := err.Error(); !utf8.ValidString(msg) || strings.ContainsFunc(msg, isControl) {
		t.Fatalf("%s %q: error %q is not safe to log", what, s, msg)
	}
}

func FuzzCheckName(f *testing.F) {
	for _, s := range []string{"", "orders:42", "a\nb", "a\x00", "\x7f", "\u0085", "\xff", "{tag}x", "é",
		strings.Repeat("n", lockcore.MaxNameLen), strings.Repeat("n", lockcore.MaxNameLen+1)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		checkTextErr(t, "name", name, lockcore.CheckName(name), wantValid(name, lockcore.MaxNameLen))
	})
}

func FuzzCheckOwner(f *testing.F) {
	for _, s := range []string{"", "job-42", "anon-1", "o\x1b[31m", "\u009b", "\xc3\x28", "日本",
		strings.Repeat("o", lockcore.MaxOwnerLen), strings.Repeat("o", lockcore.MaxOwnerLen+1)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, owner string) {
		checkTextErr(t, "owner", owner, lockcore.CheckOwner(owner), wantValid(owner, lockcore.MaxOwnerLen) && !reserved(owner))
	})
}

// crc16 is Redis Cluster's key hash (CRC16-CCITT, XMODEM).
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// slot is the Redis Cluster slot of key: the hash of its hash tag (the
// part between the first '{' and the next '}', when not empty) or of the
// whole key.
func slot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return crc16(key) % 16384
}

func FuzzDerived(f *testing.F) {
	for _, s := range []string{"orders:42", "{user:1}:cart", "a{b}c", "x{", "{}x", "a}b", "}{a}", "{", "é{ü}"} {
		f.Add(s, "0123e4567-e89b-12d3-a456-426614174000", "job-42")
	}
	f.Fuzz(func(t *testing.T, name, clientID, owner string) {
		for _, prefix := range []string{layout.ChannelPrefix, layout.QueuePrefix, layout.TimeoutPrefix,
			layout.TokenPrefix, layout.UnlockLatchPrefix} {
			d := layout.Derived(prefix, name)
			want := prefix + ":{" + name + "}"
			if strings.Contains(name, "{") {
				want = prefix + ":" + name
			}
			if d != want {
				t.Fatalf("Derived(%q, %q) = %q, want %q (Redisson's rule)", prefix, name, d, want)
			}
			if lockcore.CheckName(name) != nil || slot(d) == slot(name) {
				continue
			}
			t.Fatalf("Derived(%q, %q) = %q is in slot %d, the lock key in slot %d", prefix, name, d, slot(d), slot(name))
		}
		if layout.Channel(name) != layout.Derived(layout.ChannelPrefix, name) {
			t.Fatalf("Channel(%q) = %q", name, layout.Channel(name))
		}
		field := layout.Field(clientID, owner)
		if got, ok := strings.CutPrefix(field, clientID+":"); !ok || got != owner {
			t.Fatalf("Field(%q, %q) = %q does not split back into its owner", clientID, owner, field)
		}
	})
}

// TestDerivedSharesSlot: "Either way the derived key shares the lock key's
// hash slot" (Derived's doc), so that every script's keys are in one slot
// on Redis Cluster, for every name CheckName accepts.
func TestDerivedSharesSlot(t *testing.T) {
	for _, name := range []string{"a}b", "{}x", "x{y", "{", "}", "{a}", "x{a}y}", "plain"} {
		if err := lockcore.CheckName(name); err != nil {
			continue
		}
		for _, prefix := range []string{layout.ChannelPrefix, layout.TokenPrefix, layout.QueuePrefix} {
			if d := layout.Derived(prefix, name); slot(d) != slot(name) {
				t.Errorf("name %q: %q is in slot %d, the lock key in slot %d", name, d, slot(d), slot(name))
			}
		}
	}
}

func TestSlotFunction(t *testing.T) {
	if got := crc16("123456789"); got != 0x31c3 {
		t.Errorf("crc16(123456789) = %#x, want 0x31c3", got)
	}
	for key, want := range map[string]uint16{"foo": 12182, "bar": 5061, "{user1000}.following": slot("user1000"), "{}x": crc16("{}x") % 16384} {
		if got := slot(key); got != want {
			t.Errorf("slot(%q) = %d, want %d", key, got, want)
		}
	}
}

// TestBraceNamesOnCluster: names whose derived keys would land in another
// slot (rueidis panics on such cross-slot scripts on Cluster) are rejected
// as invalid before anything is sent.
func TestBraceNamesOnCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	c, err := rlock.NewClient(cl.ClientOption())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, name := range []string{"a}b", "{}x", "x{y"} {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("TryLock(%q) on Cluster panicked: %v", name, p)
				}
			}()
			ok, err := c.GetFencedLock(name).TryLock(rlock.WithOwner(t.Context(), "o"), 0, time.Second)
			if ok || !errors.Is(err, rlock.ErrInvalidArgument) {
				t.Errorf("TryLock(%q) on Cluster = %v, %v, want ErrInvalidArgument", name, ok, err)
			}
		}()
	}
}

func FuzzDurations(f *testing.F) {
	for _, d := range []int64{0, 1, -1, 999_999, 1_000_000, 1_000_001, int64(time.Hour), int64(lockcore.MaxLease),
		int64(lockcore.MaxLease) + 1, math.MaxInt64, math.MinInt64} {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, n int64) {
		d := time.Duration(n)
		leaseOK := d >= time.Millisecond && d <= lockcore.MaxLease
		if err := lockcore.CheckLease(d); (err == nil) != leaseOK || (err != nil && !errors.Is(err, relock.ErrInvalidArgument)) {
			t.Fatalf("CheckLease(%v) = %v, want valid=%v", d, err, leaseOK)
		}
		waitOK := d >= 0 && d <= lockcore.MaxLease
		if err := lockcore.CheckWait(d); (err == nil) != waitOK || (err != nil && !errors.Is(err, relock.ErrInvalidArgument)) {
			t.Fatalf("CheckWait(%v) = %v, want valid=%v", d, err, waitOK)
		}
		if !leaseOK {
			return
		}
		// What reaches Redis for an accepted lease: whole milliseconds,
		// rounded up, never 0 (PEXPIRE 0 deletes the key).
		ms := lockcore.Millis(d)
		arg := strconv.FormatInt(ms, 10)
		if ms < 1 || strings.HasPrefix(arg, "-") || arg == "0" {
			t.Fatalf("Millis(%v) = %d", d, ms)
		}
		if granted := time.Duration(ms) * time.Millisecond; granted < d || granted-d >= time.Millisecond {
			t.Fatalf("Millis(%v) = %dms: not the lease rounded up to a millisecond", d, ms)
		}
	})
}

// FuzzScriptArgs sends a name and an owner through every lock kind's
// acquire script and reads back what Redis holds: the hash field is
// exactly "<clientID>:<owner>" with count 1 under the key name, the
// fencing counter and the token agree, and an Unlock removes it all. An
// invalid name or owner is refused before anything is sent.
func FuzzScriptArgs(f *testing.F) {
	for _, s := range [][2]string{{"orders:42", "job-42"}, {"{user:1}:cart", "a b"}, {"é{ü}ß", "日本"}, {"a:b:c", ":"},
		{`quo"te\`, `'; return 1 --`}, {"x{", "o"}, {"", "o"}, {"n", ""}, {"n\x00", "o"}} {
		f.Add(s[0], s[1])
	}
	c := relocktest.Client(f)
	raw := relocktest.Raw(f)
	f.Fuzz(func(t *testing.T, name, owner string) {
		ctx := rlock.WithOwner(t.Context(), owner)
		valid := lockcore.CheckName(name) == nil && lockcore.CheckOwner(owner) == nil
		keys := relocktest.Keys(name)
		t.Cleanup(func() { _ = raw.Do(t.Context(), raw.B().Del().Key(keys...).Build()).Error() })
		for _, k := range []string{"Lock", "FencedLock", "FairLock"} {
			var (
				ok  bool
				err error
			)
			fenced := c.GetFencedLock(name)
			switch k {
			case "Lock":
				ok, err = c.GetLock(name).TryLock(ctx, 0, 10*time.Second)
			case "FencedLock":
				ok, err = fenced.TryLock(ctx, 0, 10*time.Second)
			case "FairLock":
				ok, err = c.GetFairLock(name).TryLock(ctx, 0, 10*time.Second)
			}
			if !valid {
				if ok || !errors.Is(err, rlock.ErrInvalidArgument) {
					t.Fatalf("%s.TryLock(name %q, owner %q) = %v, %v, want ErrInvalidArgument", k, name, owner, ok, err)
				}
				continue
			}
			if !ok || err != nil {
				t.Fatalf("%s.TryLock(name %q, owner %q) = %v, %v", k, name, owner, ok, err)
			}
			fields, err := raw.Do(t.Context(), raw.B().Hgetall().Key(name).Build()).AsStrMap()
			want := layout.Field(c.ID(), owner)
			if err != nil || len(fields) != 1 || fields[want] != "1" {
				t.Fatalf("%s: HGETALL %q = %q, %v, want {%q: 1}", k, name, fields, err, want)
			}
			if k == "FencedLock" {
				tok, err := fenced.Token(ctx)
				counter, cerr := raw.Do(t.Context(), raw.B().Get().Key(layout.Token(name)).Build()).AsInt64()
				if err != nil || cerr != nil || tok != counter || tok < 1 {
					t.Fatalf("Token = %d, %v; counter %q = %d, %v", tok, err, layout.Token(name), counter, cerr)
				}
			}
			var uerr error
			switch k {
			case "Lock":
				uerr = c.GetLock(name).Unlock(ctx)
			case "FencedLock":
				uerr = fenced.Unlock(ctx)
			case "FairLock":
				uerr = c.GetFairLock(name).Unlock(ctx)
			}
			if uerr != nil {
				t.Fatalf("%s.Unlock: %v", k, uerr)
			}
			if n, err := raw.Do(t.Context(), raw.B().Exists().Key(name, layout.Queue(name), layout.Timeouts(name)).Build()).AsInt64(); n != 0 || err != nil {
				t.Fatalf("%s: %d keys of %q left after Unlock (%v)", k, n, name, err)
			}
		}
	})
}
