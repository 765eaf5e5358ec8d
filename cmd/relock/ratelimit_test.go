package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/relocktest"
)

type rateJSON struct {
	Name        string `json:"name"`
	Kind        string `json:"kind"`
	Set         bool   `json:"set"`
	Rate        int64  `json:"rate"`
	IntervalMs  int64  `json:"interval_ms"`
	Type        string `json:"type"`
	KeepAliveMs int64  `json:"keep_alive_ms"`
	Available   *int64 `json:"available"`
	Grants      []struct {
		ID         string `json:"id"`
		Permits    int64  `json:"permits"`
		AtMs       int64  `json:"at_ms"`
		LeavesInMs int64  `json:"leaves_in_ms"`
	} `json:"grants"`
	ServerTimeMs int64        `json:"server_time_ms"`
	Waiters      []waiterJSON `json:"waiters"`
	Keys         struct {
		Config  string `json:"config"`
		Value   string `json:"value"`
		Permits string `json:"permits"`
		Channel string `json:"channel"`
	} `json:"keys"`
}

// TestStatusAndScanRateLimiter: status tells a rate limiter by its hash
// and shows its rate, the permits left and the grants in the window; scan
// lists it, not as a leak.
func TestStatusAndScanRateLimiter(t *testing.T) {
	srv := server(t)
	c := relocktest.Client(t)
	name := relocktest.Name(t)
	l := c.GetRateLimiter(name)
	ok, err := l.TrySetRate(t.Context(), 5, time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, l.Acquire(t.Context(), 2))

	var st rateJSON
	statusOf(t, srv.Addr, name, &st)
	assert.Equal(t, "rate_limiter", st.Kind, "kind")
	assert.True(t, st.Set, "set")
	assert.EqualValues(t, 5, st.Rate, "rate")
	assert.EqualValues(t, 60000, st.IntervalMs, "interval_ms")
	assert.Equal(t, "overall", st.Type, "type")
	if assert.NotNil(t, st.Available, "available") {
		assert.EqualValues(t, 3, *st.Available, "available")
	}
	if assert.Len(t, st.Grants, 1, "grants") {
		assert.EqualValues(t, 2, st.Grants[0].Permits, "grant's permits")
		assert.Len(t, st.Grants[0].ID, 32, "grant's ID")
		assert.True(t, st.Grants[0].LeavesInMs > 0 && st.Grants[0].LeavesInMs <= 60000, "leaves_in_ms %d", st.Grants[0].LeavesInMs)
	}
	assert.Equal(t, layout.RateLimiter(name).Permits, st.Keys.Permits, "keys.permits")
	out := relock(t, "status", "--redis", srv.Addr, name)
	assert.Contains(t, out.stdout, "rate limiter \""+name+"\": 5 per 1m0s, 3 permits left in the window", "status output")

	code, got := scanAll(t, srv.Addr, "--match", name)
	assert.Equal(t, 0, code, "scan exit code: a rate limiter's hash without a TTL is no leak")
	e, found := got[name]
	require.True(t, found, "scan found %v, want %q", got, name)
	assert.Equal(t, "rate_limiter", e.Kind, "scan kind")
	assert.False(t, e.Leaked, "leaked")
	if assert.NotNil(t, e.Permits, "permits_available") {
		assert.EqualValues(t, 3, *e.Permits, "permits_available")
	}

	// A rate limiter never used: its configuration alone.
	unused := relocktest.Name(t)
	ok, err = c.GetRateLimiter(unused).TrySetRate(t.Context(), 7, time.Second)
	require.NoError(t, err)
	require.True(t, ok)
	code, got = scanAll(t, srv.Addr, "--match", unused)
	assert.Equal(t, 0, code, "scan exit code")
	e, found = got[unused]
	require.True(t, found, "scan found %v, want %q", got, unused)
	assert.Equal(t, "rate_limiter", e.Kind, "scan kind of a rate limiter never used")
	if assert.NotNil(t, e.Permits, "permits_available") {
		assert.EqualValues(t, 7, *e.Permits, "permits_available")
	}
}
