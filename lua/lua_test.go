package lua_test

import (
	"testing"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/lua"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// TestUnlockLatch resends one unlock request: the second answer is the
// first one, and only one hold level is released.
func TestUnlockLatch(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	ctx := t.Context()
	key := "lua-test:latch"
	t.Cleanup(func() { rdb.Do(ctx, rdb.B().Del().Key(key).Build()) })
	for range 2 {
		if err := lua.LockAcquire.Exec(ctx, rdb, []string{key}, []string{"10000", "c:o"}).Error(); !rueidis.IsRedisNil(err) {
			t.Fatalf("acquire = %v, want nil reply", err)
		}
	}
	unlock := func(request string) int64 {
		n, err := lua.LockUnlock.Exec(ctx, rdb,
			[]string{key, "redisson_lock__channel:{" + key + "}", "redisson_unlock_latch:{" + key + "}:" + request},
			[]string{"0", "10000", "c:o", "publish", "5000"}).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := unlock("r1"); n != 1 {
		t.Fatalf("first unlock = %d, want 1 level left", n)
	}
	if n := unlock("r1"); n != 1 {
		t.Errorf("resent unlock = %d, want the latched answer 1", n)
	}
	count, _ := rdb.Do(ctx, rdb.B().Hget().Key(key).Field("c:o").Build()).AsInt64()
	if count != 1 {
		t.Errorf("hold count after a resent unlock = %d, want 1", count)
	}
	if n := unlock("r2"); n != 0 {
		t.Errorf("a new unlock request = %d, want 0 (released)", n)
	}
	if n := unlock("r3"); n != -1 {
		t.Errorf("unlock of a free lock = %d, want -1", n)
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
