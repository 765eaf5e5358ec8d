package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/relocktest"
)

type countingJSON struct {
	Name      string       `json:"name"`
	Kind      string       `json:"kind"`
	Set       bool         `json:"set"`
	Available int64        `json:"available"`
	Grants    int          `json:"grants"`
	Waiters   []waiterJSON `json:"waiters"`
	Keys      struct {
		Count   string `json:"count"`
		Grants  string `json:"grants"`
		Channel string `json:"channel"`
	} `json:"keys"`
}

// TestStatusAndScanCounting: a counting semaphore relock acquired from is
// told by its grants; a count alone is one with --kind counting; scan
// lists a count with waiters on the semaphore channel as a counting
// semaphore.
func TestStatusAndScanCounting(t *testing.T) {
	srv := server(t)
	c := relocktest.Client(t)
	name := relocktest.Name(t)
	s := c.GetCountingSemaphore(name)
	ok, err := s.TrySetPermits(t.Context(), 3)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, s.Acquire(t.Context(), 2))

	var st countingJSON
	statusOf(t, srv.Addr, name, &st)
	assert.Equal(t, "counting_semaphore", st.Kind, "kind")
	assert.True(t, st.Set, "set")
	assert.EqualValues(t, 1, st.Available, "available")
	assert.Equal(t, 1, st.Grants, "grants")
	assert.Equal(t, layout.CountingSemaphore(name).Grants, st.Keys.Grants, "keys.grants")
	assert.Equal(t, "redisson_sc:{"+name+"}", st.Keys.Channel, "keys.channel")
	out := relock(t, "status", "--redis", srv.Addr, name)
	assert.Contains(t, out.stdout, "counting semaphore \""+name+"\": 1 permit available", "status output")

	// Without its grants, a count alone: a counting semaphore if --kind
	// says so.
	do(t, srv, "DEL", layout.CountingSemaphore(name).Grants)
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
	st = countingJSON{}
	statusOf(t, srv.Addr, name, &st, "--kind", "counting")
	assert.Equal(t, "counting_semaphore", st.Kind, "--kind counting")
	assert.EqualValues(t, 1, st.Available, "available")
	assert.Zero(t, st.Grants, "grants")

	// A waiter on the count: scan finds it by the channel's subscriber.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	waited := make(chan error, 1)
	go func() { waited <- s.Acquire(ctx, 2) }()
	defer func() { cancel(); <-waited }()
	waitUntil(t, 5*time.Second, "the waiter's subscription", func() (bool, error) {
		return relocktest.Subscribers(relocktest.Raw(t), layout.CountingSemaphore(name).Channel) == 1, nil
	})
	code, got := scanAll(t, srv.Addr, "--match", name)
	assert.Equal(t, 0, code, "scan exit code")
	e, found := got[name]
	require.True(t, found, "scan found %v, want %q", got, name)
	assert.Equal(t, "counting_semaphore", e.Kind, "scan kind")
	if assert.NotNil(t, e.Permits, "permits_available") {
		assert.EqualValues(t, 1, *e.Permits, "permits_available")
	}
}
