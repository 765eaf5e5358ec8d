package lockcore

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relock-go/relock"
)

// endingCtx is a context that ends itself right after its n-th Err
// (which still answers as before): a context that ends between any two
// of the call's looks at it.
type endingCtx struct {
	context.Context
	n      atomic.Int32
	cancel context.CancelFunc
}

func (e *endingCtx) Err() error {
	err := e.Context.Err()
	if e.n.Add(-1) == 0 {
		e.cancel()
	}
	return err
}

// TestContextEndsBetweenLooks: a Lock or TryLock whose context ends, at
// any of the moments the call looks at it, while another owner holds the
// lock throughout, returns an error matching the context's and
// relock.ErrNotAcquired, never success (a Lock that returns nil holding
// nothing) nor "not acquired" without an error. The wait's end for a
// Lock is its context's end, so a context that ended between the check
// of the context and that of the wait once made the call take its end
// for the wait limit's.
func TestContextEndsBetweenLooks(t *testing.T) {
	raw, _, _, name, m, _ := grantHeld(t) // owner a holds the lock
	for _, wait := range []time.Duration{NoLimit, time.Minute} {
		for n := int32(1); n <= 24; n++ {
			inner, cancel := context.WithCancel(t.Context())
			ctx := &endingCtx{Context: inner, cancel: cancel}
			ctx.n.Store(n)
			got := goAcquire(m, WithOwner(ctx, "b"), wait, 0)
			var r acquired
			select {
			case r = <-got:
			case <-time.After(100 * time.Millisecond):
				// The call sleeps with its context live (it looked at it
				// fewer than n times): end it.
				cancel()
				r = receive(t, got, "b's call")
			}
			cancel()
			if r.ok || r.err == nil || !errors.Is(r.err, context.Canceled) || !errors.Is(r.err, relock.ErrNotAcquired) {
				t.Errorf("wait %v, context ending after look %d: b's call returned %v, %v while a holds the lock", wait, n, r.ok, r.err)
			}
			if v := hget(t, raw, name, m.Field("b")); v != "" {
				t.Fatalf("b's count in Redis is %q", v)
			}
		}
	}
}
