package integration_test

// The harness of the reliability tests: it builds integration/testprog,
// runs several of them as OS processes contending for one fenced lock,
// collects what they record, follows the fenced register's writes with
// MONITOR, and checks the history with package checker.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/integration/checker"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// relRace is set by reliability_race_test.go when the tests run with -race;
// the test program is then built with -race too.
var relRace bool

// relLease is the watchdog timeout of the test processes: short, so that
// the tests are quick, and long enough for renewals on a loaded machine.
const relLease = 600 * time.Millisecond

// relBuild builds the test program into a directory of t's.
func relBuild(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "testprog")
	args := []string{"build", "-o", bin}
	if relRace {
		args = append(args, "-race")
	}
	args = append(args, "github.com/relock-go/relock/integration/testprog")
	out, err := exec.Command("go", args...).CombinedOutput()
	require.NoError(t, err, "go build testprog:\n%s", out)
	return bin
}

var relSeq atomic.Uint64

// relName returns a name unique to this call.
func relName(t testing.TB, what string) string {
	base := strings.NewReplacer("/", ":", " ", "_").Replace(t.Name())
	return fmt.Sprintf("rel:%s:%s:%d", base, what, relSeq.Add(1))
}

// relEnv is the setting of one reliability test: the lock's server (the
// one faults hit), the address clients use to reach it (the server or a
// proxy in front of it), and the fenced register's server, which no fault
// touches, as a resource separate from the lock service would be.
type relEnv struct {
	lock     *redistest.Server
	lockAddr string
	reg      *redistest.Server
	bin      string
}

func newRelEnv(t *testing.T, lockArgs ...string) *relEnv {
	t.Helper()
	e := &relEnv{lock: redistest.Start(t, lockArgs...), reg: redistest.Start(t), bin: relBuild(t)}
	e.lockAddr = e.lock.Addr
	return e
}

// client returns an in-process Client of the lock's server (through the
// proxy, if there is one), closed when t ends.
func (e *relEnv) client(t testing.TB, opts ...rlock.Option) *rlock.Client {
	t.Helper()
	c, err := rlock.NewClient(rueidis.ClientOption{InitAddress: []string{e.lockAddr}, DisableCache: true}, opts...)
	require.NoError(t, err, "NewClient")
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// relConfig says how a workload runs.
type relConfig struct {
	procs    int
	watchdog time.Duration // the processes' watchdog timeout; relLease if 0
	unfenced bool          // plain HSET instead of the fenced register
	stallAt  int           // round in which the stallers stall while holding
	stall    time.Duration // how long they stall
	stallers int           // how many processes (p0, p1, ...) stall; 1 if 0
}

// relWorkload is a run of several test processes on one lock.
type relWorkload struct {
	t      *testing.T
	env    *relEnv
	cfg    relConfig
	name   string // the lock
	regKey string // the register
	procs  []*relProc
	mon    *relMonitor

	mu      sync.Mutex
	recs    []checker.Record
	changed chan struct{} // closed and replaced at each record
	crashes []checker.Operation
	faults  int
	notes   []string
}

// relProc is one test process.
type relProc struct {
	id     string
	cmd    *exec.Cmd
	stdin  interface{ Close() error }
	stderr relBuffer
	exited chan struct{}
	killed atomic.Bool
}

type relBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *relBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *relBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// start runs cfg.procs test processes on a fresh lock and register and
// waits until each is ready.
func (e *relEnv) start(t *testing.T, cfg relConfig) *relWorkload {
	t.Helper()
	if cfg.watchdog == 0 {
		cfg.watchdog = relLease
	}
	w := &relWorkload{t: t, env: e, cfg: cfg, name: relName(t, "lock"), regKey: relName(t, "register"),
		changed: make(chan struct{})}
	w.mon = startRelMonitor(t, e.reg, w.regKey)
	t.Cleanup(w.killAll)
	for i := range cfg.procs {
		id := fmt.Sprintf("p%d", i)
		args := []string{
			"-addr", e.lockAddr, "-reg-addr", e.reg.Addr, "-name", w.name, "-reg", w.regKey, "-id", id,
			"-watchdog", cfg.watchdog.String(), fmt.Sprintf("-fence=%v", !cfg.unfenced),
		}
		if i < max(cfg.stallers, 1) && cfg.stallAt > 0 {
			args = append(args, "-stall-at", fmt.Sprint(cfg.stallAt), "-stall", cfg.stall.String())
		}
		w.procs = append(w.procs, w.spawn(id, args))
	}
	for _, p := range w.procs {
		w.waitFor(0, 30*time.Second, p.id+" to start", func(r checker.Record) bool {
			return r.Proc == p.id && r.Kind == checker.Start
		})
	}
	return w
}

func (w *relWorkload) spawn(id string, args []string) *relProc {
	w.t.Helper()
	p := &relProc{id: id, exited: make(chan struct{})}
	p.cmd = exec.Command(w.env.bin, args...)
	// The process dies with the test, even when the test is killed.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// A race report does not change the exit code: the reports are read
	// from stderr (unexplainedRaces), which knows one of rueidis's.
	p.cmd.Env = append(os.Environ(), "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" exitcode=0"))
	p.cmd.Stderr = &p.stderr
	stdin, err := p.cmd.StdinPipe()
	require.NoError(w.t, err)
	p.stdin = stdin
	stdout, err := p.cmd.StdoutPipe()
	require.NoError(w.t, err)
	require.NoError(w.t, p.cmd.Start(), "start %s", id)
	go func() {
		defer close(p.exited)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var r checker.Record
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				w.note(fmt.Sprintf("%s wrote a bad record %q: %v", id, sc.Text(), err))
				continue
			}
			w.add(r)
		}
		_ = p.cmd.Wait()
	}()
	return p
}

func (w *relWorkload) add(r checker.Record) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.recs = append(w.recs, r)
	close(w.changed)
	w.changed = make(chan struct{})
}

func (w *relWorkload) note(s string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.notes = append(w.notes, s)
}

// mark is the number of records so far, for waitFor.
func (w *relWorkload) mark() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.recs)
}

// waitFor waits for a record, at index from or later, that matches pred,
// and returns it with the index after it. It fails the test after timeout.
func (w *relWorkload) waitFor(from int, timeout time.Duration, what string, pred func(checker.Record) bool) (checker.Record, int) {
	w.t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		w.mu.Lock()
		for i := from; i < len(w.recs); i++ {
			if pred(w.recs[i]) {
				r := w.recs[i]
				w.mu.Unlock()
				return r, i + 1
			}
		}
		from = len(w.recs)
		changed := w.changed
		w.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			require.FailNowf(w.t, "timed out", "timed out after %v waiting for %s", timeout, what)
		}
	}
}

func (w *relWorkload) proc(id string) *relProc {
	for _, p := range w.procs {
		if p.id == id {
			return p
		}
	}
	require.FailNowf(w.t, "no process", "no process %s", id)
	return nil
}

// kill ends p with SIGKILL; whatever it held is lost from then on.
func (w *relWorkload) kill(p *relProc) time.Time {
	at := time.Now()
	p.killed.Store(true)
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	w.mu.Lock()
	w.crashes = append(w.crashes, checker.Crash(p.id, p.id, at.UnixNano()))
	w.faults++
	w.mu.Unlock()
	relocktest.Receive(w.t, p.exited, 10*time.Second, p.id+" to exit after SIGKILL")
	return at
}

func (w *relWorkload) signal(p *relProc, sig syscall.Signal) {
	require.NoError(w.t, p.cmd.Process.Signal(sig), "signal %v to %s", sig, p.id)
}

// fault counts a fault injected while the workload ran.
func (w *relWorkload) fault() {
	w.mu.Lock()
	w.faults++
	w.mu.Unlock()
}

func (w *relWorkload) killAll() {
	for _, p := range w.procs {
		select {
		case <-p.exited:
			continue
		default:
		}
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.exited
	}
}

// relPause is what pauseHolder saw.
type relPause struct {
	stall, late, lost checker.Record
	stopped, resumed  time.Time
	remaining         time.Duration // the lock's lease left when p0 stopped
	pttlAt            time.Time     // when that was asked
	// ranOut: when p0 stopped, its hold was gone already (a newer token
	// was given, or there was no hold): its renewals came too late on a
	// loaded machine. remaining is then not p0's lease.
	ranOut   bool
	takeover checker.Record
}

// pauseHolder waits for p0 to stall while holding the lock, stops it with
// SIGSTOP until another process has taken the lock (so p0's lease ran
// out) and written with a newer token, then lets it go on. p0 then writes
// late with its old token and notices the loss.
func (w *relWorkload) pauseHolder() relPause {
	w.t.Helper()
	p0 := w.procs[0]
	var pz relPause
	var i int
	pz.stall, i = w.waitFor(0, 30*time.Second, "p0 to stall while holding", func(r checker.Record) bool {
		return r.Proc == p0.id && r.Kind == checker.Stall
	})
	w.signal(p0, syscall.SIGSTOP)
	pz.stopped = time.Now()
	w.fault()
	pz.remaining, pz.pttlAt, pz.ranOut = w.leaseOf(pz.stall.Token)
	pz.takeover, _ = w.waitFor(i, 10*w.cfg.watchdog+10*time.Second, "another process to take the lock", func(r checker.Record) bool {
		return r.Kind == checker.Acquire && r.Phase == checker.Return && r.Proc != p0.id && r.Result == checker.OK && !r.Reentry
	})
	_, j := w.waitFor(i, 10*time.Second, "another process to write with a newer token", func(r checker.Record) bool {
		return r.Kind == checker.Write && r.Phase == checker.Return && r.Proc != p0.id &&
			r.Token > pz.stall.Token && r.Result == checker.OK
	})
	w.signal(p0, syscall.SIGCONT)
	pz.resumed = time.Now()
	pz.late, _ = w.waitFor(j, 10*time.Second, "p0's late write", func(r checker.Record) bool {
		return r.Proc == p0.id && r.Kind == checker.Write && r.Phase == checker.Return && r.Token == pz.stall.Token
	})
	pz.lost, _ = w.waitFor(j, 10*time.Second, "p0 to notice the loss", func(r checker.Record) bool {
		return r.Proc == p0.id && r.Kind == checker.Lost
	})
	require.GreaterOrEqual(w.t, pz.late.Call, pz.stopped.UnixNano(),
		"p0 wrote before it was stopped: the harness took longer than the %v stall", w.cfg.stall)
	return pz
}

// leaseOf asks the lock's server (directly, not through a proxy), in one
// script, for the lock's remaining lease and the last token given: the
// lease is that of the hold with token only when no later token was
// given and the lock is held (gone reports otherwise).
func (w *relWorkload) leaseOf(token int64) (remaining time.Duration, at time.Time, gone bool) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	at = time.Now()
	m, err := w.env.lock.Do(ctx, "EVAL", "return {redis.call('pttl', KEYS[1]), redis.call('get', KEYS[2]) or '0'}",
		"2", w.name, layout.Token(w.name))
	require.NoError(w.t, err, "PTTL and token")
	vals, err := m.ToArray()
	require.NoError(w.t, err, "PTTL and token")
	require.Len(w.t, vals, 2, "PTTL and token")
	ms, _ := vals[0].AsInt64()
	last, _ := vals[1].ToString()
	return time.Duration(ms) * time.Millisecond, at, ms <= 0 || last != strconv.FormatInt(token, 10)
}

// remainingLease asks the lock's server (directly, not through a proxy)
// for the lock's remaining lease.
func (w *relWorkload) remainingLease() (time.Duration, time.Time) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	at := time.Now()
	m, err := w.env.lock.Do(ctx, "PTTL", w.name)
	require.NoError(w.t, err, "PTTL")
	ms, _ := m.AsInt64()
	return time.Duration(ms) * time.Millisecond, at
}

// relResult is the outcome of a workload, checked.
type relResult struct {
	scenario       string
	procs          int
	ops            []checker.Operation
	faults         int
	fencing        checker.FencingReport
	lin            checker.LinearizabilityResult
	losses         int
	overlaps       int
	longestOverlap time.Duration
}

// finish stops the processes (closing their standard input), waits for
// them, and checks the history.
func (w *relWorkload) finish(scenario string) relResult {
	w.t.Helper()
	for _, p := range w.procs {
		if !p.killed.Load() {
			_ = p.stdin.Close()
		}
	}
	for _, p := range w.procs {
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second):
			assert.Failf(w.t, "did not exit", "%s did not exit within 30s of its stop; stderr:\n%s", p.id, p.stderr.String())
			_ = p.cmd.Process.Kill()
			relocktest.Receive(w.t, p.exited, 10*time.Second, p.id+" to exit after SIGKILL")
		}
		if p.killed.Load() {
			continue
		}
		if code := p.cmd.ProcessState.ExitCode(); code != 0 {
			assert.Failf(w.t, "exit code", "%s exited with %d; stderr:\n%s", p.id, code, p.stderr.String())
		}
		races, recycled := unexplainedRaces(p.stderr.String())
		assert.Empty(w.t, races, "%s's race reports", p.id)
		if recycled > 0 {
			w.t.Logf("%s: %d race reports of rueidis's recycled command (see racereport_test.go)", p.id, recycled)
		}
	}
	applied := w.mon.finish()
	w.mu.Lock()
	recs := slices.Clone(w.recs)
	crashes := slices.Clone(w.crashes)
	faults := w.faults
	notes := slices.Clone(w.notes)
	w.mu.Unlock()
	assert.Empty(w.t, notes, "what the processes' records showed wrong")

	ops := checker.Pair(recs)
	ops = append(ops, crashes...)
	slices.SortStableFunc(ops, func(a, b checker.Operation) int { return int64Cmp(a.Call, b.Call) })
	r := relResult{scenario: scenario, procs: len(w.procs), ops: ops, faults: faults}
	r.fencing = checker.CheckFencing(ops, applied)
	r.lin = checker.CheckLinearizable(ops, time.Minute)
	var end int64
	for _, o := range ops {
		if o.Kind == checker.Lost && o.Return != checker.Pending {
			r.losses++
		}
		if o.Return != checker.Pending {
			end = max(end, o.Return)
		}
	}
	r.overlaps, r.longestOverlap = checker.Overlaps(checker.Holds(ops, end))
	w.checkClean()
	return r
}

func int64Cmp(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// checkClean checks that the workload left nothing behind on the lock's
// server but its fencing counter (kept on purpose) and unlock latches
// (which expire by themselves): no lock hash, no fair-lock queue, no
// subscriber. Locks of killed processes expire by their lease first.
func (w *relWorkload) checkClean() {
	w.t.Helper()
	raw := w.env.lock.Client(w.t)
	ctx := context.Background()
	relocktest.Eventually(w.t, w.cfg.watchdog+5*time.Second, "lock "+w.name+" to be gone after every process stopped", func() bool {
		n, err := raw.Do(ctx, raw.B().Exists().Key(w.name).Build()).AsInt64()
		return err == nil && n == 0
	})
	relCheckKeys(w.t, raw, w.name)
	relCheckNoSubscribers(w.t, raw, layout.Channel(w.name))
	_ = raw.Do(ctx, raw.B().Del().Key(layout.Token(w.name)).Build()).Error()
}

// relCheckKeys checks that of name's keys only the fencing counter is left,
// and that every other key on the server expires by itself.
func relCheckKeys(t testing.TB, raw rueidis.Client, name string) {
	t.Helper()
	ctx := context.Background()
	for _, k := range []string{name, layout.Queue(name), layout.Timeouts(name)} {
		n, err := raw.Do(ctx, raw.B().Exists().Key(k).Build()).AsInt64()
		require.NoError(t, err, "EXISTS %s", k)
		assert.Zero(t, n, "key %q left behind", k)
	}
	keys, err := raw.Do(ctx, raw.B().Keys().Pattern("*").Build()).AsStrSlice()
	require.NoError(t, err, "KEYS")
	for _, k := range keys {
		if strings.HasPrefix(k, layout.TokenPrefix+":") {
			continue
		}
		ms, err := raw.Do(ctx, raw.B().Pttl().Key(k).Build()).AsInt64()
		require.NoError(t, err, "PTTL %s", k)
		assert.NotEqual(t, int64(-1), ms, "key %q left behind without an expiry", k)
	}
}

// relCheckNoSubscribers waits (a little) for channel to have no subscriber:
// the server sees a closed connection only when it reads from it.
func relCheckNoSubscribers(t testing.TB, raw rueidis.Client, channel string) {
	t.Helper()
	relocktest.Eventually(t, 5*time.Second, "channel "+channel+" to have no subscriber after every client closed", func() bool {
		return relocktest.Subscribers(raw, channel) == 0
	})
}

// log prints the figures of r in one recognisable line.
func (r relResult) log(t testing.TB) {
	t.Helper()
	acq, writes := 0, 0
	for _, o := range r.ops {
		switch {
		case o.Kind == checker.Acquire && o.Result == checker.OK && !o.Reentry:
			acq++
		case o.Kind == checker.Write:
			writes++
		}
	}
	t.Logf("reliability: scenario=%s processes=%d operations=%d acquisitions=%d writes=%d accepted=%d "+
		"faults=%d violations=%d stale_rejected=%d losses=%d overlapping_holds=%d linearizable=%s (%d ops in %v)",
		r.scenario, r.procs, len(r.ops), acq, writes, r.fencing.Accepted, r.faults, len(r.fencing.Violations),
		r.fencing.Stale, r.losses, r.overlaps, r.lin.Result, r.lin.Operations, r.lin.Elapsed.Round(time.Millisecond))
}

// relTotals adds up the figures of every checked run of the package, for
// the README: each run prints the totals so far, so the last line printed
// has them all.
var relTotals struct {
	sync.Mutex
	runs, procs, ops, faults, violations, expected, stale, losses int
	canaries, canaryConflicts, inProcessFaults                    int
	longestCrashGap                                               time.Duration
}

func relLogTotals(t testing.TB) {
	t.Helper()
	r := &relTotals
	t.Logf("reliability-totals: fault_runs=%d processes=%d operations=%d faults=%d violations=%d "+
		"documented_token_repeats=%d stale_rejected=%d losses=%d canary_runs=%d canary_conflicts_found=%d "+
		"in_process_faults=%d longest_unavailability_after_holder_crash=%v",
		r.runs, r.procs, r.ops, r.faults, r.violations, r.expected, r.stale, r.losses, r.canaries, r.canaryConflicts,
		r.inProcessFaults, r.longestCrashGap.Round(time.Millisecond))
}

// relInProcessFaults adds faults injected into in-process clients (not
// into a workload) to the totals.
func relInProcessFaults(t testing.TB, n int) {
	t.Helper()
	relTotals.Lock()
	defer relTotals.Unlock()
	relTotals.inProcessFaults += n
	relLogTotals(t)
}

// requireSafe fails t unless the history is linearizable and has no
// violation other than of the allowed kinds, and adds the run's figures
// to the totals.
func (r relResult) requireSafe(t testing.TB, allowed ...string) {
	t.Helper()
	defer func() {
		relTotals.Lock()
		defer relTotals.Unlock()
		relTotals.runs++
		relTotals.procs += r.procs
		relTotals.ops += len(r.ops)
		relTotals.faults += r.faults
		relTotals.stale += r.fencing.Stale
		relTotals.losses += r.losses
		for _, v := range r.fencing.Violations {
			if slices.Contains(allowed, v.Kind) {
				relTotals.expected++
			} else {
				relTotals.violations++
			}
		}
		if !r.lin.OK() {
			relTotals.violations++
		}
		relLogTotals(t)
	}()
	if !assert.True(t, r.lin.OK(), "%s: lock history is not linearizable: %s", r.scenario, r.lin.Result) {
		r.dump(t)
	}
	var bad []checker.Violation
	for _, v := range r.fencing.Violations {
		if !slices.Contains(allowed, v.Kind) {
			bad = append(bad, v)
		}
	}
	if !assert.Empty(t, bad[:min(len(bad), 10)], "%s: %d violations (the first ten shown)", r.scenario, len(bad)) {
		r.dump(t)
	}
}

// dump logs the history, for a failure.
func (r relResult) dump(t testing.TB) {
	t.Helper()
	var b strings.Builder
	var t0 int64
	if len(r.ops) > 0 {
		t0 = r.ops[0].Call
	}
	for _, o := range r.ops {
		fmt.Fprintf(&b, "%9.1fms %v\n", float64(o.Call-t0)/1e6, o)
	}
	t.Logf("history of %s:\n%s", r.scenario, b.String())
}

// canary runs the workload with fencing off and a holder paused past its
// lease, on e's servers: the checker must find the conflicting write, or
// it is a checker that cannot fail.
func (e *relEnv) canary(t *testing.T) relResult {
	t.Helper()
	w := e.start(t, relConfig{procs: 3, unfenced: true, stallAt: 3, stall: 2 * time.Second})
	pz := w.pauseHolder()
	res := w.finish(t.Name() + "/canary")
	res.log(t)
	assert.Equal(t, checker.OK, pz.late.Result, "canary: the paused holder's unfenced write must be accepted")
	n := res.fencing.Count(checker.ViolWriteOrder)
	if !assert.NotZero(t, n, "canary: fencing off and a holder paused past its lease, yet no conflicting write found: the checker cannot fail") {
		res.dump(t)
	}
	relTotals.Lock()
	relTotals.canaries++
	relTotals.canaryConflicts += n
	relTotals.Unlock()
	return res
}

// relMonitor follows a register's writes with MONITOR on its server: the
// order in which MONITOR shows them is the order the server applied them.
type relMonitor struct {
	t       testing.TB
	srv     *redistest.Server
	key     string
	conn    net.Conn
	marker  string
	mu      sync.Mutex
	applied []checker.Applied
	err     error
	sawMark chan struct{}
	done    chan struct{}
}

func startRelMonitor(t testing.TB, srv *redistest.Server, key string) *relMonitor {
	t.Helper()
	conn, err := net.DialTimeout("tcp", srv.Addr, 5*time.Second)
	require.NoError(t, err, "MONITOR connection")
	m := &relMonitor{t: t, srv: srv, key: key, conn: conn, marker: "monitor-end:" + key,
		sawMark: make(chan struct{}), done: make(chan struct{})}
	t.Cleanup(func() {
		_ = conn.Close()
		<-m.done
	})
	rd := bufio.NewReader(conn)
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	_, err = conn.Write([]byte("MONITOR\r\n"))
	require.NoError(t, err, "MONITOR")
	line, err := rd.ReadString('\n')
	require.NoError(t, err, "MONITOR's answer")
	require.True(t, strings.HasPrefix(line, "+OK"), "MONITOR answered %q", line)
	_ = conn.SetDeadline(time.Time{})
	go func() {
		defer close(m.done)
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				m.mu.Lock()
				m.err = err
				m.mu.Unlock()
				return
			}
			args, err := checker.ParseMonitorLine(line)
			if err != nil {
				continue
			}
			if len(args) == 2 && strings.EqualFold(args[0], "echo") && args[1] == m.marker {
				close(m.sawMark)
				continue
			}
			if a, ok := checker.RegisterWrite(args, key); ok {
				m.mu.Lock()
				m.applied = append(m.applied, a)
				m.mu.Unlock()
			}
		}
	}()
	return m
}

// finish waits until MONITOR has shown every command run so far (it sends
// a marker and waits for it) and returns the register's writes in order.
func (m *relMonitor) finish() []checker.Applied {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := m.srv.Do(ctx, "ECHO", m.marker)
	require.NoError(m.t, err, "ECHO")
	select {
	case <-m.sawMark:
	case <-m.done:
		require.FailNowf(m.t, "MONITOR ended", "MONITOR connection ended: %v", m.err)
	case <-ctx.Done():
		require.FailNow(m.t, "MONITOR did not show the end marker within 10s")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.applied)
}
