package main

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// lockRow is one implementation's figures in scenarios 1-3.
type lockRow struct {
	Impl        string  `json:"impl"`
	Goroutines  int     `json:"goroutines"`
	Seconds     float64 `json:"seconds"`
	Ops         int64   `json:"ops"`
	OpsPerSec   float64 `json:"ops_per_sec"`
	P50us       float64 `json:"p50_us"`
	P99us       float64 `json:"p99_us"`
	AllocsPerOp float64 `json:"allocs_per_op"`
	// CPU time per op of this process and of redis-server (user+sys).
	ClientCPUus float64 `json:"client_cpu_us_per_op"`
	ServerCPUus float64 `json:"server_cpu_us_per_op"`
	// KeysAfter is the most keys left in Redis at the end of a round (the
	// locks are all released by then); -1 when the servers are shared.
	KeysAfter int64 `json:"keys_after_round"`
	// VsLimit is OpsPerSec over the limit's; in contention, the hand-off
	// p50 over the limit's lock+unlock p50 at one goroutine; in redlock,
	// the p50 over the single lock's p50.
	VsLimit float64 `json:"vs_limit,omitempty"`
	Errors  int64   `json:"errors"`
	// Reference is set on the limit rows of the contention scenario.
	Reference bool `json:"reference,omitempty"`
	// Contention only.
	Handoffs     int64   `json:"handoffs,omitempty"`
	HandoffP50us float64 `json:"handoff_p50_us,omitempty"`
	HandoffP99us float64 `json:"handoff_p99_us,omitempty"`
	Violations   int64   `json:"violations"`
	// FirstError is the first error seen, or why the run could not start.
	FirstError string `json:"first_error,omitempty"`
}

// errCount counts errors and keeps the first.
type errCount struct {
	n     atomic.Int64
	once  sync.Once
	first string
}

func (e *errCount) add(err error) int64 {
	e.once.Do(func() { e.first = err.Error() })
	return e.n.Add(1)
}

// maxErrors ends a goroutine's loop: a broken implementation should not
// spin for the whole duration.
const maxErrors = 100

func lockUnlock(ctx context.Context, l locker) error {
	if err := l.Lock(ctx); err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	if err := l.Unlock(ctx); err != nil {
		return fmt.Errorf("unlock: %w", err)
	}
	return nil
}

// bench is one implementation's run in scenarios 1-3 (and 5d): it is
// opened once, then measured in rounds that alternate with the other
// implementations', so that a change in the machine's load while the
// program runs falls on every implementation alike.
type bench struct {
	p peer
	// srvs are the servers the implementation uses; own is set when
	// openBench started the one server for it.
	srvs    []*server
	own     bool
	im      impl
	lockers []locker
	row     lockRow

	all     hist // latencies (lock+unlock, or hand-offs)
	elapsed time.Duration
	mallocs uint64
	cpu     time.Duration // this process
	srvCPU  time.Duration // redis-server
	errs    errCount
	// contention
	acquired   int64
	violations atomic.Int64
}

// openBench connects p to srvs (nil: to a server of its own, so that no
// implementation pays for another's keys) and makes goroutines handles:
// on keys of their own (name == ""), or all on the lock name; then it warms
// them up.
func openBench(ctx context.Context, srvs []*server, p peer, goroutines int, scenario, name string) *bench {
	b := &bench{p: p, srvs: srvs, row: lockRow{Impl: p.name, Goroutines: goroutines}}
	if len(srvs) == 0 {
		srv, err := startServer()
		if err != nil {
			b.row.FirstError = err.Error()
			return b
		}
		b.srvs, b.own = []*server{srv}, true
	}
	im, err := p.open(b.srvs[0].Addr)
	if err != nil {
		b.row.FirstError = err.Error()
		return b
	}
	b.im = im
	b.lockers = make([]locker, goroutines)
	for i := range b.lockers {
		key := name
		if key == "" {
			key = fmt.Sprintf("bench:%s:%s:%d", scenario, p.name, i)
		}
		b.lockers[i] = im.locker(key)
	}
	// Scripts loaded, connections open. Handles on one lock warm up one
	// at a time, and only two of them. The context has a deadline, as in
	// the measured rounds: rueidis moves a connection to its background
	// writer and reader for good at the first call with a cancellable
	// context that has none, and a single caller is faster without.
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	const warmup = 200 * time.Millisecond
	var wg sync.WaitGroup
	for i, l := range b.lockers {
		warm := func() {
			warmEnd := time.Now().Add(warmup)
			for n := 0; n < 10 || (name == "" && time.Now().Before(warmEnd)); n++ {
				if err := lockUnlock(ctx, l); err != nil {
					b.errs.add(err)
					return
				}
			}
		}
		if name == "" {
			wg.Go(warm)
		} else if i < 2 {
			warm()
		}
	}
	wg.Wait()
	return b
}

func (b *bench) ok() bool { return b.im != nil && b.errs.n.Load() <= maxErrors }

func (b *bench) close(ctx context.Context) {
	if b.im != nil {
		b.im.close()
		b.im = nil
	}
	for _, srv := range b.srvs {
		if b.own {
			srv.stop()
		} else {
			_ = srv.flush(ctx)
		}
	}
	b.srvs = nil
}

// serverCPU is the CPU time used so far by the servers of b.
func (b *bench) serverCPU() time.Duration {
	var d time.Duration
	for _, srv := range b.srvs {
		d += processCPU(srv.pid())
	}
	return d
}

// loopRound runs lock+unlock in a loop in every goroutine, each on a key
// of its own, for d. Allocations are counted over the whole process (the
// library's background goroutines included).
func (b *bench) loopRound(ctx context.Context, d time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, d+time.Minute)
	defer cancel()
	hists := make([]hist, len(b.lockers))
	var (
		done   sync.WaitGroup
		startC = make(chan struct{})
		end    time.Time // written before startC is closed
	)
	for i, l := range b.lockers {
		h := &hists[i]
		done.Go(func() {
			<-startC
			for ctx.Err() == nil {
				t0 := time.Now()
				if !t0.Before(end) {
					return
				}
				if err := lockUnlock(ctx, l); err != nil {
					if b.errs.add(err) > maxErrors {
						return
					}
					continue
				}
				h.record(time.Since(t0))
			}
		})
	}
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	cpu0, srv0 := rusage(), b.serverCPU()
	start := time.Now()
	end = start.Add(d)
	close(startC)
	done.Wait()
	b.elapsed += time.Since(start)
	b.cpu += rusage() - cpu0
	b.srvCPU += b.serverCPU() - srv0
	if b.own {
		keys, _ := b.srvs[0].do(ctx, "DBSIZE").AsInt64()
		b.row.KeysAfter = max(b.row.KeysAfter, keys)
	} else {
		b.row.KeysAfter = -1 // shared servers: not this implementation's alone
	}
	runtime.ReadMemStats(&m1)
	b.mallocs += m1.Mallocs - m0.Mallocs
	for i := range hists {
		b.all.merge(&hists[i])
	}
}

// finishLoop fills in the row of a loop run.
func (b *bench) finishLoop() *lockRow {
	row := &b.row
	row.Seconds = b.elapsed.Seconds()
	row.Ops = b.all.n
	if b.elapsed > 0 {
		row.OpsPerSec = float64(b.all.n) / b.elapsed.Seconds()
	}
	row.P50us = micros(b.all.quantile(0.50))
	row.P99us = micros(b.all.quantile(0.99))
	if b.all.n > 0 {
		row.AllocsPerOp = float64(b.mallocs) / float64(b.all.n)
		row.ClientCPUus = micros(b.cpu) / float64(b.all.n)
		row.ServerCPUus = micros(b.srvCPU) / float64(b.all.n)
	}
	row.Errors = b.errs.n.Load()
	if row.FirstError == "" {
		row.FirstError = b.errs.first
	}
	return row
}

// contendedRound runs every goroutine on the one lock for d. Each takes the
// lock, checks that it is alone inside (an in-process counter), holds it
// for hold, and releases it. Then it waits until another goroutine has
// taken the lock before it asks again, so that every acquisition is a
// hand-off to a goroutine that was already waiting: without that rule the
// goroutine that just released wins again at once (its first attempt finds
// the lock free), and a poller's hand-off never shows. The hold makes the
// first attempt of a goroutine that asks again fail, so that it waits like
// the others. The hand-off latency runs from just before the holder's
// Unlock call to the next holder's Lock returning, through a shared atomic
// stamp (nanoseconds since the round's start).
func (b *bench) contendedRound(ctx context.Context, d, hold time.Duration) {
	var (
		hists = make([]hist, len(b.lockers))
		acq   = make([]int64, len(b.lockers))
		done  sync.WaitGroup
		// turn is who took the lock last; a goroutine that released it
		// waits on turnC until someone else has taken it.
		turnMu sync.Mutex
		turnC  = sync.NewCond(&turnMu)
		turn   int
		over   bool
		inside atomic.Int32
		stamp  atomic.Int64
	)
	exclusive := b.p.exclusive && len(b.lockers) > 1
	start := time.Now()
	end := start.Add(d)
	lctx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	stopper := time.AfterFunc(d, func() {
		turnMu.Lock()
		over = true
		turnMu.Unlock()
		turnC.Broadcast()
	})
	defer stopper.Stop()
	for i, l := range b.lockers {
		h := &hists[i]
		id := i + 1
		done.Go(func() {
			for {
				err := l.Lock(lctx)
				now := time.Now()
				if err != nil {
					if lctx.Err() != nil {
						return
					}
					if b.errs.add(err) > maxErrors {
						return
					}
					continue
				}
				if exclusive && inside.Add(1) != 1 {
					b.violations.Add(1)
				}
				last := stamp.Load()
				if now.Before(end) {
					acq[id-1]++
					if exclusive && last != 0 {
						h.record(now.Sub(start) - time.Duration(last))
					}
				}
				if exclusive {
					turnMu.Lock()
					turn = id
					turnMu.Unlock()
					turnC.Broadcast()
					if hold > 0 {
						time.Sleep(hold)
					}
					inside.Add(-1)
				}
				stamp.Store(int64(time.Since(start)))
				// Unlock on ctx: lctx may be over, and it must still run.
				if err := l.Unlock(ctx); err != nil {
					b.errs.add(err)
				}
				if !now.Before(end) {
					return
				}
				if exclusive {
					turnMu.Lock()
					for turn == id && !over {
						turnC.Wait()
					}
					turnMu.Unlock()
				}
			}
		})
	}
	done.Wait()
	b.elapsed += min(time.Since(start), d)
	for i := range hists {
		b.all.merge(&hists[i])
		b.acquired += acq[i]
	}
}

// finishContended fills in the row of a contention run.
func (b *bench) finishContended() *lockRow {
	row := &b.row
	row.Seconds = b.elapsed.Seconds()
	row.Ops = b.acquired
	if b.elapsed > 0 {
		row.OpsPerSec = float64(b.acquired) / b.elapsed.Seconds()
	}
	if b.p.exclusive {
		row.Handoffs = b.all.n
		row.HandoffP50us = micros(b.all.quantile(0.50))
		row.HandoffP99us = micros(b.all.quantile(0.99))
		row.Violations = b.violations.Load()
	}
	row.Errors = b.errs.n.Load()
	if row.FirstError == "" {
		row.FirstError = b.errs.first
	}
	return row
}

// interleave opens every implementation, then runs round on each in turn,
// r.cfg.Rounds times, for r.cfg.Duration per implementation in all, and
// closes them.
func (r *run) interleave(ctx context.Context, ps []peer, open func(p peer) *bench, round func(b *bench, d time.Duration)) []*bench {
	var benches []*bench
	for _, p := range ps {
		if ctx.Err() != nil {
			break
		}
		benches = append(benches, open(p))
	}
	rounds := max(r.cfg.Rounds, 1)
	d := r.cfg.Duration / time.Duration(rounds)
	for i := range rounds {
		for _, b := range benches {
			if ctx.Err() != nil || !b.ok() {
				continue
			}
			r.logf("  round %d/%d: %s", i+1, rounds, b.p.name)
			round(b, d)
		}
	}
	for _, b := range benches {
		b.close(ctx)
	}
	return benches
}

// benchServers is the servers of an implementation in scenarios 1-3: nil
// (a server of its own) unless -shared-server is set.
func (r *run) benchServers() []*server {
	if r.cfg.SharedServer {
		return []*server{r.srv}
	}
	return nil
}

// ---- the sections ----

func (r *run) uncontended(ctx context.Context) *section {
	s := &section{
		ID:      "uncontended",
		Title:   fmt.Sprintf("1. Uncontended lock+unlock, 1 goroutine, %v each", r.cfg.Duration),
		Columns: loopColumns,
	}
	rows := r.loopRows(ctx, 1, "uncontended")
	s.Results = rows
	s.Rows = loopTable(rows)
	s.Notes = append(s.Notes,
		"one op = Lock+Unlock; limit = two EVALSHA of a no-op script in a row (two round trips)",
		"allocs/op and CPU/op (user+sys) count the whole process, background goroutines included; redis CPU/op is redis-server's",
		"each implementation has a redis-server of its own; keys after: keys left in it at the end of a round, every lock released (relock keeps a 10s unlock latch per Unlock)")
	if rl, lim := find(rows, "relock"), find(rows, "limit"); rl != nil && lim != nil && rl.Ops > 0 {
		r.goal("uncontended lock+unlock vs limit", ">= 0.90 of the limit",
			fmt.Sprintf("%.2f (%s vs %s ops/s)", rl.VsLimit, fmtRate(rl.OpsPerSec), fmtRate(lim.OpsPerSec)), rl.VsLimit >= 0.9)
	}
	return s
}

func (r *run) throughput(ctx context.Context) *section {
	n := r.cfg.Goroutines
	s := &section{
		ID:      "throughput",
		Title:   fmt.Sprintf("2. Throughput: %d goroutines on distinct keys, %v each", n, r.cfg.Duration),
		Columns: loopColumns,
	}
	rows := r.loopRows(ctx, n, "throughput")
	s.Results = rows
	s.Rows = loopTable(rows)
	s.Notes = append(s.Notes, fmt.Sprintf("limit = two no-op EVALSHA per op at the same concurrency (%d goroutines)", n))
	if rl, rd := find(rows, "relock"), find(rows, "rueidislock"); rl != nil && rd != nil && rl.Ops > 0 {
		r.goal(fmt.Sprintf("%d-goroutine throughput vs rueidislock", n), ">= rueidislock",
			fmt.Sprintf("%s vs %s ops/s (%.2fx)", fmtRate(rl.OpsPerSec), fmtRate(rd.OpsPerSec), rl.OpsPerSec/max(rd.OpsPerSec, 1)),
			rl.OpsPerSec >= rd.OpsPerSec)
	}
	return s
}

// loopRows measures lock+unlock loops of every selected implementation,
// interleaved, and fills in the ratio to the limit.
func (r *run) loopRows(ctx context.Context, goroutines int, scenario string) []*lockRow {
	benches := r.interleave(ctx, r.peers,
		func(p peer) *bench { return openBench(ctx, r.benchServers(), p, goroutines, scenario, "") },
		func(b *bench, d time.Duration) { b.loopRound(ctx, d) })
	var rows []*lockRow
	for _, b := range benches {
		rows = append(rows, b.finishLoop())
	}
	if lim := find(rows, "limit"); lim != nil && lim.OpsPerSec > 0 {
		for _, row := range rows {
			row.VsLimit = row.OpsPerSec / lim.OpsPerSec
		}
		if goroutines == 1 {
			r.limit1 = lim
		}
	}
	return rows
}

var loopColumns = []string{"impl", "ops/s", "p50", "p99", "vs limit", "allocs/op", "CPU/op", "redis CPU/op", "keys after", "errors"}

// fmtCPU prints CPU microseconds per op.
func fmtCPU(us float64) string {
	if us == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1fµs", us)
}

func fmtKeys(n int64) string {
	if n < 0 {
		return "-"
	}
	return fmtInt(n)
}

func loopTable(rows []*lockRow) [][]string {
	var out [][]string
	for _, row := range rows {
		out = append(out, []string{row.Impl, fmtRate(row.OpsPerSec),
			fmtDur(usDur(row.P50us)), fmtDur(usDur(row.P99us)), fmtRatio(row.VsLimit),
			fmt.Sprintf("%.1f", row.AllocsPerOp), fmtCPU(row.ClientCPUus), fmtCPU(row.ServerCPUus), fmtKeys(row.KeysAfter), errText(row)})
	}
	return out
}

func (r *run) contention(ctx context.Context) *section {
	n, d, hold := r.cfg.Contenders, r.cfg.Duration, r.cfg.Hold
	s := &section{
		ID:    "contention",
		Title: fmt.Sprintf("3. Contention: %d goroutines on one key, each holding it %v, %v each", n, hold, d),
		Columns: []string{"impl", "acquisitions/s", "hand-off p50", "hand-off p99",
			"p50 vs limit", "violations", "errors"},
	}
	// The limit of a hand-off: the unlock's round trip and the next
	// holder's acquire, two script round trips in a row.
	if r.limit1 == nil {
		for _, p := range r.peers {
			if p.name == "limit" {
				r.logf("  contention: the limit at 1 goroutine")
				b := r.interleave(ctx, []peer{p},
					func(p peer) *bench { return openBench(ctx, r.benchServers(), p, 1, "serial", "") },
					func(b *bench, d time.Duration) { b.loopRound(ctx, d) })
				r.limit1 = b[0].finishLoop()
			}
		}
	}
	var ps []peer
	for _, p := range r.peers {
		if p.exclusive {
			ps = append(ps, p)
		}
	}
	benches := r.interleave(ctx, ps,
		func(p peer) *bench {
			return openBench(ctx, r.benchServers(), p, n, "contention", "bench:contention:"+p.name)
		},
		func(b *bench, d time.Duration) { b.contendedRound(ctx, d, hold) })
	var rows []*lockRow
	if lim := r.limit1; lim != nil {
		rows = append(rows, &lockRow{Impl: "limit", Goroutines: 1, Seconds: lim.Seconds,
			HandoffP50us: lim.P50us, HandoffP99us: lim.P99us, Reference: true})
	}
	for _, b := range benches {
		row := b.finishContended()
		if r.limit1 != nil && r.limit1.P50us > 0 {
			row.VsLimit = row.HandoffP50us / r.limit1.P50us
		}
		rows = append(rows, row)
	}
	s.Results = rows
	for _, row := range rows {
		if row.Reference {
			s.Rows = append(s.Rows, []string{row.Impl, "-", fmtDur(usDur(row.HandoffP50us)),
				fmtDur(usDur(row.HandoffP99us)), "1.00", "-", "-"})
			continue
		}
		s.Rows = append(s.Rows, []string{row.Impl, fmtRate(row.OpsPerSec),
			fmtDur(usDur(row.HandoffP50us)), fmtDur(usDur(row.HandoffP99us)),
			fmtRatio(row.VsLimit), fmtInt(row.Violations), errText(row)})
	}
	s.Notes = append(s.Notes,
		"a goroutine that released the lock asks again only once another has taken it: every acquisition is a hand-off to a waiting goroutine",
		"hand-off latency: from just before the holder's Unlock call to the next holder's Lock returning",
		"limit row: two no-op script round trips in a row (an unlock's, then the next holder's acquire), from scenario 1; p50 vs limit: lower is better")

	rl, rs := find(rows, "relock"), find(rows, "redsync")
	if rl != nil && rl.Handoffs > 0 {
		p50 := usDur(rl.HandoffP50us)
		r.goal("contended hand-off p50", "< 1ms", fmtDur(p50), p50 < time.Millisecond)
		p99 := usDur(rl.HandoffP99us)
		r.goal("contended hand-off p99", "< 5ms", fmtDur(p99), p99 < 5*time.Millisecond)
		if rs != nil && rs.Handoffs > 0 {
			ratio := rs.HandoffP50us / rl.HandoffP50us
			r.goal("contended hand-off p50 vs redsync", ">= 20x better",
				fmt.Sprintf("%.0fx (%s vs %s)", ratio, fmtDur(p50), fmtDur(usDur(rs.HandoffP50us))), ratio >= 20)
		}
	}
	var viol []string
	ok := true
	for _, row := range rows {
		if !row.Reference {
			viol = append(viol, fmt.Sprintf("%s %d", row.Impl, row.Violations))
			ok = ok && row.Violations == 0
		}
	}
	if len(viol) > 0 {
		r.goal("mutual-exclusion violations", "0", strings.Join(viol, ", "), ok)
	}
	return s
}

func find(rows []*lockRow, impl string) *lockRow {
	for _, row := range rows {
		if row.Impl == impl {
			return row
		}
	}
	return nil
}

func errText(row *lockRow) string {
	if row.FirstError != "" && row.Errors == 0 {
		return "failed: " + row.FirstError
	}
	if row.Errors > 0 {
		return fmt.Sprintf("%d (%s)", row.Errors, row.FirstError)
	}
	return "0"
}

func usDur(us float64) time.Duration { return time.Duration(us * float64(time.Microsecond)) }
