package rlock

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/lockcore"
)

// Client hands out locks. It owns one watchdog (one goroutine renewing
// every lease it holds) and one pub/sub connection shared by every waiter.
// A Client is safe for concurrent use; create one per process and share it.
type Client struct {
	core *lockcore.Core
}

// Option configures a Client.
type Option func(*options)

// options is what the options of a Client set.
type options = lockcore.Config

// WithWatchdogTimeout sets the lease that the watchdog keeps renewing while
// a lock taken without a lease is held. Renewals run every d/3. A holder
// that dies without unlocking blocks others for at most d.
// The default is 30s; d must be between 30ms and 100 years.
func WithWatchdogTimeout(d time.Duration) Option {
	return func(c *lockcore.Config) { c.WatchdogTimeout, c.WatchdogTimeoutSet = d, true }
}

// WithLostHandler sets a function called when a hold is lost: a renewal
// found it gone (deleted, force-unlocked), a message on the lock's channel
// said it was force-unlocked, no renewal succeeded before the lease ran
// out, the fixed lease of a watched hold ran out, a call of its owner
// found it gone (a fixed lease that ran out, among others), or ForceUnlock
// removed it; each loss once. The cause says which. It runs on the
// watchdog's goroutine, a timer's, or the goroutine of the call that found
// the loss, and must return quickly, without calling the Client's locks.
// The default is none.
func WithLostHandler(fn func(name, owner string, cause error)) Option {
	return func(c *lockcore.Config) { c.OnLost = fn }
}

// WithClientName names the Client in the hash fields of its holds that
// have no owner: their owner part is "anon-<n>@<name>", so that relock
// status and relock scan show which process holds a lock. The default is
// "<hostname>:<pid>". A name is non-empty, at most 200 bytes, without
// control characters. Owners given with WithOwner are written as given.
func WithClientName(name string) Option {
	return func(c *lockcore.Config) { c.Name, c.NameSet = name, true }
}

// WithShardedPubSub makes unlocks publish with SPUBLISH and waiters listen
// with SSUBSCRIBE (Redis 7 sharded pub/sub). On Redis Cluster a message
// then travels only within the shard that holds the lock, instead of over
// the whole cluster bus, and each waiter subscribes on the node that
// serves its lock (one goroutine per lock name being waited on).
//
// Every client of a lock must use the same kind of pub/sub, or a release
// on one side wakes no waiter on the other (they then go on only when the
// lease they last saw runs out). Redisson chooses by topology: on a Redis
// 7 Cluster it uses sharded pub/sub by default (its cluster setting
// shardedSubscriptionMode is AUTO, which turns it on where the servers
// support it); on a single server, with Sentinel or master and replicas,
// on an older cluster, or with that setting OFF, it uses classic
// PUBLISH/SUBSCRIBE. So turn this on when the locks are shared with
// Redisson clients of a Redis 7 Cluster, and leave it off (the default)
// when they are shared with Redisson anywhere else. Among relock clients
// alone, it pays on a large cluster with heavy lock traffic.
func WithShardedPubSub() Option {
	return func(c *lockcore.Config) { c.ShardedPubSub = true }
}

// WithFairLockWaitTimeout sets the thread wait time of fair-lock waiters:
// Redisson's fairLockWaitTimeout, which sets how long a waiter may stay
// queued before it is dropped (see the fairlock package for the rule).
// relock's waiters find a dead relock waiter by its heartbeat in about a
// second whatever this is; it governs how long a Redisson waiter that died
// holds up a queue, and when Redisson's clients drop a waiter of a queue
// that stalls (a holder that keeps the lock for minutes).
//
// It must equal the fairLockWaitTimeout of the Redisson clients that share
// the fair locks. Shorter, every waiter queued behind a relock waiter (and
// that waiter itself) has that much less time before Redisson's clients
// drop it from a stalled queue while it lives, and a waiter dropped goes
// to the back of the queue when it next looks; longer, a waiter that died
// holds up a queue of Redisson waiters for that much longer.
// The default is 5 minutes (Redisson's); d must be between 1ms and 100
// years.
func WithFairLockWaitTimeout(d time.Duration) Option {
	return func(c *lockcore.Config) { c.FairLockWaitTimeout, c.FairLockWaitTimeoutSet = d, true }
}

// WithReplicaSync makes every acquisition and release wait, with WAIT,
// until at least replicas replicas confirmed it, for up to timeout. When
// fewer confirm an acquisition, it is released and fails with an error
// matching ErrNotAcquired and ErrReplicaSync; a release is a release
// whatever the replicas say. WithReplicaSync(0, 0) turns replica sync off,
// as WithoutReplicaSync does.
//
// The default, without this option, is Redisson's (checkLockSyncedSlaves,
// slavesSyncTimeout 1s): lock, unlock and permit operations wait up to 1s
// for the replicas that the server reports connected (INFO replication's
// connected_slaves, counted once per Client and node and again every few
// seconds within an operation's own round trip), and an acquisition fails
// with ErrReplicaSync only when none of them confirmed it. A server
// without replicas costs nothing: no WAIT is sent. Renewals do not wait,
// nor does a rate limiter's grant unless WithReplicaSync gave a number.
// A call whose context ends while WAIT waits returns when WAIT does, at
// most the timeout later, having given back what it won.
//
// It narrows the window in which a failover loses an acquisition; it does
// not make Redis strongly consistent (a failover may still promote a
// replica that missed the write): use fencing tokens for safety.
// docs/operations.md says more.
func WithReplicaSync(replicas int, timeout time.Duration) Option {
	return func(c *lockcore.Config) { c.Replicas, c.ReplicaTimeout, c.ReplicasSet = replicas, timeout, true }
}

// WithoutReplicaSync turns replica sync off: no operation waits for
// replicas (see WithReplicaSync for the default).
func WithoutReplicaSync() Option {
	return func(c *lockcore.Config) { c.Replicas, c.ReplicaTimeout, c.ReplicasSet = 0, 0, true }
}

// WithWakeOne makes a release wake one waiting process instead of one in
// each process that waits (the default, and Redisson's way, where N
// waiting processes race for one grant). Waiters of other Clients and of
// Redisson still hear every release as before, at once. With grants on
// (the default, see WithoutGrantOnRelease), the release hands the lock to
// the woken Client's waiter in Redis itself, when every waiter of the
// lock is a registered Client's: the waiter needs no round trip of its
// own. A waiter of a Client with the option goes on within 2s of a
// release even when the Client the release woke cannot act (its process
// stopped or dead), within 5s when the release granted the lock to it
// (the grant's 3s window, then a retry). It
// applies to Lock and FencedLock (a fair lock already wakes only the head
// of its queue); on Redis Cluster it needs WithShardedPubSub. The package
// documentation (Waking one process per release) says how it works. The
// default is off.
func WithWakeOne() Option {
	return func(c *lockcore.Config) { c.WakeOne = true }
}

// WithoutGrantOnRelease turns off the grant on release. By default, the
// last Unlock of a Lock or a FencedLock hands the lock, in the release
// itself, to a goroutine of the same Client that waits for it, when no
// other Client and no Redisson client waits for the lock (none is
// subscribed to its channel): the waiter needs no round trip of its own,
// and a fenced waiter gets a new token as an acquisition would. The
// granted hold's lease in Redis is a confirmation window of at most 3s
// (its own lease when that is shorter) until the Client renews it, a
// third of the window later: a process that dies in between keeps the
// lock from others for at most the window. The last Unlock of a fair
// lock (GetFairLock) grants it so to a goroutine of the same Client that
// heads its queue, whoever else waits (the queue decides who is next).
// With WithWakeOne, a release also grants a Lock or a FencedLock to a
// waiter of the registered Client whose turn it is. With this option every release publishes (or wakes one Client) and
// the woken waiter acquires, as Redisson's do. The package
// documentation (Grant on release) says more.
func WithoutGrantOnRelease() Option {
	return func(c *lockcore.Config) { c.NoGrant = true }
}

// WithKeyPrefix puts prefix before every name the Client is given, as
// Redisson's NameMapper that prepends a prefix: the Client acts as if each
// name were prefix+name. Every key and channel of a lock, semaphore,
// latch or rate limiter is derived from that name by Redisson's rules, so
// a Java service whose mapper prepends the same prefix shares them (a
// hash tag may sit in the prefix, "{app1}:", or in the name). Clients
// whose prefixes differ, neither beginning the other ("app1:" and
// "app2:"), never see each other's; where one begins the other they meet
// on names that fill the gap: prefix "app" with the name "1:x", prefix
// "app1:" with "x", and no prefix with "app1:x" are one lock. End every
// prefix with a separator that no prefix has elsewhere to keep them apart.
//
// What the Client reports names a lock in one of two ways. The handles'
// Name and the lost handler (WithLostHandler) give the name as the Client
// was given it, without the prefix (as Redisson's getName and its lock
// renewal failure listener do). Errors, the observer's and the logger's
// events (WithObserver, WithLogger) name the lock as it is in Redis,
// prefix+name, the key that relock status shows without --prefix.
//
// A prefix is valid UTF-8, without control characters, shorter than 1024
// bytes; each name with its prefix must be a valid name (a handle's
// methods report one that is not, as they do a bad name). The default,
// and "", is no prefix.
func WithKeyPrefix(prefix string) Option {
	return func(c *lockcore.Config) { c.KeyPrefix = prefix }
}

// WithDeadlockDetection sets how long a wait lasts before it looks for a
// deadlock (a cycle of owners through it: A holds L1 and waits for L2, B
// holds L2 and waits for L1; of any length, across Clients, processes and
// lock kinds), and how often it looks again while it waits. Of a cycle,
// exactly one wait ends, the one that began last (where cycles overlap,
// as through several readers of a read-write lock, the one wait they all
// share): its call returns an error matching ErrDeadlock and
// ErrNotAcquired that names the cycle, and
// the others go on once its caller releases what it holds. Owners count as
// threads of control, as a database's transactions: a cycle through an
// owner that two goroutines share is reported although the other
// goroutine might have released. A call with no owner in its context is
// an owner of its own (Do's fn gets Do's owner in its context), an owner
// is one Client's (the same owner string in two Clients is two owners),
// and a Client reads other Clients' records under its own key prefix:
// cycles through such calls, through a thread that holds through one
// Client and waits through another, or across Clients with different
// prefixes that name each other's keys in full, are not seen. Each look reads the locks' holders and
// the waits' records one key at a time (at most 64 keys), so a wait that
// lasts costs a few reads each after; the waits of the Client's own owners
// are read from memory, not from its record hash, until a look finds a
// cycle (its victim is named from the hash), and the Client's looks share
// their reads of another Client's hash for 100ms (a tenth of the delay,
// when less). The package documentation
// (Waits and deadlocks) says more.
//
// The default is on, 1s; 0 turns it off (waits that last 100ms are still
// recorded, for relock waits and status). A wait is recorded once it has
// lasted 100ms, or the delay after when that is shorter, and never looks for a
// cycle before its own record is written. A Client with detection off
// never ends a wait, even one its cycle chose: turn it off in every
// Client that shares locks, or in none. A negative delay is refused with ErrInvalidArgument.
func WithDeadlockDetection(after time.Duration) Option {
	return func(c *lockcore.Config) { c.DeadlockAfter, c.DeadlockAfterSet = after, true }
}

// NewClient builds a rueidis client from opt and a Client that owns it:
// Close closes both. Unless opt.PipelineMultiplex is set, every command
// is pipelined on one connection (rueidis would open up to four): lock
// traffic is many small scripts, which one auto-pipelined connection
// carries best, and the Client then uses two connections in all (one more
// for pub/sub).
func NewClient(opt rueidis.ClientOption, opts ...Option) (*Client, error) {
	cfg := config(opts)
	if err := lockcore.CheckConfig(cfg); err != nil {
		return nil, err
	}
	if opt.PipelineMultiplex == 0 {
		opt.PipelineMultiplex = -1
	}
	rdb, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, fmt.Errorf("relock: connect to %s: %w", describe(opt), err)
	}
	cfg.RDB, cfg.OwnsRDB, cfg.OnePipeline = rdb, true, opt.PipelineMultiplex < 0
	core, err := lockcore.NewCore(cfg)
	if err != nil {
		rdb.Close()
		return nil, err
	}
	return &Client{core: core}, nil
}

// New returns a Client that uses rdb, which the caller owns: Close leaves
// it open. rdb may send commands on several connections (rueidis'
// default): an acquisition whose context ends while its script is in
// flight then waits up to 100ms more for the script's reply, so that what
// it won is given back after it, in order. A client with
// PipelineMultiplex -1, as NewClient builds, needs no such wait. With
// WithShardedPubSub, Clients made by New on one rdb subscribe on its
// connections together, where the server counts them as one subscriber:
// their waiters then do not register for WithWakeOne's wake-ups (they
// wait as without it), and their releases grant nothing to their own
// waiters while another of them waits; give each its own rdb to keep
// those (docs/kinds.md, Grant on release, says why). When one of them
// stops listening on a lock's channel, its SUNSUBSCRIBE ends that one
// subscription for all of them: the others see their receivers end and
// subscribe again at once.
func New(rdb rueidis.Client, opts ...Option) (*Client, error) {
	cfg := config(opts)
	cfg.RDB = rdb
	core, err := lockcore.NewCore(cfg)
	if err != nil {
		return nil, err
	}
	return &Client{core: core}, nil
}

func config(opts []Option) lockcore.Config {
	var cfg lockcore.Config
	for _, o := range opts {
		o(&cfg)
	}
	return cfg
}

// Close stops lease renewals and subscriptions and waits for them. Waits in
// progress end with an error matching ErrNotAcquired and ErrClosed, and
// Close waits for them (at most 2s) before it closes the connection it
// owns: what an attempt in flight won is given back. The contexts of
// running Do functions are cancelled with cause ErrClosed.
// Locks still held are not released: they expire when their lease runs
// out. Every call after Close returns ErrClosed. Close is idempotent.
func (c *Client) Close() error { return c.core.Close() }

// ID is the UUID, made once per Client, at the start of every hash field
// this Client writes ("<ID>:<owner>").
func (c *Client) ID() string { return c.core.ID }

// Name is the Client's name (WithClientName), part of the owner of its
// holds without an owner: "anon-<n>@<name>".
func (c *Client) Name() string { return c.core.Name() }

// Redis is the rueidis client the Client uses: its own when it was made by
// NewClient (do not close it; Close does), the caller's with New. It is
// there for what works beside the locks on the same Redis, such as a
// fence.Register.
func (c *Client) Redis() rueidis.Client { return c.core.RDB }

// describe names the servers of opt for an error message: the addresses,
// with any user information in them masked, and the Sentinel master set.
func describe(opt rueidis.ClientOption) string {
	addrs := make([]string, len(opt.InitAddress))
	for i, a := range opt.InitAddress {
		if at := strings.LastIndex(a, "@"); at >= 0 {
			a = "xxxxx" + a[at:]
		}
		addrs[i] = a
	}
	d := strings.Join(addrs, ",")
	if d == "" {
		d = "no address"
	}
	if opt.Sentinel.MasterSet != "" {
		d += " (sentinel master set " + strconv.Quote(opt.Sentinel.MasterSet) + ")"
	}
	return d
}
