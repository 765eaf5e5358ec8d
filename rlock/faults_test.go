package rlock_test

import (
	"strings"
	"testing"

	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/rlock"
)

// faultKinds are the lock kinds of this package with their acquire and
// release scripts.
var faultKinds = []struct {
	name             string
	get              func(c *rlock.Client, name string) relocktest.Lockable
	acquire, release string
}{
	{"Lock", func(c *rlock.Client, n string) relocktest.Lockable { return c.GetLock(n) }, lua.LockAcquire.SHA1, lua.LockUnlock.SHA1},
	{"FencedLock", func(c *rlock.Client, n string) relocktest.Lockable { return c.GetFencedLock(n) }, lua.FencedAcquire.SHA1, lua.LockUnlock.SHA1},
}

// TestFaults runs the retry and lost-reply checks on each kind, through a
// wrapper that answers its scripts with injected replies.
func TestFaults(t *testing.T) {
	type check struct {
		name  string
		check func(t *testing.T, f *relocktest.Faulty, l relocktest.Lockable, acquire, release string)
	}
	var checks []check
	for _, msg := range relocktest.TransientErrors {
		prefix, _, _ := strings.Cut(msg, " ")
		checks = append(checks, check{"AcquireErrors/" + prefix, func(t *testing.T, f *relocktest.Faulty, l relocktest.Lockable, acquire, _ string) {
			relocktest.CheckAcquireErrors(t, f, l, acquire, msg)
		}})
	}
	checks = append(checks, []check{
		{"LostAcquireReply", func(t *testing.T, f *relocktest.Faulty, l relocktest.Lockable, acquire, _ string) {
			relocktest.CheckLostAcquireReply(t, f, l, acquire)
		}},
		{"UnlockErrors", func(t *testing.T, f *relocktest.Faulty, l relocktest.Lockable, _, release string) {
			relocktest.CheckUnlockErrors(t, f, l, release)
		}},
	}...)
	for _, k := range faultKinds {
		for _, c := range checks {
			t.Run(k.name+"/"+c.name, func(t *testing.T) {
				f := relocktest.NewFaulty(relocktest.Raw(t))
				cl, err := rlock.New(f)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = cl.Close() })
				c.check(t, f, k.get(cl, relocktest.Name(t)), k.acquire, k.release)
			})
		}
	}
}

// TestFencedTokenBeforeRedis7: the token is read with a read-only script
// (EVALSHA_RO, so that a client that sends reads to replicas may); a
// server that does not know EVALSHA_RO (before Redis 7) gets EVALSHA, from
// its first refusal on.
func TestFencedTokenBeforeRedis7(t *testing.T) {
	raw := relocktest.Raw(t)
	f := relocktest.NewFaulty(raw)
	c, err := rlock.New(f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	l := c.GetFencedLock(relocktest.Name(t))
	ctx := rlock.WithOwner(t.Context(), "a")
	token, err := l.LockAndGetToken(ctx)
	if err != nil {
		t.Fatal(err)
	}
	readOnly := func(args []string) bool { return strings.HasSuffix(strings.ToUpper(args[0]), "_RO") }
	seen := f.Inject(&relocktest.Rule{SHA1s: []string{lua.FencedToken.SHA1}, N: -1, Run: true, Keep: true, Match: readOnly})
	if got, err := l.Token(ctx); got != token || err != nil {
		t.Fatalf("Token = %d, %v, want %d", got, err, token)
	}
	if seen.Hits() != 1 {
		t.Fatalf("%d read-only scripts sent, want 1", seen.Hits())
	}
	f.Clear()
	refused := f.Inject(&relocktest.Rule{SHA1s: []string{lua.FencedToken.SHA1}, N: -1, Match: readOnly,
		Reply: relocktest.ErrorReply(t, raw, "ERR unknown command 'EVALSHA_RO', with args beginning with: ")})
	for range 2 {
		if got, err := l.Token(ctx); got != token || err != nil {
			t.Fatalf("Token on a server without EVALSHA_RO = %d, %v, want %d", got, err, token)
		}
	}
	if refused.Hits() != 1 {
		t.Errorf("EVALSHA_RO sent %d times to a server that refused it, want once", refused.Hits())
	}
	_ = l.Unlock(ctx)
}
