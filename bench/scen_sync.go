package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/rlock"
)

// The scenarios of relock's read-write lock and semaphore. Their peers do
// not have these kinds, so each runs relock beside relock's own plain
// lock, on the main server.

// syncRow is one run of the sync scenarios.
type syncRow struct {
	Impl      string  `json:"impl"`
	ReadShare float64 `json:"read_share,omitempty"`
	Seconds   float64 `json:"seconds"`
	Ops       int64   `json:"ops"`
	OpsPerSec float64 `json:"ops_per_sec"`
	// Acquisition latency (the Lock call), of read and of write holds (all
	// holds are "write" for the plain lock).
	ReadP50us  float64 `json:"read_p50_us,omitempty"`
	ReadP99us  float64 `json:"read_p99_us,omitempty"`
	WriteP50us float64 `json:"write_p50_us,omitempty"`
	WriteP99us float64 `json:"write_p99_us,omitempty"`
	// The hand-off scenario's latency.
	HandoffP50us float64 `json:"handoff_p50_us,omitempty"`
	HandoffP99us float64 `json:"handoff_p99_us,omitempty"`
	Errors       int64   `json:"errors"`
	FirstError   string  `json:"first_error,omitempty"`
}

// syncLocker is a lock one goroutine takes for reading or writing.
type syncLocker interface {
	Lock(ctx context.Context, read bool) error
	Unlock(ctx context.Context, read bool) error
}

// rwSync takes the read side or the write side of a lock (both the same
// for a plain lock).
type rwSync struct{ read, write side }

type side interface {
	Lock(context.Context) error
	Unlock(context.Context) error
}

func (l rwSync) side(read bool) side {
	if read {
		return l.read
	}
	return l.write
}
func (l rwSync) Lock(ctx context.Context, read bool) error   { return l.side(read).Lock(ctx) }
func (l rwSync) Unlock(ctx context.Context, read bool) error { return l.side(read).Unlock(ctx) }

func openSyncClient(addr string) (*rlock.Client, error) {
	return rlock.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
}

// rwMixes runs goroutines of one Client on one name, each holding a read
// (with probability share) or a write hold for r.cfg.Hold per op, for the
// read-heavy and write-heavy mixes and for a plain lock.
func (r *run) rwMixes(ctx context.Context) *section {
	g, hold, d := r.cfg.Contenders, r.cfg.Hold, r.cfg.Duration
	s := &section{
		ID:      "rwlock",
		Title:   fmt.Sprintf("6a. relock read-write lock: %d goroutines of one client on one name, each hold %v, %v each", g, hold, d),
		Columns: rwColumns,
	}
	c, err := openSyncClient(r.srv.Addr)
	if err != nil {
		s.Skipped = err.Error()
		return s
	}
	defer c.Close()
	runs := []struct {
		impl  string
		share float64
	}{
		{"relock plain lock", 0},
		{"relock rwlock read-heavy", 0.9},
		{"relock rwlock write-heavy", 0.1},
		{"relock rwlock reads only", 1},
	}
	var rows []*syncRow
	for _, run := range runs {
		if ctx.Err() != nil {
			break
		}
		name := "bench:rwlock:" + run.impl
		var l syncLocker
		if run.share == 0 {
			l = rwSync{read: c.GetLock(name), write: c.GetLock(name)}
		} else {
			rw := c.GetReadWriteLock(name)
			l = rwSync{read: rw.ReadLock(), write: rw.WriteLock()}
		}
		row := mixRound(ctx, l, g, run.share, hold, d)
		row.Impl = run.impl
		rows = append(rows, row)
		r.logf("rwlock: %s: %.0f ops/s", run.impl, row.OpsPerSec)
	}
	s.Results = rows
	s.Rows = rwTable(rows)
	s.Notes = append(s.Notes,
		"an op is Lock, the hold, Unlock; latencies are of the Lock call (its wait included)",
		"every goroutine has an owner of its own; the plain lock's ops are all exclusive (its latencies are under write)",
		"readers are not fair to writers: a write waits until no read hold is left, and overlapping readers keep it waiting (see package rwlock)")
	return s
}

// mixRound runs one mix for d.
func mixRound(ctx context.Context, l syncLocker, goroutines int, share float64, hold, d time.Duration) *syncRow {
	row := &syncRow{ReadShare: share}
	var (
		wg          sync.WaitGroup
		mu          sync.Mutex
		reads, writ hist
		ops, errs   atomic.Int64
		first       atomic.Value
	)
	stop := time.Now().Add(d)
	for i := range goroutines {
		wg.Go(func() {
			octx := rlock.WithOwner(ctx, fmt.Sprint("g", i))
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			var rh, wh hist
			for time.Now().Before(stop) && ctx.Err() == nil && errs.Load() < maxErrors {
				read := rng.Float64() < share
				start := time.Now()
				if err := l.Lock(octx, read); err != nil {
					errs.Add(1)
					first.CompareAndSwap(nil, err.Error())
					continue
				}
				if read {
					rh.record(time.Since(start))
				} else {
					wh.record(time.Since(start))
				}
				time.Sleep(hold)
				if err := l.Unlock(octx, read); err != nil {
					errs.Add(1)
					first.CompareAndSwap(nil, err.Error())
				}
				ops.Add(1)
			}
			mu.Lock()
			reads.merge(&rh)
			writ.merge(&wh)
			mu.Unlock()
		})
	}
	start := time.Now()
	wg.Wait()
	row.Seconds = time.Since(start).Seconds()
	row.Ops = ops.Load()
	row.OpsPerSec = float64(row.Ops) / row.Seconds
	row.ReadP50us, row.ReadP99us = micros(reads.quantile(0.5)), micros(reads.quantile(0.99))
	row.WriteP50us, row.WriteP99us = micros(writ.quantile(0.5)), micros(writ.quantile(0.99))
	row.Errors = errs.Load()
	if f, ok := first.Load().(string); ok {
		row.FirstError = f
	}
	return row
}

// permitHandoff measures how long a permit takes to go from one Client to
// another: clients Clients, one goroutine each, on a semaphore of one
// permit, beside the same hand-off of relock's plain lock.
func (r *run) permitHandoff(ctx context.Context) *section {
	n, d := 4, r.cfg.ClientsDuration
	s := &section{
		ID:      "permits",
		Title:   fmt.Sprintf("6b. relock semaphore: a permit of one handed between %d clients, one goroutine each, %v each", n, d),
		Columns: permitsColumns,
	}
	var clients []*rlock.Client
	for range n {
		c, err := openSyncClient(r.srv.Addr)
		if err != nil {
			s.Skipped = err.Error()
			return s
		}
		defer c.Close()
		clients = append(clients, c)
	}
	var rows []*syncRow
	for _, impl := range []string{"relock plain lock", "relock semaphore"} {
		if ctx.Err() != nil {
			break
		}
		name := "bench:permits:" + impl
		take := make([]func(context.Context) (func() error, error), n)
		for i, c := range clients {
			if impl == "relock plain lock" {
				l := c.GetLock(name)
				take[i] = func(ctx context.Context) (func() error, error) {
					return func() error { return l.Unlock(ctx) }, l.Lock(ctx)
				}
				continue
			}
			sem := c.GetSemaphore(name)
			if i == 0 {
				if _, err := sem.TrySetPermits(ctx, 1); err != nil {
					s.Skipped = err.Error()
					return s
				}
			}
			take[i] = func(ctx context.Context) (func() error, error) {
				id, err := sem.Acquire(ctx, 0)
				return func() error { return sem.Release(ctx, id) }, err
			}
		}
		row := handoffRound(ctx, take, d)
		row.Impl = impl
		rows = append(rows, row)
		r.logf("permits: %s: hand-off p50 %v", impl, fmtDur(usDur(row.HandoffP50us)))
	}
	s.Results = rows
	s.Rows = permitsTable(rows)
	s.Notes = append(s.Notes,
		"each goroutine takes the permit (lease 0: the watchdog's) or the lock, gives it back at once, and asks again: every acquisition is a hand-off",
		"hand-off latency: from just before the holder's Release (Unlock) to another client's Acquire (Lock) returning; a goroutine that takes back what it gave is not counted",
		"a release publishes the new count; each client wakes one waiter, which passes the wake-up on only when permits are left")
	return s
}

// handoffRound runs goroutines that take and give back one permit (or
// lock) for d, and measures the hand-offs.
func handoffRound(ctx context.Context, take []func(context.Context) (func() error, error), d time.Duration) *syncRow {
	row := &syncRow{}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		all   hist
		ops   atomic.Int64
		errs  atomic.Int64
		first atomic.Value
		// The last release: when it started, and by whom (-1: none to
		// count). Re-taking one's own permit is not a hand-off.
		lastMu sync.Mutex
		lastAt time.Time
		lastBy = -1
	)
	rctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for i, tk := range take {
		wg.Go(func() {
			var h hist
			for rctx.Err() == nil && errs.Load() < maxErrors {
				give, err := tk(rctx)
				if err != nil {
					if rctx.Err() == nil {
						errs.Add(1)
						first.CompareAndSwap(nil, err.Error())
					}
					continue
				}
				now := time.Now()
				lastMu.Lock()
				if lastBy >= 0 && lastBy != i {
					h.record(now.Sub(lastAt))
					ops.Add(1)
				}
				lastAt, lastBy = time.Now(), i
				lastMu.Unlock()
				if err := give(); err != nil {
					errs.Add(1)
					first.CompareAndSwap(nil, err.Error())
				}
			}
			mu.Lock()
			all.merge(&h)
			mu.Unlock()
		})
	}
	start := time.Now()
	wg.Wait()
	row.Seconds = time.Since(start).Seconds()
	row.Ops = ops.Load()
	row.OpsPerSec = float64(row.Ops) / row.Seconds
	row.HandoffP50us, row.HandoffP99us = micros(all.quantile(0.5)), micros(all.quantile(0.99))
	row.Errors = errs.Load()
	if f, ok := first.Load().(string); ok {
		row.FirstError = f
	}
	return row
}

func syncErrText(row *syncRow) string {
	if row.Errors == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%s)", row.Errors, row.FirstError)
}
