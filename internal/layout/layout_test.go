package layout_test

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/layout"
)

const clientID = "0f8fad5b-d9cb-469f-a165-70867728950e"

// names are lock names with and without hash tags of their own.
var names = []string{"a", "orders:42", "a:b:c", "x{t}y", "{tag}", "{t}rest", "jobs:{eu}", "a}b{c}"}

func TestTaggedDerivedSuffixed(t *testing.T) {
	tests := []struct {
		name                    string
		tagged, derived, suffix string
	}{
		{"a", "{a}", "p:{a}", "{a}:s"},
		{"orders:42", "{orders:42}", "p:{orders:42}", "{orders:42}:s"},
		{"x{t}y", "x{t}y", "p:x{t}y", "x{t}y:s"},
		{"{tag}", "{tag}", "p:{tag}", "{tag}:s"},
		{"jobs:{eu}", "jobs:{eu}", "p:jobs:{eu}", "jobs:{eu}:s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.tagged, layout.Tagged(tt.name), "Tagged")
			assert.Equal(t, tt.derived, layout.Derived("p", tt.name), "Derived")
			assert.Equal(t, tt.suffix, layout.Suffixed(tt.name, "s"), "Suffixed")
		})
	}
}

// TestNames pins the names Redisson uses: a change here breaks interop.
func TestNames(t *testing.T) {
	const n = "orders:42"
	assert.Equal(t, "redisson_lock__channel:{orders:42}", layout.Channel(n))
	assert.Equal(t, "redisson_lock__channel:{orders:42}:"+clientID+":w", layout.FairWaiterChannel(n, clientID+":w"))
	assert.Equal(t, "redisson_lock_queue:{orders:42}", layout.Queue(n))
	assert.Equal(t, "redisson_lock_timeout:{orders:42}", layout.Timeouts(n))
	assert.Equal(t, "redisson_lock_token:{orders:42}", layout.Token(n))
	assert.Equal(t, "redisson_unlock_latch:{orders:42}:0123456789abcdef0123456789abcdef",
		layout.UnlockLatch(n, "0123456789abcdef0123456789abcdef"))
	assert.Equal(t, "relock_wakers:{orders:42}", layout.Wakers(n))
	assert.Equal(t, "relock_knocks:{orders:42}", layout.Knocks(n))
	assert.Equal(t, "relock_wake:{orders:42}:"+clientID, layout.WakeChannel(n, clientID))
	assert.Equal(t, "redisson_rwlock:{orders:42}", layout.RWChannel(n))
	assert.Equal(t, "{orders:42}:"+clientID+":r:rwlock_timeout:2", layout.ReadLeaseKey(n, clientID+":r", 2))
	assert.Equal(t, layout.SemaphoreKeys{
		Available:      "orders:42",
		Leases:         "{orders:42}:timeout",
		Channel:        "redisson_sc:{orders:42}",
		Queue:          "{orders:42}:relock_queue",
		QueueDeadlines: "{orders:42}:relock_queue_timeout",
		Holders:        "{orders:42}:relock_holders",
	}, layout.Semaphore(n))
	assert.Equal(t, layout.CountingSemaphoreKeys{
		Count:   "orders:42",
		Grants:  "{orders:42}:relock_grants",
		Channel: "redisson_sc:{orders:42}",
	}, layout.CountingSemaphore(n))
	rl := layout.RateLimiter(n)
	assert.Equal(t, layout.RateLimiterKeys{
		Config:  "orders:42",
		Value:   "{orders:42}:value",
		Permits: "{orders:42}:permits",
		Channel: "relock_ratelimiter:{orders:42}",
	}, rl)
	assert.Equal(t, "{orders:42}:value:"+clientID, rl.ClientValue(clientID))
	assert.Equal(t, "{orders:42}:permits:"+clientID, rl.ClientPermits(clientID))
	assert.Equal(t, "x{t}y:permits:"+clientID, layout.RateLimiter("x{t}y").ClientPermits(clientID))
	assert.Equal(t, "redisson_countdownlatch__channel__{orders:42}", layout.LatchChannel(n))
	// The latch's channel wraps a name with a tag of its own too.
	assert.Equal(t, "redisson_countdownlatch__channel__{x{t}y}", layout.LatchChannel("x{t}y"))
	assert.Equal(t, "{orders:42}:relock_opened", layout.LatchOpened(n))
	assert.Equal(t, "x{t}y:relock_opened", layout.LatchOpened("x{t}y"))
	assert.Equal(t, strconv.FormatInt(layout.NoLeaseScore, 10), layout.NoLease)
}

func TestFields(t *testing.T) {
	f := layout.Field(clientID, "job:7")
	assert.Equal(t, clientID+":job:7", f)
	id, owner := layout.SplitField(f)
	assert.Equal(t, clientID, id)
	assert.Equal(t, "job:7", owner)
	id, owner = layout.SplitField("nocolon")
	assert.Empty(t, id)
	assert.Equal(t, "nocolon", owner)

	for field, want := range map[string]bool{
		f:                                        true,
		clientID + ":":                           true, // an empty owner
		clientID:                                 false,
		"mode":                                   false,
		"0f8fad5b-d9cb-469f-a165-70867728950g:x": false, // not hex
		"0f8fad5bd9cb-469f-a165-70867728950e0:x": false, // dash misplaced
	} {
		assert.Equal(t, want, layout.IsHolderField(field), "IsHolderField(%q)", field)
	}
}

func TestSharesSlot(t *testing.T) {
	for name, want := range map[string]bool{
		"a": true, "orders:{user:7}": true, "{a}": true, "x{t}y": true,
		"a}": false, "x{": false, "{}a": false, "{}{a}": false,
	} {
		assert.Equal(t, want, layout.SharesSlot(name), "SharesSlot(%q)", name)
	}
}

// reads reports whether m names the lock name, as its name or its other
// reading.
func reads(m layout.Match, name string) bool { return m.Name == name || m.Alt == name }

// TestKeysRoundTrip: every key of every kind, for names with and without
// hash tags, classifies back to its role and its lock.
func TestKeysRoundTrip(t *testing.T) {
	for _, spec := range layout.Specs {
		for _, name := range names {
			for _, r := range spec.Roles {
				k := layout.KeyOf(name, r)
				t.Run(string(spec.Kind)+"/"+name+"/"+r.String(), func(t *testing.T) {
					m, ok := layout.Classify(k.Name, k.Type)
					if r == layout.RoleCount {
						assert.False(t, ok, "a count is a plain integer: Classify(%q) = %+v", k.Name, m)
						return
					}
					require.True(t, ok, "Classify(%q, %q) found nothing", k.Name, k.Type)
					assert.Equal(t, r, m.Role, "role of %q", k.Name)
					assert.Equal(t, r.Kind(), m.Kind)
					assert.True(t, reads(m, name), "Classify(%q) = %+v, want the lock %q", k.Name, m, name)
					if r != layout.RoleLock && r != layout.RoleWakers && r != layout.RoleKnocks && r != layout.RoleGrantees {
						assert.Equal(t, spec.Kind, m.Kind, "kind of %q", k.Name)
					}
				})
			}
			ch := layout.ChannelOf(name, spec.Channel)
			m, ok := layout.ClassifyChannel(ch)
			require.True(t, ok, "ClassifyChannel(%q) found nothing", ch)
			assert.Equal(t, spec.Channel, m.Role, "role of %q", ch)
			assert.True(t, reads(m, name), "ClassifyChannel(%q) = %+v, want the lock %q", ch, m, name)
		}
	}
}

// TestDetailedRoundTrip: the keys and channels that carry more than the
// name classify back to the name and what they carry.
func TestDetailedRoundTrip(t *testing.T) {
	field := clientID + ":owner:with:colons"
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			cases := []struct {
				key, typ string
				channel  bool
				role     layout.Role
				detail   string
			}{
				{layout.ReadLeaseKey(name, field, 3), layout.TypeString, false, layout.RoleReadLease, field},
				{layout.UnlockLatch(name, "0123456789abcdef0123456789ABCDEF"), layout.TypeString, false, layout.RoleUnlockLatch, "0123456789abcdef0123456789ABCDEF"},
				{layout.FairWaiterChannel(name, field), "", true, layout.RoleWaiterChannel, field},
				{layout.WakeChannel(name, clientID), "", true, layout.RoleWakeChannel, clientID},
				{layout.RateLimiter(name).ClientValue(clientID), layout.TypeString, false, layout.RoleRateClientValue, clientID},
				{layout.RateLimiter(name).ClientPermits(clientID), layout.TypeZSet, false, layout.RoleRateClientPermits, clientID},
			}
			for _, c := range cases {
				var m layout.Match
				var ok bool
				if c.channel {
					m, ok = layout.ClassifyChannel(c.key)
				} else {
					m, ok = layout.Classify(c.key, c.typ)
				}
				require.True(t, ok, "%q classified as nothing", c.key)
				assert.Equal(t, c.role, m.Role, "role of %q", c.key)
				assert.True(t, reads(m, name), "%q = %+v, want the lock %q", c.key, m, name)
				assert.Equal(t, c.detail, m.Detail, "detail of %q", c.key)
			}
		})
	}
}

func TestClassifyAmbiguousAndForeign(t *testing.T) {
	tests := []struct {
		key, typ  string
		ok        bool
		role      layout.Role
		name, alt string
	}{
		{"redisson_lock_queue:{a}", "list", true, layout.RoleQueue, "a", "{a}"},
		{"redisson_lock_queue:x{t}y", "list", true, layout.RoleQueue, "x{t}y", ""},
		{"redisson_lock_queue:plain", "list", false, 0, "", ""},
		// The type decides: a hash is a lock of its own name.
		{"redisson_lock_queue:{a}", "hash", true, layout.RoleLock, "redisson_lock_queue:{a}", ""},
		{"redisson_lock_timeout:{a}", "zset", true, layout.RoleTimeouts, "a", "{a}"},
		{"redisson_lock_token:{a:b}", "string", true, layout.RoleToken, "a:b", "{a:b}"},
		{"redisson_lock_token:{a:b}", "list", false, 0, "", ""},
		{"redisson_unlock_latch:{a}:0123456789abcdef0123456789abcdef", "string", true, layout.RoleUnlockLatch, "a", "{a}"},
		{"redisson_unlock_latch:{a}:nothex", "string", false, 0, "", ""},
		{"{a}:timeout", "zset", true, layout.RoleLeases, "a", "{a}"},
		{"a:timeout", "zset", false, 0, "", ""},
		{"{a}:relock_grants", "zset", true, layout.RoleGrants, "a", "{a}"},
		{"{a}:relock_grants", "string", false, 0, "", ""},
		{"{a}:value", "string", true, layout.RoleRateValue, "a", "{a}"},
		{"{a}:value", "zset", false, 0, "", ""},
		{"a:value", "string", false, 0, "", ""},
		{"{a}:permits", "zset", true, layout.RoleRatePermits, "a", "{a}"},
		{"{a}:permits:notaclient", "zset", false, 0, "", ""},
		{"{a}:" + clientID + ":7:rwlock_timeout:2", "string", true, layout.RoleReadLease, "a", "{a}"},
		{"x{t}:" + clientID + ":owner:with:colons:rwlock_timeout:1", "string", true, layout.RoleReadLease, "x{t}", ""},
		{"anything", "hash", true, layout.RoleLock, "anything", ""},
		{"{a}:timeout", "string", false, 0, "", ""},
		{"{a}:relock_opened", "string", true, layout.RoleLatchOpened, "a", "{a}"},
		{"x{t}:relock_opened", "string", true, layout.RoleLatchOpened, "x{t}", ""},
		{"a:relock_opened", "string", false, 0, "", ""},
		{"{a}:relock_opened", "zset", false, 0, "", ""},
		{"{a}:" + clientID + ":r:rwlock_timeout:x", "string", false, 0, "", ""},
		{"{a}:notaclient:r:rwlock_timeout:1", "string", false, 0, "", ""},
		{"counter", "string", false, 0, "", ""},
		{"somelist", "list", false, 0, "", ""},
	}
	for _, tt := range tests {
		m, ok := layout.Classify(tt.key, tt.typ)
		if !assert.Equal(t, tt.ok, ok, "Classify(%q, %q) = %+v", tt.key, tt.typ, m) || !ok {
			continue
		}
		assert.Equal(t, tt.role, m.Role, "role of %q", tt.key)
		assert.Equal(t, tt.name, m.Name, "name of %q", tt.key)
		assert.Equal(t, tt.alt, m.Alt, "alt of %q", tt.key)
	}
	for _, ch := range []string{"news", "redisson_countdownlatch__channel__x", "relock_wake:{a}:notaclient", "redisson_sc:plain"} {
		m, ok := layout.ClassifyChannel(ch)
		assert.False(t, ok, "ClassifyChannel(%q) = %+v, want nothing", ch, m)
	}
}

func TestKeysOf(t *testing.T) {
	all := layout.KeysOf("a")
	seen := map[layout.Role]bool{}
	for _, k := range all {
		assert.False(t, seen[k.Role], "role %v twice", k.Role)
		seen[k.Role] = true
	}
	for _, s := range layout.Specs {
		for _, r := range s.Roles {
			assert.True(t, seen[r], "KeysOf misses %v of %s", r, s.Kind)
		}
	}
	assert.Equal(t, []layout.Key{{"a", "string", layout.RoleCount}, {"{a}:relock_opened", "string", layout.RoleLatchOpened}},
		layout.KeysOf("a", layout.KindLatch))
	s, ok := layout.SpecOf(layout.KindFair)
	require.True(t, ok)
	assert.Equal(t, "fair lock", s.Noun)
	_, ok = layout.SpecOf("queue")
	assert.False(t, ok)
}

// TestOtherForm: a name without braces and the same name in braces are
// each other's other form (they derive the same keys); names with braces
// of another shape have none, and OtherKey is then the name itself.
func TestOtherForm(t *testing.T) {
	for name, want := range map[string]string{
		"a": "{a}", "{a}": "a", "orders:42": "{orders:42}", "{orders:42}": "orders:42",
		"x{t}y": "", "{t}rest": "", "jobs:{eu}": "", "{a}{b}": "", "{}": "", "{{a}}": "", "{a}b}": "", "a}b": "", "": "",
	} {
		got, ok := layout.OtherForm(name)
		assert.Equal(t, want, got, "OtherForm(%q)", name)
		assert.Equal(t, want != "", ok, "OtherForm(%q) ok", name)
		if want == "" {
			assert.Equal(t, name, layout.OtherKey(name), "OtherKey(%q)", name)
			continue
		}
		assert.Equal(t, want, layout.OtherKey(name), "OtherKey(%q)", name)
		assert.Equal(t, layout.Channel(name), layout.Channel(want), "the forms %q and %q share their channel", name, want)
		assert.Equal(t, layout.Semaphore(name).Leases, layout.Semaphore(want).Leases, "and their leases")
	}
}

// TestDerivedKey: a key relock derives from a name reads back as one, with
// the name it belongs to; a name's own key, or a text of another shape,
// does not.
func TestDerivedKey(t *testing.T) {
	for _, name := range names {
		for _, k := range layout.KeysOf(name) {
			m, ok := layout.DerivedKey(k.Name)
			if k.Name == name {
				continue // the key under the name: a lock's hash or a count
			}
			if assert.True(t, ok, "DerivedKey(%q), the %s key of %q", k.Name, k.Role, name) {
				assert.Contains(t, []string{m.Name, m.Alt}, name, "DerivedKey(%q): whose", k.Name)
			}
		}
	}
	for _, key := range []string{"a", "{a}", "redisson_lock_queue:a", "a:timeout", "{a}:timeouts", "orders:{eu}"} {
		_, ok := layout.DerivedKey(key)
		assert.False(t, ok, "DerivedKey(%q)", key)
	}
}

func TestIsRateConfig(t *testing.T) {
	assert.True(t, layout.IsRateConfig(map[string]string{"rate": "5", "interval": "1000", "type": "0", "keepAliveTime": "0"}))
	assert.True(t, layout.IsRateConfig(map[string]string{"rate": "5", "interval": "1000", "type": "0"}))
	assert.False(t, layout.IsRateConfig(map[string]string{"rate": "5", clientID + ":1": "1"}))
	assert.False(t, layout.IsRateConfig(map[string]string{}))
}

func TestUnpackGrant(t *testing.T) {
	id, n, ok := layout.UnpackGrant("\x100123456789abcdef\x02\x01\x00\x00")
	assert.True(t, ok)
	assert.Equal(t, "0123456789abcdef", id)
	assert.EqualValues(t, 258, n)
	for _, m := range []string{"", "\x01", "\x05ab\x01\x00\x00\x00"} {
		_, _, ok := layout.UnpackGrant(m)
		assert.False(t, ok, "UnpackGrant(%q)", m)
	}
}
