package lockcore

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/redistest"
)

// entryStamp returns the stamp of the grantees entry of the Client id for
// name (-1 when there is none).
func entryStamp(t *testing.T, raw rueidis.Client, name, id string) int64 {
	t.Helper()
	v, err := raw.Do(context.Background(), raw.B().Hget().Key(layout.Grantees(name)).Field(id).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return -1
	}
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.SplitN(v, " ", 4)
	if len(parts) != 4 {
		t.Fatalf("grantees entry %q", v)
	}
	s, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestReview35s7GrantToSecondCallOfOwner: two calls of one owner wait on
// a Client with wake-one; the grantees entry is the latest attempt's,
// which is the owner's second open offer. Another Client's release grants
// the lock through the registry: the grant must land (the call whose
// attempt the entry came from sleeps on its offer, and nothing used the
// owner's call slot since), not be given back because the owner's first
// offer, of an older attempt, does not match it.
func TestReview35s7GrantToSecondCallOfOwner(t *testing.T) {
	raw := redistest.Shared(t).Client(t)
	a := grantCore(t, raw, Config{WakeOne: true})
	b := grantCore(t, raw, Config{WakeOne: true})
	name := grantName(t, raw)
	t.Cleanup(func() {
		raw.Do(context.Background(), raw.B().Del().Key(layout.Grantees(name), layout.Wakers(name)).Build())
	})
	ma, mb := NewMutex(a, name, Reentrant{}), NewMutex(b, name, Reentrant{})
	h := WithOwner(t.Context(), "h")
	if _, ok, err := ma.Acquire(h, 0, 0); !ok || err != nil {
		t.Fatalf("h: %v %v", ok, err)
	}
	x := WithOwner(t.Context(), "x")
	x1 := goAcquire(mb, x, NoLimit, 0)
	waitOffer(t, b, name, 1)
	x2 := goAcquire(mb, x, NoLimit, 0)
	waitOffer(t, b, name, 2)
	// The precondition: the entry is the second offer's attempt's (a
	// retry of the first call, 1 to 2s on, would reorder them: wait for
	// its offer to come back).
	waitUntil(t, 10*time.Second, "the entry the second offer's", func() bool {
		s := entryStamp(t, raw, name, b.ID)
		b.mu.Lock()
		defer b.mu.Unlock()
		list := b.offers[grantKey{name, Reentrant{}}]
		return len(list) == 2 && list[1].stamp == s && list[0].stamp != s
	})
	landed, returned := GrantsLanded(), GrantsReturned()
	if err := ma.Unlock(h); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []<-chan acquired{x1, x2} {
		if r := receive(t, ch, "x's acquisition"); !r.ok || r.err != nil {
			t.Fatalf("x: %v %v", r.ok, r.err)
		}
	}
	if n := GrantsReturned() - returned; n != 0 {
		t.Errorf("%d grants given back, want 0", n)
	}
	if n := GrantsLanded() - landed; n != 1 {
		t.Errorf("%d grants landed, want 1", n)
	}
	for range 2 {
		if err := mb.Unlock(x); err != nil {
			t.Fatal(err)
		}
	}
}
