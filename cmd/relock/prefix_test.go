package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// prefixedName returns a fresh name and deletes its keys under each prefix
// when t ends.
func prefixedName(t *testing.T, prefixes ...string) string {
	t.Helper()
	name := relocktest.Name(t)
	srv := redistest.Shared(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, p := range prefixes {
			_, _ = srv.Do(ctx, append([]string{"DEL"}, relocktest.Keys(p+name)...)...)
		}
	})
	return name
}

// TestPrefixRun: run --prefix P NAME holds P+NAME, the lock a Client with
// WithKeyPrefix(P) calls NAME; another prefix is another lock.
func TestPrefixRun(t *testing.T) {
	srv := server(t)
	name := prefixedName(t, "app1:", "app2:")
	// COMMAND reads, without a prefix, the lock run holds.
	r := relock(t, "--prefix", "app1:", "run", "--no-wait", "--redis", srv.Addr, name, "--",
		relockBin, "--redis", srv.Addr, "status", "--json", "app1:"+name)
	wantCode(t, r, 0)
	assert.Contains(t, r.stdout, `"locked": true`, "the lock app1:NAME is held while COMMAND runs")

	app1 := relocktest.Client(t, rlock.WithKeyPrefix("app1:"))
	require.NoError(t, app1.GetLock(name).LockLease(t.Context(), time.Minute))
	r = relock(t, "run", "--prefix", "app1:", "--no-wait", "--redis", srv.Addr, name, "true")
	wantCode(t, r, exitTempFail)
	r = relockEnv(t, []string{"RELOCK_PREFIX=app1:"}, "run", "--no-wait", "--redis", srv.Addr, name, "true")
	wantCode(t, r, exitTempFail)
	r = relock(t, "run", "--no-wait", "--redis", srv.Addr, "app1:"+name, "true")
	wantCode(t, r, exitTempFail)
	r = relock(t, "run", "--prefix", "app2:", "--no-wait", "--redis", srv.Addr, name, "true")
	wantCode(t, r, exitOK)
}

// TestPrefixStatus: status --prefix P NAME (or $RELOCK_PREFIX) reads
// P+NAME.
func TestPrefixStatus(t *testing.T) {
	srv := server(t)
	name := prefixedName(t, "app1:")
	c := relocktest.Client(t)
	require.NoError(t, c.GetLock("app1:"+name).Lock(rlock.WithOwner(t.Context(), "java")))

	r := relock(t, "status", "--prefix", "app1:", "--redis", srv.Addr, name)
	wantCode(t, r, exitOK)
	assert.Contains(t, r.stdout, c.ID()+":java")
	r = relockEnv(t, []string{"RELOCK_PREFIX=app1:"}, "status", "--redis", srv.Addr, name)
	wantCode(t, r, exitOK)
	r = relock(t, "status", "--prefix", "app2:", "--redis", srv.Addr, name)
	wantCode(t, r, exitNoSuchLock)
	r = relock(t, "status", "--redis", srv.Addr, name)
	wantCode(t, r, exitNoSuchLock)
	r = relock(t, "status", "--prefix", "app\x01", "--redis", srv.Addr, name)
	wantCode(t, r, exitUsage)
	assert.Contains(t, r.stderr, "--prefix")
	r = relock(t, "status", "--prefix", "{", "--redis", srv.Addr, name)
	wantCode(t, r, exitUsage)
}

// TestPrefixScan: scan --prefix P lists only the names under P, shown
// without it, and --match matches them without it.
func TestPrefixScan(t *testing.T) {
	srv := server(t)
	name := prefixedName(t, "app1:", "app2:")
	c := relocktest.Client(t)
	require.NoError(t, c.GetLock("app1:"+name).LockLease(t.Context(), time.Minute))
	require.NoError(t, c.GetLock("app2:"+name).LockLease(t.Context(), time.Minute))

	r := relock(t, "scan", "--prefix", "app1:", "--match", name, "--json", "--redis", srv.Addr)
	wantCode(t, r, exitOK)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 1, "one lock under app1: named %q:\n%s", name, r.stdout)
	var e struct {
		Name string   `json:"name"`
		Keys []string `json:"keys"`
	}
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &e))
	assert.Equal(t, name, e.Name, "the name without the prefix")
	assert.Contains(t, e.Keys, "app1:"+name, "the keys whole")

	r = relock(t, "scan", "--match", "app1:"+name, "--json", "--redis", srv.Addr)
	wantCode(t, r, exitOK)
	assert.Contains(t, r.stdout, `"name":"app1:`+name+`"`, "without --prefix, the whole name")
	r = relock(t, "scan", "--prefix", "app1:", "--match", "app1:"+name, "--json", "--redis", srv.Addr)
	wantCode(t, r, exitOK)
	assert.Empty(t, strings.TrimSpace(r.stdout), "--match is matched against the name without the prefix")
}

// TestPrefixUnlock: unlock --force --prefix P NAME deletes P+NAME and
// nothing else.
func TestPrefixUnlock(t *testing.T) {
	srv := server(t)
	name := prefixedName(t, "app1:", "app2:")
	app1 := relocktest.Client(t, rlock.WithKeyPrefix("app1:"))
	app2 := relocktest.Client(t, rlock.WithKeyPrefix("app2:"))
	require.NoError(t, app1.GetLock(name).Lock(rlock.WithOwner(t.Context(), "a")))
	require.NoError(t, app2.GetLock(name).Lock(rlock.WithOwner(t.Context(), "b")))

	r := relock(t, "unlock", "--force", "--prefix", "app1:", "--redis", srv.Addr, name)
	wantCode(t, r, exitOK)
	assert.Contains(t, r.stdout, "was held by "+app1.ID()+":a")
	locked, err := app1.GetLock(name).IsLocked(t.Context())
	require.NoError(t, err)
	assert.False(t, locked, "app1's lock is gone")
	locked, err = app2.GetLock(name).IsLocked(t.Context())
	require.NoError(t, err)
	assert.True(t, locked, "app2's lock is kept")
}
