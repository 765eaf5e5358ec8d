package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
	"github.com/relock-go/relock/semaphore"
)

// statusJSON mirrors the documented output of status --json; its tags are
// the stable field names.
type statusJSON struct {
	Name             string `json:"name"`
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
	FencingCounter *int64 `json:"fencing_counter"`
	ServerTimeMs   int64  `json:"server_time_ms"`
	Keys           struct {
		Lock    string `json:"lock"`
		Queue   string `json:"queue"`
		Timeout string `json:"timeout"`
		Token   string `json:"token"`
		Channel string `json:"channel"`
	} `json:"keys"`
}

func status(t *testing.T, addr, name string) statusJSON {
	t.Helper()
	r := relock(t, "status", "--json", "--redis", addr, name)
	wantCode(t, r, 0)
	var st statusJSON
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, r.stdout)
	}
	return st
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
		if err := l.Lock(holder); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _, _ = l.ForceUnlock(context.Background()) })

	waitCtx, cancel := context.WithCancel(rlock.WithOwner(t.Context(), "waiter"))
	waited := make(chan error, 1)
	go func() { waited <- c2.GetFairLock(name).Lock(waitCtx) }()
	defer func() {
		cancel()
		if err := <-waited; !errors.Is(err, rlock.ErrNotAcquired) {
			t.Errorf("the waiter's Lock = %v, want ErrNotAcquired", err)
		}
	}()
	rdb := relocktest.Raw(t)
	queue := lockcore.Derived(lockcore.QueuePrefix, name)
	relocktest.Eventually(t, 10*time.Second, "the waiter to queue", func() bool {
		n, err := rdb.Do(t.Context(), rdb.B().Llen().Key(queue).Build()).AsInt64()
		return err == nil && n == 1
	})

	st := status(t, srv.Addr, name)
	if !st.Locked || st.Name != name {
		t.Errorf("name, locked = %q, %v; want %q, true", st.Name, st.Locked, name)
	}
	if st.LeaseRemainingMs <= 0 || st.LeaseRemainingMs > 30_000 {
		t.Errorf("lease_remaining_ms = %d, want in (0, 30000]", st.LeaseRemainingMs)
	}
	if len(st.Holders) != 1 {
		t.Fatalf("holders = %+v, want one", st.Holders)
	}
	h := st.Holders[0]
	if h.Field != c1.ID()+":holder" || h.ClientID != c1.ID() || h.Owner != "holder" || h.HoldCount != 2 {
		t.Errorf("holder = %+v, want field %s:holder, hold count 2", h, c1.ID())
	}
	if len(st.Queue) != 1 {
		t.Fatalf("queue = %+v, want one waiter", st.Queue)
	}
	w := st.Queue[0]
	if w.Position != 1 || w.Field != c2.ID()+":waiter" || w.Owner != "waiter" {
		t.Errorf("waiter = %+v, want position 1, field %s:waiter", w, c2.ID())
	}
	if w.DeadlineMs == nil || w.RemainingMs == nil {
		t.Fatalf("waiter has no deadline: %+v", w)
	}
	if *w.RemainingMs <= 0 || *w.DeadlineMs-st.ServerTimeMs != *w.RemainingMs {
		t.Errorf("deadline_ms %d, remaining_ms %d, server_time_ms %d: want remaining > 0 and deadline - time = remaining",
			*w.DeadlineMs, *w.RemainingMs, st.ServerTimeMs)
	}
	if st.FencingCounter != nil {
		t.Errorf("fencing_counter = %d, want null", *st.FencingCounter)
	}
	if st.Keys.Queue != queue || st.Keys.Lock != name {
		t.Errorf("keys = %+v", st.Keys)
	}

	r := relock(t, "status", "--redis", srv.Addr, name)
	wantCode(t, r, 0)
	for _, want := range []string{"held", c1.ID() + ":holder", "hold count 2", "1. " + c2.ID() + ":waiter", "deadline in"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status output lacks %q:\n%s", want, r.stdout)
		}
	}
}

func TestStatusFencingCounter(t *testing.T) {
	srv := server(t)
	c := relocktest.Client(t)
	name := relocktest.Name(t)
	l := c.GetFencedLock(name)
	token, err := l.LockAndGetToken(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	st := status(t, srv.Addr, name)
	if st.Locked || st.LeaseRemainingMs != 0 || len(st.Holders) != 0 {
		t.Errorf("locked %v, lease %d, holders %v; want a free lock", st.Locked, st.LeaseRemainingMs, st.Holders)
	}
	if st.FencingCounter == nil || *st.FencingCounter != token {
		t.Errorf("fencing_counter = %v, want %d", st.FencingCounter, token)
	}
}

func TestStatusNotALock(t *testing.T) {
	srv := server(t)
	name := relocktest.Name(t)
	if _, err := srv.Do(t.Context(), "SET", name, "x"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, relock(t, "status", "--redis", srv.Addr, name), exitFailure)
	r := relock(t, "unlock", "--force", "--redis", srv.Addr, name)
	wantCode(t, r, exitFailure)
	if v, err := srv.Do(t.Context(), "GET", name); err != nil {
		t.Errorf("unlock --force deleted a key that is not a lock: GET = %v, %v", v, err)
	}
}

// statusOf runs status --json (with args before NAME) and decodes it.
func statusOf(t *testing.T, addr, name string, v any, args ...string) {
	t.Helper()
	r := relock(t, append(append([]string{"status", "--json", "--redis", addr}, args...), name)...)
	wantCode(t, r, 0)
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("status --json: %v\n%s", err, r.stdout)
	}
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
	Keys struct {
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
	if err := rw.WriteLock().Lock(w); err != nil {
		t.Fatal(err)
	}
	if err := rw.ReadLock().Lock(w); err != nil {
		t.Fatal(err)
	}
	var st rwJSON
	statusOf(t, srv.Addr, name, &st)
	if st.Kind != "rwlock" || !st.Locked || st.Mode != "write" || st.LeaseRemainingMs <= 0 {
		t.Errorf("status = %+v, want a locked rwlock in write mode", st)
	}
	if st.Writer == nil || st.Writer.Owner != "w" || st.Writer.ClientID != c.ID() || st.Writer.HoldCount != 1 {
		t.Errorf("writer = %+v", st.Writer)
	}
	if len(st.Readers) != 1 || st.Readers[0].Owner != "w" || len(st.Readers[0].Levels) != 1 || st.Readers[0].Levels[0].RemainingMs <= 0 {
		t.Errorf("readers = %+v, want the writer's read level", st.Readers)
	}
	if st.Keys.Channel != "redisson_rwlock:{"+name+"}" {
		t.Errorf("channel = %q", st.Keys.Channel)
	}
	if err := rw.WriteLock().Unlock(w); err != nil {
		t.Fatal(err)
	}
	r := rlock.WithOwner(t.Context(), "r")
	if err := rw.ReadLock().Lock(r); err != nil {
		t.Fatal(err)
	}
	if err := rw.ReadLock().Lock(r); err != nil {
		t.Fatal(err)
	}
	st = rwJSON{}
	statusOf(t, srv.Addr, name, &st)
	if st.Mode != "read" || st.Writer != nil || len(st.Readers) != 2 {
		t.Fatalf("status = %+v, want read mode with two readers", st)
	}
	if rr := st.Readers[0]; rr.Owner != "r" || rr.HoldCount != 2 || len(rr.Levels) != 2 ||
		rr.Levels[1].Key != "{"+name+"}:"+c.ID()+":r:rwlock_timeout:2" {
		t.Errorf("reader r = %+v", rr)
	}
	out := relock(t, "status", "--redis", srv.Addr, name)
	wantCode(t, out, 0)
	for _, want := range []string{"read mode", "reader " + c.ID() + ":r  hold count 2", "level 2:"} {
		if !strings.Contains(out.stdout, want) {
			t.Errorf("status output lacks %q:\n%s", want, out.stdout)
		}
	}
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
	} `json:"held"`
	Queue []struct {
		Position   int    `json:"position"`
		PermitID   string `json:"permit_id"`
		JoinedMs   int64  `json:"joined_ms"`
		DeadlineMs *int64 `json:"deadline_ms"`
	} `json:"queue"`
	ServerTimeMs int64 `json:"server_time_ms"`
	Keys         struct {
		Available    string `json:"available"`
		Leases       string `json:"leases"`
		Channel      string `json:"channel"`
		Queue        string `json:"queue"`
		QueueTimeout string `json:"queue_timeout"`
	} `json:"keys"`
}

// TestStatusSemaphore: a permit held, a waiter queued; then a count alone,
// which may be a latch.
func TestStatusSemaphore(t *testing.T) {
	srv := server(t)
	c := relocktest.Client(t)
	name := relocktest.Name(t)
	s := c.GetSemaphore(name)
	if _, err := s.TrySetPermits(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	id, err := s.Acquire(t.Context(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(t.Context())
	waited := make(chan error, 1)
	go func() { _, err := s.Acquire(wctx, 0); waited <- err }()
	defer cancel()
	rdb := relocktest.Raw(t)
	relocktest.Eventually(t, 10*time.Second, "the waiter to queue", func() bool {
		n, err := rdb.Do(t.Context(), rdb.B().Zcard().Key(semaphore.KeysOf(name).Queue).Build()).AsInt64()
		return err == nil && n == 1
	})
	var st semJSON
	statusOf(t, srv.Addr, name, &st)
	if st.Kind != "semaphore" || !st.Set || st.Available != 0 || len(st.Held) != 1 || len(st.Queue) != 1 {
		t.Fatalf("status = %+v, want a set semaphore, none available, one held, one queued", st)
	}
	if h := st.Held[0]; h.PermitID != id || h.RemainingMs == nil || *h.RemainingMs <= 0 || *h.RemainingMs > 60_000 {
		t.Errorf("held = %+v, want permit %s with up to a minute left", h, id)
	}
	if q := st.Queue[0]; q.Position != 1 || len(q.PermitID) != 32 || q.DeadlineMs == nil {
		t.Errorf("queue = %+v", q)
	}
	if st.Keys.Leases != "{"+name+"}:timeout" || st.Keys.Channel != "redisson_sc:{"+name+"}" {
		t.Errorf("keys = %+v", st.Keys)
	}
	out := relock(t, "status", "--redis", srv.Addr, name)
	for _, want := range []string{"0 permits available, 1 held", "permit " + id, "queue: 1 waiting"} {
		if !strings.Contains(out.stdout, want) {
			t.Errorf("status output lacks %q:\n%s", want, out.stdout)
		}
	}
	cancel()
	if err := <-waited; !errors.Is(err, rlock.ErrNotAcquired) {
		t.Errorf("the waiter's Acquire = %v, want ErrNotAcquired", err)
	}
	if err := s.Release(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	// A count alone: a semaphore with nothing held, or a latch.
	var counter struct {
		Name  string `json:"name"`
		Kind  string `json:"kind"`
		Value int64  `json:"value"`
		Keys  struct {
			Count string `json:"count"`
		} `json:"keys"`
	}
	statusOf(t, srv.Addr, name, &counter)
	if counter.Kind != "counter" || counter.Value != 1 {
		t.Errorf("status of a count alone = %+v, want kind counter, value 1", counter)
	}
	st = semJSON{}
	statusOf(t, srv.Addr, name, &st, "--kind", "semaphore")
	if st.Kind != "semaphore" || st.Available != 1 || len(st.Held) != 0 {
		t.Errorf("status --kind semaphore = %+v", st)
	}
}

func TestStatusLatch(t *testing.T) {
	srv := server(t)
	c := relocktest.Client(t)
	name := relocktest.Name(t)
	if _, err := c.GetCountDownLatch(name).TrySetCount(t.Context(), 3); err != nil {
		t.Fatal(err)
	}
	var st struct {
		Name  string `json:"name"`
		Kind  string `json:"kind"`
		Count int64  `json:"count"`
		Open  bool   `json:"open"`
		Keys  struct {
			Count   string `json:"count"`
			Channel string `json:"channel"`
		} `json:"keys"`
	}
	statusOf(t, srv.Addr, name, &st, "--kind", "latch")
	if st.Kind != "latch" || st.Count != 3 || st.Open || st.Keys.Channel != "redisson_countdownlatch__channel__{"+name+"}" {
		t.Errorf("status = %+v", st)
	}
	out := relock(t, "status", "--kind", "latch", "--redis", srv.Addr, name)
	if !strings.Contains(out.stdout, "count 3") {
		t.Errorf("status output:\n%s", out.stdout)
	}
	wantCode(t, relock(t, "status", "--kind", "queue", "--redis", srv.Addr, name), exitUsage)
}
