package lua_test

import (
	"context"
	"testing"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/lua"
)

// TestRWScriptsResentOnce: the read-write lock's scripts that change a
// hold move its count, and its lease keys with it, to what the client
// expects, so a request sent twice has the effect of sending it once.
func TestRWScriptsResentOnce(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	ctx := t.Context()
	key, prefix, field := "lua-test:rw", "{lua-test:rw}", "c:o"
	channel := "redisson_rwlock:{lua-test:rw}"
	level := func(n string) string { return prefix + ":" + field + ":rwlock_timeout:" + n }
	t.Cleanup(func() { rdb.Do(context.Background(), rdb.B().Del().Key(key, level("1"), level("2")).Build()) })
	count := func() string {
		v, _ := rdb.Do(ctx, rdb.B().Hget().Key(key).Field(field).Build()).ToString()
		return v
	}
	exists := func(k string) bool {
		n, _ := rdb.Do(ctx, rdb.B().Exists().Key(k).Build()).AsInt64()
		return n == 1
	}
	for range 2 {
		if err := lua.RWReadAcquire.Exec(ctx, rdb, rwKeys(key), []string{"10000", field, prefix}).Error(); !rueidis.IsRedisNil(err) {
			t.Fatalf("read acquire = %v, want nil reply", err)
		}
	}
	if count() != "1" || !exists(level("1")) || exists(level("2")) {
		t.Fatalf("after a read acquisition sent twice: count %q, level keys %v %v", count(), exists(level("1")), exists(level("2")))
	}
	for range 2 {
		if err := lua.RWReadReenter.Exec(ctx, rdb, []string{key, channel}, []string{"10000", field, prefix, "2", "publish"}).Error(); err != nil {
			t.Fatalf("read re-enter = %v", err)
		}
	}
	if count() != "2" || !exists(level("2")) {
		t.Fatalf("after a re-entry sent twice: count %q", count())
	}
	unlock := func(target string) int64 {
		t.Helper()
		n, err := lua.RWReadUnlock.Exec(ctx, rdb, []string{key, channel},
			[]string{"0", "10000", field, "publish", target, prefix}).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for range 2 {
		if n := unlock("1"); n != 1 {
			t.Fatalf("read unlock to 1 = %d", n)
		}
	}
	if count() != "1" || exists(level("2")) {
		t.Fatalf("after an unlock sent twice: count %q, level 2 key %v", count(), exists(level("2")))
	}
	if n := unlock("0"); n != 0 {
		t.Fatalf("read unlock to 0 = %d", n)
	}
	if n := unlock("0"); n != -1 {
		t.Fatalf("read unlock of a free lock = %d, want -1", n)
	}
	if exists(key) || exists(level("1")) {
		t.Fatal("keys left after the last read unlock")
	}

	// The write side.
	wfield := field + ":write"
	for range 2 {
		if err := lua.RWWriteAcquire.Exec(ctx, rdb, rwKeys(key), []string{"10000", wfield, prefix}).Error(); !rueidis.IsRedisNil(err) {
			t.Fatalf("write acquire = %v, want nil reply", err)
		}
	}
	for range 2 {
		if err := lua.RWWriteReenter.Exec(ctx, rdb, []string{key, channel}, []string{"10000", wfield, prefix, "2", "publish"}).Error(); err != nil {
			t.Fatal(err)
		}
	}
	if v, _ := rdb.Do(ctx, rdb.B().Hget().Key(key).Field(wfield).Build()).ToString(); v != "2" {
		t.Fatalf("write count %q, want 2", v)
	}
	for _, target := range []string{"1", "1", "0"} {
		if n, err := lua.RWWriteUnlock.Exec(ctx, rdb, []string{key, channel},
			[]string{"1", "10000", wfield, "publish", target, prefix}).AsInt64(); err != nil || n < 0 {
			t.Fatalf("write unlock to %s = %d, %v", target, n, err)
		}
	}
	if exists(key) {
		t.Fatal("hash left after the last write unlock")
	}
}

// TestSemAcquireOnePermitPerID: an acquisition sent twice with one permit
// ID takes one permit.
func TestSemAcquireOnePermitPerID(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	ctx := t.Context()
	keys := []string{"lua-test:sem", "{lua-test:sem}:timeout", "redisson_sc:{lua-test:sem}",
		"{lua-test:sem}:relock_queue", "{lua-test:sem}:relock_queue_timeout", "{lua-test:sem}:relock_holders", "{lua-test:sem}"}
	t.Cleanup(func() { rdb.Do(context.Background(), rdb.B().Del().Key(keys...).Build()) })
	if err := rdb.Do(ctx, rdb.B().Set().Key(keys[0]).Value("2").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		got, err := lua.SemAcquire.Exec(ctx, rdb, keys, []string{"publish", "0123456789abcdef", "10000", "1", "750", "c:me"}).AsIntSlice()
		if err != nil || len(got) != 3 || got[0] != 1 {
			t.Fatalf("acquire = %v, %v", got, err)
		}
	}
	if v, _ := rdb.Do(ctx, rdb.B().Get().Key(keys[0]).Build()).ToString(); v != "1" {
		t.Errorf("available %q after one permit taken twice, want 1", v)
	}
	if n, _ := rdb.Do(ctx, rdb.B().Exists().Key(keys[3], keys[4]).Build()).AsInt64(); n != 0 {
		t.Errorf("a winner left %d queue keys", n)
	}
}
