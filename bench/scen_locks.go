package main

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// lockRow is one implementation's figures in the lock scenarios.
type lockRow struct {
	Impl       string `json:"impl"`
	Goroutines int    `json:"goroutines"`
	// Clients is the number of client instances the goroutines share out
	// (1: all on one client; else one each, as so many processes would).
	Clients     int     `json:"clients"`
	Seconds     float64 `json:"seconds"`
	Ops         int64   `json:"ops"`
	OpsPerSec   float64 `json:"ops_per_sec"`
	P50us       float64 `json:"p50_us"`
	P99us       float64 `json:"p99_us"`
	AllocsPerOp float64 `json:"allocs_per_op"`
	// CPU time per op of this process and of redis-server (user+sys; the
	// server's from INFO cpu).
	ClientCPUus float64 `json:"client_cpu_us_per_op"`
	ServerCPUus float64 `json:"server_cpu_us_per_op"`
	// CmdsPerOp is the commands the clients sent (RESP arrays written on
	// their connections) per op; CallsPerOp is the calls the server ran
	// per op (INFO commandstats), the ones inside scripts included. Both
	// by command name too, and the bytes each way.
	CmdsPerOp     float64            `json:"client_cmds_per_op"`
	CallsPerOp    float64            `json:"server_calls_per_op"`
	CmdsByName    map[string]float64 `json:"client_cmds_per_op_by_name,omitempty"`
	CallsByName   map[string]float64 `json:"server_calls_per_op_by_name,omitempty"`
	BytesOutPerOp float64            `json:"bytes_sent_per_op"`
	BytesInPerOp  float64            `json:"bytes_received_per_op"`
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
	// Contention only. In the contended scenarios an op is an acquisition.
	Handoffs int64 `json:"handoffs,omitempty"`
	// HoldMeanUs is how long a contention scenario's holds lasted, on
	// average: from Lock's return to the Unlock call (the hold's sleep
	// lasts longer than asked).
	HoldMeanUs   float64 `json:"hold_mean_us,omitempty"`
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

// bench is one implementation's run in the lock scenarios (and 5d): it is
// opened once, then measured in rounds that alternate with the other
// implementations', so that a change in the machine's load while the
// program runs falls on every implementation alike.
type bench struct {
	p peer
	// srvs are the servers the implementation uses; own is set when
	// openBench started the one server for it.
	srvs []*server
	own  bool
	// ims are the client instances: one that every goroutine shares, or
	// one per goroutine.
	ims     []impl
	wire    *wire
	lockers []locker
	row     lockRow

	all     hist // latencies (lock+unlock, or hand-offs)
	elapsed time.Duration
	mallocs uint64
	cpu     time.Duration // this process
	srv     stats         // the servers' counters over the rounds
	sent    wireCounts    // what the clients sent over the rounds
	errs    errCount
	// contention
	acquired   int64         // in the measured windows
	held       time.Duration // the holds of those acquisitions, in all
	violations atomic.Int64
}

// openBench connects p to srvs (nil: to a server of its own, so that no
// implementation pays for another's keys), with clients instances (1, or
// one per goroutine), and makes goroutines handles: on keys of their own
// (name == ""), or all on the lock name; then it warms them up.
func openBench(ctx context.Context, srvs []*server, p peer, goroutines, clients int, scenario, name string) *bench {
	b := &bench{p: p, srvs: srvs, wire: newWire(), row: lockRow{Impl: p.name, Goroutines: goroutines, Clients: clients}}
	if len(srvs) == 0 {
		srv, err := startServer()
		if err != nil {
			b.row.FirstError = err.Error()
			return b
		}
		b.srvs, b.own = []*server{srv}, true
	}
	for range clients {
		im, err := p.open(b.srvs[0].Addr, b.wire)
		if err != nil {
			b.row.FirstError = err.Error()
			b.closeClients()
			return b
		}
		b.ims = append(b.ims, im)
	}
	b.lockers = make([]locker, goroutines)
	for i := range b.lockers {
		key := name
		if key == "" {
			key = fmt.Sprintf("bench:%s:%s:%d", scenario, p.name, i)
		}
		b.lockers[i] = b.ims[i%len(b.ims)].locker(key)
	}
	// Scripts loaded, connections open. Handles on one lock warm up one
	// at a time, and only two of them, unless each has a client of its
	// own: then each once. The context has a deadline, as in the measured
	// rounds: rueidis moves a connection to its background writer and
	// reader for good at the first call with a cancellable context that
	// has none, and a single caller is faster without.
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	const warmup = 200 * time.Millisecond
	var wg sync.WaitGroup
	for i, l := range b.lockers {
		warm := func() {
			warmEnd := time.Now().Add(warmup)
			times := 10
			if clients > 1 {
				times = 1
			}
			for n := 0; n < times || (name == "" && time.Now().Before(warmEnd)); n++ {
				if err := lockUnlock(ctx, l); err != nil {
					b.errs.add(err)
					return
				}
			}
		}
		if name == "" {
			wg.Go(warm)
		} else if i < 2 || clients > 1 {
			warm()
		}
	}
	wg.Wait()
	return b
}

func (b *bench) ok() bool { return len(b.ims) > 0 && b.errs.n.Load() <= maxErrors }

func (b *bench) closeClients() {
	var wg sync.WaitGroup
	for _, im := range b.ims {
		wg.Go(im.close)
	}
	wg.Wait()
	b.ims = nil
}

func (b *bench) close(ctx context.Context) {
	b.closeClients()
	for _, srv := range b.srvs {
		if b.own {
			srv.stop()
		} else {
			_ = srv.flush(ctx)
		}
	}
	b.srvs = nil
}

// serverStats adds up the counters of b's servers.
func (b *bench) serverStats(ctx context.Context) stats {
	var st stats
	for _, srv := range b.srvs {
		s, err := srv.stats(ctx)
		if err != nil {
			b.errs.add(fmt.Errorf("INFO: %w", err))
		}
		st.add(s)
	}
	return st
}

// mark is the counters at the start of a round.
type mark struct {
	srv     stats
	sent    wireCounts
	cpu     time.Duration
	mallocs uint64
}

// begin reads the counters before a round. Allocations are counted over
// the whole process (the library's background goroutines included).
func (b *bench) begin(ctx context.Context) mark {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	// The clients' counters first, then the server's, here as in end, so
	// that the two windows are as long.
	m := mark{mallocs: ms.Mallocs, cpu: rusage(), sent: b.wire.snap()}
	m.srv = b.serverStats(ctx)
	return m
}

// end adds what the round did since m.
func (b *bench) end(ctx context.Context, m mark) {
	b.cpu += rusage() - m.cpu
	b.sent.add(b.wire.snap().sub(m.sent))
	b.srv.add(b.serverStats(ctx).sub(m.srv))
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.mallocs += ms.Mallocs - m.mallocs
}

// reset forgets the rounds measured so far (a warm-up), but not the
// errors and violations they saw.
func (b *bench) reset() {
	b.all = hist{}
	b.elapsed, b.mallocs, b.cpu = 0, 0, 0
	b.srv, b.sent = stats{}, wireCounts{}
	b.acquired, b.held = 0, 0
}

// loopRound runs lock+unlock in a loop in every goroutine, each on a key
// of its own, for d.
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
	m := b.begin(ctx)
	start := time.Now()
	end = start.Add(d)
	close(startC)
	done.Wait()
	b.elapsed += time.Since(start)
	b.end(ctx, m)
	if b.own {
		keys, _ := b.srvs[0].do(ctx, "DBSIZE").AsInt64()
		b.row.KeysAfter = max(b.row.KeysAfter, keys)
	} else {
		b.row.KeysAfter = -1 // shared servers: not this implementation's alone
	}
	for i := range hists {
		b.all.merge(&hists[i])
	}
}

// perOp fills in the per-op counts of row, over ops ops.
func (b *bench) perOp(row *lockRow, ops int64) {
	if ops <= 0 {
		return
	}
	n := float64(ops)
	row.AllocsPerOp = float64(b.mallocs) / n
	row.ClientCPUus = micros(b.cpu) / n
	row.ServerCPUus = micros(b.srv.CPU) / n
	row.CmdsPerOp = float64(b.sent.Cmds) / n
	row.CallsPerOp = float64(b.srv.work()) / n
	row.CmdsByName = perOp(b.sent.ByName, ops)
	row.CallsByName = perOp(b.srv.workCalls(), ops)
	row.BytesOutPerOp = float64(b.sent.Out) / n
	row.BytesInPerOp = float64(b.sent.In) / n
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
	b.perOp(row, b.all.n)
	row.Errors = b.errs.n.Load()
	if row.FirstError == "" {
		row.FirstError = b.errs.first
	}
	return row
}

// contendedRound runs every goroutine on the one lock, measuring d after
// a lead-in. Each takes the lock, checks that it is alone inside (an
// in-process counter), holds it for hold, and releases it. Then it waits
// until another goroutine has taken the lock before it asks again, so that
// every acquisition is a hand-off to a goroutine that was already waiting:
// without that rule the goroutine that just released wins again at once
// (its first attempt finds the lock free), and a poller's hand-off never
// shows. The hold makes the first attempt of a goroutine that asks again
// fail, so that it waits like the others. The hand-off latency runs from
// just before the holder's Unlock call to the next holder's Lock
// returning, through a shared atomic stamp (nanoseconds since the round's
// start).
//
// The counters (commands, server calls, CPU) are read when the lead-in
// ends and when d has passed, and only the acquisitions between the two
// readings count, so the figures cover the steady state only: not the
// waiters' first subscriptions, nor their giving up at the end. The
// contexts of Lock have a deadline well past the end and are cancelled at
// the end instead: a deadline that passes while a reply is due makes
// rueidis close the connection of a single caller, which the next round
// would pay for.
func (b *bench) contendedRound(ctx context.Context, d, hold time.Duration) {
	var (
		hists = make([]hist, len(b.lockers))
		acq   = make([]int64, len(b.lockers))
		held  = make([]time.Duration, len(b.lockers))
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
	lead := min(d/5, 100*time.Millisecond)
	start := time.Now()
	end := start.Add(lead + d)
	lctx, cancel := context.WithDeadline(ctx, end.Add(time.Minute))
	defer cancel()
	var (
		m        mark
		counting atomic.Bool // between the two readings
		opened   time.Time
		begun    = make(chan struct{})
		closed   = make(chan struct{})
	)
	leadIn := time.AfterFunc(lead, func() {
		m = b.begin(ctx)
		opened = time.Now()
		counting.Store(true)
		close(begun)
	})
	defer leadIn.Stop()
	stopper := time.AfterFunc(lead+d, func() {
		<-begun
		counting.Store(false)
		b.elapsed += time.Since(opened)
		b.end(ctx, m)
		close(closed)
		cancel()
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
					if lctx.Err() != nil || !now.Before(end) {
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
				if counting.Load() {
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
				if counting.Load() {
					held[id-1] += time.Since(now)
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
	<-closed
	for i := range hists {
		b.all.merge(&hists[i])
		b.acquired += acq[i]
		b.held += held[i]
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
	if b.acquired > 0 {
		row.HoldMeanUs = micros(b.held / time.Duration(b.acquired))
	}
	b.perOp(row, b.acquired)
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
	return r.interleaveFor(ctx, ps, r.cfg.Duration, open, round)
}

// interleaveFor is interleave for total per implementation.
func (r *run) interleaveFor(ctx context.Context, ps []peer, total time.Duration, open func(p peer) *bench, round func(b *bench, d time.Duration)) []*bench {
	var benches []*bench
	for _, p := range ps {
		if ctx.Err() != nil {
			break
		}
		benches = append(benches, open(p))
	}
	rounds := max(r.cfg.Rounds, 1)
	d := total / time.Duration(rounds)
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
		"allocs/op: runtime.MemStats Mallocs over the rounds, per op, the whole process (background goroutines included)",
		"each implementation has a redis-server of its own; keys after: keys left in it at the end of a round, every lock released")
	s.Notes = append(s.Notes, countNotes...)
	s.Notes = append(s.Notes, breakdown(rows, "op")...)
	if rl := find(rows, "relock"); rl != nil && rl.Ops > 0 {
		if best := fastest(rows, "rueidislock", "redsync", "bsm"); best != nil {
			r.goal("uncontended lock+unlock vs the fastest peer", ">= the fastest peer",
				fmt.Sprintf("%.2fx %s (%s vs %s ops/s)", rl.OpsPerSec/max(best.OpsPerSec, 1), best.Impl,
					fmtRate(rl.OpsPerSec), fmtRate(best.OpsPerSec)), rl.OpsPerSec >= best.OpsPerSec)
		}
		r.minimalGoal("uncontended lock+unlock vs minimal", rl, find(rows, "minimal"))
	}
	return s
}

// fastest returns the row of impls with the most operations per second.
func fastest(rows []*lockRow, impls ...string) *lockRow {
	var best *lockRow
	for _, impl := range impls {
		if row := find(rows, impl); row != nil && row.Ops > 0 && (best == nil || row.OpsPerSec > best.OpsPerSec) {
			best = row
		}
	}
	return best
}

// minimalGoal records relock's rate over the minimal implementation's, to
// be at least 0.9.
func (r *run) minimalGoal(name string, rl, minimal *lockRow) {
	if minimal == nil || minimal.Ops == 0 {
		return
	}
	ratio := rl.OpsPerSec / max(minimal.OpsPerSec, 1)
	r.goal(name, ">= 0.90x minimal",
		fmt.Sprintf("%.2fx (%s vs %s ops/s)", ratio, fmtRate(rl.OpsPerSec), fmtRate(minimal.OpsPerSec)), ratio >= 0.9)
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
	s.Notes = append(s.Notes, countNotes...)
	if rl, rd := find(rows, "relock"), find(rows, "rueidislock"); rl != nil && rd != nil && rl.Ops > 0 {
		r.goal(fmt.Sprintf("%d-goroutine throughput vs rueidislock", n), ">= rueidislock",
			fmt.Sprintf("%s vs %s ops/s (%.2fx)", fmtRate(rl.OpsPerSec), fmtRate(rd.OpsPerSec), rl.OpsPerSec/max(rd.OpsPerSec, 1)),
			rl.OpsPerSec >= rd.OpsPerSec)
	}
	if rl := find(rows, "relock"); rl != nil && rl.Ops > 0 {
		r.minimalGoal(fmt.Sprintf("%d-goroutine throughput vs minimal", n), rl, find(rows, "minimal"))
	}
	return s
}

// loopRows measures lock+unlock loops of every selected implementation,
// interleaved, and fills in the ratio to the limit.
func (r *run) loopRows(ctx context.Context, goroutines int, scenario string) []*lockRow {
	benches := r.interleave(ctx, r.scenarioPeers(scenario),
		func(p peer) *bench { return openBench(ctx, r.benchServers(), p, goroutines, 1, scenario, "") },
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

var loopColumns = []string{"impl", "ops/s", "p50", "p99", "vs limit", "allocs/op", "CPU/op",
	"cmds/op", "redis calls/op", "redis CPU/op", "keys after", "errors"}

// fmtCPU prints CPU microseconds per op.
func fmtCPU(us float64) string {
	if us == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1fµs", us)
}

// fmtPerOp prints a count per op.
func fmtPerOp(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
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
			fmt.Sprintf("%.1f", row.AllocsPerOp), fmtCPU(row.ClientCPUus),
			fmtPerOp(row.CmdsPerOp), fmtPerOp(row.CallsPerOp), fmtCPU(row.ServerCPUus),
			fmtKeys(row.KeysAfter), errText(row)})
	}
	return out
}

// countNotes are the notes that say how the per-op counts are made.
var countNotes = []string{
	"CPU: user+sys of this whole process (every client instance, background goroutines included); redis CPU: used_cpu_user+used_cpu_sys of INFO cpu",
	"cmds: commands the clients sent, counted on their connections (dial hooks); redis calls: INFO commandstats calls, those inside scripts included (the program's own INFO excepted)",
}

// breakdown lists, per implementation, what the clients sent and what the
// server ran, per op, by command.
func breakdown(rows []*lockRow, unit string) []string {
	var out []string
	for _, row := range rows {
		if row.Reference || (len(row.CmdsByName) == 0 && len(row.CallsByName) == 0) {
			continue
		}
		out = append(out, fmt.Sprintf("%s per %s: sent %s; redis ran %s", row.Impl, unit,
			fmtByName(row.CmdsByName), fmtByName(row.CallsByName)))
	}
	return out
}

// fmtByName prints counts per op by name, the largest first; counts under
// 0.005 are left out.
func fmtByName(m map[string]float64) string {
	names := slices.Collect(maps.Keys(m))
	slices.SortFunc(names, func(a, b string) int {
		if c := cmp.Compare(m[b], m[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	var parts []string
	for _, n := range names {
		if m[n] >= 0.005 {
			parts = append(parts, fmt.Sprintf("%s %.2f", n, m[n]))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// ensureLimit1 measures the limit at one goroutine unless scenario 1 did:
// the reference of a hand-off, two script round trips in a row (the
// unlock's, then the next holder's acquire).
func (r *run) ensureLimit1(ctx context.Context, scenario string) {
	if r.limit1 != nil {
		return
	}
	for _, p := range r.peers {
		if p.name == "limit" {
			r.logf("  %s: the limit at 1 goroutine", scenario)
			b := r.interleave(ctx, []peer{p},
				func(p peer) *bench { return openBench(ctx, r.benchServers(), p, 1, 1, "serial", "") },
				func(b *bench, d time.Duration) { b.loopRound(ctx, d) })
			r.limit1 = b[0].finishLoop()
		}
	}
}

// contendedRows measures ps on one lock each, interleaved: goroutines
// goroutines on clients client instances (1, or one per goroutine), each
// holding the lock for hold, for total each. With clients of their own,
// the goroutines first contend unmeasured for a moment, so that every
// client has its connections and subscriptions. The limit's reference row
// comes first when it is known.
func (r *run) contendedRows(ctx context.Context, ps []peer, goroutines, clients int, hold, total time.Duration, scenario string) []*lockRow {
	benches := r.interleaveFor(ctx, ps, total,
		func(p peer) *bench {
			b := openBench(ctx, r.benchServers(), p, goroutines, clients, scenario, "bench:"+scenario+":"+p.name)
			if clients > 1 && b.ok() {
				b.contendedRound(ctx, 200*time.Millisecond, hold)
				b.reset()
			}
			return b
		},
		func(b *bench, d time.Duration) { b.contendedRound(ctx, d, hold) })
	var rows []*lockRow
	if lim := r.limit1; lim != nil {
		rows = append(rows, &lockRow{Impl: "limit", Goroutines: 1, Clients: 1, Seconds: lim.Seconds,
			HandoffP50us: lim.P50us, HandoffP99us: lim.P99us, Reference: true})
	}
	for _, b := range benches {
		row := b.finishContended()
		if r.limit1 != nil && r.limit1.P50us > 0 {
			row.VsLimit = row.HandoffP50us / r.limit1.P50us
		}
		rows = append(rows, row)
	}
	return rows
}

var contendedColumns = []string{"impl", "acquisitions/s", "hold (mean)", "hand-off p50", "hand-off p99", "p50 vs limit",
	"CPU/acq", "cmds/acq", "redis calls/acq", "redis CPU/acq", "violations", "errors"}

func contendedTable(rows []*lockRow) [][]string {
	var out [][]string
	for _, row := range rows {
		if row.Reference {
			out = append(out, []string{row.Impl, "-", "-", fmtDur(usDur(row.HandoffP50us)),
				fmtDur(usDur(row.HandoffP99us)), "1.00", "-", "-", "-", "-", "-", "-"})
			continue
		}
		hold := "-"
		if row.HoldMeanUs > 0 {
			hold = fmtDur(usDur(row.HoldMeanUs))
		}
		out = append(out, []string{row.Impl, fmtRate(row.OpsPerSec), hold,
			fmtDur(usDur(row.HandoffP50us)), fmtDur(usDur(row.HandoffP99us)), fmtRatio(row.VsLimit),
			fmtCPU(row.ClientCPUus), fmtPerOp(row.CmdsPerOp), fmtPerOp(row.CallsPerOp), fmtCPU(row.ServerCPUus),
			fmtInt(row.Violations), errText(row)})
	}
	return out
}

// exclusivePeers are the selected implementations that lock something
// and run in scenario.
func (r *run) exclusivePeers(scenario string) []peer {
	var ps []peer
	for _, p := range r.scenarioPeers(scenario) {
		if p.exclusive {
			ps = append(ps, p)
		}
	}
	return ps
}

// scenarioPeers are the selected implementations that run in scenario.
func (r *run) scenarioPeers(scenario string) []peer {
	var ps []peer
	for _, p := range r.peers {
		if p.runsIn(scenario) {
			ps = append(ps, p)
		}
	}
	return ps
}

// runsIn reports whether p runs in scenario.
func (p peer) runsIn(scenario string) bool { return p.only == nil || slices.Contains(p.only, scenario) }

// violationGoal records that no implementation let two holders in at once.
func (r *run) violationGoal(name string, rows []*lockRow) {
	var viol []string
	ok := true
	for _, row := range rows {
		if !row.Reference {
			viol = append(viol, fmt.Sprintf("%s %d", row.Impl, row.Violations))
			ok = ok && row.Violations == 0
		}
	}
	if len(viol) > 0 {
		r.goal(name, "0", strings.Join(viol, ", "), ok)
	}
}

func (r *run) contention(ctx context.Context) *section {
	n, d, hold := r.cfg.Contenders, r.cfg.Duration, r.cfg.Hold
	s := &section{
		ID:      "contention",
		Title:   fmt.Sprintf("3. Contention: %d goroutines on one key, one client, each holding it %v, %v each", n, hold, d),
		Columns: contendedColumns,
	}
	r.ensureLimit1(ctx, "contention")
	rows := r.contendedRows(ctx, r.exclusivePeers("contention"), n, 1, hold, d, "contention")
	s.Results = rows
	s.Rows = contendedTable(rows)
	s.Notes = append(s.Notes,
		"a goroutine that released the lock asks again only once another has taken it: every acquisition is a hand-off to a waiting goroutine",
		"hand-off latency: from just before the holder's Unlock call to the next holder's Lock returning",
		"limit row: two no-op script round trips in a row (an unlock's, then the next holder's acquire), from scenario 1; p50 vs limit: lower is better",
		"each round has an unmeasured lead-in of a fifth of it (at most 100ms); the counters cover the measured part, per acquisition (acq) in it")
	s.Notes = append(s.Notes, noGrantNotes()...)
	s.Notes = append(s.Notes, countNotes...)

	rl, rs := find(rows, "relock"), find(rows, "redsync")
	r.oneClient = rl
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
		r.grantGoals(n, hold, rl, find(rows, "minimal"), find(rows, "relock/no-grant"), find(rows, "mutex"))
	}
	r.violationGoal("mutual-exclusion violations", rows)
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

// grantGoals records the goals of grant on release (issue 35) for one
// Client's n goroutines holding the lock for hold: relock's hand-off p50
// at most 0.6x minimal's, and its acquisitions per second at least 0.85x
// the most that holds of hold allow. noGrant, when measured, is cited
// beside: the same Client without grant on release; and so is mutex, the
// in-process lock in the same harness: the most that the holds' sleeps
// allow on the machine.
func (r *run) grantGoals(n int, hold time.Duration, rl, minimal, noGrant, mutex *lockRow) {
	before := func(f func(*lockRow) string) string {
		if noGrant == nil || noGrant.Ops == 0 {
			return ""
		}
		return "; relock/no-grant: " + f(noGrant)
	}
	if minimal != nil && minimal.Handoffs > 0 && rl.Handoffs > 0 {
		ratio := rl.HandoffP50us / minimal.HandoffP50us
		r.goal(fmt.Sprintf("one client's %d goroutines: hand-off p50 vs minimal", n), "<= 0.60x minimal",
			fmt.Sprintf("%.2fx (%s vs %s%s)", ratio, fmtDur(usDur(rl.HandoffP50us)), fmtDur(usDur(minimal.HandoffP50us)),
				before(func(row *lockRow) string {
					return fmt.Sprintf("%.2fx, %s", row.HandoffP50us/minimal.HandoffP50us, fmtDur(usDur(row.HandoffP50us)))
				})),
			ratio <= 0.6)
	}
	if hold > 0 && rl.Ops > 0 {
		most := float64(time.Second) / float64(hold)
		ratio := rl.OpsPerSec / most
		ceiling := ""
		if mutex != nil && mutex.OpsPerSec > 0 {
			ceiling = fmt.Sprintf("; an in-process lock in the same harness: %.2fx, %s/s, holds of %s on average (relock's %.2fx of it)",
				mutex.OpsPerSec/most, fmtRate(mutex.OpsPerSec), fmtDur(usDur(mutex.HoldMeanUs)), rl.OpsPerSec/mutex.OpsPerSec)
		}
		r.goal(fmt.Sprintf("one client's %d goroutines, %v holds: acquisitions per second", n, hold),
			fmt.Sprintf(">= 0.85x the %s/s that the holds allow", fmtRate(most)),
			fmt.Sprintf("%.2fx (%s/s%s%s)", ratio, fmtRate(rl.OpsPerSec),
				before(func(row *lockRow) string {
					return fmt.Sprintf("%.2fx, %s/s", row.OpsPerSec/most, fmtRate(row.OpsPerSec))
				}), ceiling),
			ratio >= 0.85)
	}
}
