package lockcore

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relock-go/relock/lua"
)

// TestGrantNotUndoneBySettle: an owner's record may have a settle under
// way (an earlier call of the owner ended with an attempt's reply lost:
// the Client sets the owner's count in Redis back to what it holds, in
// the background) while a release grants a waiting call of the owner the
// lock. The settle must not set the count to the record's want (0) over
// the grant: the call would return holding a field Redis no longer has
// (seen as TestReview35CancelCrossesGrant's rare failure under load).
//
//   - after-grant: the settle runs once the grant is written and before
//     the call took it; it sends nothing until the grant is landed.
//   - before-claim: the settle read want and is on its way when the
//     release runs; the release grants nothing (it publishes, and the
//     call takes the lock by its own attempt).
func TestGrantNotUndoneBySettle(t *testing.T) {
	for _, when := range []string{"after-grant", "before-claim"} {
		t.Run(when, func(t *testing.T) {
			raw, g, c, name, m, a := grantHeld(t)
			b := WithOwner(t.Context(), "b")
			got := goAcquire(m, b, NoLimit, 0)
			waitOffer(t, c, name, 1)
			h := c.find(m.holdKey("b"))
			defer c.leave(h)
			r := Request{Core: c, Name: name, Field: h.field, LeaseMs: Millis(c.WatchdogTimeout),
				LeaseArg: c.watchdogArg, Chan: m.channel, Wakers: m.wakers}
			settle := func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				return m.settleOnce(ctx, h, r, settleAny)
			}
			var once atomic.Bool
			var settled error
			g0 := GrantsMade()
			switch when {
			case "after-grant":
				g.setAfter(func(args []string) {
					if args[0] == lua.LockUnlock.SHA1 {
						if once.CompareAndSwap(false, true) {
							settled = settle()
						}
					}
				})
				if err := m.Unlock(a); err != nil {
					t.Fatal(err)
				}
				if GrantsMade() == g0 {
					t.Fatal("a's Unlock granted nothing")
				}
				if settled == nil {
					t.Error("the settle ran while the grant was on its way")
				}
			case "before-claim":
				var settling atomic.Bool
				g.mu.Lock()
				g.before = func(sha string) {
					if sha != lua.LockUnlock.SHA1 {
						return
					}
					// The first release sent is the settle's (want read):
					// a's Unlock runs before it reaches Redis.
					if settling.CompareAndSwap(false, true) {
						if err := m.Unlock(a); err != nil {
							t.Error(err)
						}
					}
				}
				g.mu.Unlock()
				if settled = settle(); settled != nil {
					t.Fatal(settled)
				}
				if GrantsMade() != g0 {
					t.Error("a's Unlock granted b while a settle of b was on its way")
				}
			}
			res := receive(t, got, "b's call")
			if !res.ok || res.err != nil {
				t.Fatalf("b: %v %v", res.ok, res.err)
			}
			if v := hget(t, raw, name, m.Field("b")); v != "1" {
				t.Fatalf("b's call returned holding, and b's count in Redis is %q", v)
			}
			// Once landed, a settle finds the hold and leaves it.
			if err := settle(); err != nil {
				t.Fatal(err)
			}
			if v := hget(t, raw, name, m.Field("b")); v != "1" {
				t.Fatalf("after a settle, b's count in Redis is %q", v)
			}
			if err := m.Unlock(b); err != nil {
				t.Fatal(err)
			}
		})
	}
}
