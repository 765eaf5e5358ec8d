package lua_test

import (
	"context"
	"testing"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/lua"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// TestScriptsResentOnce: the scripts that change a hold move its count to
// the one the client expects, so a request sent twice has the effect of
// sending it once, and an unlock writes nothing but the hold (no key is
// left behind).
func TestScriptsResentOnce(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	ctx := t.Context()
	key := "lua-test:counts"
	channel := "redisson_lock__channel:{" + key + "}"
	t.Cleanup(func() { rdb.Do(context.Background(), rdb.B().Del().Key(key).Build()) })
	hget := func() string {
		v, _ := rdb.Do(ctx, rdb.B().Hget().Key(key).Field("c:o").Build()).ToString()
		return v
	}
	for range 2 {
		if err := lua.LockAcquire.Exec(ctx, rdb, lockKeys(key), []string{"10000", "c:o"}).Error(); !rueidis.IsRedisNil(err) {
			t.Fatalf("acquire = %v, want nil reply", err)
		}
	}
	if got := hget(); got != "1" {
		t.Fatalf("count after an acquisition sent twice = %q, want 1", got)
	}
	for range 2 {
		if err := lua.LockReenter.Exec(ctx, rdb, []string{key, "redisson_lock_token:{" + key + "}", channel},
			[]string{"10000", "c:o", "2", "publish"}).Error(); err != nil {
			t.Fatalf("re-enter = %v", err)
		}
	}
	if got := hget(); got != "2" {
		t.Fatalf("count after a re-entry sent twice = %q, want 2", got)
	}
	unlock := func(target string) int64 {
		t.Helper()
		n, err := lua.LockUnlock.Exec(ctx, rdb, []string{key, channel},
			[]string{"0", "10000", "c:o", "publish", target}).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for range 2 {
		if n := unlock("1"); n != 1 {
			t.Fatalf("unlock to 1 = %d, want 1 level left", n)
		}
	}
	if got := hget(); got != "1" {
		t.Errorf("count after an unlock sent twice = %q, want 1", got)
	}
	if n := unlock("0"); n != 0 {
		t.Errorf("unlock to 0 = %d, want 0 (released)", n)
	}
	if n := unlock("0"); n != -1 {
		t.Errorf("unlock of a free lock = %d, want -1", n)
	}
	if keys, _ := rdb.Do(ctx, rdb.B().Keys().Pattern("*"+key+"*").Build()).AsStrSlice(); len(keys) != 0 {
		t.Errorf("keys left after the last unlock: %q", keys)
	}
}

// TestUnlockKeepsOthersFields: a release to 0 removes only its own field.
func TestUnlockKeepsOthersFields(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	ctx := t.Context()
	key := "lua-test:fields"
	t.Cleanup(func() { rdb.Do(context.Background(), rdb.B().Del().Key(key).Build()) })
	if err := rdb.Do(ctx, rdb.B().Hset().Key(key).FieldValue().FieldValue("c:a", "1").FieldValue("c:b", "2").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	n, err := lua.LockUnlock.Exec(ctx, rdb, []string{key, "redisson_lock__channel:{" + key + "}"},
		[]string{"0", "10000", "c:a", "publish", "0"}).AsInt64()
	if err != nil || n != 0 {
		t.Fatalf("unlock = %d, %v, want 0", n, err)
	}
	if v, _ := rdb.Do(ctx, rdb.B().Hget().Key(key).Field("c:b").Build()).ToString(); v != "2" {
		t.Errorf("the other field = %q, want 2", v)
	}
}

// TestRenewNeverRecreates: an owner-checked renewal of a missing hold
// reports 0 and writes nothing.
func TestRenewNeverRecreates(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	ctx := t.Context()
	key := "lua-test:renew"
	n, err := lua.LockRenew.Exec(ctx, rdb, []string{key}, []string{"10000", "c:o"}).AsInt64()
	if err != nil || n != 0 {
		t.Fatalf("renew of a missing hold = %d, %v, want 0", n, err)
	}
	if e, _ := rdb.Do(ctx, rdb.B().Exists().Key(key).Build()).AsInt64(); e != 0 {
		t.Error("renew created the key")
	}
}
