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
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/fairlock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/rlock"
)

// TestRandomizedHolds is a randomized, model-based test of the public API
// against a real redis-server, with faults.
//
// Two Clients share one lock. Each has two named owners, each driven by
// two goroutines, and one goroutine acting without an owner (anonymous
// holds, Do with an owner of its own). In rounds, every goroutine makes one
// random call (Lock, TryLock with a wait and a lease, LockLease, Unlock,
// re-entry, Do with an error, a panic or a re-entry inside, a wait whose
// context ends midway, ForceUnlock) while, now and then, a fault hits the
// server: a SIGSTOP shorter or longer than the lease, CLIENT KILL of every
// connection, or real OOM replies; between rounds a Client may be closed
// and replaced. A model follows what every call was told and checks:
//
//   - exclusion: a call that acquires never finds another owner inside
//     (holding, and neither releasing, reported lost, nor doomed by a
//     force-unlock, a pause longer than the lease, a Close or the end of
//     a fixed lease);
//   - the promise: a hold that returned nil ends only by its Unlock or by
//     a reported loss (Done closes with a loss as its cause, and only for
//     a doomed hold); no Unlock says "not held" of a hold that was not
//     reported lost;
//   - after every round, the count Redis has for each owner is the model's,
//     and the lock hash has no field that no owner holds;
//   - liveness: no wait sleeps through a stretch in which the lock was free
//     and no fault hit the server;
//   - at the end, nothing is left in Redis, in the pub/sub subscriptions or
//     in the goroutine list (TestMain).
//
// It runs for 40s in all by default; RELOCK_CHECK_DURATION (a Go duration)
// makes it run longer, and RELOCK_CHECK_SEED replays a seed's choices
// (the timing of a real server is not replayed).
func TestRandomizedHolds(t *testing.T) {
	total := 40 * time.Second
	if s := os.Getenv("RELOCK_CHECK_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("RELOCK_CHECK_DURATION: %v", err)
		}
		total = d
	}
	if testing.Short() {
		total = 5 * time.Second
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("RELOCK_CHECK_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("RELOCK_CHECK_SEED: %v", err)
		}
		seed = v
	}
	kinds := []struct {
		name  string
		share int // of the total duration, in tenths
		get   func(c *rlock.Client, name string) checkedLock
		// slack is how long the lock may stay free while someone waits:
		// a fair lock waits up to a waiter timeout for a dead waiter at
		// the head of its queue.
		slack time.Duration
		opts  []rlock.Option
	}{
		{"Lock", 5, func(c *rlock.Client, n string) checkedLock { return c.GetLock(n) }, 300 * time.Millisecond, nil},
		{"FencedLock", 1, func(c *rlock.Client, n string) checkedLock { return c.GetFencedLock(n) }, 300 * time.Millisecond, nil},
		{"FairLock", 2, func(c *rlock.Client, n string) checkedLock { return c.GetFairLock(n) },
			fairlock.WaiterTimeout + fairlock.RefreshInterval + 100*time.Millisecond, nil},
		// With wake-one, a wake-up lost with a killed connection is made
		// up by the retry of a registered waiter, within 2s.
		{"Lock/WakeOne", 2, func(c *rlock.Client, n string) checkedLock { return c.GetLock(n) },
			2*time.Second + 300*time.Millisecond, []rlock.Option{rlock.WithWakeOne()}},
	}
	for i, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			s := seed + uint64(i)
			t.Logf("seed %d (RELOCK_CHECK_SEED=%d replays it)", s, seed)
			c := newChecker(t, s, k.get, k.opts...)
			c.slack = k.slack
			c.run(total * time.Duration(k.share) / 10)
		})
	}
}

// checkedLock is what every lock kind offers.
type checkedLock interface {
	Name() string
	Lock(ctx context.Context) error
	LockLease(ctx context.Context, lease time.Duration) error
	TryLock(ctx context.Context, wait, lease time.Duration) (bool, error)
	Unlock(ctx context.Context) error
	ForceUnlock(ctx context.Context) (bool, error)
	HoldCount(ctx context.Context) (int, error)
	Do(ctx context.Context, fn func(ctx context.Context) error) error
	HoldContext(ctx context.Context) context.Context
}

const (
	chkLease      = 900 * time.Millisecond // watchdog timeout: renewal every 300ms
	chkFixedLease = 1500 * time.Millisecond
	chkClients    = 2
)

// checker is the model and the harness.
type checker struct {
	t      *testing.T
	srv    *redistest.Server
	raw    rueidis.Client
	get    func(c *rlock.Client, name string) checkedLock
	name   string
	opts   []rlock.Option // of every Client
	slack  time.Duration  // see TestRandomizedHolds
	rng    *rand.Rand
	rngMu  sync.Mutex
	epoch  time.Time
	failed bool

	mu      sync.Mutex
	clients [chkClients]*rlock.Client
	// faulty are the Clients' connections, through which the checker
	// injects error replies to acquisitions.
	faulty  [chkClients]*relocktest.Faulty
	oom     rueidis.RedisResult
	owners  []*chkOwner
	forcing int // ForceUnlock calls in flight
	// dooms are the windows of the events that may end any hold taken
	// before they end (ForceUnlock calls, pauses longer than the lease),
	// faults those of every fault, and free the stretches in which the
	// model knows the lock was free.
	dooms    []window
	faults   []window
	freeFrom time.Time // zero while the lock is not known to be free
	free     []window
	waits    []window // calls that waited, for the liveness check
	history  []string
	// anonLosses counts the loss reports of owners relock made up (an
	// anonymous hold, Do without an owner), per Client.
	anonLosses [chkClients]int
	// oldFields are the fields of the owners of closed Clients: they may
	// stay in Redis until their lease ends, at oldUntil at the latest.
	oldFields map[string]bool
	oldUntil  time.Time
	ops       int
	nfaults   int
}

type window struct {
	from, to time.Time
	what     string
}

// chkOwner is the model of one owner.
//
// count is what the owner was told it holds. It is exact while the owner
// is certain; an event whose effect on the hold the model cannot know
// (a force-unlock or a long pause that may have come before or after a
// call of the owner, a loss report, a call whose outcome is unknown) makes
// it uncertain, and the next checkpoint takes the Client's own view, after
// checking that view against Redis.
type chkOwner struct {
	client    int
	name      string // "" for the anonymous actor of its Client, "do" for Do's own owner
	anonymous bool   // its field is not known (the anonymous actor, Do's owner)
	field     string // "<clientID>:<owner>" for named owners

	count      int
	uncertain  bool
	doomed     string    // an event that may have ended its hold, this round
	releasing  int       // releases (Unlock, Do's own) in flight
	fixedUntil time.Time // a fixed-lease hold is certainly held only until then
	lastFixed  time.Time // the latest end of a fixed lease of the owner
	lostSeen   int       // loss reports of the lost handler this round
	residue    bool      // Redis may still have its field at count 0
	// gaveUp is when the owner's last acquisition that did not acquire
	// ended: if the server was paused then, its script may still have run
	// after the call had settled it, leaving a level until its lease ends.
	gaveUp time.Time
	lag    bool // Redis' count may be one higher (a release it did not confirm)
}

func newChecker(t *testing.T, seed uint64, get func(*rlock.Client, string) checkedLock, opts ...rlock.Option) *checker {
	srv := redistest.Start(t, "--maxmemory-policy", "noeviction")
	k := &checker{
		t: t, srv: srv, raw: srv.Client(t), get: get,
		name:      "chk:" + strings.ReplaceAll(t.Name(), "/", ":"),
		opts:      opts,
		rng:       rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		epoch:     time.Now(),
		oldFields: make(map[string]bool),
	}
	k.oom = relocktest.ErrorReply(t, k.raw, "OOM command not allowed when used memory > 'maxmemory'.")
	for i := range chkClients {
		k.clients[i] = k.newClient(i)
		for _, o := range []string{"a", "b", ""} {
			k.owners = append(k.owners, &chkOwner{client: i, name: o, anonymous: o == ""})
		}
	}
	k.refreshFields()
	return k
}

func (k *checker) newClient(i int) *rlock.Client {
	rdb, err := rueidis.NewClient(k.srv.ClientOption())
	if err != nil {
		k.t.Fatal(err)
	}
	k.t.Cleanup(rdb.Close)
	k.faulty[i] = relocktest.NewFaulty(rdb)
	c, err := rlock.New(k.faulty[i], append([]rlock.Option{rlock.WithWatchdogTimeout(chkLease),
		rlock.WithLostHandler(func(name, owner string, cause error) {
			k.mu.Lock()
			defer k.mu.Unlock()
			k.history = append(k.history, fmt.Sprintf("%s   loss reported: c%d %s: %v", k.since(), i, owner, oneLine(cause)))
			for _, o := range k.owners {
				if o.client == i && !o.anonymous && ownerString(o) == owner {
					// Checked against its causes now, and again at the
					// checkpoint (an acquisition that registers late may
					// learn of a doom only then).
					if !k.excused(o) {
						o.lostSeen++
					}
					o.uncertain = true
					return
				}
			}
			k.anonLosses[i]++
			for _, o := range k.owners {
				if o.client == i && o.anonymous {
					o.uncertain = true
				}
			}
		})}, k.opts...)...)
	if err != nil {
		k.t.Fatal(err)
	}
	k.t.Cleanup(func() { _ = c.Close() })
	return c
}

// refreshFields sets the fields of the named owners from their Clients'
// IDs (after a Client was replaced). k.mu is held or not needed.
func (k *checker) refreshFields() {
	for _, o := range k.owners {
		if !o.anonymous {
			o.field = layout.Field(k.clients[o.client].ID(), ownerString(o))
		}
	}
}

func (o *chkOwner) String() string {
	if o.name == "" {
		return fmt.Sprintf("c%d:anonymous", o.client)
	}
	return fmt.Sprintf("c%d%s", o.client, o.name)
}

// ownerString is o's owner string (named owners only).
func ownerString(o *chkOwner) string { return "c" + strconv.Itoa(o.client) + o.name }

func (k *checker) intn(n int) int {
	k.rngMu.Lock()
	defer k.rngMu.Unlock()
	return k.rng.IntN(n)
}

func (k *checker) since() string { return time.Since(k.epoch).Round(time.Millisecond).String() }

// logf adds a line to the history (printed on failure).
func (k *checker) logf(format string, args ...any) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.logLocked(format, args...)
}

func (k *checker) logLocked(format string, args ...any) {
	k.history = append(k.history, k.since()+" "+fmt.Sprintf(format, args...))
}

// violation records a broken rule. k.mu is held.
func (k *checker) violation(format string, args ...any) {
	msg := "VIOLATION " + fmt.Sprintf(format, args...)
	k.logLocked("%s", msg)
	k.t.Error(k.since() + " " + msg)
	k.failed = true
}

// run runs rounds for d, then cleans up and checks that nothing is left.
func (k *checker) run(d time.Duration) {
	defer func() {
		if k.failed {
			k.mu.Lock()
			h := k.history
			if len(h) > 400 {
				h = h[len(h)-400:]
			}
			k.mu.Unlock()
			k.t.Logf("history (last %d lines):\n%s", len(h), strings.Join(h, "\n"))
		}
	}()
	end := time.Now().Add(d)
	rounds := 0
	for time.Now().Before(end) && !k.failed {
		if k.intn(2) == 0 {
			k.handoffRound()
		} else {
			k.round()
		}
		k.checkpoint()
		if k.intn(40) == 0 {
			k.replaceClient(k.intn(chkClients))
		}
		rounds++
	}
	k.finish()
	k.t.Logf("%d rounds, %d calls, %d faults", rounds, k.ops, k.nfaults)
}

// round makes every goroutine do one call, with perhaps a fault at the
// same time, and waits for all of them.
func (k *checker) round() {
	var wg sync.WaitGroup
	k.mu.Lock()
	owners := slices.Clone(k.owners)
	k.mu.Unlock()
	// In some rounds only one Client acts, so that a wake-up its waiters
	// lose is not covered up by another Client's waiter.
	focus := -1
	if k.intn(3) == 0 {
		focus = k.intn(chkClients)
	}
	for _, o := range owners {
		if o.name == "do" || focus >= 0 && o.client != focus {
			continue
		}
		n := 2
		if o.anonymous {
			n = 1
		}
		for range n {
			wg.Go(func() { k.step(o) })
		}
	}
	if f := k.intn(8); f < 5 {
		wg.Go(func() { k.fault(f, time.Duration(k.intn(200))*time.Millisecond) })
	}
	wg.Wait()
}

// handoffRound is a round shaped for hand-offs under faults: one owner of
// a Client holds the lock on a fixed lease for a while, the Client's other
// goroutines wait for it with contexts that end at various times around
// the release, and acquisitions fail (injected OOM replies) for a stretch
// that may cover the release. A woken waiter whose attempt fails and
// whose context then ends must hand its wake-up on.
func (k *checker) handoffRound() {
	f := k.intn(chkClients)
	k.mu.Lock()
	var holder *chkOwner
	var waiters []*chkOwner
	for _, o := range k.owners {
		switch {
		case o.client != f || o.name == "do":
		case holder == nil && !o.anonymous && k.intn(2) == 0:
			holder = o
		default:
			waiters = append(waiters, o)
		}
	}
	k.mu.Unlock()
	if holder == nil {
		k.round()
		return
	}
	hold := time.Duration(100+k.intn(100)) * time.Millisecond
	oom := k.intn(4) != 0
	var wg sync.WaitGroup
	wg.Go(func() {
		ctx, l := k.handle(holder)
		k.acquire(holder, ctx, l, "LockLease", 300*time.Millisecond, true,
			func(ctx context.Context) (bool, error) { return true, l.LockLease(ctx, chkFixedLease) }, chkFixedLease)
		if oom {
			// Acquisitions fail from a little before the release on.
			time.Sleep(hold - 20*time.Millisecond)
			wg.Go(func() { k.fault(4, 0) })
			time.Sleep(20 * time.Millisecond)
		} else {
			time.Sleep(hold)
		}
		k.mu.Lock()
		n := holder.count
		k.mu.Unlock()
		for range n {
			k.unlockNow(holder, ctx, l)
		}
	})
	for _, w := range waiters {
		// One goroutine of each owner waits until a little after the
		// release, the other long.
		// The short one starts first: the hub wakes its oldest waiter.
		for i, timeout := range []time.Duration{hold + time.Duration(k.intn(110))*time.Millisecond, 2 * time.Second} {
			wg.Go(func() {
				time.Sleep(time.Duration(15+10*i) * time.Millisecond)
				ctx, l := k.handle(w)
				k.acquire(w, ctx, l, "Lock (hand-off)", timeout, true,
					func(ctx context.Context) (bool, error) { return true, l.Lock(ctx) }, 0)
				k.mu.Lock()
				n := w.count
				k.mu.Unlock()
				if n > 0 {
					time.Sleep(time.Duration(k.intn(50)) * time.Millisecond)
					k.unlockNow(w, ctx, l)
				}
			})
		}
	}
	wg.Wait()
}

// fault hits the server while the round runs.
func (k *checker) fault(which int, delay time.Duration) {
	time.Sleep(delay)
	var what string
	from := time.Now()
	switch which {
	case 0:
		what = "SIGSTOP shorter than the lease"
		k.pause(chkLease / 3)
	case 1:
		what = "SIGSTOP longer than the lease"
		k.doom(from, "a pause longer than the lease")
		k.pause(chkLease * 3 / 2)
		k.doom(from, "a pause longer than the lease")
		k.mu.Lock()
		k.dooms = append(k.dooms, window{from: from, to: time.Now(), what: what})
		k.mu.Unlock()
	case 2:
		what = "CLIENT KILL of every other connection"
		for _, typ := range []string{"normal", "pubsub"} {
			_ = k.raw.Do(context.Background(), k.raw.B().Arbitrary("CLIENT", "KILL", "TYPE", typ, "SKIPME", "yes").Build()).Error()
		}
	case 3:
		what = "OOM replies"
		k.config("maxmemory", "1")
		time.Sleep(chkLease / 4)
		k.config("maxmemory", "0")
	case 4:
		// Injected, so that releases still go through while acquisitions
		// fail: the woken waiters' attempts fail.
		what = "OOM replies to acquisitions"
		k.mu.Lock()
		for _, f := range k.faulty {
			f.Inject(&relocktest.Rule{N: -1, Reply: k.oom, SHA1s: []string{lua.LockAcquire.SHA1,
				lua.FencedAcquire.SHA1, lua.FairAcquire.SHA1, lua.LockReenter.SHA1}})
		}
		k.mu.Unlock()
		time.Sleep(chkLease / 6)
		k.mu.Lock()
		for _, f := range k.faulty {
			f.Clear()
		}
		k.mu.Unlock()
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.nfaults++
	k.faults = append(k.faults, window{from: from, to: time.Now(), what: what})
	k.logLocked("fault: %s (from %v)", what, from.Sub(k.epoch).Round(time.Millisecond))
}

// doom marks every hold with levels, or with an acquisition in flight
// that started before t, as doomed by why: it may end without its Client
// knowing yet. Acquisitions whose reply comes later check the windows of
// k.dooms.
func (k *checker) doom(t time.Time, why string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, o := range k.owners {
		if o.count > 0 {
			o.doomed = why
			o.uncertain = true
		}
	}
}

func (k *checker) pause(d time.Duration) {
	if err := k.srv.Pause(); err != nil {
		k.t.Error(err)
		return
	}
	time.Sleep(d)
	if err := k.srv.Resume(); err != nil {
		k.t.Error(err)
	}
}

func (k *checker) config(param, value string) {
	if err := k.raw.Do(context.Background(), k.raw.B().ConfigSet().ParameterValue().ParameterValue(param, value).Build()).Error(); err != nil {
		k.t.Errorf("CONFIG SET %s %s: %v", param, value, err)
	}
}

// handle returns the context an owner's calls use (the anonymous actor's
// carries no owner), and the lock handle (a new handle each time: a hold
// belongs to its owner and Client, not to a handle).
func (k *checker) handle(o *chkOwner) (context.Context, checkedLock) {
	k.mu.Lock()
	c := k.clients[o.client]
	k.mu.Unlock()
	ctx := context.Background()
	if !o.anonymous {
		ctx = rlock.WithOwner(ctx, ownerString(o))
	}
	return ctx, k.get(c, k.name)
}

// step makes one random call for o and updates the model.
func (k *checker) step(o *chkOwner) {
	ctx, l := k.handle(o)
	k.mu.Lock()
	holding := o.count > 0
	k.ops++
	k.mu.Unlock()
	r := k.intn(100)
	switch {
	case holding && r < 40, !holding && r < 5:
		k.unlock(o, ctx, l)
	case r < 55:
		timeout := []time.Duration{50 * time.Millisecond, 150 * time.Millisecond, 500 * time.Millisecond, 2 * time.Second}[k.intn(4)]
		k.acquire(o, ctx, l, "Lock", timeout, true, func(ctx context.Context) (bool, error) { return true, l.Lock(ctx) }, 0)
	case r < 75:
		wait := []time.Duration{0, 50 * time.Millisecond, 300 * time.Millisecond}[k.intn(3)]
		lease := []time.Duration{0, 0, chkFixedLease}[k.intn(3)]
		k.acquire(o, ctx, l, fmt.Sprintf("TryLock(%v, %v)", wait, lease), 3*time.Second, wait > 0,
			func(ctx context.Context) (bool, error) { return l.TryLock(ctx, wait, lease) }, lease)
	case r < 82:
		k.acquire(o, ctx, l, "LockLease", 400*time.Millisecond, true,
			func(ctx context.Context) (bool, error) { return true, l.LockLease(ctx, chkFixedLease) }, chkFixedLease)
	case r < 98:
		k.do(o, ctx, l)
	default:
		k.forceUnlock(o, ctx, l)
	}
}

// inside reports whether o certainly holds the lock at now: it was told
// so, and its hold is neither being released, uncertain, reported lost,
// doomed, nor past its fixed lease. k.mu is held.
func (o *chkOwner) inside(now time.Time) bool {
	return o.count > o.releasing && !o.uncertain && o.doomed == "" && o.lostSeen == 0 &&
		(o.fixedUntil.IsZero() || now.Before(o.fixedUntil))
}

// acquiredLocked records a successful acquisition by o whose call started
// at start, and checks exclusion. lease > 0 is a fixed lease. k.mu is held.
func (k *checker) acquiredLocked(o *chkOwner, what string, start time.Time, lease time.Duration) {
	now := time.Now()
	k.logLocked("%v %s -> acquired (count %d)", o, what, o.count+1)
	if k.forcing == 0 {
		for _, p := range k.owners {
			if p != o && p.inside(now) {
				k.violation("%v: %s acquired the lock while %v held it (%d levels)", o, what, p, p.count)
			}
		}
	}
	if o.name == "" && o.count > 0 && !o.fixedUntil.IsZero() && !now.Before(o.fixedUntil) {
		// The actor's earlier hold ran out its fixed lease: the Client
		// ends it (as lost) now that a new ownerless hold replaces it.
		o.count, o.fixedUntil, o.lag = 0, time.Time{}, false
	}
	if o.name == "" && o.count > o.releasing && !o.uncertain {
		k.violation("%v: %s acquired the lock a second time without an owner: it is not reentrant", o, what)
	}
	o.count++
	o.lag = false
	if o.count == 1 {
		// Taken before an event that ended in the meantime (its script ran
		// before, its reply came after): that event may have ended it.
		for _, w := range k.dooms {
			if w.to.After(start) {
				o.doomed, o.uncertain = w.what, true
			}
		}
		if k.forcing > 0 {
			o.doomed, o.uncertain = "ForceUnlock", true
		}
	}
	if lease > 0 {
		o.fixedUntil = start.Add(lease)
		o.lastFixed = o.fixedUntil
	} else {
		o.fixedUntil = time.Time{}
	}
	if !k.freeFrom.IsZero() {
		// The lock was free until this acquisition (its reply: a waiter
		// that slept through a free lock and then took it is caught too).
		k.free = append(k.free, window{from: k.freeFrom, to: now})
		k.freeFrom = time.Time{}
	}
}

// excused reports whether a loss of o's hold is explained by an event: a
// doom this round, or the end of a fixed lease. k.mu is held.
func (k *checker) excused(o *chkOwner) bool {
	return o.doomed != "" || !o.lastFixed.IsZero() && time.Now().After(o.lastFixed)
}

// acquire runs one acquisition call for o with a timeout on its context;
// waits tells whether the call may wait (for the liveness check).
func (k *checker) acquire(o *chkOwner, ctx context.Context, l checkedLock, what string, timeout time.Duration,
	waits bool, call func(context.Context) (bool, error), lease time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	ok, err := call(ctx)
	k.mu.Lock()
	defer k.mu.Unlock()
	if waits {
		k.waits = append(k.waits, window{from: start, to: time.Now(), what: fmt.Sprintf("%v %s", o, what)})
	}
	if err != nil || !ok {
		o.gaveUp = time.Now()
	}
	switch {
	case err == nil && ok:
		k.acquiredLocked(o, what, start, lease)
	case err == nil:
		k.logLocked("%v %s -> not acquired", o, what)
	default:
		k.logLocked("%v %s -> %v", o, what, oneLine(err))
		if !errors.Is(err, rlock.ErrNotAcquired) && !errors.Is(err, rlock.ErrClosed) && !isRedisFailure(err) {
			k.violation("%v: %s failed with %v, which is neither ErrNotAcquired, ErrClosed nor a Redis failure", o, what, err)
		}
		if errors.Is(err, rlock.ErrLockLost) {
			o.uncertain = true // a re-entry found the hold gone
		}
	}
}

// isRedisFailure reports whether err comes from Redis or the connection
// to it (a failure a fault explains).
func isRedisFailure(err error) bool {
	var re *rueidis.RedisError
	return errors.As(err, &re) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		strings.Contains(err.Error(), "connection") || strings.Contains(err.Error(), "EOF") ||
		strings.Contains(err.Error(), "broken pipe") || strings.Contains(err.Error(), "closed")
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", " | ") }

func errText(err error) string {
	if err == nil {
		return "nil"
	}
	return oneLine(err)
}

// unlock releases one level.
func (k *checker) unlock(o *chkOwner, ctx context.Context, l checkedLock) {
	// Hold a while, so that others are waiting when the lock comes free.
	time.Sleep(time.Duration(k.intn(150)) * time.Millisecond)
	k.unlockNow(o, ctx, l)
}

// unlockNow is unlock without the wait.
func (k *checker) unlockNow(o *chkOwner, ctx context.Context, l checkedLock) {
	k.mu.Lock()
	o.releasing++
	k.mu.Unlock()
	err := l.Unlock(ctx)
	k.mu.Lock()
	defer k.mu.Unlock()
	o.releasing--
	k.logLocked("%v Unlock (count %d) -> %v", o, o.count, errText(err))
	k.releasedLocked(o, err, "Unlock")
}

// releasedLocked records the outcome err of a release of one level of o
// (an Unlock, or Do's own). k.mu is held.
func (k *checker) releasedLocked(o *chkOwner, err error, what string) {
	switch {
	case err == nil:
		o.lag = false
		if o.count == 0 {
			if !o.uncertain {
				k.violation("%v: %s succeeded, but the owner was told it holds nothing", o, what)
			}
			return
		}
		o.count--
		if o.count == 0 {
			o.fixedUntil = time.Time{}
			k.maybeFreeLocked()
		}
	case errors.Is(err, rlock.ErrLockLost):
		// Found gone: a loss, reported by the error (and to the handler).
		if o.count > 0 && !o.uncertain && !k.excused(o) {
			k.violation("%v: %s found a hold of %d levels gone, with nothing that could have ended it: %v", o, what, o.count, err)
		}
		o.count, o.fixedUntil, o.uncertain = 0, time.Time{}, true
		k.freeFrom = time.Time{}
	case errors.Is(err, rlock.ErrNotHeld):
		if o.count > 0 && !o.uncertain && !k.excused(o) {
			k.violation("%v: %s says not held, of a hold of %d levels never reported lost: %v", o, what, o.count, err)
		}
		o.count, o.fixedUntil = 0, time.Time{}
	case errors.Is(err, rlock.ErrClosed):
		o.count, o.fixedUntil, o.uncertain = 0, time.Time{}, true
		k.freeFrom = time.Time{}
	default:
		// Redis did not confirm the release: the level is released for the
		// Client all the same. Redis' count may stay one higher until the
		// owner's next call; at the last level the field may be left until
		// its lease ends.
		if !isRedisFailure(err) {
			k.violation("%v: %s failed with %v, not a Redis failure", o, what, err)
		}
		if o.count > 0 {
			o.count--
		}
		if o.count == 0 {
			o.residue, o.fixedUntil = true, time.Time{}
		} else {
			o.lag = true
		}
		k.freeFrom = time.Time{}
	}
}

// maybeFreeLocked starts a free stretch when the model knows that the lock
// is free: nobody holds it and no field may be left. k.mu is held.
func (k *checker) maybeFreeLocked() {
	for _, o := range k.owners {
		if o.count > 0 || o.residue || o.uncertain {
			return
		}
	}
	if k.freeFrom.IsZero() {
		k.freeFrom = time.Now()
	}
}

// do runs Do with a function that checks the hold, maybe re-enters, and
// returns nil, an error, or panics.
func (k *checker) do(o *chkOwner, ctx context.Context, l checkedLock) {
	ctx, cancel := context.WithTimeout(ctx, []time.Duration{100 * time.Millisecond, 500 * time.Millisecond}[k.intn(2)])
	defer cancel()
	mode := k.intn(4) // 0: nil, 1: error, 2: panic, 3: re-entry inside
	start := time.Now()
	var inner *chkOwner // the owner Do acted for
	errFn := errors.New("fn failed")
	fn := func(fctx context.Context) error {
		k.mu.Lock()
		inner = o
		if o.anonymous {
			// Do made an owner of its own: a temporary owner of the model.
			inner = &chkOwner{client: o.client, name: "do", anonymous: true}
			k.owners = append(k.owners, inner)
		}
		k.acquiredLocked(inner, "Do", start, 0)
		if l.HoldContext(fctx).Err() != nil && !inner.uncertain {
			k.violation("%v: Do's function runs with its hold already ended (%v)", inner, context.Cause(l.HoldContext(fctx)))
		}
		k.mu.Unlock()
		defer func() {
			// Do releases its level once fn returns.
			k.mu.Lock()
			inner.releasing++
			k.mu.Unlock()
		}()
		if mode == 3 {
			start := time.Now()
			if err := l.Lock(fctx); err == nil {
				k.mu.Lock()
				k.acquiredLocked(inner, "re-entry in Do", start, 0)
				inner.releasing++
				k.mu.Unlock()
				err := l.Unlock(fctx)
				k.mu.Lock()
				inner.releasing--
				k.releasedLocked(inner, err, "Unlock in Do")
				k.mu.Unlock()
			}
		}
		time.Sleep(time.Duration(k.intn(100)) * time.Millisecond)
		switch mode {
		case 1:
			return errFn
		case 2:
			panic("checker: fn panics")
		}
		return nil
	}
	var err error
	func() {
		defer func() {
			if v := recover(); v != nil && v != "checker: fn panics" {
				panic(v)
			}
		}()
		err = l.Do(ctx, fn)
	}()
	k.mu.Lock()
	defer k.mu.Unlock()
	k.waits = append(k.waits, window{from: start, to: time.Now(), what: fmt.Sprintf("%v Do", o)})
	k.logLocked("%v Do(mode %d) -> %v", o, mode, errText(err))
	if inner == nil {
		if err == nil {
			k.violation("%v: Do returned nil without running its function", o)
		}
		return
	}
	inner.releasing--
	// Another goroutine of the owner may have released the level Do took
	// while fn ran (an owner's levels are all alike): Do's release then
	// finds nothing to release. That is right only if the model, too, has
	// no level left for the owner.
	taken := errors.Is(err, rlock.ErrNotHeld) && !errors.Is(err, rlock.ErrLockLost) && inner.count == 0
	if mode == 1 && !errors.Is(err, errFn) || mode == 0 && err != nil && !errors.Is(err, rlock.ErrLockLost) &&
		!errors.Is(err, rlock.ErrClosed) && !isRedisFailure(err) && !taken {
		k.violation("%v: Do = %v, want the function's own result", o, err)
	}
	// Do released its level, found the hold gone, found its level taken,
	// or failed to release (a panic hides the release's error: the
	// release may have failed).
	var rerr error
	switch {
	case errors.Is(err, rlock.ErrLockLost), errors.Is(err, rlock.ErrClosed), taken:
		rerr = err
	case err != nil && isRedisFailure(err):
		rerr = err
	case mode == 2 && inner.count == 0:
		rerr = rlock.ErrNotHeld // the panic hid a release that found its level taken
	}
	k.releasedLocked(inner, rerr, "Do's release")
	if mode == 2 {
		if inner.count > 0 {
			inner.lag = true
		} else {
			inner.residue = true
		}
	}
	if inner != o && inner.count == 0 && !inner.uncertain {
		k.owners = slices.DeleteFunc(k.owners, func(p *chkOwner) bool { return p == inner })
	}
}

// forceUnlock deletes the lock whoever holds it: every hold taken before
// the call ends is doomed, and while it is in flight nobody is certainly
// inside.
func (k *checker) forceUnlock(o *chkOwner, ctx context.Context, l checkedLock) {
	from := time.Now()
	k.doom(from, "ForceUnlock")
	k.mu.Lock()
	k.forcing++
	k.mu.Unlock()
	ok, err := l.ForceUnlock(ctx)
	k.doom(time.Now(), "ForceUnlock")
	k.mu.Lock()
	defer k.mu.Unlock()
	k.forcing--
	k.dooms = append(k.dooms, window{from: from, to: time.Now(), what: "ForceUnlock"})
	k.logLocked("%v ForceUnlock -> %v, %v", o, ok, errText(err))
}

// replaceClient closes Client i and puts a new one in its place: every hold
// of its owners ends with ErrClosed (their fields stay until their lease
// ends).
func (k *checker) replaceClient(i int) {
	ctx := context.Background()
	k.mu.Lock()
	old := k.clients[i]
	var lives []context.Context
	for _, o := range k.owners {
		if o.client == i && o.count > 0 {
			octx, l := k.handle0(o, old)
			lives = append(lives, l.HoldContext(octx))
		}
	}
	k.mu.Unlock()
	_ = old.Close()
	for _, life := range lives {
		if cause := context.Cause(life); !errors.Is(cause, rlock.ErrClosed) {
			k.mu.Lock()
			k.violation("after Close, a hold's cause is %v, want ErrClosed", cause)
			k.mu.Unlock()
		}
	}
	c := k.newClient(i)
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, o := range k.owners {
		if o.client != i {
			continue
		}
		if !o.anonymous {
			k.oldFields[o.field] = true
		}
		if o.count > 0 {
			o.residue = true
		}
		o.count, o.fixedUntil, o.uncertain, o.doomed = 0, time.Time{}, false, ""
	}
	k.owners = slices.DeleteFunc(k.owners, func(p *chkOwner) bool { return p.client == i && p.name == "do" })
	k.clients[i] = c
	k.oldUntil = time.Now().Add(max(chkLease, chkFixedLease))
	k.freeFrom = time.Time{}
	k.refreshFields()
	k.logLocked("Client %d closed and replaced", i)
	_ = ctx
}

// strayLocked reports whether fields has a field that no owner holds
// (nor may have left). k.mu is held.
func (k *checker) strayLocked(fields map[string]string, vs map[*chkOwner]view) bool {
	anonymous := false
	known := map[string]bool{}
	for _, o := range k.owners {
		if !o.anonymous && (o.count > 0 || o.residue || o.uncertain) {
			known[o.field] = true
		}
		if o.anonymous && (o.count > 0 || o.residue || o.uncertain) {
			anonymous = true
		}
	}
	for f := range fields {
		if !known[f] && !k.oldFields[f] && !anonymous {
			return true
		}
	}
	return false
}

// handle0 is handle on a given Client. k.mu is held.
func (k *checker) handle0(o *chkOwner, c *rlock.Client) (context.Context, checkedLock) {
	ctx := context.Background()
	if !o.anonymous {
		ctx = rlock.WithOwner(ctx, ownerString(o))
	}
	return ctx, k.get(c, k.name)
}

// view is what a Client says of one owner's hold: its life, and the count
// Redis has.
type view struct {
	alive bool
	count int
	// anonFields, for an anonymous actor, counts the fields Redis has of
	// its Client's anonymous owners: the actor's residue stays while any
	// is left (it cannot tell its own from its Client's others).
	anonFields int
}

// views reads the Client's and Redis' view of every certain-field owner.
// Named owners are read from the lock's fields, anonymous actors with
// HoldCount without an owner.
func (k *checker) views(ctx context.Context, fields map[string]string) map[*chkOwner]view {
	k.mu.Lock()
	owners := slices.Clone(k.owners)
	clients := k.clients
	k.mu.Unlock()
	vs := make(map[*chkOwner]view)
	for _, o := range owners {
		if o.name == "do" {
			continue
		}
		octx, l := k.handle0(o, clients[o.client])
		v := view{alive: l.HoldContext(octx).Err() == nil}
		if o.anonymous {
			v.count, _ = l.HoldCount(octx)
			prefix := layout.Field(clients[o.client].ID(), "anon-")
			for f := range fields {
				if strings.HasPrefix(f, prefix) {
					v.anonFields++
				}
			}
		} else {
			v.count, _ = strconv.Atoi(fields[o.field])
		}
		vs[o] = v
	}
	return vs
}

// checkpoint checks the model against the Clients and Redis between
// rounds, when no call is in flight.
func (k *checker) checkpoint() {
	ctx := context.Background()
	// A doomed hold whose field is gone is reported lost within a renewal
	// interval (a fixed lease just ends): wait for that first.
	deadline := time.Now().Add(chkLease + 500*time.Millisecond)
	strayUntil := time.Now().Add(400 * time.Millisecond)
	var fields map[string]string
	var vs map[*chkOwner]view
	for {
		var err error
		fields, err = k.raw.Do(ctx, k.raw.B().Hgetall().Key(k.name).Build()).AsStrMap()
		if err != nil {
			k.t.Errorf("HGETALL: %v", err)
			return
		}
		vs = k.views(ctx, fields)
		pending := ""
		k.mu.Lock()
		for o, v := range vs {
			if v.alive && v.count == 0 && o.fixedUntil.IsZero() {
				pending = o.String()
			}
		}
		// A field nobody holds may be one a failed acquisition is taking
		// back: give it a moment (the settlement runs every 100ms).
		if pending == "" && time.Now().Before(strayUntil) && k.strayLocked(fields, vs) {
			pending = "stray field"
		}
		k.mu.Unlock()
		if pending == "" || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	now := time.Now()
	for o, v := range vs {
		fixedOver := !o.fixedUntil.IsZero() && !now.Before(o.fixedUntil)
		if o.count == 0 && k.pausedAt(o.gaveUp) {
			// A script held up in the paused server may have run after
			// its call gave up and gave back what it might have won.
			o.residue = true
		}
		switch {
		case v.alive && v.count == 0 && o.fixedUntil.IsZero():
			k.violation("%v: its Client holds the lock for it, but Redis has no hold of it, and no loss was reported within the lease", o)
		case o.uncertain || o.doomed != "":
			// Take the Client's view.
			k.logLocked("  model: %v resynced from %d to %d levels (alive %v, doomed %q)", o, o.count, v.count, v.alive, o.doomed)
			if v.alive && v.count == 0 {
				// A fixed-lease hold gone from Redis: its Client learns of
				// it at its next call, which reports the loss then.
				o.count = 0
				o.lostSeen = 0
				continue
			}
			if v.alive {
				// Redis' count may still lag a release it did not confirm;
				// the Client's count is the one released.
				if !(o.lag && v.count == o.count+1) {
					o.count = v.count
				}
			} else {
				if v.count > 0 {
					o.residue = true
				}
				o.count, o.fixedUntil = 0, time.Time{}
			}
		case o.count > 0 && !v.alive:
			k.violation("%v was told it holds %d levels, but its hold ended without a loss report (Redis has %d)", o, o.count, v.count)
		case o.count > 0 && v.count != o.count && !fixedOver && !(o.lag && v.count == o.count+1):
			k.violation("%v was told it holds %d levels; Redis has %d", o, o.count, v.count)
		case o.count == 0 && v.alive:
			k.violation("%v was told it holds nothing, but its Client has a live hold for it (Redis has %d)", o, v.count)
		case o.count == 0 && v.count > 0 && !o.residue:
			k.violation("%v holds nothing, but Redis has its field at %d", o, v.count)
		}
		if o.lostSeen > 0 && !k.excused(o) {
			k.violation("%v: %d loss reports, with nothing that could have ended its hold", o, o.lostSeen)
		}
		o.lostSeen, o.uncertain, o.doomed = 0, false, ""
		if o.residue && v.count == 0 && v.anonFields == 0 {
			o.residue = false
		}
	}
	for i, n := range k.anonLosses {
		excused := false
		for _, o := range k.owners {
			if o.client == i && o.anonymous && (o.residue || k.excused(o)) {
				excused = true
			}
		}
		if n > 0 && !excused && len(k.dooms) == 0 {
			k.violation("c%d: %d loss reports of anonymous holds, with nothing that could have ended them", i, n)
		}
		k.anonLosses[i] = 0
	}
	// Do's own owners are gone once Do returned; one whose release may
	// have failed stays as a residue until the lock is free.
	for _, o := range k.owners {
		if o.name == "do" && (o.uncertain || o.count > 0) {
			o.residue, o.uncertain, o.count = true, false, 0
		}
	}
	k.owners = slices.DeleteFunc(k.owners, func(p *chkOwner) bool {
		return p.name == "do" && (!p.residue || len(fields) == 0)
	})
	// Every field belongs to an owner that holds, or is a residue.
	known := map[string]bool{}
	anonymous := false
	for _, o := range k.owners {
		if !o.anonymous && (o.count > 0 || o.residue) {
			known[o.field] = true
		}
		if o.anonymous && (o.count > 0 || o.residue) {
			anonymous = true
		}
	}
	for f := range k.oldFields {
		if fields[f] == "" {
			delete(k.oldFields, f)
		}
	}
	for f, v := range fields {
		if !known[f] && !k.oldFields[f] && !anonymous {
			k.violation("Redis has field %s=%s that no owner holds", f, v)
		}
	}
	k.maybeFreeLocked()
	k.liveness()
	k.dooms = k.dooms[:0]
}

// pausedAt reports whether the server was paused (SIGSTOP) at t. k.mu is
// held.
func (k *checker) pausedAt(t time.Time) bool {
	for _, x := range k.faults {
		if strings.HasPrefix(x.what, "SIGSTOP") && !t.Before(x.from) && !t.After(x.to) {
			return true
		}
	}
	return false
}

// liveness checks that no call waited through a stretch longer than the
// slack in which the lock was free and no fault hit the server.
func (k *checker) liveness() {
	slack := k.slack
	free := k.free
	if !k.freeFrom.IsZero() {
		free = append(free, window{from: k.freeFrom, to: time.Now()})
	}
	for _, w := range k.waits {
		for _, f := range free {
			// A closed Client's fields may hold the lock until oldUntil.
			from, to := maxTime(maxTime(w.from, f.from), k.oldUntil), minTime(w.to, f.to)
			for _, x := range k.faults {
				// A fault, and the retry that follows it, excuse a wait.
				if x.from.Before(to) && x.to.Add(retryPause*3/2).After(from) {
					from = maxTime(from, x.to.Add(retryPause*3/2))
				}
			}
			if to.Sub(from) > slack {
				k.violation("liveness: %s (%v to %v) waited while the lock was free from %v to %v",
					w.what, w.from.Sub(k.epoch), w.to.Sub(k.epoch), from.Sub(k.epoch), to.Sub(k.epoch))
			}
		}
	}
	k.waits = k.waits[:0]
	k.free = k.free[:0]
}

const retryPause = 100 * time.Millisecond

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

// finish releases every hold, waits for residues to expire, and checks
// that nothing of the lock is left in Redis or subscribed.
func (k *checker) finish() {
	ctx := context.Background()
	for _, o := range k.owners {
		octx, l := k.handle(o)
		for range o.count {
			if err := l.Unlock(octx); err != nil && !errors.Is(err, rlock.ErrNotHeld) {
				k.t.Errorf("%v: final Unlock: %v", o, err)
			}
		}
	}
	for i := range chkClients {
		_ = k.clients[i].Close()
	}
	deadline := time.Now().Add(chkFixedLease + chkLease + 2*time.Second)
	for {
		keys, err := k.raw.Do(ctx, k.raw.B().Keys().Pattern("*").Build()).AsStrSlice()
		if err != nil {
			k.t.Fatal(err)
		}
		keys = slices.DeleteFunc(keys, func(s string) bool { return strings.HasPrefix(s, "redisson_lock_token:") })
		if len(keys) == 0 {
			break
		}
		if time.Now().After(deadline) {
			k.t.Errorf("keys left in Redis after every hold ended: %q", keys)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	chans, err := k.raw.Do(ctx, k.raw.B().PubsubChannels().Build()).AsStrSlice()
	if err != nil {
		k.t.Fatal(err)
	}
	if len(chans) != 0 {
		k.t.Errorf("channels still subscribed after Close: %q", chans)
	}
}
