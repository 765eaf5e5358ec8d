package lockcore

import (
	"context"
	"errors"
	"testing"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// TestTryContextEndsInFlight: a TryLock with wait 0 whose context ends
// at any of the moments the call looks at it, while another owner holds
// the lock throughout, and that looks at it again after that, returns an
// error matching the context's and relock.ErrNotAcquired: never "not
// acquired" without an error, which
// the API keeps for a call whose context is live. A context that ended
// while the call's one attempt was in flight (its script runs on a
// context that outlives the caller's by a moment) once made the call
// return (false, nil).
func TestTryContextEndsInFlight(t *testing.T) {
	raw := redistest.Shared(t).Client(t)
	c := grantCore(t, raw, Config{})
	name := grantName(t, raw)
	m := NewMutex(c, name, Reentrant{})
	if _, ok, err := m.Acquire(WithOwner(t.Context(), "a"), 0, 0); !ok || err != nil {
		t.Fatalf("a: %v %v", ok, err)
	}
	for n := int32(1); n <= 8; n++ {
		inner, cancel := context.WithCancel(t.Context())
		ctx := &endingCtx{Context: inner, cancel: cancel}
		ctx.n.Store(n)
		_, ok, err := m.Acquire(WithOwner(ctx, "b"), 0, 0)
		// The call looked at its context after it ended (it can tell
		// only then).
		seen := ctx.n.Load() < 0
		cancel()
		if !seen {
			if ok || (err != nil && !errors.Is(err, context.Canceled)) {
				t.Errorf("context ending after look %d: b's TryLock returned %v, %v while a holds the lock", n, ok, err)
			}
			continue
		}
		if ok || err == nil || !errors.Is(err, context.Canceled) || !errors.Is(err, relock.ErrNotAcquired) {
			t.Errorf("context ending after look %d: b's TryLock returned %v, %v while a holds the lock", n, ok, err)
		}
		if v := hget(t, raw, name, m.Field("b")); v != "" {
			t.Fatalf("b's count in Redis is %q", v)
		}
	}
}
