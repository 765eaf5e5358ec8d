package rlock_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
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
		prefix := relocktest.ErrorName(msg)
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
		{"UnconfirmedUnlock", func(t *testing.T, f *relocktest.Faulty, l relocktest.Lockable, _, release string) {
			relocktest.CheckUnconfirmedUnlockSettled(t, f, l, release)
		}},
	}...)
	for _, k := range faultKinds {
		for _, c := range checks {
			t.Run(k.name+"/"+c.name, func(t *testing.T) {
				f := relocktest.NewFaulty(relocktest.Raw(t))
				cl, err := rlock.New(f)
				require.NoError(t, err)
				t.Cleanup(func() { _ = cl.Close() })
				c.check(t, f, k.get(cl, relocktest.Name(t)), k.acquire, k.release)
			})
		}
	}
}

// TestFencedTokenReadOnly: a token is read with a read-only script
// (EVALSHA_RO, so that a client that sends reads to replicas may) on a
// server that has the command; on one without it (before Redis 7) the
// first refusal makes the Client send EVALSHA from then on. Each server
// is asked what it supports, and checked for what applies to it: the
// package's server, whatever its version, and one without EVALSHA_RO
// (renamed away on a server that has it), so that both ways run on every
// version.
func TestFencedTokenReadOnly(t *testing.T) {
	t.Run("package server", func(t *testing.T) { checkFencedToken(t, redistest.Shared(t)) })
	t.Run("server without EVALSHA_RO", func(t *testing.T) {
		// A server before Redis 7 has no EVALSHA_RO to rename (and refuses
		// to start when asked to): there the server itself is the case.
		var args []string
		if relocktest.Knows(t, redistest.Shared(t).Client(t), "EVALSHA_RO") {
			args = []string{"--rename-command", "EVALSHA_RO", ""}
		}
		checkFencedToken(t, redistest.Start(t, args...))
	})
}

func checkFencedToken(t *testing.T, srv *redistest.Server) {
	raw := srv.Client(t)
	hasReadOnly := relocktest.Knows(t, raw, "EVALSHA_RO")
	t.Logf("the server knows EVALSHA_RO: %v", hasReadOnly)
	f := relocktest.NewFaulty(raw)
	c, err := rlock.New(f)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	l := c.GetFencedLock(relocktest.Name(t))
	ctx := rlock.WithOwner(t.Context(), "a")
	token, err := l.LockAndGetToken(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Unlock(ctx) })
	readOnly := func(args []string) bool { return strings.HasSuffix(strings.ToUpper(args[0]), "_RO") }

	sent := f.Inject(&relocktest.Rule{SHA1s: []string{lua.FencedToken.SHA1}, N: -1, Run: true, Keep: true, Match: readOnly})
	for range 3 {
		got, err := l.Token(ctx)
		require.NoError(t, err, "Token")
		require.Equal(t, token, got, "Token")
	}
	if !hasReadOnly {
		assert.EqualValues(t, 1, sent.Hits(), "EVALSHA_RO sent to a server without it: once, then EVALSHA")
		return
	}
	assert.EqualValues(t, 3, sent.Hits(), "read-only scripts sent for 3 tokens")

	// The same server refusing EVALSHA_RO, as one before Redis 7 would.
	f.Clear()
	refused := f.Inject(&relocktest.Rule{SHA1s: []string{lua.FencedToken.SHA1}, N: -1, Match: readOnly,
		Reply: relocktest.ErrorReply(t, raw, "ERR unknown command 'EVALSHA_RO', with args beginning with: ")})
	for range 2 {
		got, err := l.Token(ctx)
		require.NoError(t, err, "Token on a server without EVALSHA_RO")
		require.Equal(t, token, got, "Token on a server without EVALSHA_RO")
	}
	assert.EqualValues(t, 1, refused.Hits(), "EVALSHA_RO sent to a server that refused it: once")
}
