package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/internal/redisproc"
)

const demoUsage = `Usage: relock [CONNECTION FLAGS] demo [--workers N] [--duration DUR] [--fair] [--plain]

Watch worker processes contend for one distributed lock, live.

The demo uses the Redis server the connection flags name if it answers
within half a second. If nothing answers there at all, it starts a
throwaway redis-server of its own (it must be installed: 'apt-get install
-y redis-server', or run ./demo.sh, which installs it); a server that
refuses the password or the TLS handshake is an error (exit 69). It then
starts N worker processes (this binary, re-run as 'relock demo-worker').
Each one loops: Lock (watchdog lease), work for 5-30ms, Unlock, spend
1-10ms elsewhere. Inside the lock each worker increments a shared "inside"
counter in Redis and decrements it on leaving: any value but 1 means two
workers were inside at once.

On a terminal the demo redraws a small table every 100ms: each worker's
state, who holds the lock according to Redis, the fair queue (with
--fair), and each hand-off's latency (from one worker's release to the
next one's Lock returning). Otherwise it prints a line a second. At the
end it prints a summary: acquisitions per worker, hand-off latency
percentiles, and violations (the counter check, and overlapping hold
intervals), which must be 0. Then it stops the workers, deletes its keys,
and stops its own redis-server. Ctrl-C ends it early, with the summary.

Exit codes: 0 no violations, 1 a violation or a worker failed,
64 bad command line, 69 a server refused the connection, or none answered
and none could be started, 130 interrupted (after the summary).`

func (cl *cli) demo(args []string) int {
	fs := cl.newConnFlagSet("demo", demoUsage)
	workers := fs.Int("workers", 4, "number of worker processes, `N` from 1 to 16")
	duration := fs.duration("duration", 15*time.Second, "how long the workers run, `DUR`")
	fair := fs.Bool("fair", false, "use a fair lock (FIFO queue in Redis) instead of a plain one")
	plain := fs.Bool("plain", false, "print plain lines even on a terminal")
	pos, _, code := cl.parse(fs, args, -1)
	if code >= 0 {
		return code
	}
	switch {
	case len(pos) > 0:
		return cl.usageError(fs, "demo takes no arguments (got %q)", pos[0])
	case *workers < 1 || *workers > 16:
		return cl.usageError(fs, "--workers must be from 1 to 16, not %d", *workers)
	case duration.d <= 0 || duration.d > time.Hour:
		return cl.usageError(fs, "--duration must be more than 0 and at most 1h, not %v", duration.d)
	}
	exe, err := os.Executable()
	if err != nil {
		return cl.errorf(exitFailure, "cannot find the relock binary to start workers: %v", err)
	}

	// Under --prefix the demo's lock is under it too; the workers are
	// given the whole name.
	name, err := cl.conn.lockName("relock-demo:{" + randomID() + "}")
	if err != nil {
		return cl.usageError(fs, "%v", err)
	}
	d := &demo{
		cl:       cl,
		workers:  *workers,
		duration: duration.d,
		fair:     *fair,
		exe:      exe,
		// The hash tag puts every key of the run in one slot, so the
		// demo works on Redis Cluster too.
		name: name,
	}
	d.tty = !*plain && isTerminal(cl.stdout)
	d.color = d.tty && os.Getenv("NO_COLOR") == ""

	// Ctrl-C from here on stops the demo in order: summary, cleanup.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)

	if code := d.startRedis(); code >= 0 {
		return code
	}
	defer d.stopRedis()
	return d.run(sigs)
}

// demo is one run of 'relock demo'.
type demo struct {
	cl       *cli
	workers  int
	duration time.Duration
	fair     bool
	exe      string
	name     string // the lock
	tty      bool   // redraw a block instead of printing lines
	color    bool

	addr      string            // the server, for people
	conn      connFlags         // how the workers connect
	srv       *redisproc.Server // our own redis-server, or nil
	redisNote string
	rdb       rueidis.Client

	procs []*workerProc
}

// workerProc is one worker process.
type workerProc struct {
	id    string
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

func (d *demo) printf(format string, args ...any) {
	fmt.Fprintf(d.cl.stdout, format, args...)
}

// startRedis picks the server: the one the connection flags name if it
// answers within half a second, else (when nothing answers there at all) a
// redis-server of our own. It returns -1 on success.
func (d *demo) startRedis() int {
	t, code := d.cl.target()
	if code >= 0 {
		return code
	}
	addr := t.where
	probe := *t
	probe.opt.Dialer.Timeout = 500 * time.Millisecond
	rdb, err := probe.dial()
	switch {
	case err == nil:
		d.addr, d.conn, d.rdb = addr, *d.cl.conn, rdb
		d.redisNote = fmt.Sprintf("using the Redis server at %s (the demo's keys are deleted at the end)", addr)
		return -1
	case !t.unreachable(err):
		// A server answered but refused us (password, TLS): starting
		// another one would hide that.
		return d.cl.errorf(exitUnavailable, "%v", err)
	default:
		var errno syscall.Errno
		if errors.As(err, &errno) {
			err = errno
		}
		d.printf("no Redis at %s (%v): starting a throwaway redis-server\n", addr, err)
		srv, err := redisproc.Start()
		switch {
		case errors.Is(err, redisproc.ErrNotInstalled):
			return d.cl.errorf(exitUnavailable, "%v, or run ./demo.sh, which installs it; or point --redis at a running server", err)
		case err != nil:
			return d.cl.errorf(exitUnavailable, "cannot start redis-server: %v", err)
		}
		d.srv, d.addr = srv, srv.Addr
		d.redisNote = fmt.Sprintf("started redis-server on %s (stopped at the end)", srv.Addr)
	}
	// Our own server: plain, no password, whatever the flags and the
	// environment say.
	d.conn = connFlags{redis: d.addr}
	own, err := d.conn.resolve(func(string) string { return "" }, d.cl.redact.add)
	if err == nil {
		d.rdb, err = own.dial()
	}
	if err != nil {
		return d.cl.errorf(exitUnavailable, "%v", err)
	}
	return -1
}

func (d *demo) stopRedis() {
	if d.rdb != nil {
		d.rdb.Close()
		d.rdb = nil
	}
	if d.srv != nil {
		_ = d.srv.Stop()
		d.srv = nil
	}
}

// run starts the workers, shows what they do until the time is up (or a
// signal), stops them, prints the summary and deletes the demo's keys.
func (d *demo) run(sigs <-chan os.Signal) int {
	kind := "plain"
	if d.fair {
		kind = "fair"
	}
	d.printf("relock demo: %d worker processes contend for one %s lock, %q, for %v.\n", d.workers, kind, d.name, d.duration)
	d.printf("Each loops: Lock (watchdog lease %v), work %v-%v, Unlock, %v-%v elsewhere.\n",
		lockcore.DefaultWatchdogTimeout, workMin.Milliseconds(), workMax, thinkMin.Milliseconds(), thinkMax)
	d.printf("An \"inside\" counter in Redis checks that no two workers are ever inside at once.\n")
	d.printf("redis: %s\n", d.redisNote)

	events := make(chan workerEvent, 1024)
	var readers sync.WaitGroup
	for i := 1; i <= d.workers; i++ {
		p, err := d.startWorker(fmt.Sprintf("w%d", i), events, &readers)
		if err != nil {
			d.killWorkers()
			go func() {
				readers.Wait()
				close(events)
			}()
			for range events {
			}
			d.waitWorkers()
			d.cleanup()
			d.stopRedis()
			return d.cl.errorf(exitFailure, "cannot start a worker: %v", err)
		}
		d.procs = append(d.procs, p)
	}
	go func() {
		readers.Wait()
		close(events)
	}()
	var pids []string
	for _, p := range d.procs {
		pids = append(pids, fmt.Sprintf("%s pid %d", p.id, p.cmd.Process.Pid))
	}
	d.printf("workers: %s\n\n", strings.Join(pids, ", "))

	st := newDemoState(d.procs, time.Now())
	v := newView(d, st)
	v.begin()
	defer v.end()

	interval := time.Second
	if d.tty {
		interval = 100 * time.Millisecond
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	timeUp := time.NewTimer(d.duration)
	defer timeUp.Stop()
	var kill <-chan time.Time
	var interrupted os.Signal
	stopping := false
	stop := func() {
		if !stopping {
			stopping = true
			st.stopAt = time.Now()
			d.stopWorkers()
			kill = time.After(5 * time.Second)
		}
	}
loop:
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				break loop
			}
			st.apply(ev)
			v.event(ev)
		case <-tick.C:
			if d.tty {
				st.observe(d.readRedis())
			}
			v.tick()
		case <-timeUp.C:
			stop()
		case sig := <-sigs:
			if interrupted != nil {
				d.killWorkers() // a second Ctrl-C: do not wait for them
			}
			interrupted = sig
			st.interrupted = true
			stop()
		case <-kill:
			kill = nil
			st.note("workers did not stop within 5s; killing them")
			d.killWorkers()
		}
	}
	st.finish(time.Now())
	d.waitWorkers()
	st.observe(d.readRedis())
	v.final()
	v.end()
	d.printf("\n")
	ok := v.summary()
	msg := d.cleanup()
	d.stopRedis()
	d.printf("%s\n", msg)
	switch {
	case interrupted != nil:
		return exitSignalBase + signalNumber(interrupted)
	case !ok:
		return exitFailure
	}
	return exitOK
}

// workerEnv is the environment of a worker: the address goes there, not on
// its command line, where any user of the machine could read a password
// in a URL.
func (d *demo) workerEnv() []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return name == "RELOCK_REDIS" || (d.srv != nil && slices.Contains(passwordVars, name))
	})
	return append(env, "RELOCK_REDIS="+d.conn.redis)
}

// startWorker starts one worker process and the goroutines that read its
// stdout (events) and stderr (log lines) into events.
func (d *demo) startWorker(id string, events chan<- workerEvent, readers *sync.WaitGroup) (*workerProc, error) {
	args := append([]string{"demo-worker"}, d.conn.args()...)
	args = append(args, "--lock", d.name, "--id", id)
	if d.fair {
		args = append(args, "--fair")
	}
	cmd := exec.Command(d.exe, args...)
	cmd.Env = d.workerEnv()
	cmd.SysProcAttr = detachedAttr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	readers.Go(func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var ev workerEvent
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				ev = workerEvent{Kind: "log", Msg: sc.Text()}
			}
			ev.Worker = id
			events <- ev
		}
		events <- workerEvent{Kind: "exit", Worker: id, T: time.Now().UnixNano()}
	})
	readers.Go(func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			events <- workerEvent{Kind: "log", Worker: id, T: time.Now().UnixNano(), Msg: sc.Text()}
		}
	})
	return &workerProc{id: id, cmd: cmd, stdin: stdin}, nil
}

// stopWorkers asks every worker to stop: it finishes its turn, releases
// the lock and exits.
func (d *demo) stopWorkers() {
	for _, p := range d.procs {
		_ = p.stdin.Close()
	}
}

func (d *demo) killWorkers() {
	for _, p := range d.procs {
		_ = p.cmd.Process.Kill()
	}
}

// waitWorkers reaps the workers; their pipes have been read to the end.
func (d *demo) waitWorkers() {
	for _, p := range d.procs {
		_ = p.cmd.Wait()
	}
}

// readRedis reads the lock's state for the live view; nil if that failed.
func (d *demo) readRedis() *lockState {
	ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
	defer cancel()
	st, err := readLock(ctx, d.rdb, d.name)
	if err != nil {
		return nil
	}
	return st
}

// cleanup deletes the demo's keys (the lock's and the demo's own) and
// says what it cleaned up.
func (d *demo) cleanup() string {
	ctx, cancel := shortContext()
	defer cancel()
	dk := keysForDemo(d.name)
	keys := []string{dk.inside, dk.lastRelease}
	for _, k := range layout.KeysOf(d.name, layout.KindLock, layout.KindFenced, layout.KindFair) {
		keys = append(keys, k.Name)
	}
	err := d.rdb.Do(ctx, d.rdb.B().Del().Key(keys...).Build()).Error()
	msg := "cleanup: workers stopped, the demo's keys deleted"
	if err != nil {
		msg = fmt.Sprintf("cleanup: workers stopped; deleting the demo's keys failed: %v", err)
	}
	if d.srv != nil {
		msg += ", redis-server stopped"
	}
	return msg
}

// randomID names one demo run, so that runs on one server never mix.
func randomID() string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Sprintf("%08x", time.Now().UnixNano()&0xffffffff)
	}
	return hex.EncodeToString(b[:])
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("TERM") == "dumb" {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
