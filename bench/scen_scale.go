package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/rlock"
)

// counted is a relock Client on a counting rueidis client whose
// connections carry a name of their own, so that CLIENT LIST finds them.
type counted struct {
	c        *rlock.Client
	cc       countingClient
	connName string
	acquire  string // SHA1 of the acquire script
	unlock   string // SHA1 of the unlock script
}

func openCounted(ctx context.Context, addr, connName string, opts ...rlock.Option) (*counted, error) {
	rdb, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:       []string{addr},
		ClientName:        connName,
		PipelineMultiplex: -1, // as rlock.NewClient
	})
	if err != nil {
		return nil, err
	}
	cc := newCountingClient(rdb)
	c, err := rlock.New(cc, opts...)
	if err != nil {
		rdb.Close()
		return nil, err
	}
	k := &counted{c: c, cc: cc, connName: connName}
	if k.acquire, k.unlock, err = scriptSHAs(ctx, c, cc); err != nil {
		k.close()
		return nil, err
	}
	return k, nil
}

func (k *counted) close() {
	_ = k.c.Close()
	k.cc.Client.Close()
}

// waitFor polls cond until it holds, ctx ends or limit passes.
func waitFor(ctx context.Context, limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for !cond() {
		if ctx.Err() != nil || time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// mem is the process's live heap and goroutine stacks, after a full GC.
type mem struct{ heap, stack uint64 }

func memNow() mem {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return mem{m.HeapAlloc, m.StackInuse}
}

// perItem is the growth from m0 to m1, per item: heap+stack and heap only.
func perItem(m0, m1 mem, n int) (total, heap float64) {
	dh := float64(int64(m1.heap) - int64(m0.heap))
	ds := float64(int64(m1.stack) - int64(m0.stack))
	return (dh + ds) / float64(n), dh / float64(n)
}

// ---- 5a: many waiters on one lock ----

type waitersResult struct {
	Waiters              int     `json:"waiters"`
	SetupSeconds         float64 `json:"setup_seconds"`
	AllWaiting           bool    `json:"all_waiting"`
	SubscribedChannels   int     `json:"subscribed_channels"`
	ChannelSubscribers   int64   `json:"channel_subscribers"`
	ClientConnections    int     `json:"client_connections"`
	SubscribedConns      int     `json:"subscribed_connections"`
	Handoffs             int64   `json:"handoffs"`
	HandoffsPerSec       float64 `json:"handoffs_per_sec"`
	HandoffP50us         float64 `json:"handoff_p50_us"`
	HandoffP99us         float64 `json:"handoff_p99_us"`
	AcquiresPerHandoff   float64 `json:"acquire_scripts_per_handoff"`
	ServerScriptsPerHand float64 `json:"server_acquire_scripts_per_handoff"`
	ServerCallsPerHand   float64 `json:"server_calls_per_handoff"`
	ServerCPUusPerHand   float64 `json:"server_cpu_us_per_handoff"`
	Violations           int64   `json:"violations"`
	Errors               int64   `json:"errors"`
	FirstError           string  `json:"first_error,omitempty"`
}

// waitersOneLock parks r.cfg.Waiters goroutines on one lock that the main
// goroutine holds, looks at the subscriptions and connections, then
// releases it and lets every waiter take it once in turn.
func (r *run) waitersOneLock(ctx context.Context) *section {
	n := r.cfg.Waiters
	s := &section{
		ID:      "waiters",
		Title:   fmt.Sprintf("5a. relock: %s goroutine waiters on one lock, one Client", fmtInt(int64(n))),
		Columns: measureColumns,
	}
	res := &waitersResult{Waiters: n}
	s.Results = res
	k, err := openCounted(ctx, r.srv.Addr, "relock-bench-waiters")
	if err != nil {
		s.Skipped = err.Error()
		return s
	}
	defer k.close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()

	const name = "bench:waiters"
	holder := k.c.GetLock(name)
	if err := holder.Lock(ctx); err != nil {
		s.Skipped = err.Error()
		return s
	}
	base := k.cc.count(k.acquire)
	var (
		wg         sync.WaitGroup
		errs       errCount
		mu         sync.Mutex
		h          hist
		stamp      atomic.Int64 // nanoseconds since start, just before an Unlock
		inside     atomic.Int32
		violations atomic.Int64
	)
	start := time.Now()
	for range n {
		wg.Go(func() {
			l := k.c.GetLock(name)
			if err := l.Lock(ctx); err != nil {
				errs.add(err)
				return
			}
			now := time.Since(start)
			if inside.Add(1) != 1 {
				violations.Add(1)
			}
			mu.Lock()
			h.record(now - time.Duration(stamp.Load()))
			mu.Unlock()
			inside.Add(-1)
			stamp.Store(int64(time.Since(start)))
			if err := l.Unlock(ctx); err != nil {
				errs.add(err)
			}
		})
	}
	// A waiter is asleep after two failed attempts: one before it
	// subscribes and one after.
	res.AllWaiting = waitFor(ctx, time.Minute, func() bool { return k.cc.count(k.acquire)-base >= int64(2*n) })
	time.Sleep(100 * time.Millisecond)
	res.SetupSeconds = time.Since(start).Seconds()

	channel := "redisson_lock__channel:{" + name + "}"
	res.SubscribedChannels, _ = r.srv.channels(ctx, "redisson_lock__channel:*")
	res.ChannelSubscribers, _ = r.srv.numsub(ctx, channel)
	res.ClientConnections, res.SubscribedConns, _ = r.srv.clientConns(ctx, k.connName)

	before, _ := r.srv.stats(ctx)
	acqBefore := k.cc.count(k.acquire)
	unlBefore := k.cc.count(k.unlock)
	t0 := time.Now()
	stamp.Store(int64(time.Since(start)))
	if err := holder.Unlock(ctx); err != nil {
		errs.add(err)
	}
	wg.Wait()
	elapsed := time.Since(t0)
	after, _ := r.srv.stats(ctx)
	d := after.sub(before)
	unlocks := k.cc.count(k.unlock) - unlBefore

	res.Handoffs = h.n
	res.HandoffsPerSec = float64(h.n) / elapsed.Seconds()
	res.HandoffP50us = micros(h.quantile(0.5))
	res.HandoffP99us = micros(h.quantile(0.99))
	if h.n > 0 {
		res.AcquiresPerHandoff = float64(k.cc.count(k.acquire)-acqBefore) / float64(h.n)
		res.ServerScriptsPerHand = float64(d.Calls["evalsha"]+d.Calls["eval"]-unlocks) / float64(h.n)
		res.ServerCallsPerHand = float64(d.work()) / float64(h.n)
		res.ServerCPUusPerHand = micros(d.CPU) / float64(h.n)
	}
	res.Violations = violations.Load()
	res.Errors = errs.n.Load()
	res.FirstError = errs.first

	s.Rows = waitersTable(res)
	if res.FirstError != "" {
		s.Notes = append(s.Notes, "first error: "+res.FirstError)
	}
	s.Notes = append(s.Notes, "each waiter takes the lock once, releases it and ends; the main goroutine held it while they queued")

	r.goal(fmt.Sprintf("%d waiters: subscribed channels", n), "1", strconv.Itoa(res.SubscribedChannels), res.SubscribedChannels == 1)
	r.goal(fmt.Sprintf("%d waiters: Client connections", n), "<= 2", strconv.Itoa(res.ClientConnections), res.ClientConnections <= 2 && res.ClientConnections > 0)
	r.goal(fmt.Sprintf("%d waiters: acquire scripts per hand-off", n), "< 3", fmt.Sprintf("%.2f", res.AcquiresPerHandoff),
		res.Handoffs > 0 && res.AcquiresPerHandoff < 3) // 0 when the release grants the hold
	r.goal(fmt.Sprintf("%d waiters: mutual-exclusion violations", n), "0", fmtInt(res.Violations), res.Violations == 0)
	return s
}

// ---- 5b: many waiters on as many locks ----

type manyLocksResult struct {
	Waiters             int     `json:"waiters"`
	SetupSeconds        float64 `json:"setup_seconds"`
	AllWaiting          bool    `json:"all_waiting"`
	PerWaiterBytes      float64 `json:"per_waiter_bytes"`
	PerWaiterHeapBytes  float64 `json:"per_waiter_heap_bytes"`
	IdleGoroutineBytes  float64 `json:"idle_goroutine_bytes"`
	IdleGoroutineHeap   float64 `json:"idle_goroutine_heap_bytes"`
	LibraryPerWaiter    float64 `json:"library_bytes_per_waiter"`
	LibraryHeapPerWait  float64 `json:"library_heap_bytes_per_waiter"`
	SubscribedChannels  int     `json:"subscribed_channels"`
	ClientConnections   int     `json:"client_connections"`
	SubscribedConns     int     `json:"subscription_connections"`
	CancelSeconds       float64 `json:"cancel_all_seconds"`
	ChannelsAfterCancel int     `json:"channels_after_cancel"`
	Errors              int64   `json:"errors"`
	FirstError          string  `json:"first_error,omitempty"`
}

// waitersManyLocks parks one waiter on each of r.cfg.ManyLocks locks held
// by another client, and measures what a waiter costs.
func (r *run) waitersManyLocks(ctx context.Context) *section {
	n := r.cfg.ManyLocks
	s := &section{
		ID:      "waiters10k",
		Title:   fmt.Sprintf("5b. relock: %s goroutine waiters on %s distinct locks, one Client", fmtInt(int64(n)), fmtInt(int64(n))),
		Columns: measureColumns,
	}
	res := &manyLocksResult{Waiters: n}
	s.Results = res
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()

	// The locks are held by another process: hashes written directly, in
	// Redisson's layout, with a lease that outlasts the run.
	names := make([]string, n)
	for i := range names {
		names[i] = "bench:many:" + strconv.Itoa(i)
	}
	adm := r.srv.admin
	for lo := 0; lo < n; lo += 1000 {
		var cmds rueidis.Commands
		for _, name := range names[lo:min(lo+1000, n)] {
			cmds = append(cmds,
				adm.B().Hset().Key(name).FieldValue().FieldValue("other-client:holder", "1").Build(),
				adm.B().Pexpire().Key(name).Milliseconds(600000).Build())
		}
		for _, res := range adm.DoMulti(ctx, cmds...) {
			if err := res.Error(); err != nil {
				s.Skipped = err.Error()
				return s
			}
		}
	}

	res.IdleGoroutineBytes, res.IdleGoroutineHeap = idleGoroutineCost(n)

	k, err := openCounted(ctx, r.srv.Addr, "relock-bench-many")
	if err != nil {
		s.Skipped = err.Error()
		return s
	}
	defer k.close()

	wctx, stop := context.WithCancel(ctx)
	defer stop()
	var (
		wg   sync.WaitGroup
		errs errCount
	)
	// One waiter first, on a name of its own, waiting until the others
	// are cancelled: the Client's pub/sub connection (opened at its first
	// subscription, closed when it has none: a cost per Client, not per
	// waiter) is open before the memory is measured.
	const warm = "bench:warm:many"
	if err := adm.Do(ctx, adm.B().Hset().Key(warm).FieldValue().FieldValue("other-client:holder", "1").Build()).Error(); err != nil {
		s.Skipped = err.Error()
		return s
	}
	base := k.cc.count(k.acquire)
	wg.Go(func() {
		if err := k.c.GetLock(warm).Lock(wctx); err == nil || wctx.Err() == nil {
			errs.add(fmt.Errorf("%s: the first waiter: %v", warm, err))
		}
	})
	if !waitFor(ctx, 10*time.Second, func() bool { return k.cc.count(k.acquire)-base >= 2 }) {
		s.Skipped = "the first waiter did not wait"
		return s
	}
	base = k.cc.count(k.acquire)
	m0 := memNow()
	start := time.Now()
	for _, name := range names {
		wg.Go(func() {
			l := k.c.GetLock(name)
			err := l.Lock(wctx)
			if err == nil {
				errs.add(fmt.Errorf("%s: acquired a lock held by another client", name))
				_ = l.Unlock(ctx)
			} else if !errors.Is(err, rlock.ErrNotAcquired) || wctx.Err() == nil {
				errs.add(err)
			}
		})
	}
	res.AllWaiting = waitFor(ctx, 2*time.Minute, func() bool { return k.cc.count(k.acquire)-base >= int64(2*n) })
	res.SetupSeconds = time.Since(start).Seconds()
	time.Sleep(200 * time.Millisecond)
	m1 := memNow()
	r.writeHeapProfile("waiters10k")
	res.PerWaiterBytes, res.PerWaiterHeapBytes = perItem(m0, m1, n)
	res.LibraryPerWaiter = res.PerWaiterBytes - res.IdleGoroutineBytes
	res.LibraryHeapPerWait = res.PerWaiterHeapBytes - res.IdleGoroutineHeap
	res.SubscribedChannels, _ = r.srv.channels(ctx, "redisson_lock__channel:{bench:many:*")
	res.ClientConnections, res.SubscribedConns, _ = r.srv.clientConns(ctx, k.connName)

	t0 := time.Now()
	stop()
	wg.Wait()
	res.CancelSeconds = time.Since(t0).Seconds()
	res.Errors = errs.n.Load()
	res.FirstError = errs.first
	time.Sleep(100 * time.Millisecond)
	res.ChannelsAfterCancel, _ = r.srv.channels(ctx, "redisson_lock__channel:{bench:many:*")

	s.Rows = manyLocksTable(res)
	if res.FirstError != "" {
		s.Notes = append(s.Notes, "first error: "+res.FirstError)
	}
	s.Notes = append(s.Notes,
		"memory: runtime HeapAlloc + StackInuse after two GCs, before and after the waiters started, divided by their number; one waiter of the Client waits already (its pub/sub connection is open)",
		"idle goroutine baseline: as many goroutines blocked on a channel, measured the same way; the difference is the library's")

	r.goal(fmt.Sprintf("%d waiters on %d locks: subscription connections", n, n), "1", strconv.Itoa(res.SubscribedConns), res.SubscribedConns == 1)
	r.goal(fmt.Sprintf("%d waiters on %d locks: heap per waiter (library's share)", n, n), "< 1 KiB",
		fmt.Sprintf("%s (heap+stack: %s; with the goroutine: %s)", fmtBytes(res.LibraryHeapPerWait), fmtBytes(res.LibraryPerWaiter), fmtBytes(res.PerWaiterBytes)),
		res.LibraryHeapPerWait < 1024)
	return s
}

// idleGoroutineCost is what a goroutine blocked on a channel costs,
// measured as the waiters are: heap+stack, and heap only.
func idleGoroutineCost(n int) (total, heap float64) {
	unblock := make(chan struct{})
	var started, wg sync.WaitGroup
	m0 := memNow()
	started.Add(n)
	for range n {
		wg.Go(func() {
			started.Done()
			<-unblock
		})
	}
	started.Wait()
	m1 := memNow()
	close(unblock)
	wg.Wait()
	return perItem(m0, m1, n)
}

// ---- 5c: many locks held on the watchdog ----

type watchdogResult struct {
	Locks             int     `json:"locks"`
	WatchdogTimeoutMs int64   `json:"watchdog_timeout_ms"`
	AcquireSeconds    float64 `json:"acquire_seconds"`
	MeasuredSeconds   float64 `json:"measured_seconds"`
	PerLockBytes      float64 `json:"per_lock_bytes"`
	PerLockHeapBytes  float64 `json:"per_lock_heap_bytes"`
	CPUShare          float64 `json:"cpu_share_of_one_core"`
	RedisCPUShare     float64 `json:"redis_cpu_share_of_one_core"`
	RenewalsPerSec    float64 `json:"renewals_per_sec"`
	ExpectedRenewals  float64 `json:"expected_renewals_per_sec"`
	PipelinesPerSec   float64 `json:"pipelines_per_sec"`
	// CommandsPerPipeline is the commands of a DoMulti call (0 in results
	// written before it was recorded).
	CommandsPerPipeline float64 `json:"commands_per_pipeline,omitempty"`
	DoCallsPerSec       float64 `json:"do_calls_per_sec"`
	RoundTripsPerSec    float64 `json:"round_trips_per_sec"`
	ServerCmdsPerSec    float64 `json:"server_commands_per_sec"`
	ServerEvalPerSec    float64 `json:"server_evalsha_per_sec"`
	ScriptLoadPerSec    float64 `json:"server_script_load_per_sec"`
	Lost                int64   `json:"lost"`
	MinRemainingMs      int64   `json:"min_remaining_lease_ms_of_sample"`
	CloseSeconds        float64 `json:"close_seconds"`
	Errors              int64   `json:"errors"`
	FirstError          string  `json:"first_error,omitempty"`
}

// watchdog takes r.cfg.Held locks on the watchdog lease and keeps them
// for r.cfg.HeldFor, measuring what the renewals cost.
func (r *run) watchdog(ctx context.Context) *section {
	n, timeout := r.cfg.Held, r.cfg.WatchdogTimeout
	s := &section{
		ID: "watchdog",
		Title: fmt.Sprintf("5c. relock: %s locks held on the watchdog (WithWatchdogTimeout(%v): renewal every %v), measured %v",
			fmtInt(int64(n)), timeout, timeout/3, r.cfg.HeldFor),
		Columns: measureColumns,
	}
	res := &watchdogResult{Locks: n, WatchdogTimeoutMs: timeout.Milliseconds()}
	s.Results = res
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()

	var lost atomic.Int64
	k, err := openCounted(ctx, r.srv.Addr, "relock-bench-watchdog",
		rlock.WithWatchdogTimeout(timeout),
		rlock.WithLostHandler(func(string, string, error) { lost.Add(1) }))
	if err != nil {
		s.Skipped = err.Error()
		return s
	}
	closed := false
	defer func() {
		if !closed {
			k.close()
		}
	}()

	handles := make([]*rlock.Lock, n)
	for i := range handles {
		handles[i] = k.c.GetLock("bench:held:" + strconv.Itoa(i))
	}
	var errs errCount
	m0 := memNow()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range watchdogWorkers {
		wg.Go(func() {
			for i := w; i < n; i += watchdogWorkers {
				if err := handles[i].Lock(ctx); err != nil {
					errs.add(err)
				}
			}
		})
	}
	wg.Wait()
	res.AcquireSeconds = time.Since(start).Seconds()
	m1 := memNow()
	r.writeHeapProfile("watchdog")
	res.PerLockBytes, res.PerLockHeapBytes = perItem(m0, m1, n)

	// Let the renewals settle into their rhythm, then measure.
	sleepCtx(ctx, timeout/3)
	ru0, calls0, t0 := rusage(), k.cc.calls(), time.Now()
	st0, _ := r.srv.stats(ctx)
	sleepCtx(ctx, r.cfg.HeldFor)
	ru1, calls1, elapsed := rusage(), k.cc.calls(), time.Since(t0)
	st1, _ := r.srv.stats(ctx)
	dc, ds, sec := calls1.sub(calls0), st1.sub(st0), elapsed.Seconds()

	res.MeasuredSeconds = sec
	res.CPUShare = (ru1 - ru0).Seconds() / sec
	res.RedisCPUShare = ds.CPU.Seconds() / sec
	res.RenewalsPerSec = float64(dc.Piped) / sec
	res.ExpectedRenewals = float64(n) / (timeout / 3).Seconds()
	res.PipelinesPerSec = float64(dc.DoMulti) / sec
	res.DoCallsPerSec = float64(dc.Do) / sec
	res.RoundTripsPerSec = float64(dc.Do+dc.DoMulti) / sec
	res.ServerCmdsPerSec = float64(ds.Commands) / sec
	res.ServerEvalPerSec = float64(ds.Calls["evalsha"]+ds.Calls["eval"]) / sec
	res.ScriptLoadPerSec = float64(ds.Calls["script|load"]) / sec
	res.Lost = lost.Load()
	res.MinRemainingMs = minRemaining(ctx, r.srv, handles)

	t1 := time.Now()
	k.close()
	closed = true
	res.CloseSeconds = time.Since(t1).Seconds()
	res.Errors = errs.n.Load()
	res.FirstError = errs.first

	if dc.DoMulti > 0 {
		res.CommandsPerPipeline = float64(dc.MultiCmds) / float64(dc.DoMulti)
	}
	s.Rows = watchdogTable(res)
	if res.FirstError != "" {
		s.Notes = append(s.Notes, "first error: "+res.FirstError)
	}
	s.Notes = append(s.Notes,
		"memory: HeapAlloc + StackInuse after two GCs, with the handles already made, before and after taking the locks",
		"round trips: each Do or DoMulti call of the Client is at most one round trip (rueidis may pipeline several Do calls into one);",
		"  the Do calls here are the SCRIPT LOAD that rueidis's Lua.ExecMulti sends before every pipeline",
		"server commands/s counts the commands run inside scripts too")

	r.goal(fmt.Sprintf("watchdog %d locks: memory per held lock", n), "< 1 KiB", fmtBytes(res.PerLockBytes), res.PerLockBytes < 1024)
	r.goal(fmt.Sprintf("watchdog %d locks: renewals keep up", n), fmt.Sprintf(">= 90%% of %s/s, 0 lost", fmtRate(res.ExpectedRenewals)),
		fmt.Sprintf("%s/s, %d lost", fmtRate(res.RenewalsPerSec), res.Lost), res.RenewalsPerSec >= 0.9*res.ExpectedRenewals && res.Lost == 0)
	r.goal(fmt.Sprintf("watchdog %d locks: round trips/s", n), "<= 1% of renewals/s",
		fmt.Sprintf("%s vs %s renewals/s", fmtRate(res.RoundTripsPerSec), fmtRate(res.RenewalsPerSec)),
		res.RenewalsPerSec > 0 && res.RoundTripsPerSec <= res.RenewalsPerSec/100)
	r.goal(fmt.Sprintf("watchdog %d locks: CPU share", n), "(reported)",
		fmt.Sprintf("%.1f%% of a core, redis-server %.1f%%", 100*res.CPUShare, 100*res.RedisCPUShare), true)
	return s
}

// minRemaining is the smallest PTTL, in ms, among up to 100 of the locks.
func minRemaining(ctx context.Context, srv *server, handles []*rlock.Lock) int64 {
	step := max(len(handles)/100, 1)
	var cmds rueidis.Commands
	for i := 0; i < len(handles); i += step {
		cmds = append(cmds, srv.admin.B().Pttl().Key(handles[i].Name()).Build())
	}
	least := int64(-1)
	for _, res := range srv.admin.DoMulti(ctx, cmds...) {
		v, err := res.AsInt64()
		if err != nil {
			continue
		}
		if least < 0 || v < least {
			least = v
		}
	}
	return least
}

// rusage is the process's user+sys CPU time so far.
func rusage() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
