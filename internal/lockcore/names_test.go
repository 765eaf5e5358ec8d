package lockcore_test

import (
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/lockcore"
)

// nameFragments build the generated names: letters, braces and colons,
// and the prefixes and suffixes of every key and channel that relock
// derives from a name, so that names shaped like another name's keys
// come up.
var nameFragments = []string{
	"a", "b", "{", "}", ":", "{a}", "x{y}", "{b}:", ":{a}",
	layout.ChannelPrefix + ":", layout.QueuePrefix + ":", layout.TimeoutPrefix + ":", layout.TokenPrefix + ":",
	layout.UnlockLatchPrefix + ":", layout.WakersPrefix + ":", layout.WakePrefix + ":", layout.AlivePrefix + ":",
	layout.RWLockChannelPrefix + ":", layout.SemaphoreChannelPrefix + ":", layout.CountDownLatchChannelPrefix,
	":" + layout.SemaphoreLeasesSuffix, ":" + layout.SemaphoreQueueSuffix, ":" + layout.SemaphoreQueueDeadlinesSuffix, ":" + layout.SemaphoreHoldersSuffix,
	":" + layout.ReadLeaseMark + ":1", ":" + nameRequestID, ":" + layout.LatchOpenedSuffix,
	":" + layout.CountingGrantsSuffix, ":" + layout.RateValueSuffix, ":" + layout.RatePermitsSuffix,
	layout.RateLimiterChannelPrefix + ":",
}

// The client IDs, owners and request IDs of the keys and channels that
// carry one. (A name that holds a Client's ID could meet a key of that
// Client's holds, as "{a}:<id>:o" reads as a's read-lease prefix; the
// generator makes none: client IDs are random UUIDs.)
const (
	nameClientA   = "0f8fad5b-d9cb-469f-a165-70867728950e"
	nameClientB   = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
	nameRequestID = "0123456789abcdef0123456789abcdef"
)

var nameOwners = []string{"o", "{a}:x", "x:rwlock_timeout:1", ""}

// derivedKeys are every key that any kind derives from name: the key
// under the name, every key of layout.KeysOf, the read holds' lease keys
// and Redisson's unlock latches of sample fields, and a rate limiter's
// window of sample clients (rate type PER_CLIENT).
func derivedKeys(name string) []string {
	keys := []string{name}
	for _, k := range layout.KeysOf(name) {
		if k.Name != name { // a lock's hash, a count: the key under the name
			keys = append(keys, k.Name)
		}
	}
	for _, f := range nameFields() {
		for level := 1; level <= 2; level++ {
			keys = append(keys, layout.ReadLeaseKey(name, f, level))
		}
	}
	for _, id := range []string{nameClientA, nameClientB} {
		k := layout.RateLimiter(name)
		keys = append(keys, k.ClientValue(id), k.ClientPermits(id))
	}
	return append(keys, layout.UnlockLatch(name, nameRequestID))
}

// derivedChannels are every channel that any kind derives from name.
func derivedChannels(name string) []string {
	var chs []string
	for _, s := range layout.Specs {
		chs = append(chs, layout.ChannelOf(name, s.Channel))
	}
	for _, f := range nameFields() {
		chs = append(chs, layout.FairWaiterChannel(name, f))
	}
	return append(chs, layout.WakeChannel(name, nameClientA), layout.WakeChannel(name, nameClientB))
}

func nameFields() []string {
	var fields []string
	for _, id := range []string{nameClientA, nameClientB} {
		for _, o := range nameOwners {
			fields = append(fields, layout.Field(id, o))
		}
	}
	return fields
}

// generatedNames are every name of up to five characters of "a{}:", and
// n names of one to four fragments, from a seeded generator.
func generatedNames(seed uint64, n int) []string {
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	var walk func(prefix string)
	walk = func(prefix string) {
		if prefix != "" {
			add(prefix)
		}
		if len(prefix) == 5 {
			return
		}
		for _, c := range "a{}:" {
			walk(prefix + string(c))
		}
	}
	walk("")
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for range n {
		var b strings.Builder
		for range 1 + r.IntN(4) {
			b.WriteString(nameFragments[r.IntN(len(nameFragments))])
		}
		add(b.String())
		// Its other form, and a name wrapped in braces, often.
		add("{" + b.String() + "}")
	}
	return out
}

// TestNoTwoAcceptedNamesShareAKey is the property behind
// relock.ErrNameConflict and the names lockcore.CheckName refuses: of two
// different names that are both accepted (CheckName takes each, and
// neither is the other's layout.OtherForm, which the scripts refuse while
// the other is in use), no key and no channel that any kind derives from
// one is derived from the other. And of a name and its other form: they
// share every derived key but the one under the name, so that a script
// of one sees the other in use; that key is in the name's cluster slot,
// as is every key derived from an accepted name.
func TestNoTwoAcceptedNamesShareAKey(t *testing.T) {
	seed := uint64(20240611)
	if s, err := strconv.ParseUint(strings.TrimSpace(os.Getenv("RELOCK_NAMES_SEED")), 10, 64); err == nil {
		seed = s
	}
	names := generatedNames(seed, 5000)
	var accepted []string
	for _, n := range names {
		if lockcore.CheckName(n) == nil {
			accepted = append(accepted, n)
		}
	}
	t.Logf("seed %d: %d names generated, %d accepted", seed, len(names), len(accepted))
	if len(accepted) < 2000 {
		t.Fatalf("only %d names accepted: the generator does not exercise the property", len(accepted))
	}
	pairs := 0
	check := func(what string, derive func(string) []string) {
		by := map[string][]string{}
		for _, n := range accepted {
			for _, k := range derive(n) {
				if list := by[k]; len(list) == 0 || list[len(list)-1] != n {
					by[k] = append(list, n)
				}
			}
		}
		bad := 0
		for k, list := range by {
			for i := 0; i < len(list); i++ {
				for j := i + 1; j < len(list); j++ {
					if other, ok := layout.OtherForm(list[i]); ok && other == list[j] {
						continue
					}
					if bad++; bad <= 10 {
						t.Errorf("the %s %q is derived from the names %q and %q, which are both accepted", what, k, list[i], list[j])
					}
				}
			}
		}
	}
	check("key", derivedKeys)
	check("channel", derivedChannels)

	for _, n := range accepted {
		slot := keySlot(n)
		for _, k := range derivedKeys(n) {
			if keySlot(k) != slot {
				t.Errorf("the key %q of the name %q is not in the name's slot", k, n)
			}
		}
		other, ok := layout.OtherForm(n)
		if !ok {
			if layout.OtherKey(n) != n {
				t.Errorf("OtherKey(%q) = %q, want the name (it has no other form)", n, layout.OtherKey(n))
			}
			continue
		}
		if lockcore.CheckName(other) != nil {
			continue // too long, or refused: never in use by relock
		}
		pairs++
		if layout.OtherKey(n) != other || keySlot(other) != slot {
			t.Errorf("the other form of %q, %q: OtherKey %q, slot %d, want the name's slot %d", n, other, layout.OtherKey(n), keySlot(other), slot)
		}
		if back, _ := layout.OtherForm(other); back != n {
			t.Errorf("OtherForm(OtherForm(%q)) = %q", n, back)
		}
		a, b := derivedKeys(n), derivedKeys(other)
		if a[0] == b[0] || !equalSets(a[1:], b[1:]) {
			t.Errorf("%q and its other form %q: the keys under the names %q, %q must differ and the derived keys be the same", n, other, a[0], b[0])
		}
	}
	if pairs < 100 {
		t.Errorf("only %d names with an accepted other form: the generator does not exercise the refusal", pairs)
	}
}

// TestCheckNameRefusesDerivedKeys: a name that is another name's derived
// key is refused, saying whose; the same text that is no key is taken.
func TestCheckNameRefusesDerivedKeys(t *testing.T) {
	for _, name := range []string{
		"redisson_lock_queue:{a}", "redisson_lock_token:x{y}", "{a}:timeout", "{a}:relock_queue",
		"relock_wakers:{a}", "{a}:" + nameClientA + ":o:rwlock_timeout:1", "redisson_unlock_latch:{a}:" + nameRequestID,
		"{a}:relock_opened", "x{y}:relock_opened",
		"{a}:relock_grants", "x{y}:relock_grants", "{a}:value", "x{y}:value", "{a}:permits", "x{y}:permits",
		"{a}:value:" + nameClientA, "x{y}:permits:" + nameClientB,
	} {
		err := lockcore.CheckName(name)
		if err == nil || !strings.Contains(err.Error(), "key of the") {
			t.Errorf("CheckName(%q) = %v, want it refused as another name's key", name, err)
		}
	}
	for _, name := range []string{"redisson_lock_queue:a", "a:timeout", "{a}:timeouts", "relock_wakers", "{a}", "a", "a:relock_opened",
		"a:value", "a:permits", "a:relock_grants", "relock_ratelimiter:{a}", "{a}:value:x"} {
		if err := lockcore.CheckName(name); err != nil {
			t.Errorf("CheckName(%q) = %v, want nil", name, err)
		}
	}
}

func equalSets(a, b []string) bool {
	a, b = append([]string(nil), a...), append([]string(nil), b...)
	sort.Strings(a)
	sort.Strings(b)
	return strings.Join(a, "\x00") == strings.Join(b, "\x00")
}

// keySlot is the Redis Cluster slot of key: CRC16 (XMODEM) of its hash
// tag, or of the whole key when it has none, modulo 16384.
func keySlot(key string) uint16 {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
			key = key[open+1 : open+1+end]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % 16384
}
