package lockcore_test

import (
	"fmt"
	"github.com/relock-go/relock/internal/layout"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
	"github.com/relock-go/relock/rwlock"
	"github.com/relock-go/relock/semaphore"
)

// TestRenewalsOfEveryKindAfterScriptFlush: a Client renews holds of
// several kinds, each with its own script, in the same batches; after the
// server lost its scripts (SCRIPT FLUSH) every renewal still goes through,
// each script loaded again.
func TestRenewalsOfEveryKindAfterScriptFlush(t *testing.T) {
	const lease = 300 * time.Millisecond
	c := relocktest.Client(t, rlock.WithWatchdogTimeout(lease))
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	ctx := rlock.WithOwner(t.Context(), "a")
	field := layout.Field(c.ID(), "a")
	if err := c.GetLock(name + ":lock").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.GetReadWriteLock(name + ":r").ReadLock().Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.GetReadWriteLock(name + ":w").WriteLock().Lock(ctx); err != nil {
		t.Fatal(err)
	}
	s := c.GetSemaphore(name + ":s")
	if _, err := s.TrySetPermits(ctx, 1); err != nil {
		t.Fatal(err)
	}
	id, err := s.Acquire(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = raw.Do(t.Context(), raw.B().Del().Key(name+":lock", name+":r", name+":w", name+":s",
			semaphore.KeysOf(name+":s").Leases).Build()).Error()
	})
	pttl := func(key string) int64 {
		n, err := raw.Do(t.Context(), raw.B().Pttl().Key(key).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	now := func() int64 {
		v, _ := raw.Do(t.Context(), raw.B().Time().Build()).AsIntSlice()
		return v[0]*1000 + v[1]/1000
	}
	leaseLeft := func() int64 { // the permit's
		z, err := raw.Do(t.Context(), raw.B().Zscore().Key(semaphore.KeysOf(name+":s").Leases).Member(string(unhex(t, id))).Build()).AsFloat64()
		if err != nil {
			t.Fatal(err)
		}
		return int64(z) - now()
	}
	left := map[string]func() int64{
		"lock":       func() int64 { return pttl(name + ":lock") },
		"read hold":  func() int64 { return pttl(rwlock.LeaseKey(name+":r", field, 1)) },
		"write hold": func() int64 { return pttl(name + ":w") },
		"permit":     leaseLeft,
	}
	if err := raw.Do(t.Context(), raw.B().ScriptFlush().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	low, high := (lease * 5 / 6).Milliseconds(), (lease * 17 / 20).Milliseconds()
	for i := range 3 {
		for what, f := range left {
			relocktest.Eventually(t, 5*lease, fmt.Sprint(what, ": lease running down ", i), func() bool { return f() < low })
			relocktest.Eventually(t, 5*lease, fmt.Sprint(what, ": renewal ", i), func() bool { return f() > high })
		}
	}
	if err := s.Release(ctx, id); err != nil {
		t.Fatal(err)
	}
}

func unhex(t *testing.T, id string) []byte {
	t.Helper()
	var b []byte
	if _, err := fmt.Sscanf(id, "%x", &b); err != nil || len(b) != 16 {
		t.Fatalf("permit ID %q", id)
	}
	return b
}
