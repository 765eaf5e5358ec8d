package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/internal/waitrec"
	"github.com/relock-go/relock/rlock"
)

// waitsName mirrors a "name" line of waits --json; its tags are the
// stable field names.
type waitsName struct {
	Type    string `json:"type"`
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	Mode    string `json:"mode"`
	Holders []struct {
		Field     string `json:"field"`
		ClientID  string `json:"client_id"`
		Owner     string `json:"owner"`
		HoldCount int64  `json:"hold_count"`
		Mode      string `json:"mode"`
	} `json:"holders"`
	Available     *int64       `json:"available"`
	Count         *int64       `json:"count"`
	Waiters       []waiterJSON `json:"waiters"`
	LongestWaitMs int64        `json:"longest_wait_ms"`
	InCycle       bool         `json:"in_cycle"`
	Error         string       `json:"error"`
}

// waiterJSON mirrors an element of waiters[] (waits and status).
type waiterJSON struct {
	Field     string `json:"field"`
	ClientID  string `json:"client_id"`
	Owner     string `json:"owner"`
	Kind      string `json:"kind"`
	SinceMs   int64  `json:"since_ms"`
	WaitingMs int64  `json:"waiting_ms"`
}

// waitsCycle mirrors a "cycle" line of waits --json.
type waitsCycle struct {
	Type   string   `json:"type"`
	Owners []string `json:"owners"`
	Edges  []struct {
		Waiter string `json:"waiter"`
		Name   string `json:"name"`
		Kind   string `json:"kind"`
		Holder string `json:"holder"`
	} `json:"edges"`
}

// waitsOutput is what waits --json printed.
type waitsOutput struct {
	names  map[string]waitsName
	cycles []waitsCycle
}

// runWaits runs waits --json with args and decodes its lines, refusing
// fields the usage text does not list.
func runWaits(t *testing.T, wantExit int, args ...string) waitsOutput {
	t.Helper()
	r := relock(t, append([]string{"waits", "--json", "--redis", server(t).Addr}, args...)...)
	wantCode(t, r, wantExit)
	out := waitsOutput{names: map[string]waitsName{}}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if line == "" {
			continue
		}
		var head struct {
			Type string `json:"type"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &head), line)
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		switch head.Type {
		case "name":
			var n waitsName
			require.NoError(t, dec.Decode(&n), line)
			out.names[n.Name] = n
		case "cycle":
			var c waitsCycle
			require.NoError(t, dec.Decode(&c), line)
			out.cycles = append(out.cycles, c)
		default:
			require.Failf(t, "unknown line", "%s", line)
		}
	}
	return out
}

// recordWait writes a wait record as a Client with ID clientID (under the
// key prefix prefix) does: owner waits (a wait of kind) for name since ago
// on the server's clock. The record goes when t ends.
func recordWait(t *testing.T, prefix, clientID, owner, name, kind string, ago time.Duration) {
	t.Helper()
	rdb := relocktest.Raw(t)
	key := waitrec.Key(prefix, clientID)
	rec := waitrec.Record{Owner: layout.Field(clientID, owner), Name: name, Kind: kind,
		Since: serverMs(t, server(t)) - ago.Milliseconds()}
	id := fmt.Sprintf("%d", time.Now().UnixNano())
	require.NoError(t, rdb.Do(t.Context(), rdb.B().Hset().Key(key).FieldValue().FieldValue(id, rec.Encode()).Build()).Error())
	require.NoError(t, rdb.Do(t.Context(), rdb.B().Pexpire().Key(key).Milliseconds(time.Minute.Milliseconds()).Build()).Error())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = rdb.Do(ctx, rdb.B().Hdel().Key(key).Field(id).Build()).Error()
	})
}

// testNames are n names under one pattern, and the pattern.
func testNames(t *testing.T, n int) ([]string, string) {
	var names []string
	for range n {
		names = append(names, relocktest.Name(t))
	}
	base := strings.NewReplacer("/", ":", " ", "_").Replace(t.Name())
	return names, "relock-test:" + base + ":*"
}

// TestWaitsEveryKind: waits shows, for a name of every kind waited for,
// what is held under it (by the library) and the waiter its record names.
func TestWaitsEveryKind(t *testing.T) {
	c := relocktest.Client(t)
	ctx := t.Context()
	holder := rlock.WithOwner(ctx, "holder")
	names, match := testNames(t, 10)
	type tc struct {
		kind  string // the waiter's
		setup func(name string)
		want  layout.Kind
	}
	cases := []tc{
		{"lock", func(n string) { require.NoError(t, c.GetLock(n).Lock(holder)) }, layout.KindLock},
		{"fenced", func(n string) { require.NoError(t, c.GetFencedLock(n).Lock(holder)) }, layout.KindFenced},
		{"fair", func(n string) { require.NoError(t, c.GetFairLock(n).Lock(holder)) }, layout.KindLock}, // no queue: a lock
		{"spin", func(n string) { require.NoError(t, c.GetSpinLock(n).Lock(holder)) }, layout.KindLock},
		{"read", func(n string) { require.NoError(t, c.GetReadWriteLock(n).WriteLock().Lock(holder)) }, layout.KindRWLock},
		{"write", func(n string) { require.NoError(t, c.GetReadWriteLock(n).ReadLock().Lock(holder)) }, layout.KindRWLock},
		{"semaphore", func(n string) {
			s := c.GetSemaphore(n)
			_, err := s.TrySetPermits(ctx, 1)
			require.NoError(t, err)
			_, err = s.Acquire(holder, time.Minute)
			require.NoError(t, err)
		}, layout.KindSemaphore},
		{"counting_semaphore", func(n string) {
			_, err := c.GetCountingSemaphore(n).TrySetPermits(ctx, 0)
			require.NoError(t, err)
		}, layout.KindCountingSemaphore},
		{"rate_limiter", func(n string) {
			l := c.GetRateLimiter(n)
			_, err := l.TrySetRate(ctx, 1, time.Hour)
			require.NoError(t, err)
			require.NoError(t, l.Acquire(ctx, 1))
		}, layout.KindRateLimiter},
		{"latch", func(n string) {
			_, err := c.GetCountDownLatch(n).TrySetCount(ctx, 2)
			require.NoError(t, err)
		}, layout.KindLatch},
	}
	for i, tc := range cases {
		tc.setup(names[i])
		recordWait(t, "", c.ID(), "waiter-"+tc.kind, names[i], tc.kind, time.Duration(i+1)*time.Second)
	}

	out := runWaits(t, exitOK, "--match", match)
	require.Len(t, out.names, len(cases), "names")
	assert.Empty(t, out.cycles, "cycles")
	for i, tc := range cases {
		n, ok := out.names[names[i]]
		if !assert.True(t, ok, "%s: no line for %s", tc.kind, names[i]) {
			continue
		}
		assert.Equal(t, string(tc.want), n.Kind, "%s: kind", tc.kind)
		if assert.Len(t, n.Waiters, 1, "%s: waiters", tc.kind) {
			w := n.Waiters[0]
			assert.Equal(t, c.ID()+":waiter-"+tc.kind, w.Field, "%s: waiter", tc.kind)
			assert.Equal(t, c.ID(), w.ClientID, "%s: client_id", tc.kind)
			assert.Equal(t, "waiter-"+tc.kind, w.Owner, "%s: owner", tc.kind)
			assert.Equal(t, tc.kind, w.Kind, "%s: kind waited for", tc.kind)
			assert.GreaterOrEqual(t, w.WaitingMs, int64(i+1)*1000, "%s: waiting_ms", tc.kind)
			assert.Less(t, w.WaitingMs, int64(i+1)*1000+30_000, "%s: waiting_ms", tc.kind)
			assert.Equal(t, w.WaitingMs, n.LongestWaitMs, "%s: longest_wait_ms", tc.kind)
		}
		switch tc.kind {
		case "lock", "fenced", "fair", "spin":
			if assert.Len(t, n.Holders, 1, "%s: holders", tc.kind) {
				assert.Equal(t, c.ID()+":holder", n.Holders[0].Field, "%s: holder", tc.kind)
				assert.Equal(t, int64(1), n.Holders[0].HoldCount)
			}
		case "read":
			assert.Equal(t, "write", n.Mode)
			if assert.Len(t, n.Holders, 1, "%s: holders", tc.kind) {
				assert.Equal(t, c.ID()+":holder:write", n.Holders[0].Field)
				assert.Equal(t, "write", n.Holders[0].Mode)
			}
		case "write":
			assert.Equal(t, "read", n.Mode)
			if assert.Len(t, n.Holders, 1, "%s: holders", tc.kind) {
				assert.Equal(t, c.ID()+":holder", n.Holders[0].Field)
				assert.Equal(t, "read", n.Holders[0].Mode)
			}
		case "semaphore", "counting_semaphore", "rate_limiter":
			if assert.NotNil(t, n.Available, "%s: available", tc.kind) {
				assert.Equal(t, int64(0), *n.Available, "%s: available", tc.kind)
			}
		case "latch":
			if assert.NotNil(t, n.Count, "latch: count") {
				assert.Equal(t, int64(2), *n.Count)
			}
		}
	}

	// The text form names every waiter.
	r := relock(t, "waits", "--redis", server(t).Addr, "--match", match)
	wantCode(t, r, exitOK)
	for _, tc := range cases {
		assert.Contains(t, r.stdout, c.ID()+":waiter-"+tc.kind+"  "+tc.kind+"  waiting ", "text")
	}
	assert.Contains(t, r.stdout, "10 waiting calls for 10 names on 1 node(s), 0 cycles")

	// So does top, one line per name.
	r = relock(t, "top", "--once", "--interval", "50ms", "--redis", server(t).Addr, "--match", match)
	wantCode(t, r, exitOK)
	for i, tc := range cases {
		l, ok := topLineOf(t, r.stdout, names[i])
		if assert.True(t, ok, "top: no line for %s:\n%s", tc.kind, r.stdout) {
			assert.Equal(t, 1, l.wait, "top: %s waiters", tc.kind)
			assert.Equal(t, topKind(tc.want), l.kind, "top: %s kind", tc.kind)
		}
	}

	// status shows the waiters of every kind too.
	for i, tc := range cases {
		kind := map[string]string{"latch": "latch", "counting_semaphore": "counting"}[tc.kind]
		args := []string{"status", "--json", "--redis", server(t).Addr}
		if kind != "" {
			args = append(args, "--kind", kind)
		}
		r := relock(t, append(args, names[i])...)
		wantCode(t, r, exitOK)
		var st struct {
			Waiters []waiterJSON `json:"waiters"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &st), r.stdout)
		if assert.Len(t, st.Waiters, 1, "%s: status waiters\n%s", tc.kind, r.stdout) {
			assert.Equal(t, c.ID()+":waiter-"+tc.kind, st.Waiters[0].Field, "%s: status waiter", tc.kind)
			assert.Equal(t, tc.kind, st.Waiters[0].Kind, "%s: status waiter's kind", tc.kind)
			assert.GreaterOrEqual(t, st.Waiters[0].WaitingMs, int64(i+1)*1000)
		}
		r = relock(t, append(args[:1], append(args[2:], names[i])...)...)
		wantCode(t, r, exitOK)
		assert.Contains(t, r.stdout, "waiting: 1 call, longest first\n  "+c.ID()+":waiter-"+tc.kind+"  "+tc.kind+"  waiting ", "status text")
	}
}

// TestWaitsCycles: owners of two Clients that hold one lock each and wait
// for the other's are flagged as a cycle (exit 3), across kinds; so are a
// ring of three and an owner that holds a read lock and waits for the
// write lock of the name; a chain that ends at an owner that waits for
// nothing is none.
func TestWaitsCycles(t *testing.T) {
	c1, c2, c3 := relocktest.Client(t), relocktest.Client(t), relocktest.Client(t)
	own := func(c *rlock.Client, o string) context.Context { return rlock.WithOwner(t.Context(), o) }
	field := func(c *rlock.Client, o string) string { return layout.Field(c.ID(), o) }

	t.Run("two owners", func(t *testing.T) {
		names, match := testNames(t, 2)
		x, y := names[0], names[1]
		require.NoError(t, c1.GetLock(x).Lock(own(c1, "a")))
		require.NoError(t, c2.GetReadWriteLock(y).WriteLock().Lock(own(c2, "b")))
		recordWait(t, "", c1.ID(), "a", y, "read", 2*time.Second)
		out := runWaits(t, exitOK, "--match", match) // one edge: no ring yet
		assert.Empty(t, out.cycles)
		recordWait(t, "", c2.ID(), "b", x, "lock", time.Second)
		out = runWaits(t, exitCycle, "--match", match)
		require.Len(t, out.cycles, 1, "cycles")
		cy := out.cycles[0]
		assert.Equal(t, "cycle", cy.Type)
		a, b := field(c1, "a"), field(c2, "b")
		want := []string{a, b}
		if b < a {
			want = []string{b, a}
		}
		assert.Equal(t, want, cy.Owners, "owners")
		require.Len(t, cy.Edges, 2)
		for _, e := range cy.Edges {
			switch e.Waiter {
			case a:
				assert.Equal(t, y, e.Name)
				assert.Equal(t, "read", e.Kind)
				assert.Equal(t, b+":write", e.Holder)
			case b:
				assert.Equal(t, x, e.Name)
				assert.Equal(t, "lock", e.Kind)
				assert.Equal(t, a, e.Holder)
			default:
				assert.Fail(t, "edge of no owner of the cycle", "%+v", e)
			}
		}
		assert.True(t, out.names[x].InCycle && out.names[y].InCycle, "in_cycle")

		r := relock(t, "waits", "--redis", server(t).Addr, "--match", match)
		wantCode(t, r, exitCycle)
		assert.Contains(t, r.stdout, "CYCLE (a deadlock) of 2 owners:\n")
		assert.Contains(t, r.stdout, "  "+a+" waits (read) for "+y+", held by "+b+":write\n")
		assert.Contains(t, r.stdout, "  "+b+" waits (lock) for "+x+", held by "+a+"\n")

		r = relock(t, "top", "--once", "--interval", "50ms", "--redis", server(t).Addr, "--match", match)
		wantCode(t, r, exitOK)
		assert.Contains(t, r.stdout, "2 names, 2 waiting calls, 1 cycle among them")
	})

	t.Run("three owners", func(t *testing.T) {
		names, match := testNames(t, 3)
		holders := []*rlock.Client{c1, c2, c3}
		for i, n := range names {
			require.NoError(t, holders[i].GetFencedLock(n).Lock(own(holders[i], "o")))
		}
		// o of c1 waits for names[1] (c2's), c2's for names[2], c3's for names[0].
		recordWait(t, "", c1.ID(), "o", names[1], "fenced", time.Second)
		recordWait(t, "", c2.ID(), "o", names[2], "fenced", time.Second)
		out := runWaits(t, exitOK, "--match", match) // a chain
		assert.Empty(t, out.cycles)
		recordWait(t, "", c3.ID(), "o", names[0], "fenced", time.Second)
		out = runWaits(t, exitCycle, "--match", match)
		require.Len(t, out.cycles, 1)
		assert.Len(t, out.cycles[0].Owners, 3)
		assert.Len(t, out.cycles[0].Edges, 3)
	})

	t.Run("read to write upgrade", func(t *testing.T) {
		names, match := testNames(t, 1)
		rw := c1.GetReadWriteLock(names[0])
		require.NoError(t, rw.ReadLock().Lock(own(c1, "u")))
		recordWait(t, "", c1.ID(), "u", names[0], "write", time.Second)
		out := runWaits(t, exitCycle, "--match", match)
		require.Len(t, out.cycles, 1)
		assert.Equal(t, []string{field(c1, "u")}, out.cycles[0].Owners)
	})

	// A writer that also holds the read lock gets the write lock again:
	// no cycle.
	t.Run("writer that reads", func(t *testing.T) {
		names, match := testNames(t, 1)
		rw := c1.GetReadWriteLock(names[0])
		require.NoError(t, rw.WriteLock().Lock(own(c1, "w")))
		require.NoError(t, rw.ReadLock().Lock(own(c1, "w")))
		recordWait(t, "", c1.ID(), "w", names[0], "write", time.Second)
		out := runWaits(t, exitOK, "--match", match)
		assert.Empty(t, out.cycles)
	})
}

// TestWaitsPrefix: under --prefix P, waits shows the names under P
// without it, whichever Client's hash keeps the record.
func TestWaitsPrefix(t *testing.T) {
	name := prefixedName(t, "app1:")
	c := relocktest.Client(t, rlock.WithKeyPrefix("app1:"))
	require.NoError(t, c.GetLock(name).Lock(rlock.WithOwner(t.Context(), "h")))
	recordWait(t, "app1:", c.ID(), "w", "app1:"+name, "lock", time.Second)

	out := runWaits(t, exitOK, "--prefix", "app1:", "--match", name)
	n, ok := out.names[name]
	require.True(t, ok, "no line for %s: %v", name, out.names)
	assert.Equal(t, c.ID()+":h", n.Holders[0].Field)
	assert.Equal(t, c.ID()+":w", n.Waiters[0].Field)

	out = runWaits(t, exitOK, "--match", "app1:"+name) // whole, without --prefix
	assert.Contains(t, out.names, "app1:"+name)
	out = runWaits(t, exitOK, "--prefix", "app2:", "--match", name)
	assert.Empty(t, out.names)

	r := relock(t, "status", "--json", "--prefix", "app1:", "--redis", server(t).Addr, name)
	wantCode(t, r, exitOK)
	assert.Contains(t, r.stdout, `"field": "`+c.ID()+`:w"`)

	r = relock(t, "top", "--once", "--interval", "50ms", "--prefix", "app1:", "--redis", server(t).Addr, "--match", name)
	wantCode(t, r, exitOK)
	l, ok := topLineOf(t, r.stdout, name)
	require.True(t, ok, "top --prefix shows the name without the prefix:\n%s", r.stdout)
	assert.Equal(t, 1, l.wait)

	// A name with waiters and nothing under it: no such lock, but
	// status says that someone waits.
	free := prefixedName(t)
	recordWait(t, "", c.ID(), "w2", free, "semaphore", time.Second)
	r = relock(t, "status", "--redis", server(t).Addr, free)
	wantCode(t, r, exitNoSuchLock)
	assert.Contains(t, r.stderr, "yet a call waits for it")
}

// libraryRecordsWaits reports whether the library writes wait records:
// whether rlock depends on internal/waitrec.
// TestWaitsRealWaiters: relock run --wait processes that wait for a lock
// and a fair lock held by the test are shown by waits, status and top,
// from the records their Clients write; their records go when their
// waits end.
func TestWaitsRealWaiters(t *testing.T) {
	srv := server(t)
	c := relocktest.Client(t)
	names, match := testNames(t, 2)
	holder := rlock.WithOwner(t.Context(), "holder")
	require.NoError(t, c.GetLock(names[0]).Lock(holder))
	require.NoError(t, c.GetFairLock(names[1]).Lock(holder))
	p1 := startRelock(t, "run", "--redis", srv.Addr, "--wait", "1m", names[0], "--", "true")
	p2 := startRelock(t, "run", "--redis", srv.Addr, "--wait", "1m", "--fair", names[1], "--", "true")
	host, err := os.Hostname()
	require.NoError(t, err)
	want := map[string]struct{ owner, kind string }{
		names[0]: {fmt.Sprintf("run:%s:%d", host, p1.cmd.Process.Pid), "lock"},
		names[1]: {fmt.Sprintf("run:%s:%d", host, p2.cmd.Process.Pid), "fair"},
	}
	var out waitsOutput
	waitUntil(t, 15*time.Second, "both waiters recorded", func() (bool, error) {
		out = runWaits(t, exitOK, "--match", match)
		for n, w := range want {
			got := out.names[n]
			if len(got.Waiters) != 1 || got.Waiters[0].Owner != w.owner {
				return false, nil
			}
		}
		return true, nil
	}, p1.describe, p2.describe)
	for n, w := range want {
		assert.Equal(t, w.kind, out.names[n].Waiters[0].Kind, "the kind %s's waiter waits for", n)
		assert.Equal(t, c.ID()+":holder", out.names[n].Holders[0].Field, "the holder of %s", n)
	}
	var st struct {
		Waiters []waiterJSON `json:"waiters"`
	}
	r := relock(t, "status", "--json", "--redis", srv.Addr, names[0])
	wantCode(t, r, exitOK)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	if assert.Len(t, st.Waiters, 1, "status waiters") {
		assert.Equal(t, want[names[0]].owner, st.Waiters[0].Owner)
	}
	r = relock(t, "top", "--once", "--interval", "100ms", "--redis", srv.Addr, "--match", match)
	wantCode(t, r, exitOK)
	l, ok := topLineOf(t, r.stdout, names[0])
	require.True(t, ok, r.stdout)
	assert.Equal(t, 1, l.wait)

	require.NoError(t, c.GetLock(names[0]).Unlock(holder))
	require.NoError(t, c.GetFairLock(names[1]).Unlock(holder))
	wantCode(t, p1.wait(30*time.Second), 0)
	wantCode(t, p2.wait(30*time.Second), 0)
	out = runWaits(t, exitOK, "--match", match)
	assert.Empty(t, out.names, "waits after the waits ended")
}
