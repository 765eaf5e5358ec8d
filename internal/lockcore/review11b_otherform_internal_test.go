package lockcore

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/redistest"
)

// TestReview11bOtherFormGivesBack: a Client whose waiter on one form of a
// name got the lock keeps an idle listener on the shared wake channel. A
// grant for the other form's entry of the Client (left behind, the
// Client has no listener of that form) is heard by the idle listener
// alone: it is given back at once, on the hash of the grant's form, not
// left for its window, and nothing is written in the other form's hash.
func TestReview11bOtherFormGivesBack(t *testing.T) {
	for _, tc := range []struct {
		name          string
		idleBraced    bool
		grantedFenced bool
	}{
		{"plainIdle-bracedGrant", false, false},
		{"plainIdle-bracedFencedGrant", false, true},
		{"bracedIdle-plainGrant", true, false},
		{"bracedIdle-plainFencedGrant", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := redistest.Shared(t).Client(t)
			a := grantCore(t, raw, Config{WakeOne: true})
			b := grantCore(t, raw, Config{WakeOne: true})
			plain := grantName(t, raw)
			braced := "{" + plain + "}"
			t.Cleanup(func() {
				raw.Do(context.Background(), raw.B().Del().Key(braced, layout.Grantees(plain), layout.Wakers(plain)).Build())
			})
			idle, granted := plain, braced
			if tc.idleBraced {
				idle, granted = braced, plain
			}
			var kind Kind = Reentrant{}
			if tc.grantedFenced {
				kind = Fenced{}
			}
			// b's waiter on the idle form gets the lock, and leaves a
			// listener on the wake channel.
			leaveIdleListener(t, NewMutex(a, idle, Reentrant{}), NewMutex(b, idle, Reentrant{}))
			h := WithOwner(t.Context(), "h")
			b.mu.Lock()
			listens := b.wakers[idle] != nil && b.wakers[idle].listener != nil && b.wakers[granted] == nil
			b.mu.Unlock()
			if !listens {
				t.Fatal("b has no idle listener of the one form only")
			}
			// An entry of b for the granted form, left behind, with b
			// registered.
			ma := NewMutex(a, granted, kind)
			if _, ok, err := ma.Acquire(h, 0, 0); !ok || err != nil {
				t.Fatalf("h on %s: %v %v", granted, ok, err)
			}
			letter := grantPlain
			if tc.grantedFenced {
				letter = grantFenced
			}
			if layout.SelfTagged(granted) {
				letter = grantFencedBraced
				if !tc.grantedFenced {
					letter = grantPlainBraced
				}
			}
			field := layout.Field(b.ID, "z")
			entry := letter + " 3000 " + strconv.FormatInt(b.stamp(time.Now()), 10) + " " + field
			ctx := t.Context()
			for _, cmd := range []string{"hset", "zadd"} {
				var err error
				if cmd == "hset" {
					err = raw.Do(ctx, raw.B().Hset().Key(layout.Grantees(plain)).FieldValue().FieldValue(b.ID, entry).Build()).Error()
				} else {
					err = raw.Do(ctx, raw.B().Zadd().Key(layout.Wakers(plain)).ScoreMember().
						ScoreMember(float64(time.Now().Add(time.Minute).UnixMilli()), b.ID).Build()).Error()
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			returned := GrantsReturned()
			if err := ma.Unlock(h); err != nil {
				t.Fatal(err)
			}
			// The granted field's lease is the entry's window (3s): a grant
			// nobody takes, or one given back on the other hash, leaves it
			// until then. It is given back well before.
			waitUntil(t, 10*time.Second, fmt.Sprintf("the grant to %s given back (the idle listener of %s passing it on)", granted, idle), func() bool {
				// The TTL first: the field may go between the two reads.
				if left := pttl(t, raw, granted); left >= 0 && left < 300 && hget(t, raw, granted, field) != "" {
					t.Fatalf("%s still holds %s's field as its window ends (given back: %v)", granted, field,
						GrantsReturned() != returned)
				}
				return GrantsReturned() != returned && hget(t, raw, granted, field) == ""
			})
			if v := hget(t, raw, idle, field); v != "" {
				t.Errorf("%s holds %s: %q", idle, field, v)
			}
		})
	}
}

// TestReview11bGrantSelfTaggedNoOtherForm: a name with a '{' that has no
// other form ("p{q}" is its own hash tag, and no name without braces
// shares its keys) writes its entries in upper case, and its grant is
// landed by its own listener: the waiter holds its field when its call
// returns, and nothing is given back.
func TestReview11bGrantSelfTaggedNoOtherForm(t *testing.T) {
	raw := redistest.Shared(t).Client(t)
	a := grantCore(t, raw, Config{WakeOne: true})
	b := grantCore(t, raw, Config{WakeOne: true})
	name := grantName(t, raw) + "{q}"
	t.Cleanup(func() {
		raw.Do(context.Background(), raw.B().Del().Key(name, layout.Grantees(name), layout.Wakers(name), layout.Token(name)).Build())
	})
	if _, ok := layout.OtherForm(name); ok || !layout.SelfTagged(name) {
		t.Fatalf("%s: want a self-tagged name without another form", name)
	}
	for _, kind := range []Kind{Reentrant{}, Fenced{}} {
		ma, mb := NewMutex(a, name, kind), NewMutex(b, name, kind)
		h := WithOwner(t.Context(), "h")
		if _, ok, err := ma.Acquire(h, 0, 0); !ok || err != nil {
			t.Fatalf("h: %v %v", ok, err)
		}
		x := WithOwner(t.Context(), "x")
		xCall := goAcquire(mb, x, NoLimit, 0)
		waitOffer(t, b, name, 1)
		landed, returned := GrantsLanded(), GrantsReturned()
		if err := ma.Unlock(h); err != nil {
			t.Fatal(err)
		}
		if r := receive(t, xCall, "x's call"); !r.ok || r.err != nil {
			t.Fatalf("x: %v %v", r.ok, r.err)
		}
		if n := GrantsLanded() - landed; n != 1 {
			t.Errorf("%T: %d grants landed, want 1", kind, n)
		}
		if n := GrantsReturned() - returned; n != 0 {
			t.Errorf("%T: %d grants given back, want 0", kind, n)
		}
		if v := hget(t, raw, name, mb.Field("x")); v != "1" {
			t.Errorf("%T: x's field: %q, want 1", kind, v)
		}
		if err := mb.Unlock(x); err != nil {
			t.Fatal(err)
		}
	}
}
