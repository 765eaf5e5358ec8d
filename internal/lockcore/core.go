package lockcore

import (
	"context"
	"errors"
	"github.com/relock-go/relock"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/waitrec"
	"github.com/relock-go/relock/observe"
	"github.com/relock-go/relock/pubsub"
	"github.com/relock-go/relock/watchdog"
)

// DefaultWatchdogTimeout is the lease the watchdog keeps renewing.
const DefaultWatchdogTimeout = 30 * time.Second

// DefaultFairLockWaitTimeout is the thread wait time of fair-lock
// waiters, Redisson's default fairLockWaitTimeout.
const DefaultFairLockWaitTimeout = 5 * time.Minute

// MinWatchdogTimeout is the shortest watchdog lease accepted: renewals run
// every third of it, and each needs a round trip.
const MinWatchdogTimeout = 30 * time.Millisecond

// releaseTimeout bounds a release that runs on a detached context (Unlock
// with a cancelled context, the release inside Do, giving back a hold won
// after the caller's context ended).
const releaseTimeout = 5 * time.Second

// Config is what a Client is built from.
type Config struct {
	RDB     rueidis.Client
	OwnsRDB bool // Close closes RDB
	// OnePipeline says that RDB sends every command on one connection, in
	// order (rueidis' PipelineMultiplex -1): a give-back sent after a
	// script can then never overtake it (see Wait.ScriptContext).
	OnePipeline     bool
	WatchdogTimeout time.Duration
	// WatchdogTimeoutSet is set when WatchdogTimeout was given (so 0 is
	// rejected instead of taken as the default).
	WatchdogTimeoutSet bool
	Linger             time.Duration // pub/sub linger; 0 for the hub's default
	OnLost             func(name, owner string, cause error)
	// ShardedPubSub publishes with SPUBLISH and waits with SSUBSCRIBE.
	ShardedPubSub bool
	// FairLockWaitTimeout is the thread wait time of the fair lock's
	// waiters (Redisson's fairLockWaitTimeout); 0 for the default.
	// FairLockWaitTimeoutSet is set when it was given (0 is then refused).
	FairLockWaitTimeout    time.Duration
	FairLockWaitTimeoutSet bool
	// Replicas, when above 0, makes every acquisition and release wait
	// (up to ReplicaTimeout) for that many replicas to confirm it, and an
	// acquisition fail otherwise. With ReplicasSet and Replicas 0, nothing
	// waits for replicas; without ReplicasSet, operations wait for the
	// replicas the server counts (see replicas.go), DefaultReplicaTimeout.
	Replicas       int
	ReplicaTimeout time.Duration
	ReplicasSet    bool
	// WakeOne makes a release wake one waiting Client instead of every
	// Client that waits (see wake.go).
	WakeOne bool
	// Name names the Client in the owners of its anonymous holds
	// ("anon-<n>@<name>"); "" means DefaultClientName, unless NameSet
	// says it was given (and is then refused).
	Name    string
	NameSet bool
	// KeyPrefix is put before every name the Client is given (Redisson's
	// prepending NameMapper); "" is no prefix.
	KeyPrefix string
	// Observer and Logger, when set, are told of the locks' life (see
	// observe.go).
	Observer observe.Observer
	Logger   *slog.Logger
	// DeadlockAfter is how long a wait lasts before it looks for a cycle
	// of owners through itself, and how often it looks again (see
	// deadlock.go); 0 means DefaultDeadlockAfter unless DeadlockAfterSet
	// says it was given (then detection is off).
	DeadlockAfter    time.Duration
	DeadlockAfterSet bool
	// NoGrant turns off the grant on release (see grant.go).
	NoGrant bool
}

// Core is the state one Client shares with every lock it hands out: the
// Redis client, the client ID, the pub/sub hub, the watchdog and the
// records of the holds of its owners.
type Core struct {
	RDB             rueidis.Client
	ID              string
	WatchdogTimeout time.Duration
	Hub             *pubsub.Hub
	Watchdog        *watchdog.Watchdog
	// FairLockWaitTimeout is Config.FairLockWaitTimeout, the default
	// filled in.
	FairLockWaitTimeout time.Duration

	ownsRDB        bool
	onePipeline    bool   // see Config.OnePipeline
	name           string // see Config.Name
	prefix         string // see Config.KeyPrefix
	onLost         func(name, owner string, cause error)
	publish        string
	replicaMode    ReplicaMode
	replicas       int
	replicaTimeout time.Duration
	counts         *replicaCounts
	obs            *observer // nil without an observer and a logger

	// root is the parent of every hold's life: Close cancels it with
	// cause relock.ErrClosed, which ends every hold at once.
	root      context.Context
	closeRoot context.CancelCauseFunc
	// background counts the goroutines that settle, after their call
	// returned, the acquisitions whose reply was lost, and the holds that
	// ended without Redis confirming it (see settleReserved).
	background sync.WaitGroup
	closed     chan struct{}
	closeOnce  sync.Once
	closeErr   error
	// inWait counts the calls in Wait; waitsOver, made by Close while some
	// are, is closed when the last one returns (see awaitWaits). Both are
	// guarded by mu.
	inWait    int
	waitsOver chan struct{}

	// subscribeHook and renewHook, when set (by tests), replace the hub
	// and the renewal script.
	subscribeHook func(ctx context.Context, channel string) (waiter, error)
	// beginHook, when set (by tests), replaces the hub's Begin.
	beginHook  func(channel string) (waiter, pending, error)
	listenHook func(channel string, fn func()) (waiter, error)
	renewHook  func(ctx context.Context, leases []*watchdog.Lease) []error
	// landHook, when set (by tests), is called by a waiter that waits for
	// the release that claimed its grant offer to answer.
	landHook func()
	// refusedHook, when set (by tests), is called by a call whose
	// attempt that wrote its grantees entry was refused, before the call
	// acts on the reply; an error it returns stands for the reply (as if
	// it were lost).
	refusedHook func() error

	// watchdogArg is WatchdogTimeout in whole ms, as the scripts take it.
	watchdogArg string
	// wakeOne: see Config.WakeOne; numsub is the PUBSUB subcommand that
	// counts a channel's subscribers.
	wakeOne bool
	numsub  string
	// noGrant: see Config.NoGrant.
	noGrant bool
	// epoch is when the Core was made: the origin of the stamps of its
	// grantees entries (see remotegrant.go).
	epoch time.Time

	// ext keeps what kinds built outside this package keep per Client
	// (see Extension).
	ext sync.Map

	mu      sync.Mutex
	holds   map[holdKey]*hold
	sweepAt int // the number of records at which idle ones are swept
	// spares are stopped watchdog registrations of forgotten records, for
	// the next hold that has none of its own (see forgetLocked).
	spares []*renewal
	// anon names, per lock (and role, see Mutex.anonKey), the owner of
	// the Client's latest anonymous hold of an exclusive role; anonShared
	// the owners of every one of a shared role (a read lock), latest
	// last.
	anon       map[string]string
	anonShared map[string][]string
	// anonFree are idle records of ownerless acquisitions, for the next
	// (see enterAnon).
	anonFree []*hold
	// anonLost keeps, per lock (and role), the cause of the loss of the
	// Client's last anonymous hold, until an ownerless release learns of
	// it or a new anonymous hold begins.
	anonLost map[string]error
	// noReadOnly is set once the server refused a read-only script
	// (EVALSHA_RO, Redis 7): read-only scripts then go as EVALSHA.
	noReadOnly atomic.Bool

	// waits are the Client's wait records (see waitrecord.go).
	waits waitBook
	// recordReads are the reads of other Clients' wait record hashes
	// that the Client's looks for deadlocks share (see deadlock.go).
	recordReads recordReads

	// closers run at Close (see OnClose).
	closers []func()
	// wakers are this Client's registrations for wake-ups, per lock name
	// (see wake.go); wakeChans counts their waiters per lock channel.
	wakers    map[string]*waker
	wakeChans map[string]int
	// watches are the running watches of locks (see watch.go).
	watches map[*watch]struct{}
	// offers are the open grant offers of the Client's sleeping
	// acquisitions, oldest first, or in the order the calls queued for a
	// QueueKind (see grant.go); queued numbers the waiting calls in the
	// order of their first attempts (acquisition.queued).
	offers map[grantKey][]*grantOffer
	queued atomic.Uint64
	// early are the grants through the registry parked for a call of an
	// owner whose attempt's reply had not been acted on (see earlyGrant),
	// by the owner's record of the lock; earlyN counts them, read without
	// c.mu.
	early  map[*hold]earlyGrant
	earlyN atomic.Int64
	// refused holds, per lock name, when an attempt of the Client that
	// hears no release (TryLock with no wait, a spin waiter's) last
	// found it held, whatever the kind of the caller (a plain, fenced and
	// spin lock of one name share its hash): the Client's releases do not
	// grant the lock to its waiters for KnockTTL after, as they do not
	// while another Client knocked (see layout.Knocks; the script skips
	// the knocks of the Client's own ID).
	refused     map[string]time.Time
	refusedKept int // len(refused) after its last sweep
	// sharesRDB: the Client's subscriptions ride its rueidis client's
	// connections (sharded pub/sub), which other Clients may share (see
	// shareconn.go).
	sharesRDB bool
}

// NewCore builds the shared state. It does no I/O.
func NewCore(cfg Config) (*Core, error) {
	if cfg.RDB == nil {
		return nil, invalid("nil rueidis client")
	}
	if err := CheckConfig(cfg); err != nil {
		return nil, err
	}
	if cfg.WatchdogTimeout == 0 {
		cfg.WatchdogTimeout = DefaultWatchdogTimeout
	}
	if cfg.Name == "" {
		cfg.Name = DefaultClientName
	}
	if cfg.FairLockWaitTimeout == 0 {
		cfg.FairLockWaitTimeout = DefaultFairLockWaitTimeout
	}
	c := &Core{
		RDB:             cfg.RDB,
		ID:              uuid.NewString(),
		WatchdogTimeout: cfg.WatchdogTimeout,
		ownsRDB:         cfg.OwnsRDB,
		onePipeline:     cfg.OnePipeline,
		name:            cfg.Name,
		prefix:          cfg.KeyPrefix,
		onLost:          cfg.OnLost,
		publish:         "publish",
		replicas:        cfg.Replicas,
		replicaTimeout:  cfg.ReplicaTimeout,
		counts:          newReplicaCounts(),
		obs:             newObserver(cfg),
		closed:          make(chan struct{}),
		holds:           make(map[holdKey]*hold),
		sweepAt:         minSweep,
		anon:            make(map[string]string),
		anonShared:      make(map[string][]string),
		anonLost:        make(map[string]error),
		wakeOne:         cfg.WakeOne,
		noGrant:         cfg.NoGrant,
		epoch:           time.Now(),
		numsub:          "numsub",
		wakers:          make(map[string]*waker),
		wakeChans:       make(map[string]int),
	}
	c.FairLockWaitTimeout = cfg.FairLockWaitTimeout
	switch {
	case cfg.Replicas > 0:
		c.replicaMode = ReplicasFixed
	case cfg.ReplicasSet:
		c.replicaMode = ReplicasOff
	default:
		c.replicaMode, c.replicaTimeout = ReplicasCounted, DefaultReplicaTimeout
	}
	c.waits.key = waitrec.Key(c.prefix, c.ID)
	c.waits.live = make(map[string]*waitRecord)
	c.waits.after = cfg.DeadlockAfter
	if !cfg.DeadlockAfterSet && cfg.DeadlockAfter == 0 {
		c.waits.after = DefaultDeadlockAfter
	}
	c.watchdogArg = strconv.FormatInt(Millis(c.WatchdogTimeout), 10)
	// The root of every hold's life. It is not a call's context: it
	// lives as long as the Client and ends at Close.
	c.root, c.closeRoot = context.WithCancelCause(context.Background())
	if cfg.ShardedPubSub {
		c.publish, c.numsub = "spublish", "shardnumsub"
	}
	c.Hub = pubsub.New(cfg.RDB, pubsub.Options{Linger: cfg.Linger, Policy: c.wakePolicy, Sharded: cfg.ShardedPubSub})
	c.Watchdog = watchdog.New(watchdog.Config{Renew: c.obs.renewFunc(c.renew)})
	c.shareJoin()
	return c, nil
}

// CheckConfig checks the options of cfg (not its client). A zero watchdog
// timeout means the default.
func CheckConfig(cfg Config) error {
	if d := cfg.WatchdogTimeout; d != 0 || cfg.WatchdogTimeoutSet {
		if err := CheckWatchdogTimeout(d); err != nil {
			return err
		}
	}
	if cfg.Name != "" || cfg.NameSet {
		if err := CheckClientName(cfg.Name); err != nil {
			return err
		}
	}
	if w := cfg.FairLockWaitTimeout; (w != 0 || cfg.FairLockWaitTimeoutSet) && (w < time.Millisecond || w > MaxLease) {
		return invalid("fair lock wait timeout %v is outside [1ms, %v]", w, MaxLease)
	}
	if err := CheckKeyPrefix(cfg.KeyPrefix); err != nil {
		return err
	}
	if cfg.DeadlockAfter < 0 || cfg.DeadlockAfter > MaxLease {
		return invalid("deadlock detection delay %v is outside [0, %v]", cfg.DeadlockAfter, MaxLease)
	}
	if cfg.Replicas < 0 {
		return invalid("negative replica count %d", cfg.Replicas)
	}
	if cfg.Replicas > 0 && cfg.ReplicaTimeout < time.Millisecond {
		return invalid("replica sync timeout %v is under 1ms", cfg.ReplicaTimeout)
	}
	return nil
}

// CheckWatchdogTimeout checks a watchdog timeout: between
// MinWatchdogTimeout and MaxLease.
func CheckWatchdogTimeout(d time.Duration) error {
	if d < MinWatchdogTimeout || d > MaxLease {
		return invalid("watchdog timeout %v is outside [%v, %v]", d, MinWatchdogTimeout, MaxLease)
	}
	return nil
}

// OnClose registers fn to run at Close, once the holds have ended and
// before the watchdog stops: for kinds built outside this package to end
// what they keep (a semaphore's permits). After Close, fn runs at once.
func (c *Core) OnClose(fn func()) {
	c.mu.Lock()
	if c.CheckOpen() == nil {
		c.closers = append(c.closers, fn)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	fn()
}

// Extension returns the value this Client keeps under key, made by newValue
// on first use: the state that a kind built outside this package keeps per
// Client (a semaphore's permits on the watchdog). key is best a value of
// an unexported type of the caller's package.
func (c *Core) Extension(key any, newValue func() any) any {
	if v, ok := c.ext.Load(key); ok {
		return v
	}
	v, _ := c.ext.LoadOrStore(key, newValue())
	return v
}

// Close stops renewals and subscriptions and waits for them. Waits in
// progress end with relock.ErrClosed; every hold ends with cause relock.ErrClosed, so
// running Do functions see their context cancelled with it. Held locks
// then expire by their lease.
func (c *Core) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		close(c.closed)
		closing := c.obs.closingLocked(c)
		c.stopExpiriesLocked()
		c.mu.Unlock()
		c.closeRoot(relock.ErrClosed)
		c.obs.closed(closing)
		c.mu.Lock()
		closers := c.closers
		c.closers = nil
		c.mu.Unlock()
		for _, fn := range closers {
			fn()
		}
		c.stopWatches()
		c.stopWakers()
		c.background.Wait()
		c.closeWaits()
		c.Watchdog.Close()
		c.closeErr = c.Hub.Close()
		c.shareLeave()
		c.awaitWaits()
		if c.ownsRDB {
			c.RDB.Close()
		}
	})
	return c.closeErr
}

// closeGrace bounds how long Close waits for the calls in Wait to end.
const closeGrace = 2 * time.Second

// awaitWaits waits, at most closeGrace, for the calls in Wait to end.
// Close has ended their sleeps; an attempt in flight is answered, and what
// it won, or may have won, is given back (see Wait.Cancelled and
// Waiter.End) on the Client's connection, which Close closes next when it
// owns it: given back after that, a counting semaphore's permits (which
// have no lease) would stay taken for good.
func (c *Core) awaitWaits() {
	c.mu.Lock()
	if c.inWait == 0 {
		c.mu.Unlock()
		return
	}
	over := make(chan struct{})
	c.waitsOver = over
	c.mu.Unlock()
	t := time.NewTimer(closeGrace)
	defer t.Stop()
	select {
	case <-over:
	case <-t.C:
	}
}

// waitBegins counts a call in Wait.
func (c *Core) waitBegins() {
	c.mu.Lock()
	c.inWait++
	c.mu.Unlock()
}

// waitEnds counts a call out of Wait.
func (c *Core) waitEnds() {
	c.mu.Lock()
	c.inWait--
	if c.inWait == 0 && c.waitsOver != nil {
		close(c.waitsOver)
		c.waitsOver = nil
	}
	c.mu.Unlock()
}

// waiter is one local waiter on a pub/sub channel (a *pubsub.Waiter).
type waiter interface {
	C() <-chan struct{}
	Leave(passOn bool)
	PassOn()
	Heard() bool
	// Err is the refusal of the channel when it was subscribed again
	// after a lost connection (see pubsub.Waiter.Err).
	Err() error
}

// pending is a subscription started and not yet confirmed (see
// pubsub.Pending).
type pending interface {
	Done() <-chan struct{}
	Err() error
}

// beginSubscribe registers a waiter on channel at once and starts its
// subscription, whose outcome p tells (nil: made already). A test's
// stand-in in beginHook is called instead, or the one in subscribeHook,
// with ctx, which waits for the subscription.
func (c *Core) beginSubscribe(ctx context.Context, channel string) (w waiter, p pending, err error) {
	switch {
	case c.beginHook != nil:
		return c.beginHook(channel)
	case c.subscribeHook != nil:
		w, err = c.subscribeHook(ctx, channel)
		return w, nil, err
	}
	hw, hp, err := c.Hub.Begin(channel)
	if err != nil {
		return nil, nil, err
	}
	select {
	case <-hp.Done():
		if err := hp.Err(); err != nil {
			hw.Leave(false)
			return nil, nil, err
		}
		return hw, nil, nil
	default:
		return hw, hp, nil
	}
}

// listen registers onMessage for every message on channel through the
// hub, and onMissed for when a message may have been missed (the
// subscription made, or made again); a test's stand-in in listenHook
// gets onMessage only.
func (c *Core) listen(channel string, onMessage, onMissed func()) (waiter, error) {
	if c.listenHook != nil {
		return c.listenHook(channel, onMessage)
	}
	l, err := c.Hub.ListenMissed(channel, onMessage, onMissed)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// Name is the Client's name (Config.Name).
func (c *Core) Name() string { return c.name }

// Map is the name in Redis of the name given to the Client: the Client's
// key prefix, then name. Every handle is made from the mapped name, so
// its keys and channels are derived from it, as a Redisson client with a
// prepending NameMapper derives them.
// An empty name stays empty, and is refused as every empty name is.
func (c *Core) Map(name string) string {
	if name == "" {
		return ""
	}
	return c.prefix + name
}

// Unmap is the name given to the Client for a name in Redis that Map
// made: mapped without the Client's key prefix.
func (c *Core) Unmap(mapped string) string { return strings.TrimPrefix(mapped, c.prefix) }

// KeyPrefix is the Client's key prefix ("" for none).
func (c *Core) KeyPrefix() string { return c.prefix }

// CheckKeyPrefix checks a key prefix: valid UTF-8, no control characters,
// shorter than MaxNameLen. "" is no prefix. The rules of CheckName are
// applied to each name with its prefix, when a handle is used.
func CheckKeyPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if len(prefix) >= MaxNameLen {
		return invalid("key prefix is %d bytes, the limit is %d", len(prefix), MaxNameLen-1)
	}
	if err := checkText(prefix); err != nil {
		return invalid("key prefix %q: %v", prefix, err)
	}
	return nil
}

// PublishCommand is the command the scripts publish with.
func (c *Core) PublishCommand() string { return c.publish }

// Closed is closed when Close has begun.
func (c *Core) Closed() <-chan struct{} { return c.closed }

// CheckOpen returns relock.ErrClosed once Close has begun.
func (c *Core) CheckOpen() error {
	select {
	case <-c.closed:
		return relock.ErrClosed
	default:
		return nil
	}
}

// detached returns a context for a release that must happen even when ctx
// has ended: it keeps ctx's values and drops its cancellation. It is
// bounded by releaseTimeout, or by ctx's deadline when ctx is still live
// and ends sooner (but never less than releaseFloor, so that a release
// still gets its round trip).
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	now := time.Now()
	deadline := now.Add(releaseTimeout)
	if d, ok := ctx.Deadline(); ok && ctx.Err() == nil && d.Before(deadline) {
		deadline = maxTime(d, now.Add(releaseFloor))
	}
	return context.WithDeadline(context.WithoutCancel(ctx), deadline)
}

// releaseFloor is the least time a release gets on a live context whose
// deadline is near.
const releaseFloor = 250 * time.Millisecond

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// closedOr returns err joined with relock.ErrClosed when the Client is closed, so a
// Redis error caused by Close still matches relock.ErrClosed.
func (c *Core) closedOr(err error) error {
	if err != nil && c.CheckOpen() != nil && !errors.Is(err, relock.ErrClosed) {
		return Join(err, relock.ErrClosed)
	}
	return err
}
