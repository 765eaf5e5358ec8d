package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/rlock"
)

// The demo's timing: each worker holds the lock for a random 5-30ms of
// "work", then spends a random 1-10ms on other things before it asks
// again, so that the lock changes hands instead of going back to the
// worker that just released it.
const (
	workMin  = 5 * time.Millisecond
	workMax  = 30 * time.Millisecond
	thinkMin = 1 * time.Millisecond
	thinkMax = 10 * time.Millisecond
)

// demoKeys are the keys of one demo run besides the lock's own.
type demoKeys struct {
	inside      string // INCR on entering, DECR on leaving: 1 while someone is inside
	lastRelease string // "<unix ns> <worker>" of the last release
}

func keysForDemo(lock string) demoKeys {
	return demoKeys{inside: lock + ":inside", lastRelease: lock + ":last-release"}
}

const workerUsage = `Usage: relock [CONNECTION FLAGS] demo-worker --lock NAME --id ID [--fair]

One worker process of 'relock demo' (which starts it; not meant to be run
by hand). It loops: Lock, note the time, check that nobody else is inside,
work for 5-30ms, note the release, Unlock; and reports each step as a JSON
line on stdout. It stops when its stdin closes or on SIGTERM.`

func (cl *cli) demoWorker(args []string) int {
	fs := cl.newConnFlagSet("demo-worker", workerUsage)
	name := fs.String("lock", "", "lock `NAME`")
	id := fs.String("id", "", "worker `ID`, also its owner string")
	fair := fs.Bool("fair", false, "use a fair lock")
	pos, _, code := cl.parse(fs, args, -1)
	if code >= 0 {
		return code
	}
	if len(pos) > 0 || *name == "" || *id == "" {
		return cl.usageError(fs, "demo-worker needs --lock and --id and no arguments")
	}

	// The demo stops its workers itself: a terminal's Ctrl-C is for it.
	signal.Ignore(syscall.SIGINT, syscall.SIGHUP)
	stop, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin) // the demo closed it, or died
		cancel()
	}()

	w := &worker{id: *id, out: json.NewEncoder(cl.stdout), keys: keysForDemo(*name), redact: &cl.redact}
	t, code := cl.target()
	if code >= 0 {
		return code
	}
	rdb, err := t.dial()
	if err != nil {
		return w.fail(err)
	}
	defer rdb.Close()
	client, err := rlock.New(rdb)
	if err != nil {
		return w.fail(err)
	}
	defer client.Close()
	w.rdb = rdb
	w.lock = client.GetLock(*name)
	if *fair {
		w.lock = client.GetFairLock(*name)
	}
	w.emit(workerEvent{Kind: "ready", PID: os.Getpid(), ClientID: client.ID()})
	if err := w.loop(rlock.WithOwner(stop, *id)); err != nil {
		return w.fail(err)
	}
	w.emit(workerEvent{Kind: "done", N: w.n})
	return exitOK
}

// demoLock is what a worker needs of its lock.
type demoLock interface {
	Lock(ctx context.Context) error
	Unlock(ctx context.Context) error
	Done(ctx context.Context) <-chan struct{}
}

type worker struct {
	id     string
	out    *json.Encoder
	rdb    rueidis.Client
	lock   demoLock
	keys   demoKeys
	n      int
	redact *redactor
}

func (w *worker) emit(ev workerEvent) {
	ev.Worker = w.id
	if ev.T == 0 {
		ev.T = time.Now().UnixNano()
	}
	_ = w.out.Encode(ev) // one write per line; a closed stdout means the demo is gone
}

func (w *worker) fail(err error) int {
	w.emit(workerEvent{Kind: "error", Msg: w.redact.mask(err.Error())})
	return exitFailure
}

// loop takes and releases the lock until ctx ends. ctx carries the
// worker's owner; its end stops a wait, never a hold.
func (w *worker) loop(ctx context.Context) error {
	for ctx.Err() == nil {
		asked := time.Now()
		w.emit(workerEvent{Kind: "waiting", T: asked.UnixNano()})
		if err := w.lock.Lock(ctx); err != nil {
			if ctx.Err() != nil {
				return nil // asked to stop while waiting
			}
			return fmt.Errorf("lock: %w", err)
		}
		if err := w.hold(ctx, asked); err != nil {
			return err
		}
		sleep(ctx, randDuration(thinkMin, thinkMax))
	}
	return nil
}

// hold does one turn with the lock held, and releases it.
func (w *worker) hold(ctx context.Context, asked time.Time) error {
	got := time.Now()
	w.n++
	// The requests made while holding must finish even when the worker
	// is asked to stop: it stops after this turn.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	b := w.rdb.B()
	res := w.rdb.DoMulti(rctx,
		b.Incr().Key(w.keys.inside).Build(),
		b.Get().Key(w.keys.lastRelease).Build())
	inside, err := res[0].AsInt64()
	if err != nil {
		_ = w.lock.Unlock(ctx)
		return fmt.Errorf("INCR %s: %w", w.keys.inside, err)
	}
	ev := workerEvent{Kind: "acquired", T: got.UnixNano(), N: w.n, Inside: inside, WaitNs: got.Sub(asked).Nanoseconds()}
	if last, err := res[1].ToString(); err == nil {
		at, prev, _ := strings.Cut(last, " ")
		if ns, err := strconv.ParseInt(at, 10, 64); err == nil {
			ev.Prev, ev.HandoffNs = prev, got.UnixNano()-ns
		}
	}
	w.emit(ev)

	work := time.NewTimer(randDuration(workMin, workMax))
	defer work.Stop()
	select {
	case <-work.C:
	case <-w.lock.Done(ctx):
		return fmt.Errorf("lost the lock while holding it")
	}

	left := time.Now()
	w.emit(workerEvent{Kind: "released", T: left.UnixNano(), HeldNs: left.Sub(got).Nanoseconds()})
	res = w.rdb.DoMulti(rctx,
		b.Decr().Key(w.keys.inside).Build(),
		b.Set().Key(w.keys.lastRelease).Value(fmt.Sprintf("%d %s", left.UnixNano(), w.id)).Build())
	for _, r := range res {
		if err := r.Error(); err != nil {
			_ = w.lock.Unlock(ctx)
			return fmt.Errorf("leaving: %w", err)
		}
	}
	if err := w.lock.Unlock(ctx); err != nil {
		return fmt.Errorf("unlock: %w", err)
	}
	return nil
}

func randDuration(lo, hi time.Duration) time.Duration {
	return lo + rand.N(hi-lo+1)
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
