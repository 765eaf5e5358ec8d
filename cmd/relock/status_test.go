package main

import (
	"context"
	"encoding/json"
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

// statusJSON mirrors the documented output of status --json for a lock;
// its tags are the stable field names.
type statusJSON struct {
	Name             string `json:"name"`
	Kind             string `json:"kind"`
	Locked           bool   `json:"locked"`
	LeaseRemainingMs int64  `json:"lease_remaining_ms"`
	Holders          []struct {
		Field     string `json:"field"`
		ClientID  string `json:"client_id"`
		Owner     string `json:"owner"`
		HoldCount int64  `json:"hold_count"`
	} `json:"holders"`
	Queue []struct {
		Position    int    `json:"position"`
		Field       string `json:"field"`
		ClientID    string `json:"client_id"`
		Owner       string `json:"owner"`
		DeadlineMs  *int64 `json:"deadline_ms"`
		RemainingMs *int64 `json:"remaining_ms"`
	} `json:"queue"`
	FencingCounter *int64       `json:"fencing_counter"`
	ServerTimeMs   int64        `json:"server_time_ms"`
	Waiters        []waiterJSON `json:"waiters"`
	Keys           struct {
		Lock    string `json:"lock"`
		Queue   string `json:"queue"`
		Timeout string `json:"timeout"`
		Token   string `json:"token"`
		Channel string `json:"channel"`
	} `json:"keys"`
}

// status runs status --json on a lock and decodes it.
func status(t *testing.T, addr, name string) statusJSON {
	t.Helper()
	var st statusJSON
	statusOf(t, addr, name, &st)
	return st
}

// statusOf runs status --json (with args before NAME) and decodes it,
// refusing fields the documentation does not list.
func statusOf(t *testing.T, addr, name string, v any, args ...string) {
	t.Helper()
	r := relock(t, append(append([]string{"status", "--json", "--redis", addr}, args...), name)...)
	wantCode(t, r, 0)
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(v), "status --json:\n%s", r.stdout)
}

// queueWaiter has a waiter of c queue for the fair lock name, and waits
// until it has; the waiter leaves when the test ends.
func queueWaiter(t *testing.T, c *rlock.Client, name, owner string) {
	t.Helper()
	ctx, cancel := context.WithCancel(rlock.WithOwner(t.Context(), owner))
	waited := make(chan error, 1)
	go func() { waited <- c.GetFairLock(name).Lock(ctx) }()
	t.Cleanup(func() {
		cancel()
		assert.ErrorIs(t, <-waited, rlock.ErrNotAcquired, "the waiter's Lock")
	})
	rdb := relocktest.Raw(t)
	waitUntil(t, 10*time.Second, "the waiter to queue", func() (bool, error) {
		n, err := rdb.Do(t.Context(), rdb.B().Llen().Key(layout.Queue(name)).Build()).AsInt64()
		return n >= 1, err
	})
}

// TestStatusHolderAndQueue holds a fair lock twice (hold count 2) with one
// client and queues a waiter with another, then checks what status shows.
func TestStatusHolderAndQueue(t *testing.T) {
	srv := server(t)
	c1, c2 := relocktest.Client(t), relocktest.Client(t)
	name := relocktest.Name(t)
	holder := rlock.WithOwner(t.Context(), "holder")
	l := c1.GetFairLock(name)
	for range 2 {
		require.NoError(t, l.Lock(holder))
	}
	t.Cleanup(func() { _, _ = l.ForceUnlock(context.Background()) })
	queueWaiter(t, c2, name, "waiter")

	st := status(t, srv.Addr, name)
	assert.Equal(t, name, st.Name, "name")
	assert.Equal(t, "fair", st.Kind, "kind")
	assert.True(t, st.Locked, "locked")
	assert.True(t, st.LeaseRemainingMs > 0 && st.LeaseRemainingMs <= 30_000, "lease_remaining_ms %d, want in (0, 30000]", st.LeaseRemainingMs)
	require.Len(t, st.Holders, 1, "holders")
	h := st.Holders[0]
	assert.Equal(t, c1.ID()+":holder", h.Field, "holder's field")
	assert.Equal(t, c1.ID(), h.ClientID, "holder's client")
	assert.Equal(t, "holder", h.Owner, "holder's owner")
	assert.EqualValues(t, 2, h.HoldCount, "hold count")
	require.Len(t, st.Queue, 1, "queue")
	w := st.Queue[0]
	assert.Equal(t, 1, w.Position, "waiter's position")
	assert.Equal(t, c2.ID()+":waiter", w.Field, "waiter's field")
	assert.Equal(t, "waiter", w.Owner, "waiter's owner")
	require.NotNil(t, w.DeadlineMs, "waiter's deadline")
	require.NotNil(t, w.RemainingMs, "waiter's time left")
	assert.Positive(t, *w.RemainingMs, "waiter's time left")
	assert.Equal(t, *w.RemainingMs, *w.DeadlineMs-st.ServerTimeMs, "deadline_ms - server_time_ms = remaining_ms")
	assert.Nil(t, st.FencingCounter, "fencing_counter")
	assert.Equal(t, layout.Queue(name), st.Keys.Queue, "keys.queue")
	assert.Equal(t, name, st.Keys.Lock, "keys.lock")

	r := relock(t, "status", "--redis", srv.Addr, name)
	wantCode(t, r, 0)
	for _, want := range []string{"fair lock", "held", c1.ID() + ":holder", "hold count 2", "1. " + c2.ID() + ":waiter", "deadline in"} {
		assert.Contains(t, r.stdout, want, "status output")
	}
	assert.NotContains(t, r.stdout, "fencing counter", "status output of a fair lock")
}

func TestStatusFencingCounter(t *testing.T) {
	srv := server(t)
	c := relocktest.Client(t)
	name := relocktest.Name(t)
	l := c.GetFencedLock(name)
	token, err := l.LockAndGetToken(t.Context())
	require.NoError(t, err)
	require.NoError(t, l.Unlock(t.Context()))
	st := status(t, srv.Addr, name)
	assert.Equal(t, "fenced", st.Kind, "kind")
	assert.False(t, st.Locked, "locked")
	assert.Zero(t, st.LeaseRemainingMs, "lease_remaining_ms of a free lock")
	assert.Empty(t, st.Holders, "holders")
	assert.Equal(t, &token, st.FencingCounter, "fencing_counter")

	r := relock(t, "status", "--redis", srv.Addr, name)
	wantCode(t, r, 0)
	assert.Contains(t, r.stdout, "fenced lock", "status output")
	assert.Contains(t, r.stdout, "fencing counter: ", "status output")
	assert.NotContains(t, r.stdout, "fair queue", "status output of a fenced lock")
}

// TestStatusSections: each kind of lock prints only its own sections.
func TestStatusSections(t *testing.T) {
	srv := server(t)
	c := relocktest.Client(t)
	a := rlock.WithOwner(t.Context(), "a")

	plain := relocktest.Name(t) + ":plain"
	require.NoError(t, c.GetLock(plain).Lock(a))
	t.Cleanup(func() { _ = c.GetLock(plain).Unlock(a) })
	r := relock(t, "status", "--redis", srv.Addr, plain)
	wantCode(t, r, 0)
	assert.Equal(t, []string{
		`lock "` + plain + `": held, lease `,
		"  holder " + c.ID() + ":a  hold count 1",
	}, firstWords(r.stdout), "status of a plain lock")

	fair := relocktest.Name(t) + ":fair"
	require.NoError(t, c.GetFairLock(fair).Lock(a))
	t.Cleanup(func() { _ = c.GetFairLock(fair).Unlock(a) })
	queueWaiter(t, relocktest.Client(t), fair, "b")
	r = relock(t, "status", "--redis", srv.Addr, fair)
	wantCode(t, r, 0)
	lines := firstWords(r.stdout)
	if len(lines) == 6 { // the waiter's record, where its Client keeps one
		assert.Equal(t, "waiting: 1 call, longest first", lines[4], "status of a fair lock:\n%s", r.stdout)
		assert.Contains(t, lines[5], ":b  fair  waiting ", "status of a fair lock:\n%s", r.stdout)
		lines = lines[:4]
	}
	require.Len(t, lines, 4, "status of a fair lock:\n%s", r.stdout)
	assert.Equal(t, `fair lock "`+fair+`": held, lease `, lines[0])
	assert.Equal(t, "fair queue: 1 waiting, head first", lines[2])
}

// firstWords is out's lines, each cut after "lease " (what follows is a
// time that changes).
func firstWords(out string) []string {
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	for i, l := range lines {
		if before, _, ok := strings.Cut(l, "lease "); ok {
			lines[i] = before + "lease "
		}
	}
	return lines
}

// TestStatusNoSuchLock: a name with no key of any kind is no lock; it
// gets a message and an exit code of its own, distinct from a free
// lock's.
func TestStatusNoSuchLock(t *testing.T) {
	srv := server(t)
	c := relocktest.Client(t)
	name := relocktest.Name(t)
	for _, args := range [][]string{nil, {"--json"}, {"--kind", "lock"}, {"--kind", "latch"}} {
		r := relock(t, append(append([]string{"status", "--redis", srv.Addr}, args...), name)...)
		wantCode(t, r, exitNoSuchLock)
		assert.Empty(t, r.stdout, "stdout with %q", args)
		wantOneLine(t, r, "no such lock", name)
	}

	// A free lock that keeps a key (here its fencing counter) is there.
	l := c.GetFencedLock(name)
	require.NoError(t, l.Lock(t.Context()))
	require.NoError(t, l.Unlock(t.Context()))
	r := relock(t, "status", "--redis", srv.Addr, name)
	wantCode(t, r, exitOK)
	assert.Contains(t, r.stdout, "free", "status of a free fenced lock")
}

func TestStatusNotALock(t *testing.T) {
	srv := server(t)
	name := relocktest.Name(t)
	_, err := srv.Do(t.Context(), "SET", name, "x")
	require.NoError(t, err)
	wantCode(t, relock(t, "status", "--redis", srv.Addr, name), exitFailure)
	r := relock(t, "unlock", "--force", "--redis", srv.Addr, name)
	wantCode(t, r, exitFailure)
	v, err := srv.Do(t.Context(), "GET", name)
	require.NoError(t, err)
	got, err := v.ToString()
	require.NoError(t, err, "unlock --force deleted a key that is not a lock")
	assert.Equal(t, "x", got, "the key's value")

	_, err = srv.Do(t.Context(), "RPUSH", name+":list", "x")
	require.NoError(t, err)
	wantCode(t, relock(t, "status", "--redis", srv.Addr, name+":list"), exitFailure)
}

type rwJSON struct {
	Name             string `json:"name"`
	Kind             string `json:"kind"`
	Locked           bool   `json:"locked"`
	Mode             string `json:"mode"`
	LeaseRemainingMs int64  `json:"lease_remaining_ms"`
	Writer           *struct {
		Field     string `json:"field"`
		ClientID  string `json:"client_id"`
		Owner     string `json:"owner"`
		HoldCount int64  `json:"hold_count"`
	} `json:"writer"`
	Readers []struct {
		Field     string `json:"field"`
		ClientID  string `json:"client_id"`
		Owner     string `json:"owner"`
		HoldCount int64  `json:"hold_count"`
		Levels    []struct {
			Level       int    `json:"level"`
			Key         string `json:"key"`
			RemainingMs int64  `json:"remaining_ms"`
		} `json:"levels"`
	} `json:"readers"`
	Waiters []waiterJSON `json:"waiters"`
	Keys    struct {
		Lock    string `json:"lock"`
		Channel string `json:"channel"`
	} `json:"keys"`
}

// TestStatusReadWriteLock: a writer that also reads, then two readers.
func TestStatusReadWriteLock(t *testing.T) {
	srv := server(t)
	c := relocktest.Client(t)
	name := relocktest.Name(t)
	w := rlock.WithOwner(t.Context(), "w")
	rw := c.GetReadWriteLock(name)
	require.NoError(t, rw.WriteLock().Lock(w))
	require.NoError(t, rw.ReadLock().Lock(w))
	var st rwJSON
	statusOf(t, srv.Addr, name, &st)
	assert.Equal(t, "rwlock", st.Kind, "kind")
	assert.True(t, st.Locked, "locked")
	assert.Equal(t, "write", st.Mode, "mode")
	assert.Positive(t, st.LeaseRemainingMs, "lease_remaining_ms")
	if assert.NotNil(t, st.Writer, "writer") {
		assert.Equal(t, "w", st.Writer.Owner, "writer's owner")
		assert.Equal(t, c.ID(), st.Writer.ClientID, "writer's client")
		assert.EqualValues(t, 1, st.Writer.HoldCount, "writer's hold count")
	}
	if assert.Len(t, st.Readers, 1, "readers: the writer's read level") {
		assert.Equal(t, "w", st.Readers[0].Owner, "reader")
		if assert.Len(t, st.Readers[0].Levels, 1, "reader's levels") {
			assert.Positive(t, st.Readers[0].Levels[0].RemainingMs, "level 1's lease")
		}
	}
	assert.Equal(t, "redisson_rwlock:{"+name+"}", st.Keys.Channel, "keys.channel")
	require.NoError(t, rw.WriteLock().Unlock(w))

	r := rlock.WithOwner(t.Context(), "r")
	require.NoError(t, rw.ReadLock().Lock(r))
	require.NoError(t, rw.ReadLock().Lock(r))
	st = rwJSON{}
	statusOf(t, srv.Addr, name, &st)
	assert.Equal(t, "read", st.Mode, "mode")
	assert.Nil(t, st.Writer, "writer")
	require.Len(t, st.Readers, 2, "readers")
	rr := st.Readers[0]
	assert.Equal(t, "r", rr.Owner, "first reader")
	assert.EqualValues(t, 2, rr.HoldCount, "r's hold count")
	if assert.Len(t, rr.Levels, 2, "r's levels") {
		assert.Equal(t, "{"+name+"}:"+c.ID()+":r:rwlock_timeout:2", rr.Levels[1].Key, "level 2's key")
	}
	out := relock(t, "status", "--redis", srv.Addr, name)
	wantCode(t, out, 0)
	for _, want := range []string{"read mode", "reader " + c.ID() + ":r  hold count 2", "level 2:"} {
		assert.Contains(t, out.stdout, want, "status output")
	}
	wantCode(t, relock(t, "status", "--kind", "lock", "--redis", srv.Addr, name), exitFailure)
	_ = rw.ReadLock().Unlock(r)
	_ = rw.ReadLock().Unlock(r)
	_ = rw.ReadLock().Unlock(w)
}

type semJSON struct {
	Name      string `json:"name"`
	Kind      string `json:"kind"`
	Set       bool   `json:"set"`
	Available int64  `json:"available"`
	Held      []struct {
		PermitID    string `json:"permit_id"`
		LeaseEndMs  *int64 `json:"lease_end_ms"`
		RemainingMs *int64 `json:"remaining_ms"`
		ClientID    string `json:"client_id"`
		Owner       string `json:"owner"`
	} `json:"held"`
	Queue []struct {
		Position   int    `json:"position"`
		PermitID   string `json:"permit_id"`
		JoinedMs   int64  `json:"joined_ms"`
		DeadlineMs *int64 `json:"deadline_ms"`
	} `json:"queue"`
	ServerTimeMs int64        `json:"server_time_ms"`
	Waiters      []waiterJSON `json:"waiters"`
	Keys         struct {
		Available    string `json:"available"`
		Leases       string `json:"leases"`
		Channel      string `json:"channel"`
		Queue        string `json:"queue"`
		QueueTimeout string `json:"queue_timeout"`
		Holders      string `json:"holders"`
	} `json:"keys"`
}

// TestStatusSemaphore: a permit held, a waiter queued; then a count alone,
// which may be a latch.
func TestStatusSemaphore(t *testing.T) {
	srv := server(t)
	c := relocktest.Client(t)
	name := relocktest.Name(t)
	s := c.GetSemaphore(name)
	_, err := s.TrySetPermits(t.Context(), 1)
	require.NoError(t, err)
	id, err := s.Acquire(rlock.WithOwner(t.Context(), "worker-1"), time.Minute)
	require.NoError(t, err)
	wctx, cancel := context.WithCancel(t.Context())
	waited := make(chan error, 1)
	go func() { _, err := s.Acquire(wctx, 0); waited <- err }()
	defer cancel()
	rdb := relocktest.Raw(t)
	waitUntil(t, 10*time.Second, "the waiter to queue", func() (bool, error) {
		n, err := rdb.Do(t.Context(), rdb.B().Zcard().Key(layout.Semaphore(name).Queue).Build()).AsInt64()
		return n == 1, err
	})
	waitUntil(t, 10*time.Second, "the waiter's record", func() (bool, error) {
		n, err := rdb.Do(t.Context(), rdb.B().Hlen().Key(waitrec.Key("", c.ID())).Build()).AsInt64()
		return n == 1, err
	})
	var st semJSON
	statusOf(t, srv.Addr, name, &st)
	assert.Equal(t, "semaphore", st.Kind, "kind")
	assert.True(t, st.Set, "set")
	assert.Zero(t, st.Available, "available")
	require.Len(t, st.Held, 1, "held")
	require.Len(t, st.Queue, 1, "queue")
	h := st.Held[0]
	assert.Equal(t, id, h.PermitID, "permit held")
	assert.Equal(t, "worker-1", h.Owner, "who took the permit")
	assert.Equal(t, c.ID(), h.ClientID, "the Client that took the permit")
	if assert.NotNil(t, h.RemainingMs, "permit's lease") {
		assert.True(t, *h.RemainingMs > 0 && *h.RemainingMs <= 60_000, "permit's lease left %d, want up to a minute", *h.RemainingMs)
	}
	q := st.Queue[0]
	assert.Equal(t, 1, q.Position, "waiter's position")
	assert.Len(t, q.PermitID, 32, "waiter's permit ID")
	assert.NotNil(t, q.DeadlineMs, "waiter's deadline")
	assert.Equal(t, "{"+name+"}:timeout", st.Keys.Leases, "keys.leases")
	assert.Equal(t, "redisson_sc:{"+name+"}", st.Keys.Channel, "keys.channel")
	assert.Equal(t, "{"+name+"}:relock_holders", st.Keys.Holders, "keys.holders")
	// The anonymous waiter is named as its permit's holder entry will
	// name it, the Client's anonymous owner (not its permit ID).
	var waiter string
	if assert.Len(t, st.Waiters, 1, "waiters") {
		w := st.Waiters[0]
		assert.Equal(t, c.ID(), w.ClientID, "the waiter's Client")
		assert.Regexp(t, `^anon-[0-9]+@.`, w.Owner, "the anonymous waiter")
		waiter = w.Field
	}
	out := relock(t, "status", "--redis", srv.Addr, name)
	for _, want := range []string{"0 permits available, 1 held", "permit " + id + "  taken by " + c.ID() + ":worker-1", "queue: 1 waiting",
		"waiting: 1 call", waiter + "  semaphore  waiting "} {
		assert.Contains(t, out.stdout, want, "status output")
	}
	cancel()
	assert.ErrorIs(t, <-waited, rlock.ErrNotAcquired, "the waiter's Acquire")
	require.NoError(t, s.Release(t.Context(), id))

	// A count alone: a semaphore with nothing held, or a latch.
	var counter struct {
		Name    string       `json:"name"`
		Kind    string       `json:"kind"`
		Value   int64        `json:"value"`
		Waiters []waiterJSON `json:"waiters"`
		Keys    struct {
			Count string `json:"count"`
		} `json:"keys"`
	}
	statusOf(t, srv.Addr, name, &counter)
	assert.Equal(t, "counter", counter.Kind, "kind of a count alone")
	assert.EqualValues(t, 1, counter.Value, "value of a count alone")
	st = semJSON{}
	statusOf(t, srv.Addr, name, &st, "--kind", "semaphore")
	assert.Equal(t, "semaphore", st.Kind, "--kind semaphore")
	assert.EqualValues(t, 1, st.Available, "available")
	assert.Empty(t, st.Held, "held")
}

func TestStatusLatch(t *testing.T) {
	srv := server(t)
	c := relocktest.Client(t)
	name := relocktest.Name(t)
	_, err := c.GetCountDownLatch(name).TrySetCount(t.Context(), 3)
	require.NoError(t, err)
	var st struct {
		Name    string       `json:"name"`
		Kind    string       `json:"kind"`
		Count   int64        `json:"count"`
		Open    bool         `json:"open"`
		Waiters []waiterJSON `json:"waiters"`
		Keys    struct {
			Count   string `json:"count"`
			Channel string `json:"channel"`
		} `json:"keys"`
	}
	statusOf(t, srv.Addr, name, &st, "--kind", "latch")
	assert.Equal(t, "latch", st.Kind, "kind")
	assert.EqualValues(t, 3, st.Count, "count")
	assert.False(t, st.Open, "open")
	assert.Equal(t, "redisson_countdownlatch__channel__{"+name+"}", st.Keys.Channel, "keys.channel")
	out := relock(t, "status", "--kind", "latch", "--redis", srv.Addr, name)
	assert.Contains(t, out.stdout, "count 3", "status output")
	wantCode(t, relock(t, "status", "--kind", "queue", "--redis", srv.Addr, name), exitUsage)
}
