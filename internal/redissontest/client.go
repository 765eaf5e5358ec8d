package redissontest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/rueidis"
)

// Redisson's defaults (org.redisson.config.Config and BaseConfig).
const (
	// DefaultWatchdogTimeout is Config.lockWatchdogTimeout: the lease of a
	// lock taken without one, renewed every third of it.
	DefaultWatchdogTimeout = 30 * time.Second
	// DefaultFairLockWaitTimeout is Config.fairLockWaitTimeout: the thread
	// wait time a fair-lock waiter adds to the deadline ahead of it.
	DefaultFairLockWaitTimeout = 5 * time.Minute
	// UnlockLatchTimeout is how long an unlock script keeps its result
	// under redisson_unlock_latch:{name}:<requestId>: RedissonBaseLock
	// multiplies (timeout + retry delay) by the retry attempts; with the
	// defaults (3s, 1s to 2s, 4 attempts) that is 16s to 20s.
	UnlockLatchTimeout = 18 * time.Second
	// NonExpirable is the score RedissonPermitExpirableSemaphore writes
	// for a permit taken without a lease.
	NonExpirable = "922337203685477"
)

// ErrIllegalMonitorState is what Redisson's unlock throws
// (IllegalMonitorStateException) when the thread holds nothing.
var ErrIllegalMonitorState = errors.New("redissontest: attempt to unlock lock, not locked by current thread")

// ErrPermitNotHeld is what Redisson's release(permitId) throws
// (IllegalArgumentException) when the permit is not held.
var ErrPermitNotHeld = errors.New("redissontest: permit has already been released or doesn't exist")

// Option sets one of a Client's settings.
type Option func(*Client)

// WithWatchdogTimeout sets the Client's lockWatchdogTimeout.
func WithWatchdogTimeout(d time.Duration) Option { return func(c *Client) { c.watchdog = d } }

// WithFairLockWaitTimeout sets the Client's fairLockWaitTimeout.
func WithFairLockWaitTimeout(d time.Duration) Option { return func(c *Client) { c.fairWait = d } }

// WithClock sets the wall clock the Client's fair locks and semaphores
// read (System.currentTimeMillis in Redisson); a test may skew it.
func WithClock(now func() time.Time) Option { return func(c *Client) { c.now = now } }

// Client stands for one Redisson instance. Make it with New; it is closed
// when the test ends.
type Client struct {
	rdb      rueidis.Client
	id       string
	watchdog time.Duration
	fairWait time.Duration
	now      func() time.Time
	publish  string

	ps         pubsub
	renewals   renewals
	undecoded  atomic.Int64
	ctx        context.Context
	cancel     context.CancelFunc
	wg         sync.WaitGroup
	closeOnce  sync.Once
	scriptsRun atomic.Int64
}

// New returns a Client that runs its scripts and subscriptions through
// rdb (a client of its own: it opens one dedicated connection for its
// subscriptions). It is closed when tb ends.
func New(tb testing.TB, rdb rueidis.Client, opts ...Option) *Client {
	tb.Helper()
	c := &Client{
		rdb:      rdb,
		id:       uuid.NewString(),
		watchdog: DefaultWatchdogTimeout,
		fairWait: DefaultFairLockWaitTimeout,
		now:      time.Now,
		publish:  "publish",
	}
	for _, o := range opts {
		o(c)
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.ps.c = c
	c.ps.entries = make(map[string]*entry)
	c.renewals.holds = make(map[string]*renewal)
	tb.Cleanup(c.Close)
	return c
}

// Close stops the Client's watchdog and closes its subscription
// connection; waits in progress end with an error.
func (c *Client) Close() {
	c.closeOnce.Do(func() {
		c.cancel()
		c.wg.Wait()
		c.ps.close()
	})
}

// ID is the Client's UUID, the first part of its hash fields.
func (c *Client) ID() string { return c.id }

// Field is the hash field of thread tid: "<id>:<tid>" (getLockName).
func (c *Client) Field(tid int64) string { return c.id + ":" + strconv.FormatInt(tid, 10) }

// Undecodable is the number of messages that reached the Client's
// subscriptions and did not decode as an integer.
func (c *Client) Undecodable() int64 { return c.undecoded.Load() }

// ScriptsRun is the number of scripts the Client has run.
func (c *Client) ScriptsRun() int64 { return c.scriptsRun.Load() }

// nowMillis is the Client's wall clock in ms.
func (c *Client) nowMillis() int64 { return c.now().UnixMilli() }

// eval runs a script.
func (c *Client) eval(ctx context.Context, s *rueidis.Lua, keys []string, args ...string) rueidis.RedisResult {
	c.scriptsRun.Add(1)
	return s.Exec(ctx, c.rdb, keys, args)
}

// prefixName is RedissonObject.prefixName: "prefix:{name}", or
// "prefix:name" when the name has a '{'.
func prefixName(prefix, name string) string {
	if strings.Contains(name, "{") {
		return prefix + ":" + name
	}
	return prefix + ":{" + name + "}"
}

// suffixName is RedissonObject.suffixName: "{name}:suffix", or
// "name:suffix" when the name has a '{'.
func suffixName(name, suffix string) string {
	if strings.Contains(name, "{") {
		return name + ":" + suffix
	}
	return "{" + name + "}:" + suffix
}

// generateID is ServiceManager.generateId: 16 random bytes in hex.
func generateID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// optInt64 reads a reply that is an integer or nil.
func optInt64(res rueidis.RedisResult) (n int64, isNil bool, err error) {
	n, err = res.AsInt64()
	if rueidis.IsRedisNil(err) {
		return 0, true, nil
	}
	return n, false, err
}

// noReply is the error of a script that answers nothing (nil is fine).
func noReply(err error) error {
	if rueidis.IsRedisNil(err) {
		return nil
	}
	return err
}
