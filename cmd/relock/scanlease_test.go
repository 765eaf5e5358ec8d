package main

import (
	"strings"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/layout"
)

// A semaphore permit whose lease ended is no leak and has a lease that
// ended, not "no lease": the next call on the semaphore takes it back.
func TestScanPermitLeaseEnded(t *testing.T) {
	const now = 1_000_000
	s := &snapshot{name: "pool", now: now, keys: []*keyState{{
		Key:  layout.Key{Role: layout.RoleLeases, Type: "zset"},
		Type: "zset",
		ZSet: []rueidis.ZScore{
			{Member: "ended", Score: now - 84845},
			{Member: "running", Score: now + 2000},
			{Member: "forever", Score: layout.NoLeaseScore},
		},
	}}}
	hs := permitsOf(s)
	require.Len(t, hs, 3)
	byID := map[string]scanHolder{}
	for _, h := range hs {
		byID[h.Field] = h
	}
	ended := byID[permitID("ended")]
	assert.Equal(t, int64(0), *ended.LeaseMs, "lease_ms of a permit whose lease ended")
	require.NotNil(t, ended.LeaseEndedMsAgo)
	assert.Equal(t, int64(84845), *ended.LeaseEndedMsAgo)
	assert.Equal(t, int64(2000), *byID[permitID("running")].LeaseMs)
	assert.Nil(t, byID[permitID("running")].LeaseEndedMsAgo)
	assert.Equal(t, int64(-1), *byID[permitID("forever")].LeaseMs, "no lease")

	var b strings.Builder
	writeScan(&b, &scanResult{locks: []*scanEntry{{Name: "pool", Kind: layout.KindSemaphore, TTLMs: -1, Holders: hs}}})
	out := b.String()
	assert.Contains(t, out, "lease ended 1m25s ago (back at the next call)")
	assert.Contains(t, out, "lease 2.0s left")
	assert.Equal(t, 1, strings.Count(out, "no lease"), out)
}

func TestPlural(t *testing.T) {
	assert.Equal(t, "1 permit", plural(1, "permit"))
	assert.Equal(t, "0 permits", plural(0, "permit"))
	assert.Equal(t, "2 permits", plural(2, "permit"))
}
