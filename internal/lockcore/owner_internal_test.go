package lockcore

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestModelReusedOwnerRecordKept: the record of a made-up owner that comes
// back (ReusedOwner: a RedLock's anonymous owners) stays once idle, as a
// given owner's does, so that its next hold finds it; the record of one
// that never comes back (AnonymousOwner: Do's, a MultiLock's) goes.
func TestModelReusedOwnerRecordKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newModel()
		c := modelCore(t, m, 30*time.Second)
		x := NewMutex(c, "x", m)
		for _, o := range []struct {
			owner string
			kept  bool
		}{{ReusedOwner(), true}, {AnonymousOwner(), false}} {
			ctx := WithReservedOwner(t.Context(), o.owner)
			var first *hold
			for i := range 2 {
				if err := x.Lock(ctx); err != nil {
					t.Fatal(err)
				}
				h := recordOf(c, "x", o.owner)
				if i == 0 {
					first = h
				} else if o.kept && h != first {
					t.Errorf("owner %q: its second hold made a new record", o.owner)
				}
				if err := x.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
				if kept := recordOf(c, "x", o.owner) != nil; kept != o.kept {
					t.Errorf("owner %q: record kept once idle: %v, want %v", o.owner, kept, o.kept)
				}
			}
		}
	})
}

func TestReusedOwnerForm(t *testing.T) {
	if o := ReusedOwner(); !reservedOwner(o) || !reusedOwner(o) {
		t.Errorf("ReusedOwner() = %q: reserved %v, reused %v; want both", o, reservedOwner(o), reusedOwner(o))
	}
	for _, o := range []string{"anon-5", "anon-5@host", "anon-5@host@", "a@"} {
		if reservedOwner(o) && reusedOwner(o) {
			t.Errorf("%q is taken for a reused owner", o)
		}
	}
	if err := CheckOwner(ReusedOwner()); err == nil {
		t.Error("CheckOwner accepts a reused owner's form from users")
	}
}
