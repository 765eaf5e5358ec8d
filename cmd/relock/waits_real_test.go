package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// peekWaits runs waits --json with args and decodes its lines, failing
// nothing: it is for conditions (relocktest.Eventually), which answer
// false when the output cannot be read yet.
func peekWaits(addr string, args ...string) (waitsOutput, int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, relockBin, append([]string{"waits", "--json", "--redis", addr}, args...)...)
	cmd.Env = append(os.Environ(), "RELOCK_REDIS=", "RELOCK_PREFIX=", "RELOCK_PASSWORD=", "REDISCLI_AUTH=", "NO_COLOR=1", "GORACE=atexit_sleep_ms=0 exitcode=66")
	b, err := cmd.Output()
	code := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		return waitsOutput{}, -1, err
	}
	out := waitsOutput{names: map[string]waitsName{}}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var head struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal([]byte(line), &head); err != nil {
			return out, code, err
		}
		switch head.Type {
		case "name":
			var n waitsName
			if err := json.Unmarshal([]byte(line), &n); err != nil {
				return out, code, err
			}
			out.names[n.Name] = n
		case "cycle":
			var c waitsCycle
			if err := json.Unmarshal([]byte(line), &c); err != nil {
				return out, code, err
			}
			out.cycles = append(out.cycles, c)
		}
	}
	return out, code, nil
}

// waiting runs fn on a goroutine of its own and returns a channel that
// gets its error; the test waits for it before it ends.
func waiting(t *testing.T, fn func() error) <-chan error {
	t.Helper()
	ch := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		ch <- fn()
	}()
	t.Cleanup(wg.Wait)
	return ch
}

// TestWaitsRealEveryKind: real waiting calls of every kind that can wait,
// made by the library against real holds (relock run --wait processes
// for the lock, fenced lock and fair lock; in-process Clients for the
// rest), are shown by waits, status and top with their kind and owner,
// from the records the library writes; when the waits end, so do the
// records.
func TestWaitsRealEveryKind(t *testing.T) {
	srv := server(t)
	c := relocktest.Client(t) // the holder's
	w := relocktest.Client(t) // the in-process waiters'
	ctx := t.Context()
	holder := rlock.WithOwner(ctx, "holder")
	names, match := testNames(t, 10)
	host, err := os.Hostname()
	require.NoError(t, err)

	type waiter struct {
		kind  string      // the kind its record names
		table layout.Kind // the kind waits says the name is
		owner string      // its owner, as waits names it (without the client ID)
		field string      // client_id:owner, when the test knows the ID
		done  <-chan error
		proc  *proc
	}
	var waiters []*waiter
	wctx, stop := context.WithCancel(ctx) // ends the rate limiter's wait
	defer stop()
	own := func(kind string) context.Context { return rlock.WithOwner(wctx, "w-"+kind) }
	add := func(kind string, table layout.Kind, fn func() error) {
		waiters = append(waiters, &waiter{kind: kind, table: table, owner: "w-" + kind, field: w.ID() + ":w-" + kind, done: waiting(t, fn)})
	}
	addRun := func(kind string, args ...string) {
		name := names[len(waiters)]
		p := startRelock(t, append(append([]string{"run", "--redis", srv.Addr, "--wait", "1m"}, args...), name, "--", "true")...)
		waiters = append(waiters, &waiter{kind: kind, table: layout.KindLock,
			owner: fmt.Sprintf("run:%s:%d", host, p.cmd.Process.Pid), proc: p})
	}

	// Processes: relock run --wait, a lock, a fenced lock, a fair lock.
	require.NoError(t, c.GetLock(names[0]).Lock(holder))
	addRun("lock")
	require.NoError(t, c.GetFencedLock(names[1]).Lock(holder))
	addRun("fenced", "--fenced")
	waiters[1].table = layout.KindFenced
	require.NoError(t, c.GetFairLock(names[2]).Lock(holder))
	addRun("fair", "--fair")
	waiters[2].table = layout.KindFair // a queued waiter: the lock has a queue

	// In-process: every other kind that waits.
	spin := names[3]
	require.NoError(t, c.GetSpinLock(spin).Lock(holder))
	add("spin", layout.KindLock, func() error { return w.GetSpinLock(spin).Lock(own("spin")) })
	read := names[4]
	require.NoError(t, c.GetReadWriteLock(read).WriteLock().Lock(holder))
	add("read", layout.KindRWLock, func() error { return w.GetReadWriteLock(read).ReadLock().Lock(own("read")) })
	write := names[5]
	require.NoError(t, c.GetReadWriteLock(write).ReadLock().Lock(holder))
	add("write", layout.KindRWLock, func() error { return w.GetReadWriteLock(write).WriteLock().Lock(own("write")) })
	sem := c.GetSemaphore(names[6])
	_, err = sem.TrySetPermits(ctx, 1)
	require.NoError(t, err)
	permit, err := sem.Acquire(holder, time.Minute)
	require.NoError(t, err)
	add("semaphore", layout.KindSemaphore, func() error {
		id, err := w.GetSemaphore(names[6]).Acquire(own("semaphore"), time.Minute)
		if err == nil {
			err = w.GetSemaphore(names[6]).Release(context.Background(), id)
		}
		return err
	})
	counting := c.GetCountingSemaphore(names[7])
	_, err = counting.TrySetPermits(ctx, 0)
	require.NoError(t, err)
	add("counting_semaphore", layout.KindCountingSemaphore, func() error {
		return w.GetCountingSemaphore(names[7]).Acquire(own("counting_semaphore"), 1)
	})
	limiter := c.GetRateLimiter(names[8])
	_, err = limiter.TrySetRate(ctx, 1, time.Hour)
	require.NoError(t, err)
	require.NoError(t, limiter.Acquire(ctx, 1))
	add("rate_limiter", layout.KindRateLimiter, func() error {
		return w.GetRateLimiter(names[8]).Acquire(own("rate_limiter"), 1)
	})
	l := c.GetCountDownLatch(names[9])
	_, err = l.TrySetCount(ctx, 1)
	require.NoError(t, err)
	add("latch", layout.KindLatch, func() error { return w.GetCountDownLatch(names[9]).Await(own("latch")) })
	require.Len(t, waiters, len(names))

	var out waitsOutput
	recorded := func() bool {
		var err error
		if out, _, err = peekWaits(srv.Addr, "--match", match); err != nil {
			return false
		}
		for i, wt := range waiters {
			n := out.names[names[i]]
			if len(n.Waiters) != 1 || n.Waiters[0].Owner != wt.owner {
				return false
			}
		}
		return true
	}
	relocktest.Eventually(t, 30*time.Second, "every waiter recorded", recorded)

	// waits --json: each name, its kind, its one waiter (owner, kind).
	out = runWaits(t, exitOK, "--match", match)
	assert.Len(t, out.names, len(names))
	assert.Empty(t, out.cycles)
	for i, wt := range waiters {
		n := out.names[names[i]]
		assert.Equal(t, string(wt.table), n.Kind, "%s: kind", wt.kind)
		if assert.Len(t, n.Waiters, 1, "%s: waiters", wt.kind) {
			got := n.Waiters[0]
			assert.Equal(t, wt.owner, got.Owner, "%s: owner", wt.kind)
			assert.Equal(t, got.ClientID+":"+got.Owner, got.Field, "%s: field", wt.kind)
			if wt.field != "" {
				assert.Equal(t, wt.field, got.Field, "%s: waiter", wt.kind)
			}
			assert.Equal(t, wt.kind, got.Kind, "%s: kind waited for", wt.kind)
		}
		switch wt.kind {
		case "lock", "fenced", "fair", "spin", "read", "write":
			if assert.Len(t, n.Holders, 1, "%s: holders", wt.kind) {
				assert.Equal(t, c.ID()+":holder", strings.TrimSuffix(n.Holders[0].Field, ":write"), "%s: holder", wt.kind)
			}
		}
	}

	// status --json NAME: the same waiter.
	for i, wt := range waiters {
		args := []string{"status", "--json", "--redis", srv.Addr}
		switch wt.kind {
		case "latch":
			args = append(args, "--kind", "latch")
		case "counting_semaphore":
			args = append(args, "--kind", "counting")
		}
		r := relock(t, append(args, names[i])...)
		wantCode(t, r, exitOK)
		var st struct {
			Waiters []waiterJSON `json:"waiters"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &st), r.stdout)
		if assert.Len(t, st.Waiters, 1, "%s: status waiters\n%s", wt.kind, r.stdout) {
			assert.Equal(t, wt.owner, st.Waiters[0].Owner, "%s: status waiter", wt.kind)
			assert.Equal(t, wt.kind, st.Waiters[0].Kind, "%s: status waiter's kind", wt.kind)
		}
	}

	// top --once: one line per name, one waiter each.
	r := relock(t, "top", "--once", "--interval", "50ms", "--redis", srv.Addr, "--match", match)
	wantCode(t, r, exitOK)
	for i, wt := range waiters {
		tl, ok := topLineOf(t, r.stdout, names[i])
		if assert.True(t, ok, "top: no line for %s:\n%s", wt.kind, r.stdout) {
			assert.Equal(t, 1, tl.wait, "top: %s waiters", wt.kind)
			assert.Equal(t, topKind(wt.table), tl.kind, "top: %s kind", wt.kind)
		}
	}
	assert.Contains(t, r.stdout, fmt.Sprintf("%d names, %d waiting calls", len(names), len(names)))

	// The waits end: given what they wait for, or (the rate limiter's)
	// by their context.
	require.NoError(t, c.GetLock(names[0]).Unlock(holder))
	require.NoError(t, c.GetFencedLock(names[1]).Unlock(holder))
	require.NoError(t, c.GetFairLock(names[2]).Unlock(holder))
	require.NoError(t, c.GetSpinLock(spin).Unlock(holder))
	require.NoError(t, c.GetReadWriteLock(read).WriteLock().Unlock(holder))
	require.NoError(t, c.GetReadWriteLock(write).ReadLock().Unlock(holder))
	require.NoError(t, sem.Release(ctx, permit))
	require.NoError(t, counting.Release(ctx, 1))
	require.NoError(t, l.CountDown(ctx))
	for _, wt := range waiters {
		switch {
		case wt.proc != nil:
			wantCode(t, wt.proc.wait(30*time.Second), 0)
		case wt.kind != "rate_limiter":
			assert.NoError(t, relocktest.Receive(t, wt.done, 30*time.Second, wt.kind+"'s wait to end"), wt.kind)
		}
	}
	stop()
	require.Equal(t, "rate_limiter", waiters[8].kind)
	assert.ErrorIs(t, relocktest.Receive(t, waiters[8].done, 30*time.Second, "the rate limiter's wait to end"), context.Canceled)
	// Unlock what the in-process waiters took (their records are what
	// this test looks at, not their holds).
	own2 := func(kind string) context.Context { return rlock.WithOwner(ctx, "w-"+kind) }
	require.NoError(t, w.GetSpinLock(spin).Unlock(own2("spin")))
	require.NoError(t, w.GetReadWriteLock(read).ReadLock().Unlock(own2("read")))
	require.NoError(t, w.GetReadWriteLock(write).WriteLock().Unlock(own2("write")))

	relocktest.Eventually(t, 15*time.Second, "every record gone", func() bool {
		out, code, err := peekWaits(srv.Addr, "--match", match)
		return err == nil && code == exitOK && len(out.names) == 0
	})
	r = relock(t, "top", "--once", "--interval", "50ms", "--redis", srv.Addr, "--match", match)
	wantCode(t, r, exitOK)
	for i := range waiters {
		if tl, ok := topLineOf(t, r.stdout, names[i]); ok {
			assert.Equal(t, 0, tl.wait, "top after the waits: %s", names[i])
		}
	}
}

// TestWaitsRealCycle: two owners of two Clients, each holding one lock
// and waiting for the other's, make a real deadlock. With detection off
// nothing breaks it: waits flags it (exit 3) with both owners, and top
// shows both names with a waiter. With detection on (the default), one
// wait ends with ErrDeadlock, and once its caller releases, the other
// gets its lock and waits flags no cycle.
func TestWaitsRealCycle(t *testing.T) {
	srv := server(t)

	t.Run("detection off", func(t *testing.T) {
		c1 := relocktest.Client(t, rlock.WithDeadlockDetection(0))
		c2 := relocktest.Client(t, rlock.WithDeadlockDetection(0))
		names, match := testNames(t, 2)
		x, y := names[0], names[1]
		wctx, stop := context.WithCancel(t.Context())
		defer stop()
		a, b := rlock.WithOwner(wctx, "a"), rlock.WithOwner(wctx, "b")
		require.NoError(t, c1.GetLock(x).Lock(a))
		require.NoError(t, c2.GetReadWriteLock(y).WriteLock().Lock(b))
		aDone := waiting(t, func() error { return c1.GetReadWriteLock(y).WriteLock().Lock(a) })
		bDone := waiting(t, func() error { return c2.GetLock(x).Lock(b) })
		af, bf := layout.Field(c1.ID(), "a"), layout.Field(c2.ID(), "b")

		var out waitsOutput
		relocktest.Eventually(t, 30*time.Second, "the cycle flagged", func() bool {
			var code int
			var err error
			out, code, err = peekWaits(srv.Addr, "--match", match)
			return err == nil && code == exitCycle && len(out.cycles) == 1
		})
		out = runWaits(t, exitCycle, "--match", match)
		require.Len(t, out.cycles, 1, "cycles")
		want := []string{af, bf}
		if bf < af {
			want = []string{bf, af}
		}
		assert.Equal(t, want, out.cycles[0].Owners, "owners")
		for _, e := range out.cycles[0].Edges {
			switch e.Waiter {
			case af:
				assert.Equal(t, y, e.Name)
				assert.Equal(t, "write", e.Kind)
				assert.Equal(t, bf+":write", e.Holder)
			case bf:
				assert.Equal(t, x, e.Name)
				assert.Equal(t, "lock", e.Kind)
				assert.Equal(t, af, e.Holder)
			default:
				assert.Fail(t, "edge of no owner of the cycle", "%+v", e)
			}
		}
		assert.True(t, out.names[x].InCycle && out.names[y].InCycle, "in_cycle")
		for n, wf := range map[string]string{x: bf, y: af} {
			if assert.Len(t, out.names[n].Waiters, 1, "waiters of %s", n) {
				assert.Equal(t, wf, out.names[n].Waiters[0].Field, "the waiter of %s", n)
			}
		}

		r := relock(t, "top", "--once", "--interval", "50ms", "--redis", srv.Addr, "--match", match)
		wantCode(t, r, exitOK)
		for _, n := range names {
			tl, ok := topLineOf(t, r.stdout, n)
			if assert.True(t, ok, "top: no line for %s:\n%s", n, r.stdout) {
				assert.Equal(t, 1, tl.wait, "top: waiters of %s", n)
			}
		}
		assert.Contains(t, r.stdout, "2 names, 2 waiting calls, 1 cycle among them")

		stop()
		assert.ErrorIs(t, relocktest.Receive(t, aDone, 30*time.Second, "a's wait to end"), context.Canceled)
		assert.ErrorIs(t, relocktest.Receive(t, bDone, 30*time.Second, "b's wait to end"), context.Canceled)
		out = runWaits(t, exitOK, "--match", match)
		assert.Empty(t, out.cycles, "cycles after the waits ended")
		for n, got := range out.names {
			assert.Empty(t, got.Waiters, "waiters of %s after the waits ended", n)
		}
	})

	t.Run("detection on", func(t *testing.T) {
		c1, c2 := relocktest.Client(t), relocktest.Client(t)
		names, match := testNames(t, 2)
		x, y := names[0], names[1]
		ctx := t.Context()
		a, b := rlock.WithOwner(ctx, "a"), rlock.WithOwner(ctx, "b")
		require.NoError(t, c1.GetLock(x).Lock(a))
		require.NoError(t, c2.GetFencedLock(y).Lock(b))
		start := time.Now()
		aDone := waiting(t, func() error { return c1.GetFencedLock(y).Lock(a) })
		bDone := waiting(t, func() error { return c2.GetLock(x).Lock(b) })

		// Exactly one wait ends, with ErrDeadlock; its caller releases
		// what it holds, and the other wait gets it.
		var victim string
		var errV error
		select {
		case errV = <-aDone:
			victim = "a"
		case errV = <-bDone:
			victim = "b"
		case <-time.After(30 * time.Second):
			require.FailNow(t, "no wait of the cycle ended")
		}
		took := time.Since(start)
		require.ErrorIs(t, errV, rlock.ErrDeadlock, "the victim's error")
		assert.Contains(t, errV.Error(), x, "the error names the cycle")
		assert.Contains(t, errV.Error(), y, "the error names the cycle")
		t.Logf("victim %s after %v: %v", victim, took, errV)
		var rest <-chan error
		switch victim {
		case "a":
			require.NoError(t, c1.GetLock(x).Unlock(a))
			rest = bDone
		case "b":
			require.NoError(t, c2.GetFencedLock(y).Unlock(b))
			rest = aDone
		}
		require.NoError(t, relocktest.Receive(t, rest, 30*time.Second, "the other wait to end"), "the other wait")

		out := runWaits(t, exitOK, "--match", match)
		assert.Empty(t, out.cycles, "cycles after the victim released")
		for n, got := range out.names {
			assert.Empty(t, got.Waiters, "waiters of %s", n)
		}
		switch victim {
		case "a":
			require.NoError(t, c2.GetLock(x).Unlock(b))
			require.NoError(t, c2.GetFencedLock(y).Unlock(b))
		case "b":
			require.NoError(t, c1.GetFencedLock(y).Unlock(a))
			require.NoError(t, c1.GetLock(x).Unlock(a))
		}
	})
}
