package main

import (
	"context"
	"fmt"
	"strings"
	"time"
)

type redlockResult struct {
	Servers int        `json:"servers"`
	Rows    []*lockRow `json:"rows"`
	// Ratio is the RedLock's p50 over the single lock's; LimitRatio is the
	// same ratio for the no-op limit: what the machine allows.
	Ratio      float64 `json:"redlock_over_single_p50"`
	LimitRatio float64 `json:"limit_fanout_over_single_p50"`
}

// redlock compares lock+unlock, one goroutine, of a RedLock over
// r.cfg.RedLockServers servers of its own with a single lock on the first.
func (r *run) redlock(ctx context.Context) *section {
	n := r.cfg.RedLockServers
	s := &section{
		ID:      "redlock",
		Title:   fmt.Sprintf("5d. RedLock over %d local servers vs a single lock: lock+unlock, 1 goroutine, %v", n, r.cfg.Duration),
		Columns: redlockColumns,
	}
	res := &redlockResult{Servers: n}
	s.Results = res
	if r.redlockPeers(nil) == nil {
		s.Skipped = "the multilock package does not build yet (bench.sh built this program with -tags nomultilock)"
		return s
	}
	var (
		addrs []string
		srvs  []*server
	)
	for range n {
		srv, err := startServer()
		if err != nil {
			s.Skipped = err.Error()
			return s
		}
		defer srv.stop()
		addrs = append(addrs, srv.Addr)
		srvs = append(srvs, srv)
	}
	ps := []peer{
		{name: "limit single", open: openLimit},
		{name: fmt.Sprintf("limit x%d", n), multi: true, open: func(_ string, w *wire) (impl, error) { return openFanout(addrs, w) }},
	}
	ps = append(ps, r.redlockPeers(addrs)...)
	benches := r.interleave(ctx, ps,
		func(p peer) *bench {
			if p.multi {
				return openBench(ctx, srvs, p, 1, 1, "redlock", "")
			}
			return openBench(ctx, nil, p, 1, 1, "redlock", "")
		},
		func(b *bench, d time.Duration) { b.loopRound(ctx, d) })
	var single *lockRow
	for _, b := range benches {
		row := b.finishLoop()
		if strings.Contains(row.Impl, "single") {
			single = row
		}
		if single != nil && single.P50us > 0 {
			row.VsLimit = row.P50us / single.P50us
		}
		res.Rows = append(res.Rows, row)
	}
	s.Rows = loopTable(res.Rows)
	s.Notes = append(s.Notes, fmt.Sprintf("limit x%d: the no-op script on every server at once, twice per op, from one goroutine per server started once", n),
		"vs single: p50 latency over the single lock's p50 on the first server (lower is better); the single locks have a server of their own; redis CPU/op of the x5 rows adds up their 5 servers, which they share")
	single, multi := find(res.Rows, "relock single lock"), find(res.Rows, fmt.Sprintf("relock RedLock x%d", n))
	if lim := find(res.Rows, fmt.Sprintf("limit x%d", n)); lim != nil {
		res.LimitRatio = lim.VsLimit
	}
	if single != nil && multi != nil && single.P50us > 0 && multi.P50us > 0 {
		res.Ratio = multi.P50us / single.P50us
		// The machine's own ratio is the limit's: the same round trips,
		// from goroutines started once, with no lock logic.
		if res.LimitRatio > 0 {
			r.goal(fmt.Sprintf("RedLock x%d vs single lock, p50, over the no-op limit's ratio", n), "<= 1.15x",
				fmt.Sprintf("%.2fx (%.2fx: %s vs %s; the limit's: %.2fx)", res.Ratio/res.LimitRatio, res.Ratio,
					fmtDur(usDur(multi.P50us)), fmtDur(usDur(single.P50us)), res.LimitRatio),
				res.Ratio <= 1.15*res.LimitRatio)
		}
		r.goal(fmt.Sprintf("RedLock x%d: allocations per lock+unlock", n), "<= 40",
			fmt.Sprintf("%.1f", multi.AllocsPerOp), multi.AllocsPerOp <= 40)
	}
	return s
}
