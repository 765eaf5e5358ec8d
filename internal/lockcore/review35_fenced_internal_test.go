package lockcore

import (
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/lua"
)

// TestReview35FencedGrantReplyLost: the reply of the release that
// granted a fenced lock to b is lost; b's next attempt takes the granted
// field over. b's token must be above a's and be the hold's token (the
// counter's value when b's hold began), as for a grant whose reply came.
func TestReview35FencedGrantReplyLost(t *testing.T) {
	raw := redistest.Shared(t).Client(t)
	g := &grantRDB{Client: raw}
	c := grantCore(t, g, Config{})
	name := grantName(t, raw)
	t.Cleanup(func() { raw.Do(t.Context(), raw.B().Del().Key(layout.Token(name)).Build()) })
	m := NewMutex(c, name, Fenced{})
	a := WithOwner(t.Context(), "a")
	ta, ok, err := m.Acquire(a, 0, 0)
	if !ok || err != nil {
		t.Fatalf("a: %v %v", ok, err)
	}
	got := goAcquire(m, WithOwner(t.Context(), "b"), NoLimit, 0)
	waitOffer(t, c, name, 1)
	var lost atomic.Bool
	g.mu.Lock()
	g.lose = func(sha string) bool { return sha == lua.LockUnlock.SHA1 && lost.CompareAndSwap(false, true) }
	g.mu.Unlock()
	if err := m.Unlock(a); err != nil {
		t.Fatalf("unlock: %v", err)
	}
	r := receive(t, got, "b's acquisition")
	if !r.ok || r.err != nil {
		t.Fatalf("b: %v %v", r.ok, r.err)
	}
	if !lost.Load() {
		t.Fatal("no release reply was lost")
	}
	ctr, err := raw.Do(t.Context(), raw.B().Get().Key(layout.Token(name)).Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a's token %d, b's %d, counter %s", ta, r.token, ctr)
	if r.token <= ta {
		t.Errorf("b's token %d is not above a's %d", r.token, ta)
	}
	if strconv.FormatInt(r.token, 10) != ctr {
		t.Errorf("b's token %d, the counter %s (b's hold began with the grant's increment)", r.token, ctr)
	}
	_ = m.Unlock(WithOwner(t.Context(), "b"))
}
