package rlock_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/relock-go/relock/internal/layout"
	"math/rand/v2"
	"os"
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

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/rlock"
	"github.com/relock-go/relock/watchdog"
)

// This file is the checker's engine, shared by the models of every kind:
// the server, the Clients and their replacements, the child processes,
// the faults, the history, the liveness check and the counts. The models
// (checker_holds_test.go, checker_sem_test.go, checker_latch_test.go)
// make the calls and say what may and must happen.

const (
	// chkLease is every Client's watchdog timeout: renewals every 300ms,
	// and a dead holder's hold ends within 900ms.
	chkLease = 900 * time.Millisecond
	// chkFixedLease is the usual fixed lease.
	chkFixedLease = 1500 * time.Millisecond
	// chkBound is how soon a waiter must go on once the model says it
	// could, when no fault and no death excuse a delay.
	chkBound = 300 * time.Millisecond
	// chkRecovery is how long after a fault a waiter may still be held up
	// by it: the retry pause of a waiting call (100ms) and a half.
	chkRecovery = 150 * time.Millisecond
	// chkSettle is how long a script may run after its call's reply came
	// or its call gave up, when no pause held it up: the time a command
	// takes to go out and come back on a healthy connection.
	chkSettle = 50 * time.Millisecond
	// chkNetDelay is the latency the proxy adds each way between the
	// proxied Clients and the server, outside a delay fault.
	chkNetDelay = time.Millisecond
)

// faultKind is one kind of fault the engine injects.
type faultKind int

const (
	fPauseShort  faultKind = iota // SIGSTOP for a third of the lease
	fPauseLong                    // SIGSTOP for one and a half leases
	fClientKill                   // CLIENT KILL of every connection but the checker's
	fOOM                          // real OOM replies (maxmemory 1) for a quarter lease
	fOOMInjected                  // OOM replies to acquisitions only (releases go through)
	fNet                          // the proxy's connections: latency, a stall or a cut (see netForms)
	numFaults
)

func (f faultKind) String() string {
	return [...]string{"SIGSTOP shorter than the lease", "SIGSTOP longer than the lease",
		"CLIENT KILL of every other connection", "OOM replies", "OOM replies to acquisitions",
		"a fault of the proxied Clients' connections"}[f]
}

// counterName is the name of a fault's counter.
func (f faultKind) counterName() string {
	return [...]string{"fault:pause<lease", "fault:pause>lease", "fault:client-kill", "fault:oom", "fault:oom-injected",
		"fault:net"}[f]
}

// netForms are the forms of fNet, one picked at random each time (each
// counted as "net:<form>"; RELOCK_CHECK_SKIP names them as "net-<form>"):
// the proxy adds 10ms to 40ms each way for a third of the lease; it
// forwards nothing for a third of the lease, then all it kept; it stalls
// up to 100ms, then cuts its connections, dropping what it kept.
var netForms = []string{"delay", "stall", "cut"}

// holdsUp reports whether a command may be held up by the fault, to run
// after its call gave up: a pause of the server, or latency or a stall
// of the proxy (a cut drops what it holds, but a stall comes first).
func (f faultKind) holdsUp() bool {
	return f == fPauseShort || f == fPauseLong || f == fNet
}

// window is a stretch of time, with what it was.
type window struct {
	from, to time.Time
	what     string
}

func (w window) String() string { return w.what }

// fault is a fault that hit the server.
type fault struct {
	kind     faultKind
	form     string // of fNet
	from, to time.Time
}

// death is a Client that died: closed, or its process killed.
type death struct {
	who string
	at  time.Time
	// queued: it had a waiter in a fair lock's or a semaphore's queue,
	// which delays the queue until the waiter's place times out.
	queued bool
}

// slot is one in-process Client of the checker. A closed Client is
// replaced by a new one in the same slot (a new generation).
type slot struct {
	idx, gen int
	c        *rlock.Client
	faulty   *relocktest.Faulty
	id       string
	wakeOne  bool
	proxied  bool      // its connections go through the engine's proxy
	closedAt time.Time // zero while open
	// gets counts the GET replies of the checker's key this Client had
	// (the latch's reads), and evals the replies, not errors, of each
	// script (by SHA1) with the join flag of a semaphore's queue, if any:
	// how the checker learns that a call has reached a point of its own
	// (a waiter that attempted twice has subscribed in between).
	gets  int
	evals map[string]int
}

// chkKind is one kind the checker covers.
type chkKind struct {
	name string
	// slots is the number of in-process Clients; wakeOne says which of
	// them have WithWakeOne.
	slots   int
	wakeOne func(slot int) bool
	// proxied says which slots reach the server through the proxy (nil:
	// the last one).
	proxied func(slot int) bool
	// bound replaces chkBound for the kind (0: chkBound).
	bound time.Duration
	// queueDelay is how long a dead queued waiter may delay the others:
	// the kind's waiter timeout plus one refresh interval (0: none).
	queueDelay time.Duration
	// acquireScripts are the scripts that injected OOM replies answer.
	acquireScripts []string
	// deaths are the counters of deaths every run must have.
	deaths []string
	model  func(e *engine) model
}

// model is what a kind's model does for the engine.
type model interface {
	// shapes are the kind's round shapes; each run makes every one of
	// them at least once.
	shapes() []string
	// round makes one round of the shape, with the fault f (-1: none)
	// hitting the server while it runs.
	round(shape string, f faultKind)
	// checkpoint checks the model against the Clients and Redis, and
	// liveness, between rounds.
	checkpoint()
	// faulted tells the model of a fault when it starts (to zero) and when
	// it ends.
	faulted(f faultKind, from, to time.Time)
	// lost is the lost handler of the Client in slot s, generation gen.
	lost(s, gen int, name, owner string, cause error)
	// finish ends every hold and checks that nothing is left.
	finish()
}

// engine runs one kind for one seed.
type engine struct {
	t *testing.T
	// probedUntil is when a probe of the name's other form or another
	// kind (foreign) may last have held state in Redis: one whose reply
	// was lost holds it until its lease ends or the Client gives it back.
	// Until then, a call refused with ErrNameConflict or ErrWrongKind
	// was refused for it. e.mu guards it.
	probedUntil time.Time
	kind        *chkKind
	srv         *redistest.Server
	raw         rueidis.Client
	// proxy is between the proxied slots' Clients and the server.
	proxy *relocktest.Proxy
	name  string
	seed  uint64
	rng   *rand.Rand
	rngMu sync.Mutex
	epoch time.Time
	m     model
	oom   rueidis.RedisResult

	mu       sync.Mutex
	slots    []*slot
	faults   []fault // the faults of the last 10s of this run
	deaths   []death // the deaths of the last 10s of this run
	history  []string
	failed   bool
	counts   map[string]int
	children []*relocktest.Child
	nchild   int
	// childWins are the children's lives, from their start to a lease
	// after their death (what: the child's name).
	childWins []window
	// diedStarting are the children that died as they started, until
	// what they may have taken ran out (what: the Client's ID).
	diedStarting []window
	// more are excuses a model adds (see excuse).
	more []window
	// mustRounds is the number of rounds that make every shape and fault
	// once.
	mustRounds int
	// stalls are the stretches of the last 10s in which the test process
	// itself did not run (see watchStalls); beat is watchStalls' last
	// wake-up (unix ns).
	stalls []window
	beat   atomic.Int64
}

func newEngine(t *testing.T, k *chkKind, seed uint64) *engine {
	srv := redistest.Start(t, "--maxmemory-policy", "noeviction")
	e := &engine{
		t: t, kind: k, srv: srv, raw: srv.Client(t),
		name:   "chk:" + strings.ReplaceAll(strings.ReplaceAll(t.Name(), "/", ":"), "#", ":"),
		seed:   seed,
		rng:    rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		epoch:  time.Now(),
		counts: make(map[string]int),
	}
	e.oom = relocktest.ErrorReply(t, e.raw, "OOM command not allowed when used memory > 'maxmemory'.")
	p, err := relocktest.NewProxy(srv.Addr)
	require.NoError(t, err, "proxy")
	t.Cleanup(func() { _ = p.Close() })
	p.SetDelay(chkNetDelay)
	e.proxy = p
	for i := range k.slots {
		e.slots = append(e.slots, e.newSlot(i, 0))
	}
	t.Cleanup(func() {
		e.mu.Lock()
		cs := e.children
		e.children = nil
		e.mu.Unlock()
		for _, c := range cs {
			c.Kill()
		}
	})
	e.m = k.model(e)
	e.watchStalls()
	return e
}

// stallGap is the shortest gap between two wake-ups of watchStalls that
// it records as a stall of the test process.
const stallGap = 50 * time.Millisecond

// watchStalls starts a goroutine, stopped when the test ends, that wakes
// every few milliseconds and records each gap of stallGap or more
// between two wake-ups: a stretch in which the test process did not run
// (a machine with every core busy, a long garbage collection), and with
// it the Clients' watchdogs.
func (e *engine) watchStalls() {
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tk := time.NewTicker(5 * time.Millisecond)
		defer tk.Stop()
		last := time.Now()
		e.beat.Store(last.UnixNano())
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				now := time.Now() // not the tick's time: that is when it was due
				if now.Sub(last) >= stallGap {
					e.mu.Lock()
					e.stalls = append(e.stalls, window{from: last, to: now, what: "a stall of the test process"})
					e.beat.Store(now.UnixNano()) // with the stall: stalledLocked counts it once
					e.mu.Unlock()
				} else {
					e.beat.Store(now.UnixNano())
				}
				last = now
			}
		}
	}()
	e.t.Cleanup(func() { close(stop); <-done })
}

// stalledLocked is how long the test process stalled between from and
// to, by watchStalls, counting the gap since its last wake-up (a stall
// it has not woken up from yet, when the Clients' goroutines ran first).
// e.mu is held.
func (e *engine) stalledLocked(from, to time.Time) time.Duration {
	var d time.Duration
	stalls := e.stalls
	if beat := time.Unix(0, e.beat.Load()); time.Since(beat) >= stallGap {
		stalls = append(slices.Clip(stalls), window{from: beat, to: time.Now()})
	}
	for _, s := range stalls {
		if a, b := maxTime(s.from, from), minTime(s.to, to); b.After(a) {
			d += b.Sub(a)
		}
	}
	return d
}

// starvedLossLocked reports whether a loss reported at now with cause is
// one the test process's own stalls explain: its watchdog found the lease
// ran out with no renewal sent (ErrExpired, with no renewal error: the
// renewal due was not even started in time), while the process stalled
// for a renewal interval or more within the lease before. A watchdog
// that does not run cannot renew: the library's promise is then that the
// loss is reported, not that the hold is kept. e.mu is held.
func (e *engine) starvedLossLocked(cause error, now time.Time) bool {
	if !errors.Is(cause, watchdog.ErrExpired) || strings.Contains(cause.Error(), "last renewal error") {
		return false
	}
	d := e.stalledLocked(now.Add(-chkLease), now)
	if d < chkLease/3 {
		return false
	}
	e.count("loss:starved", 1)
	e.logLocked("  the loss comes after the test process stalled for %v within its lease, with no renewal sent: explained", d.Round(time.Millisecond))
	return true
}

// newSlot makes the Client of slot i, generation gen.
func (e *engine) newSlot(i, gen int) *slot {
	opt := e.srv.ClientOption()
	opt.PipelineMultiplex = -1 // one connection, as NewClient makes
	opt.ClientName = slotName(i, gen)
	proxied := i == e.kind.slots-1
	if e.kind.proxied != nil {
		proxied = e.kind.proxied(i)
	}
	if proxied {
		opt.InitAddress = []string{e.proxy.Addr()}
	}
	rdb, err := rueidis.NewClient(opt)
	require.NoError(e.t, err, "rueidis.NewClient")
	e.t.Cleanup(rdb.Close)
	s := &slot{idx: i, gen: gen, faulty: relocktest.NewFaulty(rdb), evals: make(map[string]int), proxied: proxied}
	s.wakeOne = e.kind.wakeOne != nil && e.kind.wakeOne(i)
	tap := relocktest.NewTap(s.faulty, countReplies(e.name, &e.mu, &s.gets, s.evals))
	opts := []rlock.Option{rlock.WithWatchdogTimeout(chkLease),
		rlock.WithLostHandler(func(name, owner string, cause error) {
			e.logf("loss reported: c%d.%d %s %s: %v", i, gen, name, owner, oneLine(cause))
			e.m.lost(i, gen, name, owner, cause)
		})}
	if s.wakeOne {
		opts = append(opts, rlock.WithWakeOne())
	}
	c, err := rlock.New(tap, opts...)
	require.NoError(e.t, err, "rlock.New")
	e.t.Cleanup(func() { _ = c.Close() })
	s.c, s.id = c, c.ID()
	return s
}

// countReplies returns a Tap's watcher that counts, under mu, the GET
// replies of key in gets and the non-error replies of every script in
// evals (keyed by SHA1, and by SHA1+"/join" for an attempt that asks to
// join a semaphore's queue).
func countReplies(key string, mu *sync.Mutex, gets *int, evals map[string]int) func(args []string) func(rueidis.RedisResult) {
	return func(args []string) func(rueidis.RedisResult) {
		switch {
		case len(args) == 2 && strings.EqualFold(args[0], "GET") && args[1] == key:
			return func(rueidis.RedisResult) {
				mu.Lock()
				*gets++
				mu.Unlock()
			}
		case len(args) >= 3:
			sha := relocktest.ScriptSHA1(args)
			if sha == "" {
				return nil
			}
			if sha == lua.SemAcquire.SHA1 {
				// ARGV[4] is the join flag.
				if nk, err := strconv.Atoi(args[2]); err == nil && len(args) > 3+nk+3 && args[3+nk+3] == "1" {
					sha += "/join"
				}
			}
			return func(res rueidis.RedisResult) {
				if err := res.Error(); err != nil && !rueidis.IsRedisNil(err) {
					return
				}
				mu.Lock()
				evals[sha]++
				mu.Unlock()
			}
		}
		return nil
	}
}

// replies is how many non-error replies of the script sha slot s had.
func (e *engine) replies(s *slot, sha string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return s.evals[sha]
}

// slotName is the connection name of the Client of slot i, generation
// gen.
func slotName(i, gen int) string { return fmt.Sprintf("chk-c%d.%d", i, gen) }

// subscribed reports whether the Client of slot s has its pub/sub
// connection subscribed to at least one channel (it subscribes only to
// the channels of the checker's object).
func (e *engine) subscribed(s *slot) bool {
	list, err := e.raw.Do(context.Background(), e.raw.B().ClientList().TypePubsub().Build()).ToString()
	if err != nil {
		return false
	}
	name := "name=" + slotName(s.idx, s.gen) + " "
	for _, line := range strings.Split(list, "\n") {
		if !strings.Contains(line, name) {
			continue
		}
		for _, f := range strings.Fields(line) {
			for _, p := range []string{"sub=", "ssub="} {
				if v, ok := strings.CutPrefix(f, p); ok && v != "0" {
					return true
				}
			}
		}
	}
	return false
}

// pubsubConn reports whether the Client of slot s has its pub/sub
// connection (subscribed or not).
func (e *engine) pubsubConn(s *slot) bool {
	list, err := e.raw.Do(context.Background(), e.raw.B().ClientList().TypePubsub().Build()).ToString()
	return err == nil && strings.Contains(list, "name="+slotName(s.idx, s.gen)+" ")
}

// slot returns the current Client of slot i.
func (e *engine) slot(i int) *slot {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.slots[i]
}

// closeSlot closes the Client of slot i (a death) and records it; queued
// says whether it had a waiter in a queue. The slot keeps the closed
// Client until replaceSlot.
func (e *engine) closeSlot(i int, queued bool, what string) *slot {
	s := e.slot(i)
	at := time.Now()
	_ = s.c.Close()
	e.mu.Lock()
	s.closedAt = at
	e.deaths = append(e.deaths, death{who: fmt.Sprintf("c%d.%d", i, s.gen), at: at, queued: queued})
	e.counts["death:close "+what]++
	e.logLocked("Client c%d.%d closed (%s)", i, s.gen, what)
	e.mu.Unlock()
	return s
}

// replaceSlot puts a new Client in slot i, whose old one is closed.
func (e *engine) replaceSlot(i int) *slot {
	old := e.slot(i)
	n := e.newSlot(i, old.gen+1)
	e.mu.Lock()
	e.slots[i] = n
	e.logLocked("Client c%d.%d replaces c%d.%d", i, n.gen, i, old.gen)
	e.mu.Unlock()
	return n
}

func (e *engine) intn(n int) int {
	e.rngMu.Lock()
	defer e.rngMu.Unlock()
	return e.rng.IntN(n)
}

// pick returns one of xs at random.
func pick[T any](e *engine, xs ...T) T { return xs[e.intn(len(xs))] }

func (e *engine) ms(n int) time.Duration { return time.Duration(e.intn(n)) * time.Millisecond }

func (e *engine) since() string { return e.at(time.Now()) }

func (e *engine) at(t time.Time) string { return t.Sub(e.epoch).Round(time.Millisecond).String() }

func (e *engine) logf(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.logLocked(format, args...)
}

func (e *engine) logLocked(format string, args ...any) {
	e.history = append(e.history, e.since()+" "+fmt.Sprintf(format, args...))
}

// violation records a broken rule. e.mu is held.
func (e *engine) violation(format string, args ...any) {
	msg := "VIOLATION " + fmt.Sprintf(format, args...)
	e.logLocked("%s", msg)
	assert.Fail(e.t, e.since()+" "+msg)
	e.failed = true
}

// count adds n to a counter. e.mu is held.
func (e *engine) count(name string, n int) { e.counts[name] += n }

// call counts one call of the API. e.mu is not held.
func (e *engine) call() {
	e.mu.Lock()
	e.counts["calls"]++
	e.mu.Unlock()
}

// run makes rounds for d (first every shape and every fault once, in a
// random order, then at random), checks after each, and finishes.
func (e *engine) run(d time.Duration) {
	defer func() {
		if e.failed || os.Getenv("RELOCK_CHECK_HISTORY") != "" {
			e.mu.Lock()
			h := e.history
			if len(h) > 500 {
				h = h[len(h)-500:]
			}
			e.mu.Unlock()
			e.t.Logf("history (last %d lines):\n%s", len(h), strings.Join(h, "\n"))
		}
	}()
	type plan struct {
		shape string
		f     faultKind
	}
	var must []plan
	shapes := e.shapes()
	for _, s := range shapes {
		if !slices.Contains(ownTests, s) {
			must = append(must, plan{s, -1})
		}
	}
	for _, f := range e.faultKinds() {
		must = append(must, plan{"random", f})
	}
	e.rngMu.Lock()
	e.rng.Shuffle(len(must), func(i, j int) { must[i], must[j] = must[j], must[i] })
	e.rngMu.Unlock()
	e.mustRounds = len(must)
	// The rounds every run must make are made even when a slow machine
	// makes them overrun d (up to mustOverrun times d): the minimums
	// checked at the end show that the checker ran them, they are not a
	// race with the clock. Random rounds fill what is left of d.
	start := time.Now()
	end, hard := start.Add(d), start.Add(mustOverrun*d)
	for !e.failed {
		if now := time.Now(); now.After(hard) || (now.After(end) && len(must) == 0) {
			break
		}
		var p plan
		if len(must) > 0 {
			p, must = must[0], must[1:]
			if len(must) == 0 {
				defer func(start time.Time) { e.logf("every shape and fault made once, by %v", e.at(start)) }(time.Now())
			}
		} else {
			p = plan{"random", -1}
			if len(shapes) > 0 && e.intn(3) == 0 {
				p.shape = pick(e, shapes...)
			}
			if f := faultKind(e.intn(2 * int(numFaults))); f < numFaults && slices.Contains(e.faultKinds(), f) {
				p.f = f
			}
		}
		e.logf("round %d: %s, fault %v", e.counts["rounds"]+1, p.shape, func() string {
			if p.f < 0 {
				return "none"
			}
			return p.f.String()
		}())
		e.m.round(p.shape, p.f)
		e.m.checkpoint()
		e.mu.Lock()
		e.counts["rounds"]++
		e.counts["shape:"+p.shape]++
		// A round may end before its fault (the kind's state did not
		// allow the round: a latch that could not be set, a model that
		// lost track of Redis): a fault every run must make and has not
		// made yet is then made in a later round.
		// The checks at the seams that a shaped round makes on the way
		// (judged) are judged only away from faults: a round that left one
		// unjudged is made again while the run has judged none of it.
		if j, ok := e.m.(*holdsModel); ok && slices.Contains(probeShapes, p.shape) {
			for _, c := range j.judged() {
				if e.counts[c] == 0 && !slices.ContainsFunc(must, func(q plan) bool { return q.shape == p.shape }) {
					must = append(must, plan{p.shape, -1})
					e.mustRounds++
					break
				}
			}
		}
		// A shaped round that could not set up its claim (a child that
		// did not get to wait in time on a loaded machine) is made again
		// while the run has made none of its claim.
		if c, ok := shapeCounters[p.shape]; ok && e.counts[c] == 0 && !slices.Contains(ownTests, p.shape) &&
			!slices.ContainsFunc(must, func(q plan) bool { return q.shape == p.shape }) {
			must = append(must, plan{p.shape, -1})
			e.mustRounds++
		}
		if p.f >= 0 && e.counts[p.f.counterName()] == 0 && slices.Contains(e.faultKinds(), p.f) &&
			!slices.ContainsFunc(must, func(q plan) bool { return q.f == p.f }) {
			must = append(must, plan{"random", p.f})
			e.mustRounds++
		}
		e.mu.Unlock()
	}
	if !e.failed {
		e.m.finish()
		e.checkMinimums()
	}
}

// strict reports whether RELOCK_CHECK_STRICT names what: a known defect
// the checker excuses unless told to judge it.
func strict(what string) bool {
	return slices.Contains(strings.Split(os.Getenv("RELOCK_CHECK_STRICT"), ","), what)
}

// skipped reports whether RELOCK_CHECK_SKIP names what.
func skipped(what string) bool {
	return slices.Contains(strings.Split(os.Getenv("RELOCK_CHECK_SKIP"), ","), what)
}

// probeShapes are the shapes whose rounds of the lock kinds (holdsModel)
// make the checks at the seams (the braced name, another kind on the
// name) while a lock is held.
var probeShapes = []string{"kill-waiter", "close-waiter"}

// mustOverrun bounds how far past its time a run goes to make the rounds
// every run must make (see run): a run that cannot make them in this many
// times its time fails its minimums.
const mustOverrun = 4

// The minimums of a run: it must make every shape and every fault at
// least once, every death of its kind's list at least once, and at least
// chkMinCalls calls of the API.
const chkMinCalls = 60

// checkMinimums fails the run if it made less than the minimums.
func (e *engine) checkMinimums() {
	e.mu.Lock()
	defer e.mu.Unlock()
	var want []string
	for _, s := range e.shapes() {
		if !slices.Contains(ownTests, s) {
			want = append(want, "shape:"+s)
		}
	}
	for _, f := range e.faultKinds() {
		want = append(want, f.counterName())
	}
	for _, d := range e.kind.deaths {
		// A death comes with the shape of its name.
		shape := strings.NewReplacer("death:kill hold", "kill-holder", "death:kill wait", "kill-waiter",
			"death:close holding", "close-holder", "death:close waiting", "close-waiter").Replace(d)
		if !skipped(shape) {
			want = append(want, d)
		}
	}
	// The shapes at the seams say by a counter of their own that they
	// got where their claim is judged, and so do the checks some shapes
	// make on the way.
	for _, sh := range e.shapes() {
		if c, ok := shapeCounters[sh]; ok && !slices.Contains(ownTests, sh) {
			want = append(want, c)
		}
	}
	if j, ok := e.m.(interface{ judged() []string }); ok {
		want = append(want, j.judged()...)
	}
	for _, w := range want {
		assert.GreaterOrEqual(e.t, e.counts[w], 1, "the run made no %s: give the checker more time (RELOCK_CHECK_DURATION)", w)
	}
	assert.GreaterOrEqual(e.t, e.counts["rounds"], e.mustRounds, "rounds made: give the checker more time (RELOCK_CHECK_DURATION)")
	assert.GreaterOrEqual(e.t, e.counts["calls"], chkMinCalls, "calls made: give the checker more time (RELOCK_CHECK_DURATION)")
}

// ownTests are the shapes that a test of their own makes every time, on
// the kinds where they found a defect (TestSeamStopRegistrant,
// TestSeamShortWait, TestSeamLeaseEnd, TestSeamProxyOpening): a run makes
// them at random only, not first.
var ownTests = []string{"stop-registrant", "short-wait", "lease-end", "proxy-opening"}

// runShape makes one round of shape, with no fault, and its checkpoint;
// it fails unless the shape got to its claim. What the round leaves is
// not checked (finish is not run): the server goes with the test.
func (e *engine) runShape(shape string) {
	defer func() {
		if e.failed || os.Getenv("RELOCK_CHECK_HISTORY") != "" {
			e.mu.Lock()
			h := e.history
			e.mu.Unlock()
			e.t.Logf("history:\n%s", strings.Join(h, "\n"))
		}
	}()
	e.logf("round 1: %s, fault none", shape)
	e.m.round(shape, -1)
	e.m.checkpoint()
	e.closeAll()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.counts["rounds"]++
	e.counts["shape:"+shape]++
	if c, ok := shapeCounters[shape]; ok && !e.failed {
		assert.GreaterOrEqual(e.t, e.counts[c], 1, "the round of %s did not get to its claim (%s): see its history", shape, c)
	}
	e.t.Logf("counts: %s", countLine(e.counts))
}

// shapeCounters are the counters the shapes at the seams make once their
// claim is set up: a child stopped, short waits made, a watched lease
// judged, an opening through the proxy judged.
var shapeCounters = map[string]string{"stop-holder": "stop:hold", "stop-waiter": "stop:wait", "stop-registrant": "stop:try",
	"short-wait": "short-wait:tries", "lease-end": "lease-end:judged", "proxy-opening": "proxy-opening:judged",
	"stale-opening": "stale-opening:made"}

// shapes are the model's round shapes but those RELOCK_CHECK_SKIP names
// (a comma-separated list: a way to look past a known failure).
func (e *engine) shapes() []string {
	skip := strings.Split(os.Getenv("RELOCK_CHECK_SKIP"), ",")
	return slices.DeleteFunc(e.m.shapes(), func(s string) bool { return slices.Contains(skip, s) })
}

// faultKinds are the faults but those RELOCK_CHECK_SKIP names (by their
// counter's name without "fault:").
func (e *engine) faultKinds() []faultKind {
	skip := strings.Split(os.Getenv("RELOCK_CHECK_SKIP"), ",")
	var fs []faultKind
	for f := range numFaults {
		if !slices.Contains(skip, strings.TrimPrefix(f.counterName(), "fault:")) {
			fs = append(fs, f)
		}
	}
	return fs
}

// fault hits the server with f after delay, and records it.
func (e *engine) fault(f faultKind, delay time.Duration) {
	time.Sleep(delay)
	form := ""
	if f == fNet {
		forms := slices.DeleteFunc(slices.Clone(netForms), func(x string) bool { return skipped("net-" + x) })
		if len(forms) == 0 {
			return
		}
		form = pick(e, forms...)
	}
	from := time.Now()
	e.mu.Lock()
	e.faults = append(e.faults, fault{kind: f, form: form, from: from})
	rec := len(e.faults) - 1
	e.logLocked("fault starts: %v %s", f, form)
	e.mu.Unlock()
	e.m.faulted(f, from, time.Time{})
	switch f {
	case fPauseShort:
		e.pause(chkLease / 3)
	case fPauseLong:
		e.pause(chkLease * 3 / 2)
	case fClientKill:
		for _, typ := range []string{"normal", "pubsub"} {
			_ = e.raw.Do(context.Background(), e.raw.B().Arbitrary("CLIENT", "KILL", "TYPE", typ, "SKIPME", "yes").Build()).Error()
		}
	case fOOM:
		e.config("maxmemory", "1")
		time.Sleep(chkLease / 4)
		e.config("maxmemory", "0")
	case fOOMInjected:
		e.mu.Lock()
		for _, s := range e.slots {
			s.faulty.Inject(&relocktest.Rule{N: -1, Reply: e.oom, SHA1s: e.kind.acquireScripts})
		}
		e.mu.Unlock()
		time.Sleep(chkLease / 6)
		e.mu.Lock()
		for _, s := range e.slots {
			s.faulty.Clear()
		}
		e.mu.Unlock()
	case fNet:
		switch form {
		case "delay":
			e.proxy.SetDelay(10*time.Millisecond + e.ms(30))
			time.Sleep(chkLease / 3)
			e.proxy.SetDelay(chkNetDelay)
		case "stall":
			e.proxy.Stall()
			time.Sleep(chkLease / 3)
			e.proxy.Resume()
		case "cut":
			e.proxy.Stall()
			time.Sleep(e.ms(100))
			n := e.proxy.Cut()
			e.logf("  the proxy cut %d connections", n)
		}
	}
	to := time.Now()
	e.m.faulted(f, from, to)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.faults[rec].to = to
	e.counts["faults"]++
	e.counts[f.counterName()]++
	if form != "" {
		e.counts["net:"+form]++
	}
	e.logLocked("fault ends: %v (from %v)", f, e.at(from))
}

func (e *engine) pause(d time.Duration) {
	if err := e.srv.Pause(); !assert.NoError(e.t, err, "SIGSTOP") {
		return
	}
	time.Sleep(d)
	assert.NoError(e.t, e.srv.Resume(), "SIGCONT")
}

func (e *engine) config(param, value string) {
	err := e.raw.Do(context.Background(), e.raw.B().ConfigSet().ParameterValue().ParameterValue(param, value).Build()).Error()
	assert.NoError(e.t, err, "CONFIG SET %s %s", param, value)
}

// pausedAt returns the end of the pause that held the server stopped at
// t (zero while it lasts), and whether there was one. e.mu is held.
func (e *engine) pausedAt(t time.Time) (time.Time, bool) {
	for _, f := range e.faults {
		if f.kind.holdsUp() && !t.Before(f.from) && (f.to.IsZero() || !t.After(f.to)) {
			return f.to, true
		}
	}
	return time.Time{}, false
}

// settled is the latest time at which a command whose call ended at t may
// still run on the server: held up by a pause that covered t, it runs at
// the pause's end. It is zero while that pause lasts: call it between
// rounds. e.mu is held.
func (e *engine) settled(t time.Time) time.Time {
	if end, ok := e.pausedAt(t); ok {
		if end.IsZero() {
			return time.Time{}
		}
		t = end
	}
	return t.Add(chkSettle)
}

// faultedDuring reports whether a fault overlapped [from, to]. e.mu is
// held.
func (e *engine) faultedDuring(from, to time.Time) bool {
	for _, f := range e.faults {
		if f.from.Before(to) && (f.to.IsZero() || f.to.After(from)) {
			return true
		}
	}
	return false
}

// excuses are the stretches in which a waiter may be held up for a reason
// other than the library: a fault and the retry that follows it, and the
// documented delay of a dead queued waiter. e.mu is held.
func (e *engine) excuses() []window {
	var xs []window
	for _, f := range e.faults {
		xs = append(xs, window{from: f.from, to: f.to.Add(chkRecovery), what: f.kind.String()})
	}
	for _, d := range e.deaths {
		if d.queued && e.kind.queueDelay > 0 {
			xs = append(xs, window{from: d.at, to: d.at.Add(e.kind.queueDelay), what: d.who + " died queued"})
		}
	}
	return append(xs, e.more...)
}

// excuse adds an excuse a model knows of. e.mu is held.
func (e *engine) excuse(from, to time.Time, what string) {
	e.more = append(e.more, window{from: from, to: to, what: what})
}

// leftQueue is the excuse of a waiter of a queue kind whose call ended
// at end without the lock while a fault hit the server: the script that
// takes it out of the queue may not have run, and its place then holds
// the queue back until it times out. It is called between rounds. e.mu
// is held.
func (e *engine) leftQueue(end time.Time, who string) {
	if e.kind.queueDelay == 0 || !e.faultedDuring(end.Add(-chkRecovery), end.Add(chkSettle)) {
		return
	}
	from := e.settled(end)
	e.excuse(end, from.Add(e.kind.queueDelay), who+" left the queue in a fault")
}

// wait is one call that waited, for the liveness check.
type wait struct {
	from, to time.Time
	what     string
	// avail is when the model says the waiter could have gone on, within
	// [from, to].
	avail []window
}

// bound is the kind's liveness bound.
func (e *engine) bound() time.Duration {
	if e.kind.bound > 0 {
		return e.kind.bound
	}
	return chkBound
}

// checkLiveness checks that no wait went on for longer than the bound in
// a stretch in which it could have gone on, outside the excuses. e.mu is
// held.
func (e *engine) checkLiveness(ws []wait) {
	xs := e.excuses()
	bound := e.bound()
	n := 0
	for _, w := range ws {
		for _, a := range w.avail {
			from, to := maxTime(w.from, a.from), minTime(w.to, a.to)
			for _, p := range subtract(window{from: from, to: to}, xs) {
				if p.to.Sub(p.from) > bound {
					e.count("violations:liveness", 1)
					if n++; n > 3 {
						break // enough to tell
					}
					e.violation("liveness: %s (%v to %v) could have gone on from %v (%s) and was still waiting at %v, %v later (bound %v)",
						w.what, e.at(w.from), e.at(w.to), e.at(p.from), a.what, e.at(p.to), p.to.Sub(p.from).Round(time.Millisecond), bound)
					break
				}
			}
		}
	}
}

// subtract returns w without the stretches of xs, in order.
func subtract(w window, xs []window) []window {
	if !w.from.Before(w.to) {
		return nil
	}
	out := []window{w}
	for _, x := range xs {
		var next []window
		for _, p := range out {
			if !x.from.Before(p.to) || !x.to.After(p.from) {
				next = append(next, p)
				continue
			}
			if p.from.Before(x.from) {
				next = append(next, window{from: p.from, to: x.from, what: p.what})
			}
			if x.to.Before(p.to) {
				next = append(next, window{from: x.to, to: p.to, what: p.what})
			}
		}
		out = next
	}
	return out
}

// free returns the stretches of [from, to] not covered by busy, each
// named after the busy stretch that ended where it starts.
func free(from, to time.Time, busy []window) []window {
	ps := subtract(window{from: from, to: to, what: "free"}, busy)
	for i, p := range ps {
		for _, b := range busy {
			if b.to.Equal(p.from) {
				ps[i].what = "free after " + b.what
			}
		}
	}
	return ps
}

// positive returns the stretches of [from, to] in which base(t) minus
// the number of busy windows covering t is above 0. base is a step
// function: steps[i].n holds from steps[i].from on, and the first step
// also before it. Each stretch is named after the busy window whose end
// opened it, if one did.
func positive(from, to time.Time, steps []step, busy []window) []window {
	type ev struct {
		at   time.Time
		d    int // +1: a busy window starts, -1: one ends, 0: a step
		what string
	}
	var evs []ev
	for _, b := range busy {
		if !b.to.After(from) || !b.from.Before(to) {
			continue
		}
		evs = append(evs, ev{at: maxTime(b.from, from), d: +1})
		if b.to.Before(to) {
			evs = append(evs, ev{at: b.to, d: -1, what: b.what})
		}
	}
	for _, st := range steps {
		if st.from.After(from) && st.from.Before(to) {
			evs = append(evs, ev{at: st.from})
		}
	}
	slices.SortStableFunc(evs, func(a, b ev) int { return a.at.Compare(b.at) })
	baseAt := func(t time.Time) int {
		n := 0
		for i, st := range steps {
			if i == 0 || !st.from.After(t) {
				n = st.n
			}
		}
		return n
	}
	var out []window
	n, open, openFrom, what := 0, false, time.Time{}, "available"
	at := from
	for i := 0; i <= len(evs); i++ {
		if i < len(evs) && evs[i].at.Equal(at) {
			n += evs[i].d
			if evs[i].d < 0 {
				what = "available after " + evs[i].what
			}
			continue
		}
		// Every event at at is applied: the value holds until the next.
		v := baseAt(at)-n > 0
		switch {
		case v && !open:
			open, openFrom = true, at
		case !v && open:
			open = false
			if at.After(openFrom) {
				out = append(out, window{from: openFrom, to: at, what: what})
			}
		}
		if i == len(evs) {
			break
		}
		at = evs[i].at
		i-- // apply it in the next pass
	}
	if open && to.After(openFrom) {
		out = append(out, window{from: openFrom, to: to, what: what})
	}
	return out
}

// step is a step of a step function: n from from on.
type step struct {
	from time.Time
	n    int
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// forgetPast drops the faults and deaths that can no longer excuse
// anything. e.mu is held.
func (e *engine) forgetPast() {
	horizon := time.Now().Add(-10 * time.Second)
	e.faults = slices.DeleteFunc(e.faults, func(f fault) bool { return f.to.Before(horizon) })
	e.deaths = slices.DeleteFunc(e.deaths, func(d death) bool { return d.at.Before(horizon) })
	e.more = slices.DeleteFunc(e.more, func(w window) bool { return w.to.Before(horizon) })
	e.childWins = slices.DeleteFunc(e.childWins, func(w window) bool { return !w.to.IsZero() && w.to.Before(horizon) })
	e.diedStarting = slices.DeleteFunc(e.diedStarting, func(w window) bool { return w.to.Before(horizon) })
	e.stalls = slices.DeleteFunc(e.stalls, func(w window) bool { return w.to.Before(horizon) })
}

// isRedisFailure reports whether err comes from Redis or the connection
// to it (a failure a fault explains).
func isRedisFailure(err error) bool {
	var re *rueidis.RedisError
	return errors.As(err, &re) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		strings.Contains(err.Error(), "connection") || strings.Contains(err.Error(), "EOF") ||
		strings.Contains(err.Error(), "broken pipe") || strings.Contains(err.Error(), "closed") ||
		strings.Contains(err.Error(), "injected")
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", " | ") }

func errText(err error) string {
	if err == nil {
		return "nil"
	}
	return oneLine(err)
}

// Child processes.

// childSpec is what a child process does: one Client on the server at
// Addr, with one call on the object Name of the checker's kind Kind.
type childSpec struct {
	Addr    string
	Kind    string
	Name    string
	Act     string // "hold", "wait", or "try" (TryLock with Wait, which must give up)
	Side    string // "r" or "w" (read-write lock), "" otherwise
	Lease   time.Duration
	Wait    time.Duration // of "try"
	WakeOne bool
	Owner   string
	// Expect, for a semaphore waiter, is the length the queue has once it
	// joined; for a counting semaphore or a rate limiter, the permits of
	// its call.
	Expect int
}

const childEnv = "RELOCK_CHECK_CHILD"

func (s childSpec) encode() string {
	return strings.Join([]string{s.Addr, s.Kind, s.Name, s.Act, s.Side, s.Lease.String(),
		strconv.FormatBool(s.WakeOne), s.Owner, strconv.Itoa(s.Expect), s.Wait.String()}, "\x1f")
}

func decodeChildSpec(v string) (childSpec, error) {
	f := strings.Split(v, "\x1f")
	if len(f) != 10 {
		return childSpec{}, fmt.Errorf("bad %s: %q", childEnv, v)
	}
	lease, err := time.ParseDuration(f[5])
	if err != nil {
		return childSpec{}, err
	}
	wait, err := time.ParseDuration(f[9])
	if err != nil {
		return childSpec{}, err
	}
	wo, _ := strconv.ParseBool(f[6])
	n, _ := strconv.Atoi(f[8])
	return childSpec{Addr: f[0], Kind: f[1], Name: f[2], Act: f[3], Side: f[4], Lease: lease, WakeOne: wo, Owner: f[7], Expect: n, Wait: wait}, nil
}

// child is a child process of a run.
type child struct {
	*relocktest.Child
	who  string
	id   string // its Client's ID
	spec childSpec
	info string // what its last line said
	// stoppedAt is when it was stopped (SIGSTOP); zero while it runs.
	stoppedAt time.Time
}

// spawn starts a child process doing spec and waits until it says it
// holds (act "hold") or waits (act "wait"). It returns nil, after logging
// why, when the child did not get there.
func (e *engine) spawn(spec childSpec) *child {
	spec.Addr, spec.Kind, spec.Name = e.srv.Addr, e.kind.name, e.name
	e.mu.Lock()
	e.nchild++
	who := fmt.Sprintf("p%d", e.nchild)
	e.mu.Unlock()
	if spec.Owner == "" {
		spec.Owner = who
	}
	e.mu.Lock()
	e.childWins = append(e.childWins, window{from: time.Now(), what: who})
	e.mu.Unlock()
	p, err := relocktest.StartChild("TestRandomizedChild", childEnv+"="+spec.encode())
	require.NoError(e.t, err, "start a child")
	e.mu.Lock()
	e.children = append(e.children, p)
	e.mu.Unlock()
	ch := &child{Child: p, who: who, spec: spec}
	ch.id, err = p.Expect("client ", 10*time.Second)
	require.NoError(e.t, err, "child %s", who)
	want := map[string]string{"hold": "held", "wait": "waiting", "try": "gave up"}[spec.Act]
	ch.info, err = p.Expect(want, 5*time.Second)
	if err != nil {
		e.logf("child %s (%s %s) did not get to %q: %v", who, spec.Act, spec.Side, want, err)
		at := e.kill(ch, true)
		// Whatever it may have taken (a waiter may have found the lock
		// free) lasts a lease at most.
		until := at.Add(max(spec.Lease, chkLease) + chkSettle)
		e.mu.Lock()
		e.excuse(at, until, "child "+who+" died as it started")
		e.diedStarting = append(e.diedStarting, window{from: at, to: until, what: ch.id})
		e.mu.Unlock()
		return nil
	}
	e.logf("child %s (Client %s) %s %s lease %v: %s %s", who, ch.id, spec.Act, spec.Side, spec.Lease, want, ch.info)
	return ch
}

// stop stops a child with SIGSTOP, and waits until it is stopped: it
// lives, keeps its connections (and with them its subscriptions), and
// does nothing, until cont. It counts "stop:<act>".
func (e *engine) stop(ch *child) time.Time {
	require.NoError(e.t, syscall.Kill(ch.Pid(), syscall.SIGSTOP), "SIGSTOP child %s", ch.who)
	if !until(5*time.Second, func() bool { return procState(ch.Pid()) == "T" }) {
		e.t.Errorf("child %s not seen stopped", ch.who)
	}
	at := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	ch.stoppedAt = at
	e.counts["stop:"+ch.spec.Act]++
	e.logLocked("child %s stopped (%s)", ch.who, ch.spec.Act)
	return at
}

// cont lets a stopped child go on (SIGCONT).
func (e *engine) cont(ch *child) time.Time {
	require.NoError(e.t, syscall.Kill(ch.Pid(), syscall.SIGCONT), "SIGCONT child %s", ch.who)
	at := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	ch.stoppedAt = time.Time{}
	e.logLocked("child %s continued (%s)", ch.who, ch.spec.Act)
	return at
}

// procState is the state letter of process pid in /proc ("T": stopped),
// "" if it cannot be read.
func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// pid (comm) state ...: comm may hold spaces, the state follows its ")".
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) {
		return ""
	}
	return string(b[i+2])
}

// diedStartingLocked returns the Client ID of a child that died as it
// started and may still have something in Redis at now, if it has a
// prefix of key (any, when key is ""). e.mu is held.
func (e *engine) diedStartingLocked(key string, now time.Time) (string, bool) {
	for _, w := range e.diedStarting {
		if w.what != "" && !now.After(w.to) && (key == "" || strings.HasPrefix(key, w.what+":")) {
			return w.what, true
		}
	}
	return "", false
}

// childWindowsLocked are the stretches in which a child may have held
// or waited for the checker's object, or left something of a call in
// Redis: from its start to its lease's end after its death (to now while
// it lives). e.mu is held.
func (e *engine) childWindowsLocked(now time.Time) []window {
	var ws []window
	for _, w := range e.childWins {
		if w.to.IsZero() {
			w.to = now
		}
		ws = append(ws, window{from: w.from, to: w.to, what: "child " + w.what})
	}
	return ws
}

// quiet waits until no excuse and no child's window covers the present
// (at most 3s), so that a shaped round's claims are judged. It reports
// whether it got there.
func (e *engine) quiet() bool {
	e.mu.Lock()
	var last time.Time
	for _, w := range append(e.excuses(), e.childWindowsLocked(time.Now())...) {
		last = maxTime(last, w.to)
	}
	e.mu.Unlock()
	d := time.Until(last)
	if d > 3*time.Second {
		e.logf("excuses or children last until %v: no wait that long", e.at(last))
		return false
	}
	if d > 0 {
		time.Sleep(d + time.Millisecond) // the end of the last excuse, not a guess
	}
	return true
}

// kill ends a child with SIGKILL and records its death.
func (e *engine) kill(ch *child, queued bool) time.Time {
	ch.Kill()
	at := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.children = slices.DeleteFunc(e.children, func(c *relocktest.Child) bool { return c == ch.Child })
	e.deaths = append(e.deaths, death{who: ch.who, at: at, queued: queued})
	for i := range e.childWins {
		if e.childWins[i].what == ch.who {
			e.childWins[i].to = at.Add(max(ch.spec.Lease, chkLease) + chkSettle)
		}
	}
	e.counts["death:kill "+ch.spec.Act]++
	e.logLocked("child %s killed (%s)", ch.who, ch.spec.Act)
	return at
}

// until polls cond every few milliseconds until it holds or timeout
// passes: it waits for a state that has no notification (a waiter seen
// in a queue). It reports whether cond held.
func until(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(2 * time.Millisecond)
	}
	return true
}

// finishKeys waits until Redis has nothing left but what keep accepts
// (every lease ends by itself), and nothing subscribed.
func (e *engine) finishKeys(keep func(key string) bool) {
	ctx := context.Background()
	deadline := time.Now().Add(chkFixedLease + chkLease + 2*time.Second)
	for {
		keys, err := e.raw.Do(ctx, e.raw.B().Keys().Pattern("*").Build()).AsStrSlice()
		require.NoError(e.t, err, "KEYS")
		keys = slices.DeleteFunc(keys, keep)
		if len(keys) == 0 {
			break
		}
		if time.Now().After(deadline) {
			assert.Empty(e.t, keys, "keys left in Redis after every hold ended")
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !until(2*time.Second, func() bool {
		chans, err := e.raw.Do(ctx, e.raw.B().PubsubChannels().Build()).AsStrSlice()
		return err == nil && len(chans) == 0
	}) {
		chans, _ := e.raw.Do(ctx, e.raw.B().PubsubChannels().Build()).AsStrSlice()
		assert.Empty(e.t, chans, "channels still subscribed after Close")
	}
}

// closeAll closes every Client and kills every child.
func (e *engine) closeAll() {
	e.mu.Lock()
	ss := slices.Clone(e.slots)
	cs := e.children
	e.children = nil
	e.mu.Unlock()
	for _, s := range ss {
		_ = s.c.Close()
	}
	for _, c := range cs {
		c.Kill()
	}
}

// field is the hash field of owner on the Client with ID id.
func field(id, owner string) string { return layout.Field(id, owner) }

// refusedForProbe reports whether err, of a call that started at start,
// is a refusal for a probe's state (see engine.probedUntil). e.mu is
// held.
func (e *engine) refusedForProbe(err error, start time.Time) bool {
	return (errors.Is(err, rlock.ErrNameConflict) || errors.Is(err, rlock.ErrWrongKind)) && start.Before(e.probedUntil)
}

// probed records a probe made from start to end that may have left state
// for up to lease. e.mu is held.
func (e *engine) probed(end time.Time, lease time.Duration) {
	if until := end.Add(lease + chkSettle + chkRecovery); until.After(e.probedUntil) {
		e.probedUntil = until
	}
}
