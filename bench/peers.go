package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/relock-go/relock/rlock"
)

// locker is one goroutine's handle on one lock, whatever the library.
// Lock waits until it holds the lock or ctx ends.
type locker interface {
	Lock(ctx context.Context) error
	Unlock(ctx context.Context) error
}

// impl is one implementation under test, connected to one server.
type impl interface {
	// locker returns a new handle on the lock name, for one goroutine.
	locker(name string) locker
	close()
}

// peer describes an implementation: how to connect it, and the settings
// it runs with, printed beside the results.
type peer struct {
	name     string
	settings string
	// exclusive is false for the limit, which locks nothing.
	exclusive bool
	// multi is set on the RedLock rows, which use several servers.
	multi bool
	// only, when set, is the scenarios the implementation runs in (the
	// no-grant implementations run where a hand-off is measured).
	only []string
	// open connects one client instance to addr; w counts what its
	// connections carry.
	open func(addr string, w *wire) (impl, error)
}

// Settings of the pollers, chosen here (the libraries have no default).
const (
	pollerTTL    = 8 * time.Second      // redsync's default expiry, used for bsm too
	bsmBackoff   = 2 * time.Millisecond // bsm/redislock LinearBackoff
	redsyncTries = math.MaxInt32        // redsync tries: wait until ctx ends
)

func peers() []peer {
	return []peer{
		{
			name:      "limit",
			settings:  `two EVALSHA of "return 1" per op, rueidis, one pipelined connection (PipelineMultiplex -1, as relock's NewClient)`,
			exclusive: false,
			open:      openLimit,
		},
		{
			name:      "limit/go-redis",
			settings:  `the same with go-redis v9 (default pool): a reference for the go-redis-based peers; ratios are to "limit"`,
			exclusive: false,
			open:      openLimitGoredis,
		},
		{
			name: "mutex",
			settings: "no Redis: an in-process lock (a Go channel of one) in the same harness; scenario 3 only. " +
				"The most acquisitions per second the harness itself allows on this machine: a 1ms sleep lasts longer than 1ms",
			exclusive: true,
			only:      []string{"contention"},
			open:      openMutex,
		},
		{
			name:      "relock/no-grant",
			settings:  noGrantSettings("relock defaults") + "; scenarios 3 and 4a only (4c: relock fair/no-grant)",
			exclusive: true,
			only:      []string{"contention", "clients16"},
			open:      openRelockNoGrant,
		},
		{
			name:      "relock",
			settings:  "rlock.NewClient defaults (one pipelined connection + one pub/sub connection, watchdog 30s); Lock(ctx)/Unlock(ctx), anonymous owner",
			exclusive: true,
			open:      openRelock,
		},
		{
			name:      "relock/wake-one/no-grant",
			settings:  noGrantSettings("relock/wake-one's settings") + "; scenario 4a only",
			exclusive: true,
			only:      []string{"clients16"},
			open:      openRelockWakeOneNoGrant,
		},
		{
			name:      "relock/wake-one",
			settings:  "rlock.NewClient with rlock.WithWakeOne(): a release wakes one waiting client (the one registered longest ago) instead of every client that waits",
			exclusive: true,
			open:      openRelockWakeOne,
		},
		{
			name:      "relock/lease",
			settings:  "the same Client; LockLease(ctx, 30s)/Unlock(ctx): a fixed lease, no watchdog renewal",
			exclusive: true,
			open:      openRelockLease,
		},
		{
			name: "minimal",
			settings: fmt.Sprintf("the yardstick: Redisson's algorithm alone on rueidis (bench/minimal.go): acquire script EXISTS/HEXISTS, HINCRBY, PEXPIRE, else PTTL; "+
				"release script HEXISTS, HINCRBY -1, at 0 DEL + PUBLISH; fixed lease %v; one pipelined connection + one pub/sub connection, "+
				"subscribed once per name and kept; one wake-up per message", minimalLease),
			exclusive: true,
			open:      openMinimal,
		},
		{
			name:      "rueidislock",
			settings:  "rueidislock.NewLocker defaults (KeyMajority 2: 3 keys per lock, KeyValidity 5s, wakes on client-side-caching invalidations); WithContext + cancel",
			exclusive: true,
			open:      openRueidislock,
		},
		{
			name: "redsync",
			settings: fmt.Sprintf("redsync v4 + go-redis v9 pool (defaults: expiry 8s, retry delay random 50-250ms, pool size 10/CPU); tries raised from 32 to %d so Lock waits until ctx ends",
				redsyncTries),
			exclusive: true,
			open:      openRedsync,
		},
		{
			name:      "bsm",
			settings:  fmt.Sprintf("bsm/redislock v0.9.4 + go-redis v9 (defaults); ttl %v, RetryStrategy LinearBackoff(%v), Obtain again while ctx lives", pollerTTL, bsmBackoff),
			exclusive: true,
			open:      openBsm,
		},
	}
}

// ---- the limit: a no-op script, twice per op ----

var noopScript = rueidis.NewLuaScript("return 1")

type limitImpl struct{ rdb rueidis.Client }

func openLimit(addr string, w *wire) (impl, error) {
	opt := w.rueidisOption(addr)
	opt.PipelineMultiplex = -1
	rdb, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, err
	}
	return limitImpl{rdb}, nil
}

func (l limitImpl) locker(string) locker { return l }
func (l limitImpl) close()               { l.rdb.Close() }

func (l limitImpl) Lock(ctx context.Context) error {
	return noopScript.Exec(ctx, l.rdb, nil, nil).Error()
}

func (l limitImpl) Unlock(ctx context.Context) error {
	return noopScript.Exec(ctx, l.rdb, nil, nil).Error()
}

// mutexImpl is the in-process lock of the "mutex" row: every handle of
// one name shares one channel of one.
type mutexImpl struct {
	mu    sync.Mutex
	locks map[string]chan struct{}
}

func openMutex(string, *wire) (impl, error) {
	return &mutexImpl{locks: make(map[string]chan struct{})}, nil
}

func (m *mutexImpl) locker(name string) locker {
	m.mu.Lock()
	defer m.mu.Unlock()
	ch, ok := m.locks[name]
	if !ok {
		ch = make(chan struct{}, 1)
		m.locks[name] = ch
	}
	return mutexLocker(ch)
}

func (m *mutexImpl) close() {}

type mutexLocker chan struct{}

func (l mutexLocker) Lock(ctx context.Context) error {
	select {
	case l <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l mutexLocker) Unlock(context.Context) error {
	select {
	case <-l:
		return nil
	default:
		return errors.New("mutex: unlocked while not held")
	}
}

type limitGoredis struct{ rdb *goredis.Client }

var noopGoredis = goredis.NewScript("return 1")

func openLimitGoredis(addr string, w *wire) (impl, error) {
	return limitGoredis{goredis.NewClient(w.goredisOptions(addr))}, nil
}

func (l limitGoredis) locker(string) locker { return l }
func (l limitGoredis) close()               { _ = l.rdb.Close() }

func (l limitGoredis) Lock(ctx context.Context) error {
	return noopGoredis.Run(ctx, l.rdb, nil).Err()
}

func (l limitGoredis) Unlock(ctx context.Context) error {
	return noopGoredis.Run(ctx, l.rdb, nil).Err()
}

// ---- relock ----

type relockImpl struct{ c *rlock.Client }

func openRelock(addr string, w *wire) (impl, error) {
	c, err := rlock.NewClient(w.rueidisOption(addr))
	if err != nil {
		return nil, err
	}
	return relockImpl{c}, nil
}

func openRelockWakeOne(addr string, w *wire) (impl, error) {
	c, err := rlock.NewClient(w.rueidisOption(addr), rlock.WithWakeOne())
	if err != nil {
		return nil, err
	}
	return relockImpl{c}, nil
}

func openRelockNoGrant(addr string, w *wire) (impl, error) {
	c, err := rlock.NewClient(w.rueidisOption(addr), noGrant()...)
	if err != nil {
		return nil, err
	}
	return relockImpl{c}, nil
}

func openRelockWakeOneNoGrant(addr string, w *wire) (impl, error) {
	c, err := rlock.NewClient(w.rueidisOption(addr), append([]rlock.Option{rlock.WithWakeOne()}, noGrant()...)...)
	if err != nil {
		return nil, err
	}
	return relockImpl{c}, nil
}

// noGrantSettings are the settings of a no-grant implementation: base
// without grant on release, or base alone when this build has no grant on
// release to turn off.
func noGrantSettings(base string) string {
	if grantSwitchable() {
		return "before grant on release: " + base + " with rlock.WithoutGrantOnRelease() " +
			"(a release publishes; the woken waiter acquires with a round trip of its own)"
	}
	return "before grant on release: " + base + " (this build has no grant on release to turn off: the same as its grant row)"
}

// *rlock.Lock is a locker as it is.
func (r relockImpl) locker(name string) locker { return r.c.GetLock(name) }
func (r relockImpl) close()                    { _ = r.c.Close() }

func openRelockLease(addr string, w *wire) (impl, error) {
	im, err := openRelock(addr, w)
	if err != nil {
		return nil, err
	}
	return relockLeaseImpl{im.(relockImpl)}, nil
}

type relockLeaseImpl struct{ relockImpl }

func (r relockLeaseImpl) locker(name string) locker { return leaseLocker{r.c.GetLock(name)} }

// leaseLocker takes the lock on a fixed lease of 30s, rlock's default
// watchdog timeout, so that nothing is renewed.
type leaseLocker struct{ l *rlock.Lock }

func (l leaseLocker) Lock(ctx context.Context) error   { return l.l.LockLease(ctx, 30*time.Second) }
func (l leaseLocker) Unlock(ctx context.Context) error { return l.l.Unlock(ctx) }

// ---- rueidislock ----

type rueidislockImpl struct{ lk rueidislock.Locker }

func openRueidislock(addr string, w *wire) (impl, error) {
	lk, err := rueidislock.NewLocker(rueidislock.LockerOption{ClientOption: w.rueidisOption(addr)})
	if err != nil {
		return nil, err
	}
	return rueidislockImpl{lk}, nil
}

func (r rueidislockImpl) locker(name string) locker { return &rueidisLocker{lk: r.lk, name: name} }
func (r rueidislockImpl) close()                    { r.lk.Close() }

type rueidisLocker struct {
	lk     rueidislock.Locker
	name   string
	cancel context.CancelFunc
}

func (l *rueidisLocker) Lock(ctx context.Context) error {
	_, cancel, err := l.lk.WithContext(ctx, l.name)
	if err != nil {
		return err
	}
	l.cancel = cancel
	return nil
}

// Unlock is rueidislock's cancel, which returns once its keys are deleted.
func (l *rueidisLocker) Unlock(context.Context) error {
	if l.cancel == nil {
		return errors.New("rueidislock: not held")
	}
	l.cancel()
	l.cancel = nil
	return nil
}

// ---- redsync ----

type redsyncImpl struct {
	rdb *goredis.Client
	rs  *redsync.Redsync
}

func openRedsync(addr string, w *wire) (impl, error) {
	rdb := goredis.NewClient(w.goredisOptions(addr))
	return redsyncImpl{rdb: rdb, rs: redsync.New(redsyncgoredis.NewPool(rdb))}, nil
}

func (r redsyncImpl) locker(name string) locker {
	return redsyncLocker{r.rs.NewMutex(name, redsync.WithTries(redsyncTries))}
}
func (r redsyncImpl) close() { _ = r.rdb.Close() }

type redsyncLocker struct{ m *redsync.Mutex }

func (l redsyncLocker) Lock(ctx context.Context) error { return l.m.LockContext(ctx) }

func (l redsyncLocker) Unlock(ctx context.Context) error {
	ok, err := l.m.UnlockContext(ctx)
	if err == nil && !ok {
		err = errors.New("redsync: unlock failed")
	}
	return err
}

// ---- bsm/redislock ----

type bsmImpl struct {
	rdb *goredis.Client
	rl  *redislock.Client
}

func openBsm(addr string, w *wire) (impl, error) {
	rdb := goredis.NewClient(w.goredisOptions(addr))
	return bsmImpl{rdb: rdb, rl: redislock.New(rdb)}, nil
}

func (b bsmImpl) locker(name string) locker {
	return &bsmLocker{rl: b.rl, name: name, opt: &redislock.Options{RetryStrategy: redislock.LinearBackoff(bsmBackoff)}}
}
func (b bsmImpl) close() { _ = b.rdb.Close() }

type bsmLocker struct {
	rl   *redislock.Client
	name string
	opt  *redislock.Options
	held *redislock.Lock
}

// Lock calls Obtain until it succeeds or ctx ends: without a deadline in
// ctx, Obtain itself gives up after the ttl.
func (l *bsmLocker) Lock(ctx context.Context) error {
	for {
		lk, err := l.rl.Obtain(ctx, l.name, pollerTTL, l.opt)
		if err == nil {
			l.held = lk
			return nil
		}
		if ctx.Err() != nil || !(errors.Is(err, redislock.ErrNotObtained) || errors.Is(err, context.DeadlineExceeded)) {
			return err
		}
	}
}

func (l *bsmLocker) Unlock(ctx context.Context) error {
	if l.held == nil {
		return errors.New("bsm: not held")
	}
	err := l.held.Release(ctx)
	l.held = nil
	return err
}

// ---- the limit of a fan-out to several servers ----

// fanoutImpl runs the no-op script on every server at once, twice per op:
// the least work a lock over several masters can do. One goroutine per
// server, started once, sends the scripts, so that an op costs no
// goroutine start.
type fanoutImpl struct {
	clients []rueidis.Client
	work    []chan fanoutReq
}

type fanoutReq struct {
	ctx  context.Context
	done chan<- error
}

func openFanout(addrs []string, w *wire) (impl, error) {
	f := &fanoutImpl{}
	for _, a := range addrs {
		opt := w.rueidisOption(a)
		opt.PipelineMultiplex = -1
		rdb, err := rueidis.NewClient(opt)
		if err != nil {
			f.close()
			return nil, err
		}
		ch := make(chan fanoutReq)
		f.clients = append(f.clients, rdb)
		f.work = append(f.work, ch)
		go func() {
			for req := range ch {
				req.done <- noopScript.Exec(req.ctx, rdb, nil, nil).Error()
			}
		}()
	}
	return f, nil
}

func (f *fanoutImpl) locker(string) locker {
	return fanoutLocker{f, make(chan error, len(f.work))}
}

func (f *fanoutImpl) close() {
	for _, ch := range f.work {
		close(ch)
	}
	for _, rdb := range f.clients {
		rdb.Close()
	}
}

type fanoutLocker struct {
	f    *fanoutImpl
	done chan error
}

func (l fanoutLocker) all(ctx context.Context) error {
	for _, ch := range l.f.work {
		ch <- fanoutReq{ctx, l.done}
	}
	var errs []error
	for range l.f.work {
		if err := <-l.done; err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (l fanoutLocker) Lock(ctx context.Context) error   { return l.all(ctx) }
func (l fanoutLocker) Unlock(ctx context.Context) error { return l.all(ctx) }
