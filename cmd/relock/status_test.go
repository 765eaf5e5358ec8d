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
